"""Monte Carlo sweeps: TOML grid -> chunks of clusters -> Parquet -> aggregated table.

* ``grid``: a sweep file expanded into cells (one ``SimConfig`` each, plus the
  baselines that paired comparisons need: the file's ``baseline`` policy, ``none`` by
  default), with a hash of the expanded grid.
* ``store``: the output directory (manifest, atomic per-chunk Parquet, resume).
* ``runner``: runs the missing chunks in-process or on a Dask cluster.
* ``aggregate``: per-cell estimates with 95% intervals (through ``fastsim.summary``).
* ``extracts``: small per-job extracts for figures (JCT histograms, trajectories).
* ``reproduce``: the paper's sweeps, figures and ``REPRODUCTION.md`` in one command.
* ``scoring``: the pre-registered tolerances and verdicts of the paper rows.
* ``frontier``: how close the model family comes to the detection and system rows together.

The package is also callable: ``fastsim.sweep(file, out)`` is ``run_sweep_file``.
``Cell``, ``Grid`` and ``load_sweep`` load on first use: ``fastsim sweep --help`` imports
this package, and ``grid`` brings numba and polars.
"""
import inspect
import sys
import types
import warnings
from pathlib import Path

from fastsim.errors import ConfigError, InertSettingWarning, api_words, known_keywords
from fastsim.lazy import lazy_names

_EXPORTS = {"Cell": "fastsim.sweep.grid", "Grid": "fastsim.sweep.grid",
            "load_sweep": "fastsim.sweep.grid"}
# ``from fastsim.sweep import *``: without a list it took the names defined at import,
# and the lazy ones are not
__all__ = sorted([*_EXPORTS, "run_sweep_file"])


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())


@known_keywords("fastsim.sweep()")
def run_sweep_file(file, out, *, clusters: int | None = None, chunk: int | None = None,
                   seed: int | None = None, backend: str = "local", address: str | None = None,
                   workers: int | None = None, keep_jobs: bool = False,
                   progress: bool | None = None):
    """Run a sweep file into ``out`` (resumable, like ``fastsim sweep``) and return its
    aggregated table: one row per cell and metric with ``mean, lo, hi`` (95%) and ``n``.

    ``file`` is a path, or the name of a shipped sweep (``"noise"``, ``"headline"``).
    ``clusters``, ``chunk`` and ``seed`` override the file's values; ``backend="dask"``
    runs the chunks on ``address``, or on a local cluster of ``workers`` processes.
    ``progress``: a bar on stderr; ``None`` (the default), where stderr is a terminal or a
    notebook, as ``fastsim sweep`` shows one, and not into a log or a pipe (a script's
    output, a test's captured stderr).  A first compile of the cells' kernels (10-40 s per
    scheduler) is said in one line on stderr where there is no bar.

    The table's columns: the cell (``cell`` id, ``experiment``, ``label``, ``scheduler``,
    ``policy`` label, ``policy_name``, the ``baseline`` cell it is paired against and its
    ``baseline_policy``, ``is_baseline``, ``uses_hidden_truth``), one column per axis of
    the grid plus ``sigma, k, base_rate, load, n_evals, mix``, then ``metric, kind, mean,
    lo, hi, n`` as in ``fastsim.summarize`` (``n``: clusters).  ``OUT/cells/`` keeps the
    per-cluster rows behind each interval.
    """
    from fastsim.resources import sweep_file
    from fastsim.sweep.aggregate import aggregate, read_aggregated_summary
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import check_run, held_run

    from fastsim.config import check_flags, is_path
    from fastsim.values import check_file_path, plain_scalar

    for name, value in (("file", file), ("out", out)):
        if not is_path(value):
            raise ConfigError(f"{name}={value!r} is invalid; allowed: a path")
    check_file_path(file, "file")
    check_flags(keep_jobs=keep_jobs)
    progress = _progress(progress)
    keep_jobs = plain_scalar(keep_jobs)  # numpy's bool as Python's, as check_run takes it
    grid = load_sweep(sweep_file(file), clusters=clusters, chunk=chunk, seed=seed)
    check_run(grid, backend, workers, keep_jobs, address)  # before the directory is written
    for line in grid.inert_notes(keep_jobs):
        warnings.warn(line, InertSettingWarning, stacklevel=3)
    # without a bar (progress=False, or stderr a log) a first sweep compiled in silence:
    # the notice without one, said where the CLI's is, after the checks and for what is left
    with api_words({"--out": "out"}, (file, out)), held_run(
            grid, Path(out), backend=backend, address=address, workers=workers,
            keep_jobs=keep_jobs, progress=progress, announce=not progress) as (store, _):
        aggregate(store, progress=progress)
    return read_aggregated_summary(Path(out))


def _progress(progress) -> bool:
    """``progress`` as a bool: ``None``, a bar where someone watches stderr.  A sweep
    of many seconds ran in silence from a terminal's Python under the old default False,
    where ``fastsim sweep`` shows its bar."""
    from fastsim.progress import interactive
    from fastsim.values import check_flags

    if progress is None:
        return interactive(sys.stderr)
    check_flags(allowed="True, False or None (a bar where stderr is a terminal or a notebook)",
                progress=progress)
    return bool(progress)


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return run_sweep_file(*args, **kwargs)

    @property
    def __signature__(self):  # inspect.signature(fastsim.sweep), help(): not (*args, **kwargs)
        return inspect.signature(run_sweep_file)


sys.modules[__name__].__class__ = _CallablePackage
