"""Declarative sweeps of the cost-aware experiments (``sweeps/costaware_*.toml``).

Format::

    name = "costaware_sgd"        # output file stem
    experiment = "sgd"            # "sgd", "subset" or "grpo"
    replications = 128            # SGD replications, or GRPO seeds (top level only)
    seed = 1                      # seed of the replications (top level only)
    [base]                        # fields of ProblemConfig + SGDConfig, or GRPOConfig
    kind = "least_squares"
    [axes]                        # every combination of these lists is run
    cost_sigma = [0.0, 1.0, 2.0]

Points with equal configs (an axis value given twice) run once.  A field that no point
reads (``cost_alpha`` with lognormal costs only) is refused; one that some points read and
others not is reset to its default where it is not read, as ``fastsim sweep`` resets ``k``
at a ``stop_at`` cell, so that those points run once, not once per value, and a note says
so (``SweepSpec.notes``).

``subset`` also takes ``gamma_fracs = [...]`` at top level (refused for the others), and
no ``strategies`` (it runs SGD at the optimal distribution on each subset).
Outputs in ``--out DIR``: ``NAME.summary.parquet`` (aggregated, with CIs: what figures
read), ``NAME.runs.parquet`` (replication level) and, for GRPO, ``NAME.curves.parquet``
(accuracy vs tokens).
"""
from __future__ import annotations

import itertools
import math
import os
import warnings
from dataclasses import dataclass, fields, replace
from pathlib import Path

import polars as pl

from fastsim.costaware.experiment import (GRPOConfig, ablation_table,
                                          config_columns as grpo_columns, curve_summary, run_grpo)
from fastsim.costaware.sgd import (ProblemConfig, SGDConfig, config_columns, make_problem,
                                   run_sgd, summarize_sgd)
from fastsim.costaware.subset import (check_gamma_frac, select_subset, subset_distribution,
                                      subset_report)
from fastsim.config import check_flags, is_path
from fastsim.errors import (ConfigError, InertSettingWarning, api_words, known_keywords,
                            quoted)
from fastsim.io import (TMP_EXTRA, axis_refusal, check_names_fit, check_output_dir,
                        make_directory, read_toml, remove_made, table_writer, toml_echo,
                        toml_text, unmade_on_failure, write_all)
from fastsim.memory import check_fits, table_bytes
from fastsim.sweep.grid import MAX_CELLS
from fastsim.sweep.store import (LOCK, DirLock, check_not_owned, hold_sweep_dirs,
                                 unmade_if_ended, unmake_lock)
from fastsim.progress import progress_bar
from fastsim.values import check_file_path

EXPERIMENTS = ("sgd", "subset", "grpo")
MAX_POINTS = MAX_CELLS  # as fastsim sweep's cells
_PROBLEM_FIELDS = {f.name for f in fields(ProblemConfig)}
_SGD_FIELDS = {f.name for f in fields(SGDConfig)}
_GRPO_FIELDS = {f.name for f in fields(GRPOConfig)}


@dataclass(frozen=True)
class SweepSpec:
    name: str
    experiment: str
    replications: int
    seed: int
    base: dict
    axes: dict
    gamma_fracs: tuple = (0.01, 0.02, 0.05, 0.1)
    # one line per axis some points do not read, which they run once for (said before work)
    notes: tuple = ()

    def points(self) -> list[dict]:
        """Every combination of the axes over the base, in file order; a point whose
        configs equal an earlier one's (an axis value given twice) is left out, as
        ``fastsim sweep`` runs a cell once."""
        keys = list(self.axes)
        out, seen = [], set()  # the configs are frozen: a list made this quadratic
        for combo in itertools.product(*(self.axes[k] for k in keys)):
            point = dict(self.base)
            point.update(zip(keys, combo))
            try:
                cfgs = _configs(self, point)
            except ConfigError:  # kept: the loader names the bad field of this point
                cfgs = None
            if cfgs is None or cfgs not in seen:
                seen.add(cfgs)
                out.append(point)
        return out


def _check_path(name: str, value) -> None:
    """A path given through the Python API, as fastsim.sweep checks its own: None was a
    TypeError, and '' the current directory."""
    if not is_path(value):
        raise ConfigError(f"{name}={value!r} is invalid; allowed: a path")


@known_keywords("fastsim.costaware.load_costaware_sweep()")
def load_costaware_sweep(path) -> SweepSpec:
    """Parse and validate a sweep TOML (every point is validated before anything runs)."""
    _check_path("path", path)
    check_file_path(path, "path")
    path = Path(path)
    raw = read_toml(path)
    if "experiment" not in raw:
        raise ConfigError(f"{path}: is a simulation sweep (it has no 'experiment'); run it "
                          f"with `fastsim sweep {path} --out DIR`")
    allowed = {"name", "experiment", "replications", "seed", "base", "axes", "gamma_fracs"}
    for key in raw:
        if key not in allowed:
            raise ConfigError(f"{path.name}: unknown key {key!r}; allowed: "
                              f"{', '.join(sorted(allowed))}")
    experiment = raw.get("experiment")
    if experiment not in EXPERIMENTS:
        raise ConfigError(f"{path.name}: experiment={toml_text(experiment)}; allowed: "
                          f"{', '.join(map(toml_text, EXPERIMENTS))}")
    for key in ("base", "axes"):
        if not isinstance(raw.get(key, {}), dict):
            raise ConfigError(f"{path.name}: {key}={toml_text(raw[key])} is invalid; allowed: "
                              f"a table ([{key}] with field = value lines)")
        _check_top_level_only(path, key, raw.get(key, {}), experiment)
    if "gamma_fracs" in raw and experiment != "subset":  # read by subset only: unused
        raise ConfigError(f"{path.name}: gamma_fracs is given to experiment = "
                          f"{toml_text(experiment)}, which has no bias budget; allowed: "
                          'gamma_fracs with experiment = "subset" only')
    gamma_fracs = raw.get("gamma_fracs", SweepSpec.gamma_fracs)
    if not isinstance(gamma_fracs, (list, tuple)) or not gamma_fracs:
        raise ConfigError(f"{path.name}: gamma_fracs={toml_text(gamma_fracs)} is invalid; "
                          "allowed: a non-empty list of fractions of mean(G) from 0 to below 1")
    axes = raw.get("axes", {})
    for k, v in axes.items():
        if (why := axis_refusal(k, v)) is not None:  # in fastsim sweep's words
            raise ConfigError(f"{path.name}: {why}")
    # counted before any point is built: 40 values on 6 axes was hours of validation
    n_points = math.prod(len(v) for v in axes.values())
    if n_points > MAX_POINTS:
        raise ConfigError(f"{path.name}: the axes cross to {n_points} points; at most "
                          f"{MAX_POINTS} allowed")
    name = raw.get("name", path.stem)
    _check_name(path, name)
    spec = SweepSpec(name=name, experiment=experiment,
                     replications=raw.get("replications", 64), seed=raw.get("seed", 1),
                     base=dict(raw.get("base", {})), axes=dict(axes),
                     gamma_fracs=tuple(gamma_fracs))
    for frac in spec.gamma_fracs:
        check_gamma_frac(frac, f"{path.name}: gamma_fracs")
    if len(set(spec.gamma_fracs)) != len(spec.gamma_fracs):  # a row each: two would be one
        raise ConfigError(f"{path.name}: gamma_fracs={toml_text(gamma_fracs)} is invalid; "
                          "allowed: each fraction once")
    points = spec.points()
    idle, reset = _check_points(path, spec, points)
    notes = _single_run_notes(path, spec, idle, reset, points, n_points)
    return replace(spec, notes=tuple(notes))


def _check_name(path: Path, name) -> None:
    """Refuse a sweep name that cannot name its output files."""
    # it names the output files in --out: a NUL (TOML's "\u0000") could name none, and
    # failed as a ValueError traceback after every run; a line break names a file no
    # listing shows on one line
    if (not isinstance(name, str) or not name.strip() or "/" in name or "\\" in name
            or name.startswith(".") or not name.isprintable()):
        raise ConfigError(f"{path.name}: name={toml_text(name)} is invalid; allowed: a "
                          "non-blank string of printable characters without '/', not "
                          "starting with '.' (it names the output files, which would be "
                          "hidden)")


def _check_points(path: Path, spec: SweepSpec, points: list[dict]) -> tuple[dict, dict]:
    """Validate each point and refuse unread fields; those some point ignores, their defaults."""
    given = set(spec.base) | set(spec.axes)
    idle: dict[str, tuple[str, str]] = {}  # fields given that some point does not read
    read = set()  # fields given that some point reads
    reset = {}  # the value a point that does not read a field runs with: its default
    for point in points:
        try:
            cfgs = _configs(spec, point)  # raises ConfigError naming the bad field
        except ConfigError as exc:
            given_here = {**point, "replications": spec.replications, "seed": spec.seed}
            raise ConfigError(f"{path.name}: {toml_echo(str(exc), given_here)}") from None
        unused = {k: v for cfg in cfgs for k, v in getattr(cfg, "unused", dict)().items()}
        reset.update({k: getattr(cfg, k) for cfg in cfgs for k in unused if hasattr(cfg, k)})
        idle.update(unused)
        read |= given - set(unused)
    for name in sorted(given - read):  # cost_alpha with lognormal costs: a no-op, unsaid
        said = _applies_to(*idle[name])
        raise ConfigError(f"{path.name}: {name} is given but would not be used at any point "
                          f"(it applies to {said}); allowed: {name} with {said}")
    return idle, reset


def _applies_to(needs: str, value: str) -> str:
    """What a field applies to, as TOML: ``cost_dist = "pareto"`` or ``prompt_median_len above 0``."""
    return f"{needs} = {toml_text(value)}" if value.isidentifier() else f"{needs} {value}"


def _single_run_notes(path: Path, spec: SweepSpec, idle: dict, reset: dict,
                      points: list[dict], n_points: int) -> list[str]:
    """A note for each axis some points do not read, so run once rather than per value."""
    # an axis some points do not read (cost_alpha beside lognormal costs): those points ran
    # once per value, identical results under as many labels; now once (``_configs``)
    notes = []
    for name, values in spec.axes.items():
        if name in idle and len(values) > 1:
            said = _applies_to(*idle[name])
            notes.append(f"{path.name}: {name} applies to {said} only: a point without it runs "
                         f"once, not once per {name}, its rows showing {name}'s default "
                         f"({reset[name]!r}); {len(points)} of {n_points} points run")
    return notes


# fields the top-level `replications` and `seed` set in every point; given in [base] or
# [axes] they were overwritten by the top-level value, silently
_TOP_LEVEL_ONLY = {"sgd": {"replications": "replications"},
                   "subset": {"replications": "replications"},
                   "grpo": {"seeds": "replications", "seed": "seed"}}


def _check_top_level_only(path: Path, section: str, table: dict, experiment: str) -> None:
    for key, top in _TOP_LEVEL_ONLY[experiment].items():
        if key in table:
            raise ConfigError(f"{path.name}: [{section}] {key} is not allowed there; allowed: "
                              f"{top} = N at the top level (one value for every point)")


def _configs(spec: SweepSpec, point: dict):
    """The configs of ``point``, each with the fields it does not read at their defaults
    (``_as_read``)."""
    return tuple(_as_read(cfg) for cfg in _given_configs(spec, point))


def _as_read(cfg):
    """``cfg`` with each field it does not read (``unused``) at its default, as ``fastsim
    sweep`` resets ``k`` at a ``stop_at`` cell: points differing there alone are one point
    (``SweepSpec.points``), which ran once per value, with identical results."""
    unused = getattr(cfg, "unused", dict)()
    return replace(cfg, **{f.name: f.default for f in fields(cfg) if f.name in unused})


def _given_configs(spec: SweepSpec, point: dict):
    if spec.experiment == "grpo":
        unknown = set(point) - _GRPO_FIELDS
        if unknown:
            raise ConfigError(f"unknown GRPO field(s) {quoted(sorted(unknown))}; allowed: "
                              f"{', '.join(sorted(_GRPO_FIELDS))}")
        return (GRPOConfig(**{**point, "seeds": spec.replications, "seed": spec.seed}),)
    unknown = set(point) - _PROBLEM_FIELDS - _SGD_FIELDS
    if unknown:
        raise ConfigError(f"unknown field(s) {quoted(sorted(unknown))}; allowed: "
                          f"{', '.join(sorted(_PROBLEM_FIELDS | _SGD_FIELDS))}")
    if spec.experiment == "subset" and "strategies" in point:  # it would be ignored
        raise ConfigError('strategies is not used by experiment = "subset", which runs SGD '
                          "at the optimal distribution on each subset; allowed: strategies "
                          'with experiment = "sgd"')
    problem = ProblemConfig(**{k: v for k, v in point.items() if k in _PROBLEM_FIELDS})
    sgd_kw = {k: v for k, v in point.items()
              if k in _SGD_FIELDS and k not in ("seed", "replications")}
    if "strategies" in sgd_kw:  # one name (an axis of single strategies) or a list of them
        v = sgd_kw["strategies"]
        sgd_kw["strategies"] = (v,) if isinstance(v, str) else tuple(v) if isinstance(
            v, list) else v  # anything else is SGDConfig's to refuse
    sgd = SGDConfig(**sgd_kw, replications=spec.replications, seed=spec.seed)
    return problem, sgd


def subset_experiment(problem_cfg: ProblemConfig, sgd_cfg: SGDConfig, gamma_fracs,
                      progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Greedy subsets per bias budget: predicted saving, bias paid, and the simulated cost
    of SGD on the subset (``p ∝ G/sqrt(c)`` on it) against optimal SGD on all samples."""
    problem = make_problem(problem_cfg, progress=progress)
    report = subset_report(problem, gamma_fracs, progress=progress)
    dists = {}
    for frac in report["gamma_frac"].to_list():  # as checked: -0.0 is the row of 0.0
        sel = select_subset(problem.G, problem.c, frac * float(problem.G.mean()))
        # labelled by the shortest text that reads back as frac (:g kept 6 digits, and a
        # frac such as 0.0123456789 matched no row of the report in the join below)
        dists[f"subset_{float(frac)!r}"] = subset_distribution(problem.G, problem.c, sel.keep,
                                                                sgd_cfg.lam)
    cfg = SGDConfig(**{**{f.name: getattr(sgd_cfg, f.name) for f in fields(SGDConfig)},
                       "strategies": ("optimal",)})
    runs = run_sgd(problem, cfg, progress=progress, distributions=dists)
    summary = summarize_sgd(runs, problem, sgd_cfg.lam, dists)
    sim = summary.filter(pl.col("strategy").str.starts_with("subset_")).select(
        pl.col("strategy").str.strip_prefix("subset_").cast(pl.Float64).alias("gamma_frac"),
        "reached_frac", "simulated_ratio", "simulated_ratio_lo", "simulated_ratio_hi",
        "predicted_ratio")
    return report.join(sim, on="gamma_frac", how="left"), runs


@known_keywords("fastsim.costaware.run_costaware_sweep()")
def run_costaware_sweep(path, out_dir, progress: bool = True) -> dict[str, Path]:
    """Run every point of a sweep file and write its Parquet outputs; returns their paths.
    Its errors name ``out_dir`` where ``fastsim costaware sweep`` says ``--out``."""
    _check_path("out_dir", out_dir)  # '' is Path('.'): the tables went into the current directory
    check_flags(progress=progress)
    spec = load_costaware_sweep(path)
    for line in spec.notes:  # the command line says them as note: lines
        warnings.warn(line, InertSettingWarning, stacklevel=3)
    with api_words({"--out": "out_dir"}, (path, out_dir)):
        return write_costaware_sweep(spec, path, Path(out_dir), progress)


def write_costaware_sweep(spec: SweepSpec, path, out: Path, progress: bool) -> dict[str, Path]:
    """``run_costaware_sweep`` of a loaded ``spec`` into ``out``, its errors in the command
    line's words (``--out``)."""
    check_tables_fit(spec, path)
    # as the command line holds its --out (``fastsim.cli.hold_outputs``), before even the
    # writability probe: through the API the tables went into a sweep directory that
    # another process held, and into its cells/
    check_not_owned(out, "--out")
    # A lock goes with its last reference, and a traceback the caller keeps (IPython keeps
    # the last one) keeps this frame's: the locks live in a list emptied on any exit, or an
    # interrupted or failed run left its directories held, every other process refused.
    # Asked before ``hold_sweep_dirs`` locks a sweep directory (one with a manifest) and so
    # makes its lock file, as ``SweepStore.open`` asks: asked after, a refused or
    # interrupted run into one left the blank sweep.lock it made
    made_lock = not os.path.lexists(out / LOCK)
    held = hold_sweep_dirs(out)
    try:
        check_output_dir(out, "--out")
        # the file's name names the outputs: too long, their write failed after every run.
        # The name is checked as typed, less what its longest file adds to it
        check_names_fit(out, [spec.name], f"{Path(path).name}: name", spec.name,
                        extra=TMP_EXTRA + len(".summary.parquet"))
        # Interrupted (Ctrl-C) or failed before its tables are written, the run leaves
        # nothing it made: it left --out holding a blank sweep.lock, a directory every
        # later look took for a sweep's (as a refused ``SweepStore.open`` leaves none)
        with unmade_on_failure() as made:
            made.append(make_directory(out))
            held.append(DirLock.acquire(out))  # one writer per directory, as fastsim sweep

            def unmake() -> None:  # ended at once in a compiled call, where no except runs
                unmake_lock(held[-1], made_lock)
                for each in reversed(made):
                    remove_made(each)

            try:
                with unmade_if_ended(unmake):
                    tables = _point_tables(spec, progress)
                    paths = {kind: out / f"{spec.name}.{kind}.parquet"
                             for kind, parts in tables.items() if parts}
                    # the lock still ours, and --out never made again (``within``): moved
                    # mid-run, it was made anew, unlocked, by the write
                    held[-1].check()
                    # all of them or none: never a summary beside another run's records
                    write_all(((paths[kind],
                                table_writer(pl.concat(tables[kind], how="diagonal_relaxed"),
                                             paths[kind]))
                               for kind in paths), within=out)
            except BaseException:
                unmake()  # unmade_on_failure's own pass then finds nothing left
                raise
        return paths
    finally:
        held.clear()


# columns of the widest table a point keeps until the end (the runs, tagged with its
# config: 27 for sgd and subset, 33 for grpo; GRPO's curves summary has 34, on fewer rows)
TABLE_COLUMNS = 34


def _rows_per_replication(spec: SweepSpec, point: dict) -> int:
    """Rows each replication (GRPO: each seed) of ``point`` adds to the tables kept until
    the end: a run per strategy (subset: optimal SGD and one per bias budget), or GRPO's
    evaluations of every arm."""
    cfgs = _configs(spec, point)
    if spec.experiment == "grpo":
        return len(cfgs[0].arms) * cfgs[0].n_evals
    if spec.experiment == "subset":
        return 1 + len(spec.gamma_fracs)
    return len(cfgs[1].strategies)


def check_tables_fit(spec: SweepSpec, path) -> None:
    """Refuse, before any point runs, a sweep whose tables would not fit in memory: every
    point's runs are kept until the end, to be written all or none, and replications =
    1000000 over 20 points grew to tens of GiB, point after point, until the process was
    killed (or, under a memory limit, aborted inside polars, leaving --out a blank
    sweep.lock)."""
    points = spec.points()
    rows = sum(_rows_per_replication(spec, point) for point in points)
    kept = "evaluations a seed" if spec.experiment == "grpo" else "SGD runs a replication"
    try:
        check_fits(lambda r: table_bytes(r * rows, TABLE_COLUMNS), spec.replications,
                   "replications", f"{rows:,} {kept} over {len(points):,} points", least=2,
                   none_fits="even 2 do not fit; allowed: fewer points (axis values)")
    except ConfigError as exc:
        raise ConfigError(f"{Path(path).name}: {exc}") from None


def _point_tables(spec: SweepSpec, progress: bool) -> dict[str, list[pl.DataFrame]]:
    """Every point of ``spec`` run: its ``summary``, ``runs`` and (GRPO) ``curves`` tables."""
    summaries, runs_all, curves_all = [], [], []
    for point in progress_bar(spec.points(), desc=spec.name, enabled=progress):
        cfgs = _configs(spec, point)
        if spec.experiment == "grpo":
            (cfg,) = cfgs  # one summary row per metric and non-uniform arm
            curves = run_grpo(cfg, progress=False)
            tags = grpo_columns(cfg)
            summaries.append(ablation_table(curves).with_columns(
                **{k: pl.lit(v) for k, v in tags.items()}))
            curves_all.append(curve_summary(curves).with_columns(
                **{k: pl.lit(v) for k, v in tags.items()}))
            runs_all.append(curves.with_columns(**{k: pl.lit(v) for k, v in tags.items()}))
            continue
        problem_cfg, sgd_cfg = cfgs
        tags = {k: pl.lit(v) for k, v in config_columns(problem_cfg, sgd_cfg).items()}
        if spec.experiment == "sgd":
            problem = make_problem(problem_cfg)
            runs = run_sgd(problem, sgd_cfg, progress=False)
            summary = summarize_sgd(runs, problem, sgd_cfg.lam)
        else:
            summary, runs = subset_experiment(problem_cfg, sgd_cfg, spec.gamma_fracs)
        summaries.append(summary.with_columns(**tags))
        runs_all.append(runs.with_columns(**tags))
    return {"summary": summaries, "runs": runs_all, "curves": curves_all}
