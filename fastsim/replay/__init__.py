"""Stop policies on real evaluation logs, live training loops and genuine RLHF traces.

* ``logs``: read CSV / JSONL / Parquet long tables and HF ``trainer_state.json``;
* ``replay``: replay any stop policy that needs no hidden truth, with the engine's kernels;
* ``monitor``: ``StopMonitor`` (any policy with a streaming form) for a live training loop;
* ``hf``: ``StopPolicyCallback`` for ``transformers.Trainer`` (optional extra ``fastsim[hf]``);
* ``traces``: toy RLHF runs that over-optimise a learned proxy for real.

The package is also callable: ``fastsim.replay(logs, policies)`` is ``replay_logs``.
Its other names load on first use: ``fastsim replay --help`` imports this package, and
``logs``, ``monitor`` and ``policies`` bring numba and polars.
"""
import inspect
import sys
import types
from pathlib import Path

from fastsim.errors import ConfigError, known_keywords
from fastsim.lazy import lazy_names

_EXPORTS = {"EvalLog": "fastsim.replay.logs", "read_logs": "fastsim.replay.logs",
            "Decision": "fastsim.replay.monitor", "EvalStopMonitor": "fastsim.replay.monitor",
            "StopMonitor": "fastsim.replay.monitor", "replay": "fastsim.replay.policies",
            "summarize_replay": "fastsim.replay.policies"}
__all__ = sorted([*_EXPORTS, "replay_logs"])


__getattr__, __dir__ = lazy_names(__name__, _EXPORTS, globals())


# how a log is read is read_logs' business; a user reaching for --metric here is told so
_READ_OPTIONS = {key: "fastsim.read_logs()'s: fastsim.replay(fastsim.read_logs(path, "
                 f"{key}=...), policies)" for key in ("fmt", "metric", "higher_is_better",
                                                      "on_duplicate", "columns")}


_POLICIES = "a policy spec (\"evalstop:k=2\") or a list of them"


def policy_list(policies) -> list:
    """``policies`` as a list of specs: one spec (``"evalstop:k=2"``, a ``PolicyConfig``) is
    a list of one, not its letters; anything but those or a list of them, one ConfigError."""
    from fastsim.config import PolicyConfig
    from fastsim.summary import value_kind  # a DataFrame's repr is many lines

    policies = [policies] if isinstance(policies, (str, PolicyConfig)) else policies
    if not isinstance(policies, (list, tuple)) or not all(
            isinstance(p, (str, PolicyConfig)) for p in policies):
        from fastsim.registry import spec_hint

        given = policies if isinstance(policies, (list, tuple)) else [policies]
        hint = next(filter(None, map(spec_hint, given)), "")
        raise ConfigError(f"policies={value_kind(policies)} is invalid; allowed: {_POLICIES}"
                          f"{hint}")
    return list(policies)


@known_keywords("fastsim.replay()", _READ_OPTIONS)
def replay_logs(logs, policies=None, gpus: float | None = None):
    """Replay stop policies on evaluation logs; one row per (policy, job).

    ``logs`` is an ``EvalLog``, or one or more paths (CSV, JSONL, Parquet,
    ``trainer_state.json``) or Polars/pandas DataFrames with a log's columns
    (``job_id, step, score``, ...; read by the same rules); ``policies`` one spec
    (``"evalstop:k=2"``) or a list.
    ``summarize_replay`` turns the rows into one row per policy with 95% intervals.
    The columns (``policy, job_id, status, stopped, trigger_step, delivered_step, ...``,
    steps in the log's units, ``gpu_h_*`` in GPU-hours) are those of
    ``fastsim.replay.replay``, whose docstring says what each means.

    Examples
    --------
    >>> import tempfile, pathlib, fastsim
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "log.csv"
    >>> _ = p.write_text("job_id,step,score\\na,1,0.5\\na,2,0.6\\na,3,0.5\\na,4,0.4\\na,5,0.3\\n")
    >>> fastsim.replay(p, "evalstop:k=2")["status"].to_list()
    ['stopped']
    """
    from fastsim.config import is_path
    from fastsim.replay.logs import EvalLog, is_frame, read_logs
    from fastsim.replay.policies import replay
    from fastsim.summary import value_kind  # a DataFrame's repr is many lines
    from fastsim.values import check_file_path

    if not (isinstance(logs, (EvalLog, list, tuple)) or is_path(logs) or is_frame(logs)):
        raise ConfigError(f"logs={value_kind(logs)} is invalid; allowed: a path, a DataFrame, "
                          "a list of them, or an EvalLog from fastsim.read_logs")
    if policies is None:  # required, but named as the user's call names it, not replay_logs
        raise ConfigError(f"fastsim.replay(): policies is missing; allowed: {_POLICIES}")
    policies = policy_list(policies)
    for p in logs if isinstance(logs, (list, tuple)) else [logs]:
        check_file_path(p, "logs", or_dir=True)
    if not isinstance(logs, EvalLog):  # read once every argument is checked
        logs = read_logs([logs] if isinstance(logs, (str, Path)) or is_frame(logs) else
                         list(logs) if isinstance(logs, (list, tuple)) else logs)
    return replay(logs, policies, gpus=gpus)


class _CallablePackage(types.ModuleType):
    def __call__(self, *args, **kwargs):
        return replay_logs(*args, **kwargs)

    @property
    def __signature__(self):  # inspect.signature(fastsim.replay), help(): not (*args, **kwargs)
        return inspect.signature(replay_logs)


sys.modules[__name__].__class__ = _CallablePackage
