"""Genuine over-optimisation traces from a toy RLHF run (in the spirit of Gao et al. 2023).

A fixed *gold* reward model labels comparisons of responses sampled from a reference
policy; a *proxy* reward model is fitted to a limited number of them (Bradley-Terry,
L2-regularised); a softmax policy over all short token sequences is optimised against the
proxy by policy gradient with group-normalised advantages and a KL penalty; every
``eval_every`` steps the gold score is estimated on held-out prompts from a finite sample.

Why it over-optimises (and only when data are scarce): the gold model penalises
repeated adjacent tokens ("degenerate text"), which the reference policy rarely produces,
so few comparisons ever show the penalty; a data-poor proxy cannot learn it and the policy
drifts into repetition, while a data-rich proxy learns it (the proxy class contains gold).

The output is a trace set in the long log format of ``docs/replay.md`` (``job_id, step,
score, proxy_reward, loss, job_type``) plus run parameters and hidden truth in ``truth_*``
columns, which no stop policy reads.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, fields, replace

import numpy as np
import polars as pl

from fastsim.errors import ConfigError
from fastsim.stats import mean_ci, proportion_ci
from kernels import toy_rlhf as k


@dataclass(frozen=True)
class ToyRLHFConfig:
    """Parameters of a toy RLHF trace set (defaults: 72 runs, ~1 minute on 2 cores).

    Examples
    --------
    >>> cfg = ToyRLHFConfig(n_comparisons=(100,), kl_coefs=(0.02,), seeds=(0,), n_steps=30)
    >>> cfg.n_runs
    1
    """

    vocab: int = 6                 # tokens
    length: int = 4                # tokens per response: vocab**length responses
    prompt_dim: int = 3            # prompt features (plus a constant)
    rep_penalty: float = 4.0       # gold penalty per repeated adjacent pair
    ref_rep_aversion: float = 2.5  # the reference policy's logit penalty per repeated pair
    n_comparisons: tuple[int, ...] = (100, 200, 400, 800, 1600, 3200)
    kl_coefs: tuple[float, ...] = (0.02, 0.1, 0.3)
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    l2: float = 1.0                # ridge of the proxy's Bradley-Terry fit
    n_steps: int = 300
    batch: int = 16                # prompts per step
    group: int = 8                 # sampled responses per prompt (advantage group)
    lr: float = 0.25
    eval_every: int = 15           # steps between evaluations
    n_eval_prompts: int = 64       # held-out prompts
    n_eval_samples: int = 2        # sampled responses per held-out prompt and evaluation
    world_seed: int = 0            # fixes gold, reference policy and held-out prompts
    hacking_margin: float = 0.05   # share of the gold gain lost after the peak

    def __post_init__(self):
        ints = {"vocab": 2, "length": 2, "prompt_dim": 1, "n_steps": 1, "batch": 1, "group": 2,
                "eval_every": 1, "n_eval_prompts": 1, "n_eval_samples": 1, "world_seed": 0}
        for name, lo in ints.items():
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < lo:
                raise ConfigError(f"ToyRLHFConfig.{name} = {v!r}: must be an integer >= {lo}")
        if self.vocab ** self.length > 20000:
            raise ConfigError(f"ToyRLHFConfig: vocab**length = {self.vocab ** self.length} "
                              "responses; at most 20000 are enumerable here")
        for name in ("rep_penalty", "ref_rep_aversion", "l2", "lr", "hacking_margin"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise ConfigError(f"ToyRLHFConfig.{name} = {v!r}: must be a finite number >= 0")
        if not self.n_comparisons or any(int(n) < 1 for n in self.n_comparisons):
            raise ConfigError(f"ToyRLHFConfig.n_comparisons = {self.n_comparisons!r}: "
                              "a non-empty list of integers >= 1")
        if not self.kl_coefs or any(not (c >= 0) for c in self.kl_coefs):
            raise ConfigError(f"ToyRLHFConfig.kl_coefs = {self.kl_coefs!r}: non-empty, each >= 0")
        if not self.seeds or any(int(s) < 0 for s in self.seeds):
            raise ConfigError(f"ToyRLHFConfig.seeds = {self.seeds!r}: non-empty, each >= 0")

    @property
    def n_runs(self) -> int:
        return len(self.n_comparisons) * len(self.kl_coefs) * len(self.seeds)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass(frozen=True)
class ToyWorld:
    """The fixed parts of a trace set: response features, gold, reference, held-out prompts."""

    feats: np.ndarray     # (n_resp, F) per-position token one-hots, then per-token repeats
    w_gold: np.ndarray    # (F, M+1)
    w_ref: np.ndarray     # (F, M+1)
    z_eval: np.ndarray    # (n_eval_prompts, M+1), first column 1


def sparse_features(feats: np.ndarray):
    """Row-wise sparse form ``(fi, fv)`` of ``feats`` for the kernels (zero-padded)."""
    nnz = int((feats != 0).sum(axis=1).max())
    fi = np.zeros((feats.shape[0], nnz), dtype=np.int64)
    fv = np.zeros((feats.shape[0], nnz))
    for y in range(feats.shape[0]):
        idx = np.nonzero(feats[y])[0]
        fi[y, :idx.size] = idx
        fv[y, :idx.size] = feats[y, idx]
    return fi, fv


def _prompts(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    return np.hstack([np.ones((n, 1)), rng.normal(size=(n, dim))])


def build_world(cfg: ToyRLHFConfig) -> ToyWorld:
    """Response features, gold and reference reward matrices, and held-out prompts.

    Token quality does not depend on position, so without the repetition penalty the
    gold-best response would repeat its best token: that is what a proxy that missed
    the penalty steers the policy towards.

    Examples
    --------
    >>> w = build_world(ToyRLHFConfig())
    >>> w.feats.shape
    (1296, 30)
    """
    V, L, M = cfg.vocab, cfg.length, cfg.prompt_dim
    resp = np.array(list(itertools.product(range(V), repeat=L)), dtype=np.int64)
    n_resp = resp.shape[0]
    onehot = np.zeros((n_resp, L * V))
    for pos in range(L):
        onehot[np.arange(n_resp), pos * V + resp[:, pos]] = 1.0
    repeats = np.zeros((n_resp, V))
    for pos in range(L - 1):
        same = resp[:, pos] == resp[:, pos + 1]
        np.add.at(repeats, (np.nonzero(same)[0], resp[same, pos]), 1.0)
    feats = np.hstack([onehot, repeats])
    rng = np.random.default_rng([cfg.world_seed, 7])
    quality = rng.normal(size=(V, M + 1))
    quality[:, 0] += np.linspace(0.0, 1.0, V)
    w_gold = np.zeros((feats.shape[1], M + 1))
    for pos in range(L):
        w_gold[pos * V:(pos + 1) * V] = quality + 0.2 * rng.normal(size=(V, M + 1))
    w_gold[L * V:, 0] = -cfg.rep_penalty
    w_ref = np.zeros_like(w_gold)
    w_ref[:L * V, 0] = 0.3 * rng.normal(size=L * V)
    w_ref[L * V:, 0] = -cfg.ref_rep_aversion
    z_eval = _prompts(np.random.default_rng([cfg.world_seed, 11]), cfg.n_eval_prompts, M)
    return ToyWorld(feats, w_gold, w_ref, z_eval)


def _softmax_rows(s: np.ndarray) -> np.ndarray:
    s = s - s.max(axis=1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=1, keepdims=True)


def comparison_pool(world: ToyWorld, n: int, seed: int, world_seed: int = 0):
    """``n`` gold-labelled comparisons of two responses sampled from the reference policy.

    Returns ``(x, label)``: ``x[i]`` is the feature difference (flattened ``F*(M+1)``)
    of the pair, ``label[i]`` +1 when the first response won.  Labels are Bradley-Terry
    draws, ``P(first wins) = sigmoid(gold_1 - gold_2)``, so they are noisy too.
    """
    rng = np.random.default_rng([world_seed, seed, 13])
    z = _prompts(rng, n, world.z_eval.shape[1] - 1)
    probs = _softmax_rows(z @ world.w_ref.T @ world.feats.T)        # (n, n_resp)
    cdf = np.cumsum(probs, axis=1)
    n_resp = world.feats.shape[0]
    y1 = np.minimum((cdf < rng.random((n, 1))).sum(axis=1), n_resp - 1)
    y2 = np.minimum((cdf < rng.random((n, 1))).sum(axis=1), n_resp - 1)
    gold = world.feats @ world.w_gold                                 # (n_resp, M+1)
    margin = np.einsum("nm,nm->n", gold[y1], z) - np.einsum("nm,nm->n", gold[y2], z)
    first_wins = rng.random(n) < 1.0 / (1.0 + np.exp(-margin))
    x = ((world.feats[y1] - world.feats[y2])[:, :, None] * z[:, None, :]).reshape(n, -1)
    return x, np.where(first_wins, 1.0, -1.0)


def fit_bradley_terry(x: np.ndarray, label: np.ndarray, l2: float, n_iter: int = 50) -> np.ndarray:
    """Ridge-regularised Bradley-Terry (logistic) fit by Newton's method; returns weights.

    Examples
    --------
    >>> x = np.array([[1.0], [-1.0], [1.0]]); lab = np.array([1.0, 1.0, 1.0])
    >>> float(fit_bradley_terry(x, lab * np.sign(x[:, 0]), 1.0)[0]) > 0
    True
    """
    d = x.shape[1]
    w = np.zeros(d)
    for _ in range(n_iter):
        m = label * (x @ w)
        p = 0.5 * (1.0 + np.tanh(-0.5 * m))          # sigmoid(-m), overflow-free
        grad = -(x.T @ (label * p)) + l2 * w
        hess = (x.T * (p * (1.0 - p))) @ x + (l2 + 1e-9) * np.eye(d)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    return w


def fit_gao(d, gain):
    """Least-squares fit of Gao et al.'s RL form ``R(d) = d (alpha - beta ln d)``.

    ``d = sqrt(KL)`` in nats^0.5, ``gain`` = gold minus gold at ``d = 0``; points with
    ``d <= 0`` carry no information about the form and are skipped.  Returns
    ``(alpha, beta, r2)``; ``r2`` is the share of the gain's variance explained.

    Examples
    --------
    >>> d = np.linspace(0.1, 3, 20)
    >>> a, b, r2 = fit_gao(d, d * (2.0 - 0.5 * np.log(d)))
    >>> round(a, 6), round(b, 6), round(r2, 6)
    (2.0, 0.5, 1.0)
    """
    d = np.asarray(d, dtype=np.float64)
    g = np.asarray(gain, dtype=np.float64)
    ok = (d > 0) & np.isfinite(g)
    d, g = d[ok], g[ok]
    if d.size < 2:
        return np.nan, np.nan, np.nan
    a = np.column_stack([d, -d * np.log(d)])
    (alpha, beta), *_ = np.linalg.lstsq(a, g, rcond=None)
    resid = g - a @ np.array([alpha, beta])
    ss_tot = float(((g - g.mean()) ** 2).sum())
    r2 = 1.0 - float((resid ** 2).sum()) / ss_tot if ss_tot > 0 else np.nan
    return float(alpha), float(beta), r2


def job_id_of(n_comparisons: int, kl_coef: float, seed: int) -> str:
    return f"n{n_comparisons:05d}_kl{kl_coef:g}_s{seed}"


def generate_toy_rlhf(cfg: ToyRLHFConfig = ToyRLHFConfig(), progress: bool = True) -> pl.DataFrame:
    """Run every (proxy data size, KL coefficient, seed) and return the long trace table.

    Columns: ``job_id, step, score`` (sampled gold on held-out prompts), ``proxy_reward``
    (sampled proxy), ``loss`` (proxy regret of the sampled responses), ``job_type``;
    run parameters ``n_comparisons, kl_coef, seed``; hidden truth ``truth_gold`` (exact
    expected gold), ``truth_kl_nats``, ``truth_gold_peak_step``, ``truth_hacking``
    (final exact gold below the peak by more than ``hacking_margin`` of the gold gain).

    Examples
    --------
    >>> cfg = ToyRLHFConfig(n_comparisons=(100,), kl_coefs=(0.02,), seeds=(0,), n_steps=30)
    >>> generate_toy_rlhf(cfg, progress=False).height
    3
    """
    from tqdm.auto import tqdm

    world = build_world(cfg)
    runs = [(int(n), float(c), int(s)) for n in cfg.n_comparisons for c in cfg.kl_coefs
            for s in cfg.seeds]
    n_max = max(int(n) for n in cfg.n_comparisons)
    proxies = np.empty((len(runs),) + world.w_gold.shape)
    pools = {}
    for r, (n, _, s) in enumerate(tqdm(runs, desc="proxy reward models", disable=not progress)):
        if s not in pools:  # nested data: the n-comparison proxy sees the first n of one pool
            pools[s] = comparison_pool(world, n_max, s, cfg.world_seed)
        x, lab = pools[s]
        proxies[r] = fit_bradley_terry(x[:n], lab[:n], cfg.l2).reshape(world.w_gold.shape)
    fi, fv = sparse_features(world.feats)
    n_evals = cfg.n_steps // cfg.eval_every + 1
    out = np.zeros((len(runs), n_evals, k.N_COLS))
    kl = np.array([c for _, c, _ in runs])
    seeds = np.array([s for _, _, s in runs], dtype=np.int64)
    # Chunks only to show progress; every run is independent, so chunking changes nothing.
    chunk = 8
    bar = tqdm(total=len(runs), desc="toy RLHF runs", disable=not progress)
    for lo in range(0, len(runs), chunk):
        hi = min(lo + chunk, len(runs))
        k.toy_rlhf_nb(fi, fv, world.w_ref, world.w_gold, proxies[lo:hi], world.z_eval,
                      kl[lo:hi], seeds[lo:hi], cfg.lr, cfg.n_steps, cfg.batch, cfg.group,
                      cfg.eval_every, cfg.n_eval_samples, out[lo:hi])
        bar.update(hi - lo)
    bar.close()
    return _to_frame(out, runs, cfg)


def _to_frame(out: np.ndarray, runs, cfg: ToyRLHFConfig) -> pl.DataFrame:
    n_runs, n_evals, _ = out.shape
    gold = out[:, :, k.C_GOLD_EXACT]
    peak = gold.argmax(axis=1)
    gain = gold[np.arange(n_runs), peak] - gold[:, 0]
    drop = gold[np.arange(n_runs), peak] - gold[:, -1]
    hacking = drop > cfg.hacking_margin * np.maximum(gain, 0.0)
    steps = out[:, :, k.C_STEP].astype(np.int64)
    rep = lambda a: np.repeat(np.asarray(a), n_evals)  # noqa: E731  (per-run -> per-row)
    return pl.DataFrame({
        "job_id": rep([job_id_of(*r) for r in runs]),
        "step": steps.ravel(),
        "score": out[:, :, k.C_GOLD_SAMPLED].ravel(),
        "proxy_reward": out[:, :, k.C_PROXY_SAMPLED].ravel(),
        "loss": out[:, :, k.C_REGRET].ravel(),
        "job_type": rep(["rlhf"] * n_runs),
        "n_comparisons": rep([r[0] for r in runs]).astype(np.int64),
        "kl_coef": rep([r[1] for r in runs]),
        "seed": rep([r[2] for r in runs]).astype(np.int64),
        "truth_gold": gold.ravel(),
        "truth_proxy": out[:, :, k.C_PROXY_EXACT].ravel(),
        "truth_kl_nats": out[:, :, k.C_KL].ravel(),
        "truth_gold_peak_step": rep(steps[np.arange(n_runs), peak]),
        "truth_hacking": rep(hacking),
    })


def run_summary(traces: pl.DataFrame) -> pl.DataFrame:
    """One row per run: parameters, truth, noise level and the fit of Gao's RL form.

    ``eval_noise_sd`` is the standard deviation of ``score - truth_gold`` (the sampling
    noise of one evaluation); ``gold_gain`` the exact gold peak minus the start, so
    ``eval_noise_sd / gold_gain`` is the noise on the scale where the peak gain is 1.
    """
    rows = []
    for (job_id,), g in traces.sort("step").group_by(["job_id"], maintain_order=True):
        gold = g["truth_gold"].to_numpy()
        d = np.sqrt(np.maximum(g["truth_kl_nats"].to_numpy(), 0.0))
        alpha, beta, r2 = fit_gao(d, gold - gold[0])
        proxy = g["truth_proxy"].to_numpy()
        rows.append({
            "job_id": job_id,
            "n_comparisons": int(g["n_comparisons"][0]),
            "kl_coef": float(g["kl_coef"][0]),
            "seed": int(g["seed"][0]),
            "truth_hacking": bool(g["truth_hacking"][0]),
            "truth_gold_peak_step": int(g["truth_gold_peak_step"][0]),
            "final_step": int(g["step"][-1]),
            "n_evals": g.height,
            "gold_start": float(gold[0]),
            "gold_peak": float(gold.max()),
            "gold_final": float(gold[-1]),
            "gold_gain": float(gold.max() - gold[0]),
            "proxy_gain": float(proxy[-1] - proxy[0]),
            "proxy_monotone_share": float(np.mean(np.diff(proxy) > 0)),
            "kl_final_nats": float(g["truth_kl_nats"][-1]),
            "eval_noise_sd": float(np.std(g["score"].to_numpy() - gold, ddof=1)),
            "gao_alpha": alpha,
            "gao_beta": beta,
            "gao_r2": r2,
        })
    return pl.DataFrame(rows)


def noise_level(runs: pl.DataFrame, mean_height: float = 0.75) -> float:
    """The traces' evaluation noise on the simulator's scale (MODEL.md section 4).

    The simulator's gold rises from 0 to its peak ``h`` (mean 0.75 by default), so a
    trace's noise sd divided by its gold gain, times 0.75, is the comparable ``sigma``.
    """
    ratio = (runs["eval_noise_sd"] / runs["gold_gain"]).to_numpy()
    return float(np.median(ratio[np.isfinite(ratio)]) * mean_height)


def simulator_comparison(runs: pl.DataFrame, policies, n_clusters: int = 50, n_jobs: int = 100,
                         seed: int = 0, sigma: float | None = None) -> pl.DataFrame:
    """The cluster simulator's detection numbers at the traces' noise, base rate and cadence.

    Runs ``fastsim.api.simulate`` on an all-RLHF workload with ``sigma`` from
    ``noise_level`` (unless given), ``base_rate`` = the traces' share of hacking runs and
    ``n_evals`` = evaluations per trace, for each policy.  One row per policy with
    pooled precision / recall / FPR and cluster-bootstrap intervals.
    """
    from fastsim.api import simulate
    from fastsim.config import SimConfig, WorkloadConfig
    from fastsim.replay.replay import parse_policy

    sigma = noise_level(runs) if sigma is None else float(sigma)
    base_rate = float(runs["truth_hacking"].mean())
    n_evals = int(runs["n_evals"].median())
    rows = []
    for spec in policies:
        p = parse_policy(spec)
        if p.name == "none":
            continue
        pol = replace(p, scope="rlhf")
        wl = WorkloadConfig(n_jobs=n_jobs, mix=(0.0, 0.0, 1.0), base_rate=base_rate, sigma=sigma,
                            n_evals=n_evals)
        res = simulate(SimConfig(workload=wl, policy=pol), n_clusters=n_clusters, seed=seed)
        c = res.clusters
        tp, fp, fn, tn = (c[x].to_numpy().astype(np.float64) for x in ("tp", "fp", "fn", "tn"))
        out = {"policy": p.label, "sigma": sigma, "base_rate": base_rate, "n_evals": n_evals,
               "n_clusters": n_clusters, "n_jobs": n_jobs}
        for name, e in (("precision", proportion_ci(tp, tp + fp)),
                        ("recall", proportion_ci(tp, tp + fn)),
                        ("fpr", proportion_ci(fp, fp + tn)),
                        ("wasted_share", mean_ci(c["wasted_share"].to_numpy()))):
            out[name], out[f"{name}_lo"], out[f"{name}_hi"] = e.mean, e.lo, e.hi
        rows.append(out)
    return pl.DataFrame(rows)


def gao_fit_groups(traces: pl.DataFrame, by=("n_comparisons", "kl_coef")) -> pl.DataFrame:
    """Gao's RL form fitted to the pooled (sqrt KL, gold gain) points of each group of runs.

    Points come from the exact gold and exact KL (hidden truth), all seeds of a group
    together, like Gao et al.'s fits over their RL runs.  Columns: the group keys,
    ``n_runs, hacking_share, gao_alpha, gao_beta, gao_r2, d_peak`` (``exp(alpha/beta - 1)``,
    where the fitted form peaks; inf when ``beta <= 0``).
    """
    rows = []
    t = traces.sort(["job_id", "step"]).with_columns(
        (pl.col("truth_gold") - pl.col("truth_gold").first().over("job_id")).alias("_gain"),
        pl.col("truth_kl_nats").clip(lower_bound=0.0).sqrt().alias("_d"))
    for keys, g in t.group_by(list(by), maintain_order=True):
        alpha, beta, r2 = fit_gao(g["_d"].to_numpy(), g["_gain"].to_numpy())
        d_peak = float(np.exp(alpha / beta - 1.0)) if beta > 0 else float("inf")
        row = dict(zip(by, keys))
        row.update({"n_runs": g["job_id"].n_unique(),
                    "hacking_share": float(g.group_by("job_id").agg(pl.col("truth_hacking").first())
                                           ["truth_hacking"].mean()),
                    "gao_alpha": alpha, "gao_beta": beta, "gao_r2": r2, "d_peak": d_peak,
                    "d_max": float(g["_d"].max())})
        rows.append(row)
    return pl.DataFrame(rows).sort(list(by))
