"""fastsim: fast, exact simulation of how GPU platforms schedule and stop LLM fine-tuning jobs.

The API in one import::

    import fastsim
    cfg = fastsim.SimConfig.from_specs("srtf_est", "evalstop:k=2")
    fastsim.simulate(cfg, n_clusters=100)        # per-cluster metrics (SimResult)
    fastsim.compare(cfg, baseline="none")         # summary table with 95% intervals
    fastsim.sweep("noise", "results/noise")       # a sweep file (or a shipped sweep's name)
    fastsim.replay("logs.csv", "evalstop:k=2")    # stop policies on evaluation logs
    fastsim.StopMonitor("peak:sigma0=0.02")       # any streaming policy in a training loop
    fastsim.costaware.sampling_distribution(G, c) # cost-aware learning (its own __all__)

Attributes load on first use, so ``import fastsim`` stays cheap for the command line; so
do the other modules (``fastsim.metrics``, ``fastsim.stats``, ...) when named.
"""
import importlib
import importlib.util

__version__ = "0.1.0"

_EXPORTS = {
    "simulate": "fastsim.api", "compare": "fastsim.api", "SimResult": "fastsim.api",
    "SimConfig": "fastsim.config", "ConfigError": "fastsim.errors",
    "summarize": "fastsim.summary", "format_table": "fastsim.summary",
    "read_logs": "fastsim.replay.logs", "StopMonitor": "fastsim.replay.monitor",
    "EvalStopMonitor": "fastsim.replay.monitor", "Decision": "fastsim.replay.monitor",
}
__all__ = sorted([*_EXPORTS, "sweep", "replay", "costaware", "__version__"])


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    # a module named after import fastsim (fastsim.costaware.run_sgd, fastsim.metrics), as
    # the callable subpackages fastsim.sweep(...) and fastsim.replay(...) are
    public = name.isidentifier() and not name.startswith("_")
    if public and importlib.util.find_spec(f"fastsim.{name}") is not None:
        return importlib.import_module(f"fastsim.{name}")
    raise AttributeError(f"module 'fastsim' has no attribute {name!r}")


def __dir__():
    return __all__
