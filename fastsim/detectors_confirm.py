"""``fastsim detectors --confirm PLAN``: the pre-registered confirmatory test of goal 3.

Goal 3 of the detector benchmark (docs/detectors.md) asks for a detector whose FPR on the
toy-RLHF traces is below EvalStop(k=2)'s at equal or higher recall. Its setting was chosen
by a search over the exploration traces, so a p-value on those traces says little. The
plan file (``docs/preregistration/detectors_goal3.toml``) fixes the candidate, the
comparison and the fresh trace seeds; it was committed before those traces existed. This
module runs that one comparison and nothing else, on a trace set it first checks against
the plan (the declared seeds, none of the exploration's).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from fastsim import detectors as det
from fastsim.errors import ConfigError, did_you_mean
from fastsim.io import read_toml, toml_text
from fastsim.stats import bootstrap_ratio_ci, cluster_sums, mcnemar_p, mean_ci, proportion_ci

START = "<!-- fastsim detectors confirm: start -->"
END = "<!-- fastsim detectors confirm: end -->"
# a plan's seeds are held as a set, one per run at most: n_runs = 10^11 let a set of 10^11
# seeds be built for minutes before any trace was read (the plan's set is 1,080 runs)
MAX_RUNS = 1_000_000


# every key read_plan reads, by table: a plan is a pre-registration, and a key it does
# not read (alpah beside alpha, seeds_last under [test]) was passed over in silence
PLAN_KEYS = {"candidate": ("detector", "params"), "baseline": ("detector", "params"),
             "traces": ("seeds_first", "seeds_last", "exploration_seeds", "world_seed",
                        "n_runs", "n_evals"),
             "test": ("primary", "test", "alternative", "alpha", "recall_rule")}


def _check_keys(plan: dict, path: Path) -> None:
    for table, value in plan.items():
        if table not in PLAN_KEYS:
            what = f"table [{table}]" if isinstance(value, dict) else f"key {table!r}"
            raise ConfigError(f"{path}: {what} is unknown"
                              f"{did_you_mean(table, PLAN_KEYS)}; allowed: "
                              + ", ".join(f"[{t}]" for t in PLAN_KEYS))
        for key in value if isinstance(value, dict) else ():  # a non-table: named below
            if key not in PLAN_KEYS[table]:
                raise ConfigError(f"{path}: [{table}] key {key!r} is unknown"
                                  f"{did_you_mean(key, PLAN_KEYS[table])}; allowed: "
                                  + ", ".join(PLAN_KEYS[table]))


def read_plan(path: Path) -> dict:
    """The plan, with every field the test needs checked (``ConfigError`` names the field)."""
    plan = read_toml(path, "pre-registration plan")
    _check_keys(plan, path)

    def field(section: str, key: str, kind, what: str, lo=None, hi=None):
        v = plan.get(section, {}).get(key) if isinstance(plan.get(section), dict) else None
        if (not isinstance(v, kind) or isinstance(v, bool) or (lo is not None and v < lo)
                or (hi is not None and v > hi)):
            said = "is missing" if v is None else f"= {toml_text(v)}"
            raise ConfigError(f"{path}: [{section}] {key} {said}; allowed: {what}")
        return v

    out = {}
    for role in ("candidate", "baseline"):
        name = field(role, "detector", str, "a detector name")
        params = field(role, "params", dict, "an inline table of parameters")
        try:
            det.policy(name, params)
        except ConfigError as exc:
            raise ConfigError(f"{path}: [{role}] {exc}") from None
        out[role] = (name, params)
    first, last = field("traces", "seeds_first", int, "an integer"), field("traces", "seeds_last", int, "an integer")
    if not 0 <= first <= last:
        raise ConfigError(f"{path}: [traces] seeds {first}..{last}; allowed: 0 <= seeds_first <= seeds_last")
    # a trace set has a run, and toy-rlhf evaluates a run at least twice
    out["n_runs"] = field("traces", "n_runs", int, f"an integer from 1 to {MAX_RUNS}", lo=1,
                          hi=MAX_RUNS)
    out["n_evals"] = field("traces", "n_evals", int, "an integer >= 2", lo=2)
    if last - first + 1 > out["n_runs"]:  # each seed has a run: a set no trace file holds
        raise ConfigError(f"{path}: [traces] seeds {first}..{last} are {last - first + 1} seeds "
                          f"for n_runs = {out['n_runs']}; allowed: at most one seed per run")
    out["seeds"] = set(range(first, last + 1))
    explored = field("traces", "exploration_seeds", list, "a list of integers")
    bad = [v for v in explored if not isinstance(v, int) or isinstance(v, bool) or v < 0]
    if bad:  # a list in it was a TypeError (unhashable); true was read as seed 1
        raise ConfigError(f"{path}: [traces] exploration_seeds holds {toml_text(bad[0])}; "
                          "allowed: a list of integers >= 0")
    out["exploration_seeds"] = set(explored)
    if out["seeds"] & out["exploration_seeds"]:
        raise ConfigError(f"{path}: [traces] the confirmation seeds overlap exploration_seeds; "
                          "allowed: disjoint seeds")
    out["world_seed"] = field("traces", "world_seed", int, "an integer from 0 to 2^64-1",
                              lo=0, hi=2**64 - 1)
    test = {k: plan.get("test", {}).get(k) for k in ("primary", "test", "alternative", "recall_rule")}
    want = {"primary": "fpr", "test": "mcnemar_exact", "alternative": "two-sided",
            "recall_rule": "candidate_recall >= baseline_recall"}
    for k, v in want.items():
        if test[k] != v:
            said = "is missing" if test[k] is None else f"= {toml_text(test[k])}"
            raise ConfigError(f"{path}: [test] {k} {said}; allowed: {toml_text(v)}")
    out["alpha"] = float(field("test", "alpha", (int, float), "a number"))
    if not 0 < out["alpha"] < 1:
        raise ConfigError(f"{path}: [test] alpha = {out['alpha']!r}; allowed: 0 < alpha < 1")
    return out


def check_traces(traces: pl.DataFrame, plan: dict, path: Path) -> dict:
    """The traces' per-run arrays, after checking they are the plan's confirmation set."""
    if "seed" not in traces.columns:
        raise ConfigError(f"{path}: no 'seed' column; allowed: traces.parquet from fastsim traces toy-rlhf")
    from fastsim.replay.traces import read_trace_config
    recorded = read_trace_config(path)  # None: an older file, whose world cannot be checked
    if recorded is not None and recorded.world_seed != plan["world_seed"]:
        raise ConfigError(f"{path}: generated with world_seed {recorded.world_seed}; allowed: the "
                          f"plan's world_seed {plan['world_seed']}")
    arrays = det.trace_arrays(traces)
    seeds = set(arrays["seed"].tolist())
    if seeds & plan["exploration_seeds"]:
        raise ConfigError(f"{path}: holds exploration seeds {sorted(seeds & plan['exploration_seeds'])}; "
                          "allowed: the plan's confirmation seeds only")
    if seeds != plan["seeds"]:
        raise ConfigError(f"{path}: seeds {min(seeds)}..{max(seeds)} ({len(seeds)}) are not the plan's "
                          f"{min(plan['seeds'])}..{max(plan['seeds'])}; allowed: exactly the declared seeds")
    n_runs, n_evals = arrays["score"].shape
    if (n_runs, n_evals) != (plan["n_runs"], plan["n_evals"]):
        raise ConfigError(f"{path}: {n_runs} runs x {n_evals} evaluations; allowed: the plan's "
                          f"{plan['n_runs']} x {plan['n_evals']}")
    return arrays


def confirm(arrays: dict, plan: dict) -> dict:
    """The declared comparison: FPR and recall of the candidate and the baseline on the same
    runs, the paired changes with their intervals, the exact McNemar test and the verdict."""
    score = arrays["score"][None]
    every = np.ones((1, score.shape[1]), np.bool_)
    fired = {role: det.triggers(*plan[role], score, every)[0][0] > 0 for role in ("candidate", "baseline")}
    hack, seed = arrays["hacking"], arrays["seed"]
    healthy = ~hack
    per_seed = lambda x: cluster_sums(seed, x)[0]  # noqa: E731
    out = {"n_runs": int(hack.size), "n_seeds": int(np.unique(seed).size),
           "n_healthy": int(healthy.sum()),
           "n_hacking": int(hack.sum()), "alpha": plan["alpha"]}
    for role in ("candidate", "baseline"):
        pos = fired[role]
        out[role] = det.label(*plan[role], sigma=float("nan"))  # shows sigma0: the plan fixes it
        out[f"{role}_fp"], out[f"{role}_tp"] = int((pos & healthy).sum()), int((pos & hack).sum())
        # runs of one seed share their random draws: the seed is the cluster
        out[f"{role}_fpr"] = proportion_ci(per_seed(pos & healthy), per_seed(healthy))
        out[f"{role}_recall"] = proportion_ci(per_seed(pos & hack), per_seed(hack))
    c, b = fired["candidate"], fired["baseline"]
    diff = c[healthy].astype(float) - b[healthy].astype(float)
    # differences of two 0/1 outcomes lie in [-1, 1], as detectors.trace_row cuts them
    out["d_fpr"] = mean_ci(diff).within(-1.0, 1.0)
    # a difference: >= 0 in every seed does not make it >= 0 (it was cut there), and it
    # lies in [-1, 1] as d_fpr does
    out["d_fpr_seed"] = bootstrap_ratio_ci(per_seed(np.where(healthy, c.astype(float) - b, 0.0)),
                                           per_seed(healthy), signed=True).within(-1.0, 1.0)
    out["d_recall"] = mean_ci(c[hack].astype(float) - b[hack].astype(float)).within(-1.0, 1.0)
    out["only_baseline"] = int((b & ~c & healthy).sum())
    out["only_candidate"] = int((c & ~b & healthy).sum())
    out["p"] = mcnemar_p(c[healthy], b[healthy])
    out["fpr_holds"] = bool(out["p"] < plan["alpha"] and out["d_fpr"].mean < 0)
    out["recall_holds"] = bool(out["candidate_recall"].mean >= out["baseline_recall"].mean)
    out["holds"] = out["fpr_holds"] and out["recall_holds"]
    return out


# The plan declares t intervals over runs; runs of one seed share their draws, and such an
# interval covered 85-88% where seeds differ as this FPR's do (``coverage.py seeds``)
INDEPENDENT = "runs taken as independent"
SEED_NOTE = ("The t intervals over runs are the plan's; runs of one seed share their draws, so "
             "where seeds differ those intervals are narrower than 95% ones (docs/model.md "
             "measures how much): the seed-clustered FPR change is the one to read.")


def markdown(r: dict, plan_path: Path) -> str:
    pct = lambda e: e.fmt(100, 1)  # noqa: E731
    lines = [
        f"Plan: `{plan_path.as_posix()}` (committed before the traces below were generated). "
        f"n = {r['n_runs']} fresh runs of {r['n_seeds']} seeds: {r['n_healthy']} healthy, "
        f"{r['n_hacking']} hacking. Rates with 95% intervals clustered by seed; changes paired "
        "on the same runs.", "",
        "| setting | FPR % | recall % |", "| --- | --- | --- |",
        *(f"| {r[k]} | {pct(r[k + '_fpr'])} ({r[k + '_fp']}/{r['n_healthy']}) | "
          f"{pct(r[k + '_recall'])} ({r[k + '_tp']}/{r['n_hacking']}) |" for k in ("baseline", "candidate")), "",
        "| comparison (candidate minus EvalStop(k=2)) | value |", "| --- | --- |",
        f"| FPR change, pp (t interval over runs, {INDEPENDENT}) | {pct(r['d_fpr'])} |",
        f"| FPR change, pp (seed-clustered bootstrap) | {pct(r['d_fpr_seed'])} |",
        f"| healthy runs where only EvalStop(k=2) fires / only the candidate fires | "
        f"{r['only_baseline']} / {r['only_candidate']} |",
        f"| exact McNemar p, two-sided (declared; alpha = {r['alpha']:g}) | {r['p']:.3g} |",
        f"| recall change, pp (t interval over runs, {INDEPENDENT}) | {pct(r['d_recall'])} |",
        f"| FPR lower, significantly | {'yes' if r['fpr_holds'] else 'no'} |",
        f"| recall equal or higher | {'yes' if r['recall_holds'] else 'no'} |",
        f"| **goal 3 on fresh traces** | **{'holds' if r['holds'] else 'does not hold'}** |",
        "", SEED_NOTE,
    ]
    return "\n".join(lines)
