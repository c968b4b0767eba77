"""Aggregate per-cluster results into estimates with 95% intervals (MODEL.md section 8).

* Cluster metrics: mean over clusters, Student-t interval (``fastsim.stats.mean_ci``).
* Detection rates (precision, recall, FPR, stop recall, stop FPR, share of triggers
  at completion): pooled over the cell's clusters
  (``sum TP / sum (TP + FP)``), cluster-bootstrap interval joined with a t interval and
  widened to contain the exact binomial interval (``fastsim.stats.proportion_ci``).
* Detection delay: pooled ``sum delay / sum TP``, the same without the binomial widening
  (``fastsim.stats.bootstrap_ratio_ci``).
* Paired comparisons: per-cluster relative change against the baseline on the same
  clusters (common random numbers), t interval of the mean change.

Every row says ``n``: how many clusters (or pairs) it rests on.  ``CellSummary`` takes a
cell's clusters chunk by chunk (memory independent of the cluster count); ``summarize``
is the same over one frame.
"""
from __future__ import annotations

import numpy as np
import polars as pl

from fastsim import metrics as M
from fastsim.errors import ConfigError, known_keywords
from fastsim.stats import (T_FEW_COVERAGE, T_FULL_COVERAGE_N, Estimate, MeanMoments, PooledRatio,
                           bootstrap_together, fmt_value, interval_decimals, mean_ci,
                           relative_changes)

# Which metric aggregates how, and its display name, is declared in ``fastsim.metrics``.
SUMMARY_SCHEMA = {"metric": pl.String, "kind": pl.String, "mean": pl.Float64,
                  "lo": pl.Float64, "hi": pl.Float64, "n": pl.Int64}


def _row(metric: str, kind: str, e: Estimate) -> dict:
    """A summary row; its interval cut to the values the estimate can take
    (``Estimate.within``, the metric's declared range)."""
    base = metric[:-len("_change")] if kind == "paired" else metric
    e = e.within(*M.estimate_range(base, kind))
    return {"metric": metric, "kind": kind, "mean": e.mean, "lo": e.lo, "hi": e.hi, "n": e.n}


def pooled_counts(clusters: pl.DataFrame,
                  metrics) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each pooled metric's per-cluster numerator and denominator, in one Polars pass (a
    chunk of 500 clusters costs a pass mostly in overhead)."""
    exprs = []
    for m in metrics:
        num_cols, den_cols = M.lookup(m).pooled
        exprs += [pl.sum_horizontal(num_cols).alias(f"{m}/num"),
                  pl.sum_horizontal(den_cols).alias(f"{m}/den")]
    sums = clusters.select(exprs)
    return {m: (sums[f"{m}/num"].to_numpy(), sums[f"{m}/den"].to_numpy()) for m in metrics}


def pooled_ci(ratio: PooledRatio, metric: str, seed: int = 0) -> Estimate:
    """A pooled metric's estimate from its counts: a rate's widened to the exact binomial
    interval (``proportion_ci``), any other ratio's not, and not cut at 0 where its
    numerator is declared ``signed`` (the detection delay).  The summary's and the
    coverage benchmark's, so that the benchmark measures what tables print."""
    m = M.lookup(metric)
    return (ratio.proportion_ci(seed=seed) if m.binomial
            else ratio.ratio_ci(seed=seed, signed=m.signed))


def _check_same_draws(ids: pl.Series, seeds: pl.Series, base_seeds: pl.Series) -> None:
    """A paired change compares each cluster with itself under the baseline (common random
    numbers): a baseline drawn with another seed has clusters of the same ids that are
    other draws, and its "paired" changes were those of unrelated clusters (seed 1's
    baseline gave +0.8% [-7.5, +9.0] where seed 0's gave -5.3% [-5.9, -4.7]).  ``seeds``
    and ``base_seeds`` are the rows' ``seed`` columns, matched; a null seed (a workload
    the caller drew) is not known to differ."""
    other = (seeds != base_seeds).fill_null(False)
    if other.any():
        i = int(other.arg_max())
        raise ConfigError(f"summarize(): cluster {ids[i]} was drawn with seed {seeds[i]} in "
                          f"clusters but seed {base_seeds[i]} in baseline ({int(other.sum())} "
                          f"of {len(other)} clusters differ), so they are not one cluster to "
                          "pair; allowed: a baseline simulated with the same seed, n_clusters "
                          "and cluster_start (fastsim.compare runs both arms)")


def _paired_changes(clusters: pl.DataFrame, baseline: pl.DataFrame):
    """``(metric, policy values, baseline values)`` matched on the ``cluster`` column."""
    metrics = [m for m in M.paired_metrics() if m in clusters.columns]
    if clusters.height == baseline.height and clusters["cluster"].equals(baseline["cluster"]):
        policy, base = clusters, baseline  # a sweep's chunks line up already
        if "seed" in clusters.columns and "seed" in baseline.columns:
            _check_same_draws(clusters["cluster"], clusters["seed"], baseline["seed"])
    else:  # other frames are matched on the cluster column, in the policy's order
        repeat = [(name, frame["cluster"]) for name, frame in (("clusters", clusters),
                                                                ("baseline", baseline))
                  if frame["cluster"].is_duplicated().any()]
        if repeat:
            # a join pairs each repeat with every repeat: "covers other clusters" said of
            # two frames of the same clusters (two seeds concatenated in two orders)
            name, ids = repeat[0]
            twice = ids.filter(ids.is_duplicated())
            raise ConfigError(
                f"{' and '.join(n for n, _ in repeat)} repeat{'s' if len(repeat) == 1 else ''} "
                f"cluster ids (cluster "
                f"{twice[0]} in {(ids == twice[0]).sum()} rows of {name}, {twice.n_unique()} "
                "ids repeated: runs concatenated?) and the two frames' rows are not in the "
                "same cluster order, so they cannot be paired by cluster; allowed: each "
                "cluster id once, or both frames' rows in the same cluster order")
        policy = clusters.join(baseline, on="cluster", how="inner", suffix="_base",
                               maintain_order="left")
        if policy.height != clusters.height or policy.height != baseline.height:
            raise ConfigError(f"baseline covers other clusters than clusters for a paired "
                              f"comparison ({baseline.height} and {clusters.height}, "
                              f"{policy.height} in both); allowed: both arms simulated with "
                              "the same n_clusters, seed and cluster_start")
        if "seed_base" in policy.columns:
            _check_same_draws(policy["cluster"], policy["seed"], policy["seed_base"])
        base = policy.select(pl.col(f"{m}_base").alias(m) for m in metrics)
    for m in metrics:
        yield m, policy[m].to_numpy(), base[m].to_numpy()


class CellSummary:
    """``summarize`` streamed: ``add`` each chunk of a cell's clusters (with the same
    clusters under the baseline, if any), then ``table``.  Memory is bounded whatever the
    number of clusters (``fastsim.stats.MeanMoments``, ``PooledRatio``).

    Examples
    --------
    >>> from fastsim.config import SimConfig
    >>> from fastsim.api import simulate
    >>> cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=10)
    >>> cell = CellSummary()
    >>> for start in (0, 4):
    ...     cell.add(simulate(cfg, 4, cluster_start=start).clusters)
    >>> cell.table().filter(pl.col("metric") == "precision")["n"][0]
    8
    """

    def __init__(self):
        # user metrics are declared when their module is imported: read the declarations now
        self.means: dict[str, MeanMoments] | None = None
        self.pooled = {m: PooledRatio() for m in M.pooled_metrics()}
        self.paired: dict[str, MeanMoments] | None = None

    def add(self, clusters: pl.DataFrame, baseline: pl.DataFrame | None = None) -> None:
        # checked, matched (and refused) before anything is added: a refused chunk adds
        # nothing, and a sweep's chunk is held to what summarize holds a frame to
        _check_clusters(clusters, "clusters", baseline is not None)
        if baseline is not None:
            _check_clusters(baseline, "baseline", True)
        changes = [] if baseline is None else [
            (m, relative_changes(p, b, f"baseline[{m!r}]"))
            for m, p, b in _paired_changes(clusters, baseline)]
        if self.means is None:
            self.means = {m: MeanMoments() for m in M.mean_metrics() if m in clusters.columns}
        for m, moments in self.means.items():
            try:
                moments.add(clusters[m].to_numpy())
            except ConfigError as e:  # "values has shape (3, 2)" named no column
                raise ConfigError(f"column {m}: {e}") from None
        for m, (num, den) in pooled_counts(clusters, self.pooled).items():
            try:
                self.pooled[m].add(num, den)
            except ConfigError as e:  # "num[0] = nan" named no column of the user's frame
                num_cols, den_cols = M.lookup(m).pooled
                raise ConfigError(f"{m} = sum of {' + '.join(num_cols)} over sum of "
                                  f"{' + '.join(den_cols)}, per cluster: {e}") from None
        if baseline is not None:
            if self.paired is None:
                self.paired = {m: MeanMoments() for m in M.paired_metrics()
                               if m in clusters.columns}
            for m, change in changes:
                self.paired[m].add(change)

    def table(self, seed: int = 0) -> pl.DataFrame:
        """One row per metric: ``metric, kind, mean, lo, hi, n`` (see ``summarize``)."""
        rows = [_row(m, "mean", mo.mean_ci()) for m, mo in (self.means or {}).items()]
        bootstrap_together(self.pooled.values(), seed=seed)  # one draw of indices for all
        rows += [_row(m, "pooled", pooled_ci(ratio, m, seed)) for m, ratio in self.pooled.items()]
        if self.paired is not None:
            rows += [_row(f"{m}_change", "paired", mo.mean_ci()) for m, mo in self.paired.items()]
        return pl.DataFrame(rows, schema=SUMMARY_SCHEMA)


@known_keywords("fastsim.summarize()")
def summarize(clusters: pl.DataFrame, baseline: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per metric: ``metric, kind, mean, lo, hi, n``.

    ``kind`` is ``mean`` (over clusters), ``pooled`` (ratio over clusters' counts) or
    ``paired`` (relative change vs ``baseline``, matched on the ``cluster`` column: row by
    row when both frames list the same ids in the same order, else by id, which must then
    appear once in each frame; a cluster whose ``seed`` differs between the two is other
    draws, and refused).

    Examples
    --------
    >>> from fastsim.config import SimConfig
    >>> from fastsim.api import simulate
    >>> cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=10)
    >>> s = summarize(simulate(cfg, 8).clusters)
    >>> s.filter(pl.col("metric") == "precision")["n"][0]
    8
    """
    cell = CellSummary()  # checks both frames (_check_clusters)
    cell.add(clusters, baseline)
    return cell.table()


def value_kind(value) -> str:
    """What ``value`` is, in a message: ``a SimResult``, ``a pandas DataFrame``, ``5``."""
    if isinstance(getattr(value, "clusters", None), pl.DataFrame):
        return "a SimResult"
    module = type(value).__module__.split(".")[0]
    return repr(value)[:40] if module == "builtins" else f"a {module} {type(value).__name__}"


def check_table(value, where: str, name: str, columns, allowed: str) -> None:
    """``value`` is a polars DataFrame holding ``columns``: anything else was a pandas
    TypeError or a Polars ColumnNotFoundError deep inside ``where``; one line naming
    ``name`` and what is ``allowed`` instead."""
    if not isinstance(value, pl.DataFrame):
        raise ConfigError(f"{where}(): {name} is {value_kind(value)}; {allowed}")
    missing = [c for c in columns if c not in value.columns]
    if missing:
        raise ConfigError(f"{where}(): {name} has no column {missing[0]!r}; {allowed}")


def _check_older(frame, name: str, need: list[str]) -> None:
    """A per-cluster table that holds fastsim's counts but not one this fastsim pools (a
    `fastsim run --out` table written before ``fp_freed`` was counted) is an older
    fastsim's: said so, with what to do, where "has no column 'fp_freed'; allowed: the
    per-cluster metrics of fastsim.simulate" left the reader to guess why a table fastsim
    wrote was not one."""
    if not isinstance(frame, pl.DataFrame):
        return
    missing = [c for c in dict.fromkeys(need) if c not in frame.columns]
    held = [c for c in need if c in frame.columns]
    if missing and held:
        raise ConfigError(f"summarize(): {name} has no column {missing[0]!r}"
                          + (f" (nor {', '.join(map(repr, missing[1:]))})" if missing[1:] else "")
                          + f" but has {held[0]!r}, as per-cluster metrics an older fastsim "
                          f"wrote before it counted {missing[0]} do; allowed: this fastsim's "
                          "per-cluster metrics, simulated again (fastsim.simulate, or fastsim "
                          "run --out)")


def _check_clusters(frame, name: str, paired: bool) -> None:
    """``frame`` is per-cluster metrics as ``simulate`` gives them: a polars DataFrame (not
    the ``SimResult`` itself) with every column the pooled rates sum, and ``cluster`` when
    a baseline is matched on it."""
    need = [c for m in M.pooled_metrics().values() for side in m.pooled for c in side]
    allowed = "allowed: the per-cluster metrics of fastsim.simulate (SimResult.clusters)"
    _check_older(frame, name, need)
    check_table(frame, "summarize", name, dict.fromkeys(need + ["cluster"] * paired), allowed)
    # every column read holds numbers: text (a CSV's numbers read as strings) was numpy's
    # TypeError with a baseline and summed as text without, a text cluster a polars
    # SchemaError from the join, booleans counted as "pooled counts 10.0 of 8.0"
    # (a column of arrays is named by the check of one value per replication)
    read = {*need, *(m for m in M.mean_metrics() if m in frame.columns),
            *(m for m in M.paired_metrics() if m in frame.columns and paired),
            *(["cluster", "seed"] * paired)}
    for c in frame.columns:
        dtype = frame.schema[c]
        if c in read and not (dtype.is_numeric() or dtype.is_nested()):
            if c == "seed":  # not a metric: fastsim's column, a name a user's frame may use
                raise ConfigError(f"summarize(): {name} column seed holds "
                                  f"{str(dtype.base_type()).lower()}; allowed: in seed, the "
                                  "seed the clusters were drawn with (an unsigned integer, "
                                  "or null if unknown): rename a column of your own")
            raise ConfigError(f"summarize(): {name} column {c} holds "
                              f"{str(dtype.base_type()).lower()}; allowed: numbers, as in "
                              "the per-cluster metrics of fastsim.simulate (SimResult.clusters)")
    for c in read & {*M.mean_metrics(), *M.paired_metrics()}:
        lo, hi = M.lookup(c).bounds
        if frame.schema[c].is_numeric() and (lo > -np.inf or hi < np.inf):
            out = frame[c].cast(pl.Float64).to_numpy()
            i = M.out_of_bounds(M.lookup(c), out)
            if i is not None:
                raise ConfigError(f"summarize(): {name} column {c} holds {float(out[i])!r} "
                                  f"(row {i}); allowed: values in {c}'s declared range "
                                  f"[{lo!r}, {hi!r}]")
    # a null count was summed as 0 (pl.sum_horizontal skips nulls), where a NaN one is
    # refused: recall read 0.75 with half its true positives missing
    for c in dict.fromkeys(need + ["cluster"] * paired):
        if frame[c].null_count():
            first = int(frame[c].is_null().arg_max())
            raise ConfigError(f"summarize(): {name} column {c} holds {frame[c].null_count()} "
                              f"nulls (row {first} the first); allowed: a number in every "
                              "row, as in the per-cluster metrics of fastsim.simulate")


def paired_rows(clusters: pl.DataFrame, baseline: pl.DataFrame) -> list[dict]:
    """Relative change per cluster against the same clusters under the baseline."""
    return [_row(f"{m}_change", "paired", mean_ci(relative_changes(p, b, f"baseline[{m!r}]")))
            for m, p, b in _paired_changes(clusters, baseline)]


def paired_changes(policy: pl.DataFrame, baseline: pl.DataFrame) -> pl.DataFrame:
    """Paired relative changes of a policy against its baseline (same clusters).

    Returns rows ``metric, kind, mean, lo, hi, n`` where ``mean`` is the mean per-cluster
    change ``policy / baseline - 1`` (e.g. -0.094 is 9.4% lower).
    """
    return pl.DataFrame(paired_rows(policy, baseline), schema=SUMMARY_SCHEMA)


def display_name(metric: str) -> str:
    """The declared label of a metric (or of a paired change); else the name, spaced."""
    paired = M.paired_metrics()
    if metric.endswith("_change") and metric[: -len("_change")] in paired:
        return paired[metric[: -len("_change")]]
    try:
        return M.lookup(metric).label
    except ConfigError:
        return metric.replace("_", " ")


def is_percent(metric: str, kind: str) -> bool:
    if kind == "paired":
        return True
    try:
        return M.lookup(metric).percent
    except ConfigError:  # a summary row of no declared metric
        return False


def _check_one_cell(summary: pl.DataFrame) -> None:
    """A metric once: a sweep's table (every cell's rows) was printed cell after cell
    under one header, with nothing to say which cell a row is of."""
    repeated = summary.filter(pl.col("metric").is_duplicated())["metric"]
    if repeated.len():
        k = int((summary["metric"] == repeated[0]).sum())
        raise ConfigError(f"format_table(): summary holds metric {repeated[0]!r} {k} times (the "
                          f"rows of {k} cells?); allowed: one cell's rows, as summary.filter("
                          "pl.col('cell') == ...) of a sweep's table (its summary.txt prints "
                          "each cell under its title)")


@known_keywords("fastsim.format_table()")
def format_table(summary: pl.DataFrame, title: str = "", note: bool = True) -> str:
    """Plain-text table of a summary: metric, estimate, 95% CI, n; and, unless ``note`` is
    false, ``few_clusters_note`` under it."""
    check_table(summary, "format_table", "summary", SUMMARY_SCHEMA,
                "allowed: a table from fastsim.summarize or fastsim.compare")
    if not isinstance(title, str):
        raise ConfigError(f"format_table(): title is {value_kind(title)}; allowed: a string")
    if not isinstance(note, bool):
        raise ConfigError(f"format_table(): note is {value_kind(note)}; allowed: True or False")
    _check_one_cell(summary)
    lines = []
    if title:
        lines.append(title)
    lines.append(f"{'metric':42s} {'estimate':>12s}  {'95% CI':>25s} {'n':>7s}")
    for r in summary.iter_rows(named=True):
        pct = is_percent(r["metric"], r["kind"])
        scale, unit = (100.0, "%") if pct else (1.0, "")
        if r["mean"] is None or not np.isfinite(r["mean"]):
            est, ci = "n/a", ""
        else:
            d = 2 if abs(r["mean"] * scale) >= 1 or r["mean"] == 0 else 4
            width = (r["hi"] - r["lo"]) * scale if r["lo"] is not None else np.nan
            if np.isfinite(width) and 0 < width < 0.05:
                d = max(d, 3)  # keep a narrow interval visibly an interval
            if r["lo"] is not None and r["hi"] is not None:
                d = interval_decimals(r["lo"] * scale, r["hi"] * scale, d)
            spec = f".{d}f"
            est = fmt_value(r["mean"] * scale, spec) + unit
            ci = (f"[{fmt_value(r['lo'] * scale, spec)}, {fmt_value(r['hi'] * scale, spec)}]{unit}"
                  if r["lo"] is not None and np.isfinite(r["lo"]) else "(no interval)")
        lines.append(f"{display_name(r['metric']):42s} {est:>12s}  {ci:>25s} {r['n']:>7d}")
    few = few_clusters_note(summary) if note else ""
    return "\n".join(lines + [few] if few else lines)


def few_clusters_note(summary: pl.DataFrame) -> str:
    """Lines saying what the summary's intervals rest on at few clusters, or "": its t
    intervals (of means and changes) on fewer than ``T_FULL_COVERAGE_N`` clusters, where
    those of skewed metrics under-cover; a rate's on one cluster, the exact binomial
    interval alone, which assumes the cluster's jobs independent."""
    lines = []
    few = summary.filter((pl.col("kind") != "pooled") & (pl.col("n") < T_FULL_COVERAGE_N)
                         & pl.col("lo").is_finite())
    if not few.is_empty():
        lines.append(f"note: t intervals here rest on fewer than {T_FULL_COVERAGE_N} clusters; "
                     "those of skewed metrics (JCT percentiles, queueing delay, mean JCT, their "
                     f"changes) cover about {T_FEW_COVERAGE}, not 95% (docs/model.md)")
    # at one cluster neither the bootstrap nor the t term has a spread to see
    one = summary.filter((pl.col("kind") == "pooled") & (pl.col("n") == 1)
                         & pl.col("lo").is_finite())
    if not one.is_empty():
        lines.append("note: at 1 cluster a rate's interval is the exact binomial one of its "
                     "jobs, which assumes them independent (it covered 95.8-99.3% on the "
                     "simulator's own jobs; docs/model.md)")
    return "\n".join(lines)
