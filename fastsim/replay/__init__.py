"""Stop policies on real evaluation logs, live training loops and genuine RLHF traces.

* ``logs``: read CSV / JSONL / Parquet long tables and HF ``trainer_state.json``;
* ``replay``: replay any stop policy that needs no hidden truth, with the engine's kernels;
* ``monitor``: ``StopMonitor`` (any policy with a streaming form) for a live training loop;
* ``hf``: ``StopPolicyCallback`` for ``transformers.Trainer`` (optional extra ``fastsim[hf]``);
* ``traces``: toy RLHF runs that over-optimise a learned proxy for real.
"""
from fastsim.replay.logs import EvalLog, read_logs
from fastsim.replay.monitor import Decision, EvalStopMonitor, StopMonitor
from fastsim.replay.replay import replay, summarize

__all__ = ["Decision", "EvalLog", "EvalStopMonitor", "StopMonitor", "read_logs", "replay",
           "summarize"]
