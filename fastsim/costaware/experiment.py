"""A small, real GRPO experiment: uniform mini-batches vs Cost-Aware GRPO, many seeds.

Task (``fastsim.kernels.grpo.make_task_nb``): each prompt has ``n_traces`` candidate reasoning
traces; a trace has a length in tokens (lognormal around ``median_len``), features, and
is correct when a hidden linear score of its features plus the prompt's difficulty and
noise is positive (``length_effect`` > 0 makes longer traces more often correct).
Policy: ``softmax(w . phi)`` over a prompt's traces, from ``w = 0``.  Each step samples
``prompts`` training prompts and ``group`` responses each from the current policy, scores
them (reward = correct), and takes one GRPO gradient step on a mini-batch of ``batch``
responses drawn uniformly or cost-aware (``fastsim.costaware.grpo``).

What counts as tokens: the summed lengths of the mini-batch responses that enter
gradient steps (the backward-pass cost the paper reduces).  Rollout generation is the
same in both arms and is not counted.  Accuracy is the exact expected pass@1 on
held-out prompts (no evaluation noise).  Both arms of a seed share the task and every
random coordinate (common random numbers), so differences are paired.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from tqdm.auto import tqdm

from fastsim.costaware.sampling import check_lam
from fastsim.costaware.sgd import _positive_int, _real
from fastsim.stats import Estimate, bootstrap_ratio_ci, mean_ci
from fastsim.kernels import grpo as nb

ARMS = ("uniform", "cost_aware")


@dataclass(frozen=True)
class GRPOConfig:
    """Knobs of the toy GRPO experiment (defaults run in well under a minute)."""

    seeds: int = 128
    seed: int = 7
    n_train: int = 256
    n_test: int = 256
    n_traces: int = 8
    n_features: int = 8
    median_len: float = 300.0
    len_sigma: float = 0.7
    length_effect: float = 0.3
    difficulty_mean: float = -0.5
    difficulty_sd: float = 1.0
    noise_sd: float = 0.5
    n_steps: int = 300
    cost_aware_step_factor: float = 2.0
    prompts: int = 16
    group: int = 8
    batch: int = 32
    lr: float = 0.1
    lam: float = 0.1
    floor: float = 0.0
    eval_every: int = 5

    def __post_init__(self):
        _positive_int("seeds", self.seeds, 2, 100_000)
        _positive_int("seed", self.seed, 0)
        _positive_int("n_train", self.n_train, 1)
        _positive_int("n_test", self.n_test, 1)
        _positive_int("n_traces", self.n_traces, 2, 1024)
        _positive_int("n_features", self.n_features, 2, 1024)
        _real("median_len", self.median_len, 1.0)
        _real("len_sigma", self.len_sigma, 0.0, 3.0)
        _real("length_effect", self.length_effect, -10.0, 10.0)
        _real("difficulty_mean", self.difficulty_mean, -10.0, 10.0)
        _real("difficulty_sd", self.difficulty_sd, 0.0, 10.0)
        _real("noise_sd", self.noise_sd, 0.0, 10.0)
        _positive_int("n_steps", self.n_steps, 1)
        _real("cost_aware_step_factor", self.cost_aware_step_factor, 1.0, 100.0)
        _positive_int("prompts", self.prompts, 1)
        _positive_int("group", self.group, 2, 4096)
        _positive_int("batch", self.batch, 1)
        _real("lr", self.lr, 0.0, 1e6, lo_open=True)
        check_lam(self.lam)
        _real("floor", self.floor, 0.0)
        _positive_int("eval_every", self.eval_every, 1, self.n_steps)

    @property
    def steps_per_arm(self) -> tuple[int, int]:
        """(uniform, cost_aware) training steps: the cost-aware arm may run longer so that
        it can reach the uniform run's peak even when that peak is at the very end."""
        return self.n_steps, int(round(self.n_steps * self.cost_aware_step_factor))

    @property
    def n_evals(self) -> int:
        return max(self.steps_per_arm) // self.eval_every + 1


def run_grpo(cfg: GRPOConfig = GRPOConfig(), progress: bool = True,
             chunk: int = 16) -> pl.DataFrame:
    """Train both arms on every seed; one row per (seed, arm, evaluation).

    Columns: ``seed``, ``arm``, ``eval``, ``step``, ``tokens`` (cumulative), ``accuracy``
    (held-out expected pass@1), ``skipped_batches`` (all-zero-advantage batches).

    Examples
    --------
    >>> df = run_grpo(GRPOConfig(seeds=2, n_steps=10, n_train=16, n_test=16), progress=False)
    >>> df.shape[0], sorted(set(df["arm"]))
    (16, ['cost_aware', 'uniform'])
    """
    E = cfg.n_evals
    tokens = np.empty((cfg.seeds, nb.N_ARMS, E))
    acc = np.empty((cfg.seeds, nb.N_ARMS, E))
    skipped = np.empty((cfg.seeds, nb.N_ARMS), np.int64)
    with tqdm(total=cfg.seeds, desc="GRPO seeds", disable=not progress, leave=False) as bar:
        for lo in range(0, cfg.seeds, chunk):
            hi = min(cfg.seeds, lo + chunk)
            nb.grpo_experiment_nb(
                cfg.n_train, cfg.n_test, cfg.n_traces, cfg.n_features, cfg.median_len,
                cfg.len_sigma, cfg.length_effect, cfg.difficulty_mean, cfg.difficulty_sd,
                cfg.noise_sd, np.array(cfg.steps_per_arm, np.int64), cfg.prompts, cfg.group, cfg.batch, cfg.lr, cfg.lam,
                cfg.floor, cfg.eval_every, cfg.seed, lo, tokens[lo:hi], acc[lo:hi],
                skipped[lo:hi])
            bar.update(hi - lo)
    seed_i, arm_i, eval_i = np.meshgrid(np.arange(cfg.seeds), np.arange(nb.N_ARMS), np.arange(E),
                                        indexing="ij")
    return pl.DataFrame({
        "seed": seed_i.ravel(), "arm": np.asarray(ARMS)[arm_i.ravel()],
        "eval": eval_i.ravel(), "step": eval_i.ravel() * cfg.eval_every,
        "tokens": tokens.ravel(), "accuracy": acc.ravel(),
        "skipped_batches": np.repeat(skipped.ravel(), E),
    }).filter(pl.col("accuracy").is_not_nan())


def _arm(curves: pl.DataFrame, arm: str):
    c = curves.filter(pl.col("arm") == arm).sort(["seed", "eval"])
    shape = (c["seed"].n_unique(), -1)
    return c["tokens"].to_numpy().reshape(shape), c["accuracy"].to_numpy().reshape(shape)


def tokens_to_uniform_peak(curves: pl.DataFrame) -> pl.DataFrame:
    """Per seed: the uniform run's peak accuracy and the tokens it took to reach it, the
    tokens the cost-aware run took to first reach the same accuracy (NaN if never), and
    accuracies at the uniform horizon (same steps) and at the uniform token budget."""
    tok_u, acc_u = _arm(curves, "uniform")
    tok_c, acc_c = _arm(curves, "cost_aware")
    rows = np.arange(acc_u.shape[0])
    peak = acc_u.max(axis=1)
    e_u = acc_u.argmax(axis=1)
    hit = acc_c >= peak[:, None]
    e_c = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    t_c = np.where(e_c >= 0, tok_c[rows, np.maximum(e_c, 0)], np.nan)
    horizon = acc_u.shape[1] - 1
    budget = tok_u[:, -1]
    # last cost-aware evaluation whose cumulative tokens fit in the uniform run's total
    e_b = (tok_c <= budget[:, None]).sum(axis=1) - 1
    return pl.DataFrame({"seed": rows, "uniform_peak_accuracy": peak,
                         "uniform_tokens_to_peak": tok_u[rows, e_u],
                         "cost_aware_tokens_to_peak": t_c,
                         "uniform_final_accuracy": acc_u[:, -1],
                         "cost_aware_accuracy_same_steps": acc_c[:, horizon],
                         "cost_aware_accuracy_same_tokens": acc_c[rows, e_b],
                         "cost_aware_final_accuracy": acc_c[:, -1],
                         "uniform_total_tokens": budget,
                         "cost_aware_tokens_same_steps": tok_c[:, horizon]})


def summarize_grpo(curves: pl.DataFrame) -> pl.DataFrame:
    """Headline numbers with 95% CIs over seeds, one row per metric.

    * ``token_saving_to_uniform_peak``: ``1 - pooled ratio`` of cost-aware over uniform
      tokens-to-peak (bootstrap over seeds that reached it), and ``reached_frac``;
    * ``token_saving_paired_mean``: mean over seeds of ``1 - tokens_ca / tokens_u``;
    * final accuracies and paired differences at the same steps and the same tokens;
    * the token saving at equal steps (cheaper mini-batches).
    """
    per_seed = tokens_to_uniform_peak(curves)
    tu = per_seed["uniform_tokens_to_peak"].to_numpy()
    tc = per_seed["cost_aware_tokens_to_peak"].to_numpy()
    ok = np.isfinite(tc) & (tu > 0)
    rows = []

    def add(metric, est, note=""):
        rows.append({"metric": metric, "mean": est.mean, "lo": est.lo, "hi": est.hi,
                     "n": est.n, "note": note})

    r = bootstrap_ratio_ci(tc[ok], tu[ok])
    add("token_saving_to_uniform_peak", Estimate(1 - r.mean, 1 - r.hi, 1 - r.lo, r.n),
        "1 - sum(tokens_ca) / sum(tokens_u) over seeds reaching the peak")
    add("reached_frac", mean_ci(ok.astype(float)), "seeds where cost-aware reached the peak")
    add("token_saving_paired_mean", mean_ci(1.0 - tc[ok] / tu[ok]),
        "mean of 1 - tokens_ca / tokens_u")
    col = lambda name: per_seed[name].to_numpy()  # noqa: E731
    fu = col("uniform_final_accuracy")
    add("uniform_peak_accuracy", mean_ci(col("uniform_peak_accuracy")))
    add("final_accuracy_uniform", mean_ci(fu), "at the uniform horizon")
    add("final_accuracy_cost_aware_same_steps", mean_ci(col("cost_aware_accuracy_same_steps")))
    add("final_accuracy_diff_same_steps", mean_ci(col("cost_aware_accuracy_same_steps") - fu),
        "cost_aware - uniform, paired, same number of steps")
    add("final_accuracy_diff_same_tokens", mean_ci(col("cost_aware_accuracy_same_tokens") - fu),
        "cost_aware - uniform, paired, cost-aware within the uniform token budget")
    add("final_accuracy_cost_aware_end", mean_ci(col("cost_aware_final_accuracy")),
        "end of the longer cost-aware run")
    add("token_saving_per_step", mean_ci(1.0 - col("cost_aware_tokens_same_steps")
                                         / col("uniform_total_tokens")),
        "same number of steps: 1 - tokens_ca / tokens_u")
    return pl.DataFrame(rows)


def curve_summary(curves: pl.DataFrame) -> pl.DataFrame:
    """Per arm and evaluation: mean cumulative tokens and accuracy with a 95% CI."""
    rows = []
    for (arm, e), g in curves.group_by(["arm", "eval"], maintain_order=True):
        a = mean_ci(g["accuracy"].to_numpy())
        t = mean_ci(g["tokens"].to_numpy())
        rows.append({"arm": arm, "eval": e, "step": int(g["step"][0]), "tokens_mean": t.mean,
                     "tokens_lo": t.lo, "tokens_hi": t.hi, "accuracy_mean": a.mean,
                     "accuracy_lo": a.lo, "accuracy_hi": a.hi, "n_seeds": a.n})
    return pl.DataFrame(rows).sort(["arm", "eval"])


def config_columns(cfg: GRPOConfig) -> dict:
    return {f"grpo_{k}": v for k, v in asdict(cfg).items()}
