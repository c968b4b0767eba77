"""One declaration per per-cluster metric; the summary, the Parquet columns' types, the
table's display and the reference comparison derive from it.

A built-in metric is a column of ``kernels.metrics.cluster_metrics_nb`` (the kernel keeps
its slots in ``METRIC_NAMES`` order, found by name; a test checks that every slot is
declared here once and nothing else is).  Declaration order is the order of the summary's
rows.  A user metric is a Python function over the per-job arrays, declared
with ``@cluster_metric`` and switched on per config (``SimConfig.metrics``,
``fastsim run --metric``, a sweep's ``[base] metrics``) by its ``MODULE:FUNCTION`` name.

How a metric aggregates over clusters (``aggregate``):

* ``mean``: mean over clusters with a Student-t interval;
* ``pooled``: ``sum(numerator) / sum(denominator)`` over clusters with a cluster-bootstrap
  interval (``binomial``: widened to the exact binomial interval, for rates);
* ``none``: a building block of a pooled metric, not summarised itself.

``paired``: also reported as a paired relative change against the baseline (its label
and its place among the paired rows).
"""
from __future__ import annotations

import inspect
import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from fastsim import registry as R
from fastsim.values import float_or_nan, plain_scalar
from fastsim.errors import ConfigError, counted, did_you_mean, user_code
from fastsim.plain_python import coded_view
from fastsim.user_modules import import_ref, wrong_kind


@dataclass(frozen=True)
class Metric:
    DECLARED_AS: ClassVar[str] = "a metric"
    name: str
    label: str
    unit: str
    dtype: str = "float"                 # "float" or "int"
    aggregate: str = "mean"              # "mean", "pooled" or "none"
    pooled: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    binomial: bool = False               # pooled rate: exact binomial widening
    signed: bool = False                 # pooled num a difference: no cut at 0 (ratio_ci)
    column: bool = True                  # a per-cluster column (False: pooled only)
    percent: bool = False                # shown as a percentage
    paired: tuple[str, int] | None = None  # (label of the change, its rank)
    # The values a cluster's value can take: a mean's interval is cut to them, and a paired
    # change of a metric that cannot be negative to -100% and above (summary._row)
    bounds: tuple[float, float] = (-math.inf, math.inf)
    help: str = ""
    fn: Callable | None = None           # a user metric: jobs -> [C] values
    ref: str = ""

    def __repr__(self) -> str:
        """``<metric mymetrics:share>``, as a declaration of ``fastsim.registry`` shows."""
        return f"<metric {self.ref or self.name}>"


def _m(name, label, unit, **kw) -> Metric:
    return Metric(name, label, unit, **kw)


_NON_NEGATIVE = (0.0, math.inf)  # times and GPU-hours
_SHARE = (0.0, 1.0)

BUILTIN_METRICS = (
    _m("jct_mean_h", "mean JCT (h)", "h", paired=("mean JCT change", 0), bounds=_NON_NEGATIVE),
    _m("jct_p50_h", "p50 JCT (h)", "h", bounds=_NON_NEGATIVE),
    _m("jct_p95_h", "p95 JCT (h)", "h", paired=("p95 JCT change", 4), bounds=_NON_NEGATIVE),
    _m("jct_p99_h", "p99 JCT (h)", "h", bounds=_NON_NEGATIVE),
    _m("makespan_h", "makespan (h)", "h", paired=("makespan change", 5), bounds=_NON_NEGATIVE),
    _m("utilization", "GPU utilisation", "share", percent=True, bounds=_SHARE),
    _m("queue_mean_h", "mean queueing delay (h)", "h", bounds=_NON_NEGATIVE),
    # The paper does not define "wasted compute": three readings, each a paired change
    # (MODEL.md section 8).
    _m("gpu_h_total", "GPU-hours used (all jobs)", "GPU-h", paired=("all GPU-hours change", 3),
       bounds=_NON_NEGATIVE),
    _m("wasted_gpu_h", "wasted GPU-hours (hacking, post-peak)", "GPU-h",
       paired=("wasted compute change (post-peak)", 1), bounds=_NON_NEGATIVE),
    _m("hacking_gpu_h", "GPU-hours of hacking jobs", "GPU-h",
       paired=("hacking jobs' GPU-hours change", 2), bounds=_NON_NEGATIVE),
    _m("wasted_share", "wasted share of GPU-hours", "share", percent=True, bounds=_SHARE),
    _m("gold_hacking", "delivered gold, hacking jobs", "gold"),
    _m("gold_healthy_rlhf", "delivered gold, healthy RLHF", "gold"),
    _m("gold_all", "delivered gold, all jobs", "gold"),
    # best evaluation's gold minus the delivered one's, the best of the same evaluations
    _m("regret_mean", "regret vs best evaluation", "gold", bounds=_NON_NEGATIVE),
    _m("tp", "true positives", "jobs", dtype="int", aggregate="none"),
    _m("fp", "false positives", "jobs", dtype="int", aggregate="none"),
    _m("fn", "false negatives", "jobs", dtype="int", aggregate="none"),
    _m("tn", "true negatives", "jobs", dtype="int", aggregate="none"),
    _m("precision", "precision", "share", aggregate="pooled", pooled=(("tp",), ("tp", "fp")),
       binomial=True, percent=True),
    _m("recall", "recall (any trigger)", "share", aggregate="pooled",
       pooled=(("tp",), ("tp", "fn")), binomial=True, percent=True),
    _m("fpr", "fpr", "share", aggregate="pooled", pooled=(("fp",), ("fp", "tn")),
       binomial=True, percent=True),
    _m("delay_sum", "detection delay, summed", "evaluations", aggregate="none"),
    _m("delay_count", "detections timed", "jobs", dtype="int", aggregate="none"),
    _m("n_stopped", "jobs stopped (at completion too)", "jobs", dtype="int", aggregate="none"),
    _m("tp_freed", "true positives stopped before completion", "jobs", dtype="int",
       aggregate="none"),
    _m("fp_freed", "false positives stopped before completion", "jobs", dtype="int",
       aggregate="none"),
    _m("pos_at_completion", "triggers at completion", "jobs", dtype="int", aggregate="none"),
    # A trigger at the last evaluation frees no GPU: stop recall and stop FPR count only
    # the stops that do.
    _m("stop_recall", "stop recall (stopped before completion)", "share", aggregate="pooled",
       pooled=(("tp_freed",), ("tp", "fn")), binomial=True, percent=True),
    _m("stop_fpr", "stop fpr (stopped before completion)", "share", aggregate="pooled",
       pooled=(("fp_freed",), ("fp", "tn")), binomial=True, percent=True),
    _m("completion_share", "share of triggers at completion", "share", aggregate="pooled",
       pooled=(("pos_at_completion",), ("tp", "fp")), binomial=True, percent=True,
       column=False),
    _m("detection_delay_evals", "detection delay (evaluations)", "evaluations", aggregate="pooled",
       pooled=(("delay_sum",), ("delay_count",)), column=False,
       signed=True),  # trigger - peak: a detection before the peak counts negative
)

_METRICS: dict[str, Metric] = {m.name: m for m in BUILTIN_METRICS}


def metrics() -> tuple[Metric, ...]:
    """Every declared metric: the built-ins, then user metrics registered so far."""
    return tuple(_METRICS.values())


def estimate_range(metric: str, kind: str) -> tuple[float, float]:
    """The values a summary row's estimate can take: a mean's, its metric's ``bounds``; a
    paired change's (``kind == "paired"``, ``metric`` the changed column), -100% and above
    where the metric cannot be negative; anything else (pooled ratios are cut by their own
    interval; a name no longer declared) unbounded."""
    m = _METRICS.get(metric)
    if m is None or kind not in ("mean", "paired"):
        return (-math.inf, math.inf)
    if kind == "paired":
        return (-1.0, math.inf) if m.bounds[0] >= 0.0 else (-math.inf, math.inf)
    return m.bounds


def lookup(ref: str) -> Metric:
    """A declared metric by name, or a user metric by ``MODULE:FUNCTION`` (imported)."""
    if ref in _METRICS:
        return _METRICS[ref]
    hint = ""
    if isinstance(ref, str) and ":" in ref:
        _check_shape(ref)
        obj = import_ref("metric", ref, "MODULE:FUNCTION of a @cluster_metric")
        if isinstance(obj, Metric):
            return obj
        hint = wrong_kind(ref, obj, Metric.DECLARED_AS, "@cluster_metric")  # a policy, a key
    raise ConfigError(f"metric={ref!r} is invalid; allowed: MODULE:FUNCTION of a "
                      f"@cluster_metric{hint}")


def _check_shape(ref: str) -> None:
    """Two metrics in one name, or a metric given parameters as a policy takes them: each
    was "module 'mymetrics' has no attribute 'jct_p90,mymetrics:waste'", which reads as
    a misspelt function."""
    module, _, attr = ref.partition(":")
    if "," in ref:
        raise ConfigError(f"metric={ref!r} is invalid; allowed: one MODULE:FUNCTION of a "
                          "@cluster_metric per name (several metrics are several names: "
                          "--metric A --metric B, metrics = [\"A\", \"B\"])")
    if ":" in attr:
        raise ConfigError(f"metric={ref!r} is invalid; allowed: MODULE:FUNCTION of a "
                          "@cluster_metric, which takes no parameters "
                          f"({module}:{attr.partition(':')[0]})")


def _check_declaration(label, unit, dtype, aggregate, percent, paired, bounds) -> None:
    """``cluster_metric``'s arguments, when declared: percent="no" (truthy) showed the
    metric times 100 with a %, paired=True labelled its change 'True', and a bound beyond
    a float's range (10**400) was an OverflowError traceback."""
    if dtype not in ("float", "int") or aggregate not in ("mean", "none"):
        raise ConfigError(f"cluster_metric dtype={dtype!r}, aggregate={aggregate!r}; allowed: "
                          "dtype float or int, aggregate mean or none")
    for name, value in (("label", label), ("unit", unit), ("paired", paired)):
        if not isinstance(value, str):
            raise ConfigError(f"cluster_metric {name}={value!r}; allowed: text"
                              + (" (the label of its paired change; empty for none)"
                                 if name == "paired" else ""))
    if not isinstance(percent, bool):
        raise ConfigError(f"cluster_metric percent={percent!r}; allowed: True or False")
    if not (isinstance(bounds, tuple) and len(bounds) == 2
            and all(isinstance(b, numbers.Real) and not isinstance(b, bool)
                    and not math.isnan(float_or_nan(b)) for b in bounds)
            and bounds[0] < bounds[1]):
        raise ConfigError(f"cluster_metric bounds={bounds!r}; allowed: a tuple (low, high) of "
                          "two numbers, low < high (math.inf for none)")


def cluster_metric(_bare: Any = None, /, *, label: str = "", unit: str = "",
                   dtype: str = "float", aggregate: str = "mean", percent: bool = False,
                   paired: str = "",
                   bounds: tuple[float, float] = (-math.inf, math.inf)) -> Callable:
    """Declare a user metric: ``fn(jobs) -> array [C]``, where ``jobs`` maps the per-job
    columns of ``SimResult.jobs`` (``jct_h``, ``held_h``, ``gpus``, ``wasted_gpu_h``,
    ``stopped``, ``hacking``, ...) to ``[C, J]`` arrays (``job_type`` as its integer code,
    ``fastsim.kernels.codes.RLHF`` and so on).  Metrics are accounting, so they
    may read hidden truth.  The column is named after the function.  A float metric
    returns finite numbers, or NaN where it is undefined on a cluster (left out of the
    mean and its n); an infinity is refused (docs/extending.md, walkthrough 3).
    ``bounds``: the values it can take (``(0, math.inf)`` for a time): its interval is cut
    to them, as the built-ins' are, and a value outside them is refused.  ``paired``: the
    label of its paired change against the baseline (a summary row ``NAME_change``; empty:
    none; a relative change needs baseline values >= 0, so its bounds must start at 0 or
    above); ``percent``: shown as a percentage.  Neither label may name a row another
    metric has (summaries name rows by label).

    Examples
    --------
    >>> @cluster_metric(label="mean GPUs of stopped jobs", unit="GPUs")
    ... def stopped_gpus(jobs):
    ...     n = jobs["stopped"].sum(axis=1)
    ...     return (jobs["gpus"] * jobs["stopped"]).sum(axis=1) / np.maximum(n, 1)
    """
    if _bare is not None:
        raise R.bare_decorator("cluster_metric")
    percent = plain_scalar(percent)  # np.True_ is a bool, as a config's own fields read it
    _check_declaration(label, unit, dtype, aggregate, percent, paired, bounds)

    def wrap(fn: Callable) -> Metric:
        R.check_decorated(fn, "metric", "cluster_metric")
        if hasattr(fn, "py_func"):  # it ran, and numba failed to type the mapping of columns
            raise ConfigError(f"metric {fn.__module__}:{fn.__name__} is an @njit function; "
                              "allowed: a plain Python function of the per-job arrays, which "
                              "come as a mapping numba cannot take (call your @njit function "
                              "from it, as f(jobs[\"jct_h\"]))")
        name = getattr(fn, "__name__", "")
        if not (isinstance(name, str) and name.isidentifier()):
            # a lambda is "<lambda>": a column no spec names, and a second lambda of its
            # module replaced the first, whose runs then computed the second
            raise ConfigError(f"metric {name or fn!r}: the column is named after the function; "
                              "allowed: a function defined with def")
        _check_arguments(fn, name)
        if (name in _METRICS and _METRICS[name].fn is None) or name in ("cluster", "seed", "job"):
            raise ConfigError(f"metric {name!r} is a built-in column; allowed: a new name")
        ref = f"{fn.__module__}:{name}"
        taken = _METRICS.get(name)
        if taken is not None and taken.ref != ref and not _same_source(taken.fn, fn):
            # summaries find a metric's label, bounds and pairing by its column's name: a
            # second module's metric of the same name replaced the first's, whose runs were
            # then summarised with the other's label and bounds (an interval cut to them)
            raise ConfigError(f"metric {name!r}: {taken.ref} and {ref} both fill {name!r}; "
                              "allowed: a new name")
        _check_change_row(name, paired)
        label_text = label or name.replace("_", " ")
        _check_row_labels(ref, fn, label_text, paired)
        if paired and bounds[0] < 0:
            # p / b - 1 against a negative baseline has the wrong sign: refused here, when
            # the sweep file is loaded, not at aggregation after the whole sweep ran
            raise ConfigError(f"metric {ref}: paired={paired!r} with bounds={bounds!r}; "
                              "allowed: a paired metric's bounds from 0 or above, as "
                              "bounds=(0, math.inf) (a relative change needs a baseline >= 0)")
        R.check_cached(fn, "metric", METRIC_ALLOWED)
        m = Metric(name, label_text, unit, dtype=dtype, aggregate=aggregate,
                   percent=percent, paired=(paired, 100) if paired else None,
                   bounds=(float(bounds[0]), float(bounds[1])),
                   help=(fn.__doc__ or "").strip().split("\n")[0], fn=fn,
                   ref=ref)
        _METRICS[name] = m
        return m
    return R.declaring("cluster_metric", wrap)


def _check_arguments(fn: Callable, name: str) -> None:
    """A metric is called with the mapping of columns alone: one that needs a second
    argument (``def two(jobs, k)``) failed only at its call, in a line naming neither its
    file nor its line; refused where it is declared, as a stop policy's arguments are."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to read (a builtin): its call says
        return
    try:
        sig.bind(None)
    except TypeError:
        raise ConfigError(f"metric {name}{tuple(sig.parameters)}: arguments differ from the "
                          f"declaration; allowed: one argument, the per-job arrays (def "
                          f"{name}(jobs))") from None


def _check_change_row(name: str, paired: str) -> None:
    """A summary names a paired metric's change ``NAME_change``: a metric of that name made
    a second row of it (``fastsim run`` wrote its results, then failed saying the table
    held the rows of two cells; ``compare`` returned both, and a filter on the name took
    either)."""
    stem = name.removesuffix("_change")
    if stem != name and stem in _METRICS and _METRICS[stem].paired:
        raise ConfigError(f"metric {name!r}: a summary names the paired change of {stem} so; "
                          "allowed: another name")
    other = _METRICS.get(f"{name}_change")
    if paired and other is not None:
        raise ConfigError(f"metric {name!r}: a summary would name its paired change "
                          f"{name}_change, the column {other.ref} fills; allowed: another name")


def _check_row_labels(ref: str, fn: Callable, label: str, paired: str) -> None:
    """A summary's rows are named by label alone: a metric labelled as another (``mean JCT
    (h)``, or its change ``mean JCT change``) was a second row of that name in ``fastsim
    run``'s table and each cell of ``summary.txt``, which no reader could tell from the
    built-in's.  Declaring it again from its own module (a reload) is not refused, as
    for its name."""
    rows = {}
    for m in _METRICS.values():
        if m.ref == ref or (m.fn is not None and _same_source(m.fn, fn)):
            continue
        rows.setdefault(m.label, m)
        if m.paired:
            rows.setdefault(m.paired[0], m)
    for what, text in (("label", label), ("paired", paired)):
        other = rows.get(text)
        if other is not None:
            owner = (f"the built-in metric {other.name}" if other.fn is None
                     else f"the metric {other.ref}")
            raise ConfigError(f"metric {ref}: {what}={text!r} names a row {owner} has in "
                              "summaries already; allowed: a label of its own")
    if paired and paired == label:
        raise ConfigError(f"metric {ref}: paired={paired!r} is its own label, two rows of one "
                          "name in summaries; allowed: a label for its change that differs")


def _same_source(a: Callable, b: Callable) -> bool:
    """Whether two functions are one definition loaded twice: a script run as ``__main__``
    that a sweep file then names by its module (``mymetrics:share``) imports it again."""
    ca, cb = getattr(a, "__code__", None), getattr(b, "__code__", None)
    return (ca is not None and cb is not None and a.__qualname__ == b.__qualname__
            and (ca.co_filename, ca.co_firstlineno) == (cb.co_filename, cb.co_firstlineno))


class _NoColumn(KeyError):
    """A metric's key that is no per-job column, said as text (a KeyError shows its repr)."""

    def __str__(self) -> str:
        return str(self.args[0])


_NoColumn.__name__ = _NoColumn.__qualname__ = "KeyError"  # what the metric's line raised


class _Columns(dict):
    """The per-job arrays a metric is given, by column: a key that is none of them names
    the nearest and every one (``KeyError: 'jct'`` said neither ``jct_h`` nor the rest)."""

    def __missing__(self, key):
        raise _NoColumn(f"{key!r} is not a per-job column{did_you_mean(str(key), self)}; the "
                        f"columns: {', '.join(self)}")


def user_columns(refs: tuple[str, ...], jobs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The user metrics ``refs`` of a config over its per-job arrays: ``{name: [C]}``
    (``job_type`` as ``plain_python.JobTypeCodes``)."""
    out = {}
    view = coded_view(jobs)  # read-only: shared with the run's other arm
    n = next(iter(jobs.values())).shape[0]
    for ref in refs:
        m = lookup(ref)
        check_code(m)
        with user_code("metric", m.name, METRIC_ALLOWED):
            # a dict of its own: a metric that rebinds a key (jobs["jct_h"] = ... / 24) or
            # drops one changed what every later metric, and the check below, read
            v = np.asarray(m.fn(_Columns(view)))
            # float64 would drop an imaginary part (with a warning), read text as the number
            # it spells ("1.5"), None as NaN and a datetime as its count of units
            if v.dtype.kind not in "biuf":
                what = "complex values" if v.dtype.kind == "c" else f"values of dtype {v.dtype}"
                raise ConfigError(f"metric {m.name} returned {what}{R.def_line(m.fn)}; allowed: "
                                  "real numbers, one per cluster (NaN where it is undefined)")
            v = v.astype(np.float64)
        if v.shape != (n,):
            raise ConfigError(f"metric {m.name} returned shape {v.shape} for a batch of "
                              f"{counted(n, 'cluster')}{R.def_line(m.fn)}; allowed: "
                              f"({n},), one value per cluster: a reduction along axis=1 of the "
                              "[clusters, jobs] arrays, as jobs[\"jct_h\"].mean(axis=1)")
        if m.dtype == "int":
            _check_integers(m, v)
        else:
            _check_floats(m, v)
        _check_bounds(m, v)
        _check_own_cluster(m, view, v)  # its refusal names the clusters asked, not a line
        out[m.name] = v.astype(np.int64 if m.dtype == "int" else np.float64)
    return out


# a metric is plain Python over numpy arrays (docs/extending.md), not an @njit kernel
METRIC_ALLOWED = "a pure function of the per-job arrays, one value per cluster (docs/extending.md)"


def check_code(m: Metric) -> None:
    """``registry.check_cached`` of a user metric, again where it runs (and before a sweep
    writes a chunk): at its declaration a function of its module defined further down is
    not there yet, and an ``@njit(cache=True)`` one passed."""
    if m.fn is not None:
        R.check_cached(m.fn, "metric", METRIC_ALLOWED)


# A metric refused for what it returned (a value, a shape, a dtype: the whole function's)
# is named with its file and def line (``registry.def_line``, read only then), as a stop
# policy refused for its return type is; one that raised is named with the line that
# raised, by ``user_code``.


def _check_integers(m: Metric, v: np.ndarray) -> None:
    """A dtype-int metric's values must be int64s as they are: 1.5 was stored as 1, and
    1e30 as -2^63 after a RuntimeWarning."""
    bad = ~(np.isfinite(v) & (v == np.round(v)) & (np.abs(v) < 2.0**63))
    if bad.any():
        raise ConfigError(f"metric {m.name} (dtype int) returned {float(v[bad][0])!r}"
                          f"{R.def_line(m.fn)}; allowed: integers from -2^63 to 2^63-1 (dtype "
                          "float for other finite values or NaN)")


def _check_floats(m: Metric, v: np.ndarray) -> None:
    """NaN is a cluster the metric is undefined on (left out of the mean and its n, as a
    built-in's NaN is); an infinity was left out the same way, so a metric that was inf on
    every cluster read "n/a" with n 0, as if undefined everywhere."""
    bad = np.isinf(v)
    if bad.any():
        raise ConfigError(f"metric {m.name} returned {float(v[bad][0])!r}{R.def_line(m.fn)}; "
                          "allowed: finite numbers, or NaN on a cluster where the metric is "
                          "undefined (left out of the mean and its n)")


def _check_own_cluster(m: Metric, view: dict[str, np.ndarray], v: np.ndarray) -> None:
    """The first, middle and last clusters' values, each asked again with that cluster's
    jobs alone, must be the same to the bit: a metric that read other clusters (divided by
    the batch's mean, gave a cluster its neighbour's value, or took the clusters in another
    order) changed with a sweep's chunk size and a run's batch, and nothing said so.  The
    last alone let through every such metric that left the last cluster its own value.
    Bits, not a tolerance: a sweep's results are the same bits for any --chunk, and a
    value that rounds by batch size would break that too.  Three calls of one cluster
    each: the cost is the metric's own on three clusters.  Then every cluster but the
    first: the batch asked again without it (``_check_rest``)."""
    n = v.shape[0]
    if n < 2:
        return
    for c in sorted({0, n // 2, n - 1}):
        alone = _Columns({k: a[c:c + 1] for k, a in view.items()})  # fresh, as user_columns gives
        with user_code("metric", m.name, METRIC_ALLOWED):
            again = np.asarray(m.fn(alone)).astype(np.float64).reshape(-1)[-1:]
        if not (again.shape == (1,) and (again[0] == v[c] or (again[0] != again[0]
                                                               and v[c] != v[c]))):
            got = float(again[0]) if again.size else None
            raise ConfigError(f"metric {m.name} returned {float(v[c])!r} for a cluster among "
                              f"{n} and {got!r} for the same cluster alone"
                              f"{_rounding_hint(float(v[c]), got)}; allowed: a value computed "
                              "from the cluster's own jobs (axis=1), the same in any batch or "
                              "chunk")
    _check_rest(m, view, v)


def _check_rest(m: Metric, view: dict[str, np.ndarray], v: np.ndarray) -> None:
    """Each cluster's value again in the batch without its first cluster (every other one
    a place earlier, no copy made): the same to the bit for every one of them, not only
    the three asked alone.  A metric that moved values among the other clusters (cluster
    1 given cluster 2's) passed, and changed with a sweep's chunk size.  One call, on the
    batch less one cluster."""
    n = v.shape[0]
    rest = _Columns({k: a[1:] for k, a in view.items()})
    with user_code("metric", m.name, METRIC_ALLOWED):
        again = np.asarray(m.fn(rest)).astype(np.float64).reshape(-1)
    if again.shape != (n - 1,):
        raise ConfigError(f"metric {m.name} returned shape {again.shape} for {n - 1} of the "
                          f"same clusters; allowed: ({n - 1},), one value per cluster")
    differ = ~((again == v[1:]) | (np.isnan(again) & np.isnan(v[1:])))
    if differ.any():
        c = int(np.flatnonzero(differ)[0]) + 1
        raise ConfigError(f"metric {m.name} returned {float(v[c])!r} for cluster {c} of {n} "
                          f"and {float(again[c - 1])!r} for it without cluster 0"
                          f"{_rounding_hint(float(v[c]), float(again[c - 1]))}; allowed: a "
                          "value computed from the cluster's own jobs (axis=1), the same in "
                          "any batch or chunk")


def _rounding_hint(batch: float, alone: float | None) -> str:
    """Why two values that differ in their last bits differ: not another cluster's data
    but an operation whose rounding follows the batch's shape (a BLAS matrix product,
    numpy's reduction over a transposed array), which a row sum avoids."""
    if alone is None or not (math.isfinite(batch) and math.isfinite(alone)) or \
            abs(batch - alone) > 1e-12 * max(abs(batch), abs(alone)):
        return ""
    return (" (a rounding difference: a matrix product (@, np.dot) or a reduction along a "
            "transposed or Fortran-order array rounds by batch size; a row sum such as "
            "(x * w).sum(axis=1) on the jobs' arrays does not)")


def out_of_bounds(m: Metric, v: np.ndarray) -> int | None:
    """The index of the first value of ``v`` outside ``m``'s declared ``bounds`` (None:
    all within; NaN is undefined, not outside).  Such a value makes an interval cut to the
    bounds wrong: a mean JCT of -5 h read "-5.0 [0.0, -2.516]"."""
    bad = (v < m.bounds[0]) | (v > m.bounds[1])  # NaN compares False
    return int(np.argmax(bad)) if bad.any() else None


def _check_bounds(m: Metric, v: np.ndarray) -> None:
    i = out_of_bounds(m, v)
    if i is not None:
        raise ConfigError(f"metric {m.name} returned {float(v.flat[i])!r}{R.def_line(m.fn)}; "
                          f"allowed: values in its declared bounds [{m.bounds[0]!r}, "
                          f"{m.bounds[1]!r}]")


def mean_metrics() -> dict[str, str]:
    return {m.name: m.label for m in metrics() if m.aggregate == "mean"}


def pooled_metrics() -> dict[str, Metric]:
    return {m.name: m for m in metrics() if m.aggregate == "pooled"}


def paired_metrics() -> dict[str, str]:
    ranked = sorted((m.paired[1], i, m) for i, m in enumerate(metrics()) if m.paired)
    return {m.name: m.paired[0] for _, _, m in ranked}


def int_columns() -> set[str]:
    return {m.name for m in metrics() if m.dtype == "int" and m.column}
