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

from dataclasses import asdict

import numpy as np
import polars as pl

from fastsim.costaware.configs import (ARMS, MAX_CURVE_POINTS, MAX_RESPONSES,  # noqa: F401
                                       GRPOConfig)
from fastsim.config import check_flags, is_integer
from fastsim.errors import ConfigError, known_keywords
from fastsim.stats import (Estimate, bootstrap_ratio_ci, clopper_pearson, mean_ci,
                           quantile_ci)
from fastsim.kernels import grpo as nb
from fastsim.progress import progress_bar

#: share of the uniform run's final gain that defines the tokens-to-target metric
TARGET_GAIN = 0.9


@known_keywords("fastsim.costaware.run_grpo()")
def run_grpo(cfg: GRPOConfig = GRPOConfig(), progress: bool = True,
             chunk: int = 16) -> pl.DataFrame:
    """Train every arm on every seed; one row per (seed, arm, evaluation).

    Columns: ``seed``, ``arm``, ``eval``, ``step``, ``tokens`` (cumulative), ``accuracy``
    (held-out expected pass@1), ``skipped_batches`` (all-zero-advantage batches), and
    ``S_sum`` / ``C_sum``: the arm's ``S(p)`` and ``C(p)`` summed over the uniform run's
    batches of that seed (exact per-sample gradient norms), so that
    ``S_sum * C_sum`` ranks the arms by ``J = S C`` on identical batches.

    Examples
    --------
    >>> df = run_grpo(GRPOConfig(seeds=2, n_steps=10, n_train=16, n_test=16), progress=False)
    >>> df.shape[0], sorted(set(df["arm"]))
    (16, ['cost_aware', 'uniform'])
    """
    # chunk=-1 gave an empty range of seeds: every row read the uninitialised arrays
    if not isinstance(cfg, GRPOConfig):
        raise ConfigError(f"cfg={type(cfg).__name__} is invalid; allowed: a GRPOConfig")
    check_flags(progress=progress)
    if not is_integer(chunk) or chunk < 1:
        raise ConfigError(f"chunk={chunk!r} is invalid; allowed: an integer >= 1 (seeds a "
                          "kernel call trains)")
    chunk = int(chunk)
    E = cfg.n_evals
    n_arms = len(cfg.arms)
    codes = np.array([ARMS.index(a) for a in cfg.arms], np.int64)
    tokens = np.empty((cfg.seeds, n_arms, E))
    acc = np.empty((cfg.seeds, n_arms, E))
    skipped = np.empty((cfg.seeds, n_arms), np.int64)
    moments = np.empty((cfg.seeds, nb.N_ARMS, 2))
    with progress_bar(total=cfg.seeds, desc="GRPO seeds", enabled=progress, leave=False) as bar:
        for lo in range(0, cfg.seeds, chunk):
            hi = min(cfg.seeds, lo + chunk)
            nb.grpo_experiment_nb(
                cfg.n_train, cfg.n_test, cfg.n_traces, cfg.n_features, cfg.median_len,
                cfg.len_sigma, cfg.length_effect, cfg.difficulty_mean, cfg.difficulty_sd,
                cfg.noise_sd, cfg.prompt_median_len, cfg.prompt_len_sigma, codes,
                np.array(cfg.steps_per_arm, np.int64), cfg.prompts, cfg.group, cfg.batch, cfg.lr,
                cfg.lam, cfg.floor, cfg.eval_every, cfg.seed, lo, tokens[lo:hi], acc[lo:hi],
                skipped[lo:hi], moments[lo:hi])
            bar.update(hi - lo)
    seed_i, arm_i, eval_i = np.meshgrid(np.arange(cfg.seeds), np.arange(n_arms), np.arange(E),
                                        indexing="ij")
    arm_moments = moments[:, codes, :]
    return pl.DataFrame({
        "seed": seed_i.ravel(), "arm": np.asarray(cfg.arms)[arm_i.ravel()],
        "eval": eval_i.ravel(), "step": eval_i.ravel() * cfg.eval_every,
        "tokens": tokens.ravel(), "accuracy": acc.ravel(),
        "skipped_batches": np.repeat(skipped.ravel(), E),
        "S_sum": np.repeat(arm_moments[..., 0].ravel(), E),
        "C_sum": np.repeat(arm_moments[..., 1].ravel(), E),
    }).filter(pl.col("accuracy").is_not_nan())


CURVE_COLUMNS = ("seed", "arm", "eval", "step", "tokens", "accuracy", "S_sum", "C_sum")


def _check_curves(curves, what: str, arm: str | None = None) -> None:
    """``curves`` is ``run_grpo``'s table, holding the uniform arm and ``arm`` when an arm
    is compared: anything else was a pandas TypeError about ``Index(...)``, a Polars
    ColumnNotFoundError, or (an arm it does not hold) numpy's 'cannot reshape array'."""
    from fastsim.errors import did_you_mean
    from fastsim.summary import check_table

    allowed = "allowed: the rows of run_grpo"
    check_table(curves, what, "curves", CURVE_COLUMNS, allowed)
    # the arms are compared seed by seed, row by row: a row given twice (two tables
    # concatenated) counted a seed twice, and seeds or evaluations one arm lacks (a
    # filtered table) paired one seed's uniform run with another seed's arm, without a word
    twice = curves.filter(curves.select("seed", "arm", "eval").is_duplicated())
    if twice.height:
        s, a, e = (twice[c][0] for c in ("seed", "arm", "eval"))
        raise ConfigError(f"{what}(): curves holds seed {s}, arm {a!r}, eval {e} twice; "
                          f"{allowed}, each (seed, arm, eval) once")
    if arm is None:
        return
    arms = curves["arm"].unique(maintain_order=True).to_list()
    if "uniform" not in arms:
        raise ConfigError(f"{what}(): curves has no uniform arm, which the others are compared "
                          f"with; {allowed} with 'uniform' among GRPOConfig.arms")
    others = [a for a in arms if a != "uniform"]
    if arm not in others:
        raise ConfigError(f"{what}(): arm={arm!r} is not an arm of curves"
                          f"{did_you_mean(str(arm), others)}; allowed: {', '.join(others)}")
    runs = (curves.filter(pl.col("arm").is_in(["uniform", arm]))
            .group_by("arm", "seed", maintain_order=True)
            .agg(n=pl.len(), first=pl.col("eval").min(), last=pl.col("eval").max()))
    gap = runs.filter((pl.col("first") != 0) | (pl.col("last") != pl.col("n") - 1))
    if gap.height:
        r = gap.row(0, named=True)
        raise ConfigError(f"{what}(): curves holds evals {r['first']} to {r['last']} of seed "
                          f"{r['seed']}, arm {r['arm']!r} with {r['n']} rows; {allowed}, each "
                          "seed's evals 0, 1, 2, ... with none left out")
    for a in ("uniform", arm):
        lengths = runs.filter(pl.col("arm") == a)["n"].unique().sort()
        if lengths.len() > 1:
            raise ConfigError(f"{what}(): curves holds seeds of {lengths[0]} and of "
                              f"{lengths[-1]} evals in arm {a!r}; {allowed}, every seed of an "
                              "arm evaluated as often")
    evals = {a: runs.filter(pl.col("arm") == a)["n"][0] for a in ("uniform", arm)}
    if evals[arm] < evals["uniform"]:  # compared at the uniform run's horizon
        raise ConfigError(f"{what}(): curves holds {evals[arm]} evals of arm {arm!r} and "
                          f"{evals['uniform']} of arm 'uniform'; {allowed}, whose other arms "
                          "train at least as many steps as uniform")
    seeds = {a: set(runs.filter(pl.col("arm") == a)["seed"]) for a in ("uniform", arm)}
    if seeds["uniform"] != seeds[arm]:
        one, other = ("uniform", arm) if seeds["uniform"] - seeds[arm] else (arm, "uniform")
        lone = min(seeds[one] - seeds[other])
        raise ConfigError(f"{what}(): curves holds seed {lone} in arm {one!r} and not in arm "
                          f"{other!r}; {allowed}, the same seeds in both arms (they are "
                          "compared seed by seed)")


def _arm(curves: pl.DataFrame, arm: str):
    c = curves.filter(pl.col("arm") == arm).sort(["seed", "eval"])
    shape = (c["seed"].n_unique(), -1)
    return c["tokens"].to_numpy().reshape(shape), c["accuracy"].to_numpy().reshape(shape)


@known_keywords("fastsim.costaware.tokens_to_uniform_peak()")
def tokens_to_uniform_peak(curves: pl.DataFrame, arm: str = "cost_aware") -> pl.DataFrame:
    """Per seed: the uniform run's peak accuracy and the tokens it took to reach it, the
    tokens ``arm`` took to first reach the same accuracy (NaN if never), ``arm``'s
    accuracies at the uniform horizon (same steps) and at the uniform token budget, and
    its total tokens (which a seed that never reached the peak or the target would exceed
    to reach it)."""
    _check_curves(curves, "tokens_to_uniform_peak", arm)
    return _tokens_to_uniform_peak(curves, arm)


def _tokens_to_uniform_peak(curves: pl.DataFrame, arm: str) -> pl.DataFrame:
    tok_u, acc_u = _arm(curves, "uniform")
    tok_c, acc_c = _arm(curves, arm)
    rows = np.arange(acc_u.shape[0])
    peak = acc_u.max(axis=1)
    e_u = acc_u.argmax(axis=1)
    hit = acc_c >= peak[:, None]
    e_c = np.where(hit.any(axis=1), hit.argmax(axis=1), -1)
    t_c = np.where(e_c >= 0, tok_c[rows, np.maximum(e_c, 0)], np.nan)
    horizon = acc_u.shape[1] - 1
    budget = tok_u[:, -1]
    # last evaluation of the arm whose cumulative tokens fit in the uniform run's total
    e_b = (tok_c <= budget[:, None]).sum(axis=1) - 1
    # a target that a noisy maximum cannot inflate: 90% of the uniform run's gain from its
    # start to the mean of its last 10 evaluations
    target = acc_u[:, 0] + TARGET_GAIN * (acc_u[:, -10:].mean(axis=1) - acc_u[:, 0])
    t_u90 = _first_tokens(tok_u, acc_u, target)
    t_c90 = _first_tokens(tok_c, acc_c, target)
    return pl.DataFrame({"seed": rows, "uniform_peak_accuracy": peak,
                         "uniform_tokens_to_peak": tok_u[rows, e_u],
                         "arm_tokens_to_peak": t_c,
                         "uniform_final_accuracy": acc_u[:, -1],
                         "arm_accuracy_same_steps": acc_c[:, horizon],
                         "arm_accuracy_same_tokens": acc_c[rows, e_b],
                         "arm_final_accuracy": acc_c[:, -1],
                         "uniform_total_tokens": budget,
                         "arm_tokens_same_steps": tok_c[:, horizon],
                         "arm_total_tokens": tok_c[:, -1],
                         "uniform_tokens_to_target": t_u90, "arm_tokens_to_target": t_c90})


def _first_tokens(tokens, acc, target):
    """Cumulative tokens at the first evaluation reaching ``target`` per seed (NaN if none)."""
    hit = acc >= target[:, None]
    e = hit.argmax(axis=1)
    return np.where(hit.any(axis=1), tokens[np.arange(tokens.shape[0]), e], np.nan)


def _moments(curves: pl.DataFrame, arm: str) -> tuple[np.ndarray, np.ndarray]:
    m = curves.filter((pl.col("arm") == arm) & (pl.col("eval") == 0)).sort("seed")
    return m["S_sum"].to_numpy(), m["C_sum"].to_numpy()


def _saving_rows(add, name, reached_name, tu, tc, spent, what):
    """Token saving of the arm to reach ``what`` and the share of seeds that reached it.

    A seed whose arm never reached it is censored at the end of its run.  The pooled and
    mean savings are stated only when no seed was censored: over the seeds that reached
    it they would drop the slowest ones.  The median saving stands whatever the censoring
    (``stats.quantile_ci``): a censored seed counts as a saving of -inf for the point and
    the lower bound, and at the tokens it had ``spent`` (its arm's total, which its tokens
    to reach it exceed) for the upper bound.  Seeds where uniform needed no tokens (its
    target at the first evaluation) have no ratio and are left out of the savings and of
    the share that reached it (every arm reaches it at 0 tokens there: a share of 1 next
    to savings of no seed)."""
    has = tu > 0
    reached = np.isfinite(tc)
    k, n = int(reached[has].sum()), int(has.sum())
    free = f"; n/a: {tc.size - n} seeds where uniform reached it at 0 tokens" if n < tc.size \
        else ""
    share = Estimate(k / n, *clopper_pearson(k, n), n) if n else Estimate(np.nan, np.nan,
                                                                           np.nan, 0)
    add(reached_name, share, f"seeds where the arm reached {what} (exact binomial CI){free}")
    ratio = np.where(reached[has], tc[has], np.inf) / tu[has]
    if reached[has].all() and has.any():
        r = bootstrap_ratio_ci(tc[has], tu[has])
        pooled = Estimate(1 - r.mean, 1 - r.hi, 1 - r.lo, r.n)
        paired = mean_ci(1.0 - ratio).within(-np.inf, 1.0)  # tokens are >= 0
    else:
        pooled = paired = Estimate(np.nan, np.nan, np.nan, int(has.sum()))
    censored = f"; n/a: {n - k} of {n} seeds never reached it" if k < n else ""
    med = quantile_ci(ratio, floor=spent[has] / tu[has])
    add(f"token_saving_to_{name}", pooled,
        f"1 - sum(tokens_arm) / sum(tokens_u) to reach {what}{censored}")
    add(f"token_saving_to_{name}_paired_mean", paired,
        f"mean of 1 - tokens_arm / tokens_u{censored}")
    add(f"token_saving_to_{name}_median",
        Estimate(1 - med.mean, 1 - med.hi, 1 - med.lo, med.n).within(-np.inf, 1.0),
        "median of 1 - tokens_arm / tokens_u, a seed that never reached it counted as -inf")


@known_keywords("fastsim.costaware.summarize_grpo()")
def summarize_grpo(curves: pl.DataFrame, arm: str = "cost_aware") -> pl.DataFrame:
    """Headline numbers of ``arm`` against uniform with 95% CIs over seeds, one row per metric.

    * ``reached_frac`` (exact binomial CI) and ``token_saving_to_uniform_peak``: ``1 -
      pooled ratio`` of the arm's over uniform tokens-to-peak (bootstrap over seeds),
      ``..._paired_mean`` (mean over seeds of ``1 - tokens_arm / tokens_u``) and
      ``..._median`` (order-statistic CI); the first two only when every seed reached the
      peak, the median under censoring too (``_saving_rows``);
    * ``reached_target_frac`` and ``token_saving_to_target*``: the same to a target a noisy
      maximum cannot inflate, ``TARGET_GAIN`` of the uniform run's gain to the mean of its
      last 10 evaluations;
    * final accuracies and paired differences at the same steps and the same tokens;
    * the token saving at equal steps (cheaper mini-batches);
    * ``predicted_J_ratio``, ``predicted_S_ratio``, ``predicted_C_ratio``: ``J = S C`` of the
      arm's distribution over uniform's, on the uniform run's batches (pooled over steps,
      mean over seeds); ``1 - predicted_J_ratio`` is the saving ``J`` predicts.
    """
    _check_curves(curves, "summarize_grpo", arm)
    per_seed = _tokens_to_uniform_peak(curves, arm)
    rows = []

    def add(metric, est, note=""):
        rows.append({"arm": arm, "metric": metric, "mean": est.mean, "lo": est.lo, "hi": est.hi,
                     "n": est.n, "note": note})

    for name, reached, u, a, what in (
            ("uniform_peak", "reached_frac", "uniform_tokens_to_peak", "arm_tokens_to_peak",
             "the peak"),
            ("target", "reached_target_frac", "uniform_tokens_to_target", "arm_tokens_to_target",
             "the target")):
        _saving_rows(add, name, reached, per_seed[u].to_numpy(), per_seed[a].to_numpy(),
                     per_seed["arm_total_tokens"].to_numpy(), what)
    col = lambda name: per_seed[name].to_numpy()  # noqa: E731
    fu = col("uniform_final_accuracy")
    def accuracy(values):
        return mean_ci(values).within(0.0, 1.0)

    def difference(values):
        return mean_ci(values).within(-1.0, 1.0)

    def ratio(values):
        return mean_ci(values).within(0.0, np.inf)

    add("uniform_peak_accuracy", accuracy(col("uniform_peak_accuracy")))
    add("final_accuracy_uniform", accuracy(fu), "at the uniform horizon")
    add("final_accuracy_arm_same_steps", accuracy(col("arm_accuracy_same_steps")))
    add("final_accuracy_diff_same_steps", difference(col("arm_accuracy_same_steps") - fu),
        "arm - uniform, paired, same number of steps")
    add("final_accuracy_diff_same_tokens", difference(col("arm_accuracy_same_tokens") - fu),
        "arm - uniform, paired, arm within the uniform token budget")
    add("final_accuracy_arm_end", accuracy(col("arm_final_accuracy")),
        "end of the longer run of the arm")
    spent = col("uniform_total_tokens") > 0  # a run of skipped batches has no ratio (0/0)
    add("token_saving_per_step", mean_ci(1.0 - col("arm_tokens_same_steps")[spent]
                                         / col("uniform_total_tokens")[spent]).within(-np.inf, 1.0),
        "same number of steps: 1 - tokens_arm / tokens_u")
    s_u, c_u = _moments(curves, "uniform")
    s_a, c_a = _moments(curves, arm)
    if (s_u > 0).all() and (c_u > 0).all():
        add("predicted_S_ratio", ratio(s_a / s_u), "S(p_arm) / S(uniform), uniform's batches")
        add("predicted_C_ratio", ratio(c_a / c_u), "C(p_arm) / C(uniform), uniform's batches")
        add("predicted_J_ratio", ratio(s_a * c_a / (s_u * c_u)), "J = S C over uniform's")
    return pl.DataFrame(rows)


@known_keywords("fastsim.costaware.ablation_table()")
def ablation_table(curves: pl.DataFrame) -> pl.DataFrame:
    """``summarize_grpo`` for every non-uniform arm in ``curves``, stacked."""
    _check_curves(curves, "ablation_table")
    arms = [a for a in ARMS if a != "uniform" and a in set(curves["arm"])]
    return pl.concat([summarize_grpo(curves, a) for a in arms], how="diagonal_relaxed")


@known_keywords("fastsim.costaware.curve_summary()")
def curve_summary(curves: pl.DataFrame) -> pl.DataFrame:
    """Per arm and evaluation: mean cumulative tokens and accuracy with a 95% CI."""
    _check_curves(curves, "curve_summary")
    rows = []
    for (arm, e), g in curves.group_by(["arm", "eval"], maintain_order=True):
        a = mean_ci(g["accuracy"].to_numpy()).within(0.0, 1.0)
        t = mean_ci(g["tokens"].to_numpy()).within(0.0, np.inf)
        rows.append({"arm": arm, "eval": e, "step": int(g["step"][0]), "tokens_mean": t.mean,
                     "tokens_lo": t.lo, "tokens_hi": t.hi, "accuracy_mean": a.mean,
                     "accuracy_lo": a.lo, "accuracy_hi": a.hi, "n_seeds": a.n})
    return pl.DataFrame(rows).sort(["arm", "eval"])


def config_columns(cfg: GRPOConfig) -> dict:
    return {f"grpo_{k}": (",".join(v) if k == "arms" else v) for k, v in asdict(cfg).items()}
