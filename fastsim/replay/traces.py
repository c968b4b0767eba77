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
import json
import math
import re
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields, replace
from decimal import ROUND_FLOOR, Decimal
from pathlib import Path

import numpy as np
import polars as pl

from fastsim import defaults as D
from fastsim.values import is_integer, is_real, plain_fields, store_floats
from fastsim.errors import ConfigError, counted
from fastsim.io import loads_json, parquet_metadata
from fastsim.replay.logs import MAX_SCORE
from fastsim.stats import check_n_boot, mean_ci, proportion_ci
from fastsim.kernels import toy_rlhf as k


MAX_COMPARISONS = 100_000     # a pool of this many comparisons holds ~100 MB of features
MAX_TOY_STEPS = 1_000_000
MAX_TRACE_ROWS = 10_000_000   # trace table rows (~1 GB)


def _n_key(n) -> str:
    return f"n{int(n):05d}"


def _kl_key(c) -> str:
    return f"kl{float(c):g}"


def _seed_key(s) -> str:
    return f"s{int(s)}"


# Each run parameter's part of a job id (job_id_of): two values with the same part would
# name the same runs.
_JOB_ID_PARTS = {"n_comparisons": _n_key, "kl_coefs": _kl_key, "seeds": _seed_key}


def _repeat_in(name: str, values) -> str | None:
    """What is repeated in ``values`` (a run parameter's list), or ``None``: a value given
    twice, or two values whose runs would share job ids."""
    key, seen = _JOB_ID_PARTS[name], {}
    for v in values:
        k = key(v)
        if k in seen:
            return (f"{v!r} appears twice" if v == seen[k] else
                    f"{seen[k]!r} and {v!r} both name their runs {k} in the job ids")
        seen[k] = v
    return None


def _first_repeat(cfg) -> tuple[str, str] | None:
    """``(run parameter, what is repeated in it)`` for the first one with a repeat."""
    for name in _JOB_ID_PARTS:
        same = _repeat_in(name, getattr(cfg, name))
        if same:
            return name, same
    return None


def _refuse_repeats(cfg) -> None:
    """A value given twice would run the same (job_id, step) rows twice, which every later
    fit then counts as independent runs: refused, naming the repeated value."""
    if (found := _first_repeat(cfg)) is not None:
        name, same = found
        raise ConfigError(f"{name}={tuple(getattr(cfg, name))!r} is invalid ({same}); "
                          "allowed: distinct values")


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
    kl_coefs: tuple[float, ...] = (0.02, 0.1, 0.3)  # each <= max_kl_coef (stable KL step)
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
        plain_fields(self)  # vocab=np.int16(256) ** length=np.int16(4) was 0 responses
        self._check_values()
        if self.n_steps < self.eval_every:  # not in _check_values: a record is read as it is
            raise ConfigError(f"n_steps={self.n_steps!r} is invalid; allowed: at least "
                              f"eval_every={self.eval_every!r} (fewer steps leave one "
                              "evaluation, at step 0: no curve to fit or stop on)")
        _refuse_repeats(self)
        self._check_kl_step()
        store_floats(self)  # -0.0 as 0.0 (run ids n00100_kl0_s0, not kl-0), 0 as 0.0

    @classmethod
    def _from_record(cls, values: dict) -> ToyRLHFConfig:
        """The config a trace file records, with every check but two that older fastsim
        did not make: repeated values and KL coefficients past the stability bound.  The
        record describes a file already written, so it must stay readable; the caller
        judges repeats (``read_trace_config``), and regenerating from it (``replace``)
        applies every check."""
        cfg = object.__new__(cls)  # a frozen dataclass: fields set past __init__'s checks
        for f in fields(cls):
            object.__setattr__(cfg, f.name, values.get(f.name, f.default))
        plain_fields(cfg)
        cfg._check_values()
        return cfg

    def _check_values(self) -> None:
        # a bool is no count nor number (True ran as 1), and int() read 1.7 as 1 and "100"
        # as 100 (text that reached the kernels: a traceback, as float text in kl_coefs)
        # Bounds the run can honour: seeds are int64 in the kernels (the world seed only
        # feeds numpy, 64 bits), and the comparison pool and the trace table must fit memory.
        ints = {"vocab": (2, None), "length": (2, None), "prompt_dim": (1, None),
                "n_steps": (1, MAX_TOY_STEPS), "batch": (1, None), "group": (2, None),
                "eval_every": (1, None), "n_eval_prompts": (1, None),
                "n_eval_samples": (1, None), "world_seed": (0, 2**64 - 1)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if not is_integer(v) or v < lo or (hi is not None and v > hi):
                top = f" from {lo} to {'2^64-1' if hi == 2**64 - 1 else hi}" if hi else f" >= {lo}"
                raise ConfigError(f"{name}={v!r} is invalid; allowed: an integer{top}")
        if self.vocab ** self.length > 20000:
            raise ConfigError(f"vocab={self.vocab!r} and length={self.length!r} are invalid "
                              f"(vocab**length = {self.vocab ** self.length} responses); "
                              "allowed: at most 20000 responses, which are enumerated")
        for name in ("rep_penalty", "ref_rep_aversion", "l2", "lr", "hacking_margin"):
            v = getattr(self, name)
            if not (is_real(v) and np.isfinite(v) and v >= 0):
                raise ConfigError(f"{name}={v!r} is invalid; allowed: a finite number >= 0")
        if not self.n_comparisons or any(not (is_integer(n) and 1 <= n <= MAX_COMPARISONS)
                                         for n in self.n_comparisons):
            raise ConfigError(f"n_comparisons={self.n_comparisons!r} is invalid; allowed: a "
                              f"non-empty list of integers from 1 to {MAX_COMPARISONS}")
        if not self.kl_coefs or any(not (is_real(c) and 0 <= c < np.inf) for c in self.kl_coefs):
            raise ConfigError(f"kl_coefs={self.kl_coefs!r} is invalid; allowed: a non-empty list "
                              "of finite numbers >= 0")
        if not self.seeds or any(not (is_integer(s) and 0 <= s <= 2**63 - 1) for s in self.seeds):
            raise ConfigError(f"seeds={self.seeds!r} is invalid; allowed: a non-empty list of "
                              "integers from 0 to 2^63-1")
        rows = self.n_runs * (self.n_steps // self.eval_every + 1)
        if rows > MAX_TRACE_ROWS:
            raise ConfigError(f"{self.n_runs} runs x {self.n_steps // self.eval_every + 1} "
                              f"evaluations = {rows} trace rows are too many; allowed: at most "
                              f"{MAX_TRACE_ROWS} (fewer seeds, sizes or steps)")

    def _check_kl_step(self) -> None:
        """The KL penalty is an explicit gradient step: a coefficient past ``max_kl_coef``
        overshoots the reference policy at every step instead of pulling the policy back."""
        if self.lr == 0 or max(self.kl_coefs) == 0:
            return  # no KL step is taken, so no world needs building
        top = max_kl_coef(self)
        bad = [c for c in self.kl_coefs if c > top]
        if bad:
            raise ConfigError(
                f"kl_coefs={self.kl_coefs!r} is invalid: {bad[0]!r} is beyond the KL "
                f"penalty step's stability bound at lr {self.lr:g} (lr x kl_coef x "
                f"{kl_curvature(self):.3g} x {prompt_moment(self):.3g} < 2, docs/real-traces.md); "
                f"allowed: numbers from 0 to {top:g} at this lr")

    @property
    def n_runs(self) -> int:
        return len(self.n_comparisons) * len(self.kl_coefs) * len(self.seeds)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def kl_curvature(cfg: ToyRLHFConfig) -> float:
    """Largest eigenvalue of ``Cov_{y ~ pi_ref}(feats[y])``, the curvature of the KL penalty
    at the reference policy per unit of prompt second moment.

    With logits ``s_y = feats[y] @ theta @ z``, the Hessian of ``KL(pi || pi_ref)`` in
    ``theta`` at ``pi = pi_ref`` is ``Cov_{pi_ref}(feats) (x) z z^T`` (the softmax Fisher
    ``diag(p) - p p^T`` pulled back through the features).  The reference logits use the
    constant prompt feature only (``build_world``), so ``pi_ref`` is the same for every prompt.

    Examples
    --------
    >>> round(kl_curvature(ToyRLHFConfig()), 3)
    0.308
    """
    w = build_world(cfg)
    p = _softmax_rows((w.feats @ w.w_ref[:, 0])[None, :])[0]
    mean = p @ w.feats
    cov = (w.feats * p[:, None]).T @ w.feats - np.outer(mean, mean)
    return float(np.linalg.eigvalsh(cov)[-1])


def prompt_moment(cfg: ToyRLHFConfig) -> float:
    """Growth per step of the mean-square KL-step error from the batch's prompt moments.

    One step applies ``I - lr kl_coef C (x) S`` to the policy's offset from the reference,
    ``S`` the batch mean of ``z z^T`` (``E S = I``; ``z = (1, N(0, I_M))``).  The second
    moment of the offset then evolves by ``Sigma -> (1 - 2a) Sigma + a^2 E[S Sigma S]``
    (``a = lr kl_coef lambda``), whose largest eigenvalue, by Isserlis' theorem, is
    ``1 + (M + 1 + sqrt((M + 1)^2 + 4 M)) / (2 B)`` for ``M`` prompt features and ``B``
    prompts per step; the offset's variance stays finite iff ``a`` times it is below 2.
    """
    m, b = cfg.prompt_dim, cfg.batch
    return 1.0 + (m + 1 + np.sqrt((m + 1) ** 2 + 4 * m)) / (2 * b)


def max_kl_coef(cfg: ToyRLHFConfig) -> float:
    """The largest KL coefficient whose penalty step keeps the policy's mean-square offset
    from the reference bounded at ``cfg.lr``: ``lr kl_coef kl_curvature prompt_moment < 2``,
    rounded down to 3 significant digits (the value an error message can name exactly).

    Examples
    --------
    >>> max_kl_coef(ToyRLHFConfig())
    20.1
    """
    rate = cfg.lr * kl_curvature(cfg) * prompt_moment(cfg)
    if rate == 0:
        return math.inf  # no step (lr 0) or no curvature: any coefficient is stable
    return _floor_3_digits(2.0 / rate)


def _floor_3_digits(x: float) -> float:
    """``x`` rounded down to 3 significant digits, never above ``x``.

    Works on the decimal digits of ``repr(x)``, so a float that already has 3 digits stays
    (in binary, 10.1 / 0.1 is 100.99999999999999, which floors to 10.0), and takes the
    exponent from ``x`` itself (rounding first and taking it from the result turned 9.996
    into 9.9).

    Examples
    --------
    >>> _floor_3_digits(9.996), _floor_3_digits(20.1), _floor_3_digits(20.15)
    (9.99, 20.1, 20.1)
    """
    if not math.isfinite(x):
        return x
    d = Decimal(repr(float(x)))  # numpy floats repr as np.float64(...)
    # float() is monotone and repr round-trips, so the floored decimal stays <= x as a float
    return float(d.quantize(Decimal(1).scaleb(d.adjusted() - 2), rounding=ROUND_FLOOR))


CONFIG_KEY = "fastsim.toy_rlhf_config"  # Parquet metadata key: the generating parameters


def config_metadata(cfg: ToyRLHFConfig) -> dict[str, str]:
    """Parquet key-value metadata recording every generating parameter of a trace set
    (``world_seed`` included), so the file alone says how to regenerate it."""
    return {CONFIG_KEY: json.dumps(asdict(cfg), sort_keys=True)}


def read_trace_config(path: Path) -> ToyRLHFConfig | None:
    """The ``ToyRLHFConfig`` recorded in a file written by ``fastsim traces toy-rlhf``
    (``traces``, ``runs`` or ``gao_fits.parquet``), or ``None`` for a file that records none
    (written before the parameters were recorded, or by other code).  A recorded value that
    is not valid is one ``ConfigError`` naming the file.  KL coefficients past the stability
    bound (older files) are read as recorded; repeated values are refused, since the file's
    runs then share job ids, and so is a key the record names twice.

    Examples
    --------
    >>> import tempfile, polars as pl
    >>> from fastsim.io import table_writer
    >>> path = Path(tempfile.mkdtemp()) / "t.parquet"
    >>> table_writer(pl.DataFrame({"x": [1]}), path, config_metadata(ToyRLHFConfig(world_seed=3)))(path)
    >>> read_trace_config(path).world_seed
    3
    """
    text = parquet_metadata(path).get(CONFIG_KEY)
    if text is None:
        return None
    try:
        # a key given twice kept its last value silently: refused, as the log reader does;
        # nesting deeper than json parses was a RecursionError traceback
        raw = loads_json(text)
        known = set(ToyRLHFConfig.field_names())
        if not isinstance(raw, dict) or not set(raw) <= known:
            raise ValueError(f"unknown fields {sorted(set(raw) - known) if isinstance(raw, dict) else raw!r}")
        cfg = ToyRLHFConfig._from_record({k: tuple(v) if isinstance(v, list) else v
                                          for k, v in raw.items()})
    except (ValueError, TypeError, ConfigError) as exc:  # JSONError among them
        allowed = getattr(exc, "allowed", None) or "the parameters fastsim traces toy-rlhf records"
        raise ConfigError(f"{path}: metadata {CONFIG_KEY} is not valid ({exc}); allowed: "
                          f"{allowed}") from None
    _refuse_recorded_repeats(cfg, path)
    return cfg


def _refuse_recorded_repeats(cfg: ToyRLHFConfig, path: Path) -> None:
    """Older fastsim wrote a repeated value's runs twice under the same job ids: the rows of
    such a file cannot be told apart, so any fit on it would be wrong."""
    if (found := _first_repeat(cfg)) is not None:
        name, same = found
        raise ConfigError(f"{path}: made with repeated {name} {tuple(getattr(cfg, name))!r} "
                          f"({same}), so its rows are ambiguous; allowed: a file made with "
                          "distinct values (regenerate it)")


def trace_origin(path: Path) -> str:
    """One line for a reader: the parameters a trace file was generated with, or, for a file
    that records none, what regenerating it would have to assume."""
    cfg = read_trace_config(path)
    if cfg is None:
        return (f"{path}: records no generating parameters (written before fastsim recorded "
                f"them); the defaults were world_seed {ToyRLHFConfig.world_seed}, "
                f"{ToyRLHFConfig.n_steps} steps: check them before regenerating")
    return (f"{path}: generated with world_seed {cfg.world_seed}, "
            f"{counted(cfg.n_runs, 'run')}, {cfg.n_steps} steps (regenerate: fastsim traces toy-rlhf --like {path})")


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
    return f"{_n_key(n_comparisons)}_{_kl_key(kl_coef)}_{_seed_key(seed)}"


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
    from fastsim.progress import progress_bar

    world = build_world(cfg)
    runs = [(int(n), float(c), int(s)) for n in cfg.n_comparisons for c in cfg.kl_coefs
            for s in cfg.seeds]
    n_max = max(int(n) for n in cfg.n_comparisons)
    proxies = np.empty((len(runs),) + world.w_gold.shape)
    pools = {}
    for r, (n, _, s) in enumerate(progress_bar(runs, desc="proxy reward models", enabled=progress)):
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
    bar = progress_bar(total=len(runs), desc="toy RLHF runs", enabled=progress)
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


TRACES_ALLOWED = "traces.parquet from fastsim traces toy-rlhf"
RUNS_ALLOWED = "runs.parquet from fastsim traces toy-rlhf"
# The type of each column a trace or runs table is read for, as toy-rlhf writes it.
_COLUMN_KINDS = {"job_id": "id", "step": "int", "seed": "int", "n_comparisons": "int",
                 "final_step": "int", "truth_gold_peak_step": "int", "n_evals": "int",
                 "truth_hacking": "bool"}
_KIND_TEXT = {"id": "a string or integer run id", "int": "integers", "bool": "booleans",
              "float": "finite numbers"}


def _kind_ok(kind: str, dtype: pl.DataType) -> bool:
    if kind == "bool":
        return dtype == pl.Boolean
    if kind == "int":
        return dtype.is_integer()
    if kind == "id":
        return dtype == pl.String or dtype.is_integer()
    return dtype.is_integer() or dtype.is_float()


def check_trace_table(table: pl.DataFrame, path, columns, *, allowed: str = TRACES_ALLOWED,
                      per_run: bool = True, equal_evals: bool = False) -> pl.DataFrame:
    """``table`` (read from ``path``) if it is a table toy-rlhf could have written, else one
    ``ConfigError`` naming the file, the column or row, and what is allowed.

    Checks the ``columns`` a command reads: present, of their type (``truth_hacking``
    boolean: the text ``"false"`` would count as a hacking run), no missing or non-finite
    value; at least one row; ``per_run``: one row per ``(job_id, step)`` (a table
    concatenated twice would double every run's evaluations), one ``truth_hacking``
    label and one ``seed`` per run; ``equal_evals``: every run has the same number of
    evaluations.
    """
    missing = sorted(c for c in columns if c not in table.columns)
    if missing:
        raise ConfigError(f"{path}: missing columns {missing}; allowed: {allowed}")
    if table.height == 0:
        raise ConfigError(f"{path}: no rows; allowed: {allowed}")
    _check_column_values(table, path, columns, allowed)
    if not per_run:
        _check_one_row_per_run(table, path, allowed)
        return table
    _check_runs(table, path, columns, allowed, equal_evals)
    return table


def _check_column_values(table: pl.DataFrame, path, columns, allowed: str) -> None:
    """Refuse a column of ``columns`` not of its type, with a missing (or, a number,
    non-finite) value, or a score beyond replay's range; the first column, then row."""
    for c in columns:
        kind = _COLUMN_KINDS.get(c, "float")
        dtype = table.schema[c]
        if not _kind_ok(kind, dtype):
            raise ConfigError(f"{path}: column {c!r} holds {dtype}; allowed: {_KIND_TEXT[kind]} "
                              f"({allowed})")
        col = table[c]
        bad = col.is_null()
        if kind == "float":
            bad = bad | ~col.cast(pl.Float64).is_finite()
        if bad.any():
            i = int(bad.arg_max())
            raise ConfigError(f"{path}: row {i + 1}: {c} is {col[i]!r}; allowed: "
                              f"{_KIND_TEXT[kind]}, none missing ({allowed})")
        if c == "score":  # as replay reads a log: the detectors' noise fits square it
            big = col.cast(pl.Float64).abs() > MAX_SCORE
            if big.any():
                i = int(big.arg_max())
                raise ConfigError(f"{path}: row {i + 1}: score is {col[i]!r}; allowed: finite "
                                  f"numbers from -1e150 to 1e150 ({allowed})")


def _check_one_row_per_run(table: pl.DataFrame, path, allowed: str) -> None:
    """Refuse a runs table (one row per run) naming a run twice."""
    dup = table["job_id"].is_duplicated()
    if dup.any():
        i = int(dup.arg_max())
        raise ConfigError(f"{path}: row {i + 1}: run {table['job_id'][i]!r} appears twice; "
                          f"allowed: one row per run ({allowed})")


def _check_runs(table: pl.DataFrame, path, columns, allowed: str, equal_evals: bool) -> None:
    """Refuse a traces table with a run's step twice, a run with two ``truth_hacking``
    labels or several seeds (of those in ``columns``), or (``equal_evals``) runs of
    different numbers of evaluations."""
    dup = table.select("job_id", "step").is_duplicated()
    if dup.any():
        i = int(dup.arg_max())
        raise ConfigError(f"{path}: row {i + 1}: run {table['job_id'][i]!r} step "
                          f"{table['step'][i]} appears twice; allowed: one row per run and step "
                          f"({allowed})")
    per = table.group_by("job_id", maintain_order=True).agg(
        pl.len().alias("n"),
        *([pl.col("truth_hacking").n_unique().alias("labels")]
          if "truth_hacking" in columns else []),
        *([pl.col("seed").n_unique().alias("seeds")] if "seed" in columns else []))
    if "labels" in per.columns and (per["labels"] > 1).any():
        run = per.filter(pl.col("labels") > 1)["job_id"][0]
        raise ConfigError(f"{path}: run {run!r} has both truth_hacking values; allowed: one label "
                          f"per run ({allowed})")
    if "seeds" in per.columns and (per["seeds"] > 1).any():
        # a run's seed was read from its first row: the runs sharing draws (the unit the
        # intervals resample) were miscounted without a word
        run = per.filter(pl.col("seeds") > 1)["job_id"][0]
        raise ConfigError(f"{path}: run {run!r} has several seeds; allowed: one seed per run "
                          f"({allowed})")
    if equal_evals and per["n"].n_unique() > 1:
        first = per.row(0, named=True)
        other = per.filter(pl.col("n") != first["n"]).row(0, named=True)
        raise ConfigError(f"{path}: run {other['job_id']!r} has {other['n']} evaluations, run "
                          f"{first['job_id']!r} {first['n']}; allowed: the same number for "
                          f"every run ({allowed})")


def check_run_values(runs: pl.DataFrame, path) -> pl.DataFrame:
    """``runs`` (a ``check_trace_table``-checked runs table read from ``path``) if every value
    the simulator comparison derives its workload from is one toy-rlhf could write, else one
    ``ConfigError`` naming the file, row and column: a negative noise or gain, or a peak past
    the run's end, was refused as the derived ``sigma`` or ``ustar_hacking``, unnamed."""
    from fastsim.config import BOUNDS

    step, final = pl.col("truth_gold_peak_step"), pl.col("final_step")
    n_evals = BOUNDS["n_evals"]  # the simulator's, which the derived n_evals must meet
    rules = (("n_evals", pl.col("n_evals").is_between(n_evals.lo, n_evals.hi),
              f"{n_evals.allowed} (the simulator's evaluations per job)"),
             ("final_step", final > 0, "a positive step"),
             ("truth_gold_peak_step", (step >= 0) & (step <= final),
              "a step from 0 to the run's final_step"),
             ("eval_noise_sd", pl.col("eval_noise_sd") >= 0, "a standard deviation >= 0"),
             ("gold_gain", pl.col("gold_gain") >= 0, "a gain >= 0 (gold peak minus start)"))
    for c, ok, allowed in rules:
        bad = ~runs.select(ok.alias("ok"))["ok"]
        if bad.any():
            i = int(bad.arg_max())
            raise ConfigError(f"{path}: row {i + 1}: {c} is {runs[c][i]!r}; allowed: {allowed} "
                              f"({RUNS_ALLOWED})")
    if not (runs["gold_gain"] > 0).any():
        raise ConfigError(f"{path}: no run has a positive gold_gain, so the noise has no scale "
                          f"to be matched on; allowed: {RUNS_ALLOWED} with a run that improves")
    return runs


def check_fit_values(traces: pl.DataFrame, path) -> pl.DataFrame:
    """``traces`` (``check_trace_table``-checked, read from ``path``) if every run has what
    ``fit_curve_knobs`` measures, else one ``ConfigError`` naming the file and the row or
    run: steps and KL >= 0, at least 3 evaluations, KL above 0 at two of them after the
    first (the KL exponent is a slope), a gold peak above the start (the scale of the noise
    and of the shapes), and a score that differs from the gold somewhere (the noise).  Each
    was a numpy traceback (TypeError, LinAlgError) or a ZeroDivisionError."""
    for c, allowed in (("step", "a step >= 0"), ("truth_kl_nats", "a KL divergence >= 0")):
        bad = traces[c] < 0
        if bad.any():
            i = int(bad.arg_max())
            raise ConfigError(f"{path}: row {i + 1}: {c} is {traces[c][i]!r}; allowed: "
                              f"{allowed} ({TRACES_ALLOWED})")
    per = (traces.sort(["job_id", "step"]).group_by("job_id", maintain_order=True)
           .agg(pl.len().alias("n"), (pl.col("truth_kl_nats").slice(1) > 0).sum().alias("kl"),
                (pl.col("truth_gold").max() - pl.col("truth_gold").first()).alias("gain")))
    for ok, what, allowed in (
            (pl.col("n") >= 3, "fewer than 3 evaluations", "at least 3 per run"),
            (pl.col("kl") >= 2, "truth_kl_nats above 0 at fewer than 2 evaluations after the "
             "first", "a KL that grows from the first evaluation (its exponent is a slope)"),
            (pl.col("gain") > 0, "no truth_gold above its first evaluation's", "a gold that "
             "rises (its gain is the scale of the noise and of the shapes)")):
        bad = per.filter(~ok)
        if bad.height:
            raise ConfigError(f"{path}: run {bad['job_id'][0]!r} has {what}; allowed: {allowed} "
                              f"({TRACES_ALLOWED})")
    if (traces["score"] == traces["truth_gold"]).all():
        raise ConfigError(f"{path}: score equals truth_gold at every evaluation, so there is no "
                          f"noise to measure; allowed: {TRACES_ALLOWED}")
    return traces


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


def noise_level(runs: pl.DataFrame, workload=None, n_clusters: int = 20, seed: int = 0) -> float:
    """The traces' evaluation noise on the simulator's scale (MODEL.md section 4).

    Matched on the same statistic on both sides: the median over runs (jobs) of the
    evaluation noise sd (``score - gold``, ``ddof = 1``) divided by the gold gain (peak
    minus start).  The simulator's ratio is linear in ``sigma``, so ``sigma`` = the
    traces' median ratio / the median ratio of ``workload`` (an all-RLHF
    ``WorkloadConfig``, ``n_clusters`` clusters) drawn at ``sigma = 1``.  Without a
    workload: the traces' ratio times 0.75, the mean peak height ``h`` (gain = ``h``).
    """
    ratio = (runs["eval_noise_sd"] / runs["gold_gain"]).to_numpy()
    target = float(np.median(ratio[np.isfinite(ratio)]))
    if workload is None:
        return target * 0.75
    from dataclasses import replace

    from fastsim.workload import generate_workload

    w = generate_workload(replace(workload, sigma=1.0), n_clusters, seed=seed)
    gain = w.gold.max(axis=2)
    sd = np.std(w.score - w.gold, axis=2, ddof=1)
    rl = (w.job_type == 2) & (gain > 0)
    return target / float(np.median(sd[rl] / gain[rl]))


def trace_peak_range(runs: pl.DataFrame) -> tuple[float, float]:
    """``(lo, hi)``: the smallest and largest progress (peak step / final step) at which the
    traces' hacking runs reach their gold peak; the simulator draws ``u*`` uniformly there."""
    hack = runs.filter(pl.col("truth_hacking"))
    if hack.height == 0:  # nothing to place the simulator's hacking peaks, nor to recall
        raise ConfigError(f"the traces hold no hacking run (of {runs.height}), so the simulator "
                          "has no peak range or recall to match; allowed: traces with at least "
                          "one hacking run (longer runs or fewer comparisons over-optimise more)")
    u = (hack["truth_gold_peak_step"] / hack["final_step"]).to_numpy()
    return float(u.min()), float(u.max())


# What each workload field ``simulator_comparison`` derives from the traces is made of.
_DERIVED = {"ustar_hacking": "the hacking runs' truth_gold_peak_step / final_step",
            "ustar_healthy": "the hacking runs' latest truth_gold_peak_step / final_step",
            "base_rate": "the share of runs with truth_hacking",
            "n_evals": "the median n_evals",
            "sigma": "the median eval_noise_sd / gold_gain, on the simulator's scale"}


@contextmanager
def _derived_from(source: str, derived: set[str]):
    """A simulator setting derived from the traces (one of ``derived``) and refused
    (``ustar_hacking=(0.0, 0.0) is invalid``, from runs that all peak at step 0) names the
    traces and what it was derived from: the user wrote no such setting."""
    try:
        yield
    except ConfigError as exc:
        field = re.match(r"(\w+)=", str(exc))
        if field is None or field[1] not in derived:
            raise
        origin = _DERIVED[field[1]]
        raise ConfigError(f"{source}: the simulator setting derived from the traces ({origin}) "
                          f"is refused: {exc}") from None


COMPARE_JOBS = 100  # jobs per simulated cluster of simulator_comparison


def matched_n_evals(runs: pl.DataFrame) -> int:
    """Evaluations per simulated job matched to the traces: their median run's."""
    return int(runs["n_evals"].median())


def simulator_comparison(runs: pl.DataFrame, policies, n_clusters: int = 50,
                         n_jobs: int = COMPARE_JOBS,
                         seed: int = 0, sigma: float | None = None,
                         curves: dict | None = None, source: str = "the traces") -> pl.DataFrame:
    """The cluster simulator's detection numbers at the traces' noise, base rate and cadence.

    Runs ``fastsim.api.simulate`` on an all-RLHF workload with ``sigma`` from
    ``noise_level`` (unless given; matched on noise sd / gold gain, per run and per job,
    clusters other than those simulated), ``base_rate`` = the traces' share of hacking runs and
    ``n_evals`` = evaluations per trace and hacking peaks drawn over the range where the
    traces' hacking runs peak (``trace_peak_range``), for each policy; every other parameter
    is the default, including the curve knobs fitted to the traces (``curves``:
    WorkloadConfig fields that override them, e.g. ``fastsim.defaults.PLAIN_CURVES``).  The
    peak position is a property of the traces, like their base rate: the paper-calibrated
    default (docs/calibration.md) is not theirs.  One row per policy with pooled precision /
    recall / FPR and cluster-bootstrap intervals, labelled as it ran: with scope ``rlhf``
    (every simulated job is RLHF), whatever scope its spec gives; a policy given twice is
    one row.  ``policies``: one spec or a list, with at least one stop policy (``none`` is
    skipped); ``n_clusters`` at least 2.  ``source`` names the traces in an error.
    """
    from fastsim.api import simulate
    from fastsim.config import SimConfig, WorkloadConfig
    from fastsim.replay import policy_list
    from fastsim.replay.policies import parse_policy

    policies = policy_list(policies)  # one spec was read letter by letter
    if not is_integer(n_clusters) or n_clusters < 2:  # one cluster has no interval
        raise ConfigError(f"n_clusters={n_clusters!r} is invalid; allowed: an integer >= 2")
    derived = {"base_rate", "n_evals"} | ({"sigma"} if sigma is None else set()) \
        | set(_DERIVED) - set(curves or {}) - {"sigma"}
    curves = dict(curves or {})
    if "ustar_hacking" not in curves:
        curves["ustar_hacking"] = trace_peak_range(runs)
        if "ustar_healthy" not in curves:  # no gap, as the defaults: healthy peaks start there
            curves["ustar_healthy"] = (curves["ustar_hacking"][1], D.USTAR_HEALTHY[1])
    base_rate = float(runs["truth_hacking"].mean())
    n_evals = matched_n_evals(runs)
    with _derived_from(source, derived):
        matched = WorkloadConfig(n_jobs=n_jobs, mix=(0.0, 0.0, 1.0), base_rate=base_rate,
                                 n_evals=n_evals, **curves)
        sigma = noise_level(runs, matched, seed=seed + 1) if sigma is None else float(sigma)
        wl = replace(matched, sigma=sigma)
        # every policy checked against the derived workload before the first runs (a
        # policy needing more evaluations than the traces have was refused after the
        # ones before it, as 'n_evals=2 is invalid', which no option sets)
        # a policy given twice (or as two specs of one policy) is run once, one row
        cfgs = [SimConfig(workload=wl, policy=pol) for pol in
                dict.fromkeys(replace(parse_policy(s), scope="rlhf") for s in policies)
                if pol.name != "none"]
    if not cfgs:  # an empty frame, with no error
        raise ConfigError(f"policies={policies!r} holds no stop policy (none never stops, so "
                          "there is nothing to compare); allowed: a stop policy, e.g. "
                          "\"evalstop:k=2\"")
    rows = []
    for cfg in cfgs:
        pol = cfg.policy
        res = simulate(cfg, n_clusters=n_clusters, seed=seed)
        c = res.clusters
        tp, fp, fn, tn = (c[x].to_numpy().astype(np.float64) for x in ("tp", "fp", "fn", "tn"))
        out = {"policy": pol.label, "sigma": sigma, "base_rate": base_rate, "n_evals": n_evals,
               "n_clusters": n_clusters, "n_jobs": n_jobs}
        for name, e in (("precision", proportion_ci(tp, tp + fp)),
                        ("recall", proportion_ci(tp, tp + fn)),
                        ("fpr", proportion_ci(fp, fp + tn)),
                        # a share: a t interval of a few clusters reached past [0, 1]
                        ("wasted_share",
                         mean_ci(c["wasted_share"].to_numpy()).within(0.0, 1.0))):
            out[name], out[f"{name}_lo"], out[f"{name}_hi"] = e.mean, e.lo, e.hi
        rows.append(out)
    return pl.DataFrame(rows)


def gao_fit_groups(traces: pl.DataFrame, by=("n_comparisons", "kl_coef")) -> pl.DataFrame:
    """Gao's RL form fitted to the pooled (sqrt KL, gold gain) points of each group of runs,
    with 95% intervals over the group's seeds.

    Points come from the exact gold and exact KL (hidden truth), all seeds of a group
    together, like Gao et al.'s fits over their RL runs: ``gao_alpha, gao_beta, gao_r2,
    d_peak`` (``exp(alpha/beta - 1)``, where the fitted form peaks; inf when
    ``beta <= 0``).  The interval of each parameter comes from fitting every seed alone:
    ``gao_*_seed_mean`` is the mean of the ``n_seeds`` per-seed fits and ``gao_*_lo`` /
    ``gao_*_hi`` its Student-t 95% interval (``fastsim.stats.mean_ci``); R^2's upper end
    is capped at 1, its largest possible value.  The seeds of a group are independent runs
    (own comparison pool, own policy draws) in one fixed world (``world_seed``).
    """
    rows = []
    t = traces.sort(["job_id", "step"]).with_columns(
        (pl.col("truth_gold") - pl.col("truth_gold").first().over("job_id")).alias("_gain"),
        pl.col("truth_kl_nats").clip(lower_bound=0.0).sqrt().alias("_d"))
    for keys, g in t.group_by(list(by), maintain_order=True):
        alpha, beta, r2 = fit_gao(g["_d"].to_numpy(), g["_gain"].to_numpy())
        d_peak = float(np.exp(alpha / beta - 1.0)) if beta > 0 else float("inf")
        row = dict(zip(by, keys))
        row.update({"n_runs": g["job_id"].n_unique(), "n_seeds": g["seed"].n_unique(),
                    "hacking_share": float(g.group_by("job_id").agg(pl.col("truth_hacking").first())
                                           ["truth_hacking"].mean()),
                    "gao_alpha": alpha, "gao_beta": beta, "gao_r2": r2, "d_peak": d_peak,
                    "d_max": float(g["_d"].max())})
        per_seed = np.array([fit_gao(s["_d"].to_numpy(), s["_gain"].to_numpy())
                             for _, s in g.group_by("seed", maintain_order=True)])
        for j, name in enumerate(("gao_alpha", "gao_beta", "gao_r2")):
            e = mean_ci(per_seed[:, j])
            hi = min(e.hi, 1.0) if name == "gao_r2" else e.hi
            row.update({f"{name}_seed_mean": e.mean, f"{name}_lo": e.lo, f"{name}_hi": hi})
        rows.append(row)
    return pl.DataFrame(rows).sort(list(by))


def gao_run_medians(runs: pl.DataFrame, n_boot: int = 2000, seed: int = 0) -> pl.DataFrame:
    """Medians of the per-run fits of Gao's form (``run_summary``) over all, healthy and
    hacking runs, with 95% percentile intervals from ``n_boot`` resamples of the runs
    (``fastsim.stats.check_n_boot``; 0: no intervals).

    One row per ``(runs, statistic)``: ``runs`` in ``all, healthy, hacking``; statistics
    ``gao_alpha, gao_beta, gao_r2``; columns ``median, lo, hi, min, n_runs``.
    """
    n_boot = check_n_boot(n_boot, zero_ok=True)
    rng = np.random.default_rng(seed)
    rows = []
    for label, sel in (("all", runs), ("healthy", runs.filter(~pl.col("truth_hacking"))),
                       ("hacking", runs.filter(pl.col("truth_hacking")))):
        for name in ("gao_alpha", "gao_beta", "gao_r2"):
            x = sel[name].drop_nans().drop_nulls().to_numpy()
            if x.size == 0:
                rows.append({"runs": label, "statistic": name, "median": np.nan, "lo": np.nan,
                             "hi": np.nan, "min": np.nan, "n_runs": 0})
                continue
            boot = np.median(x[rng.integers(0, x.size, (n_boot, x.size))], axis=1)
            # one run: every resample is that run, a zero-width interval claiming certainty
            lo, hi = (np.percentile(boot, [2.5, 97.5]) if n_boot and x.size >= 2
                      else (np.nan, np.nan))
            rows.append({"runs": label, "statistic": name, "median": float(np.median(x)),
                         "lo": float(lo), "hi": float(hi), "min": float(x.min()),
                         "n_runs": int(x.size)})
    return pl.DataFrame(rows)


# --------------------------------------------------------------------------- curve knobs

def _run_arrays(traces: pl.DataFrame):
    """Per run: progress ``u = step / final step``, sqrt(KL), exact gold, score, label."""
    out = []
    for (_,), g in traces.sort(["job_id", "step"]).group_by(["job_id"], maintain_order=True):
        step = g["step"].to_numpy().astype(np.float64)
        out.append((step / step[-1], np.sqrt(np.maximum(g["truth_kl_nats"].to_numpy(), 0.0)),
                    g["truth_gold"].to_numpy(), g["score"].to_numpy(),
                    bool(g["truth_hacking"][0])))
    return out


def _gao_shape(u, ustar, gamma):
    """Gao's form normalised to peak 1 at ``ustar``, ``x = (u / ustar)^gamma``."""
    ln_x = gamma * (np.log(u) - np.log(ustar))
    return np.exp(ln_x) * (1.0 - ln_x)


_GRID = np.linspace(0.05, 4.0, 791)  # exponents searched by the shape fits (step 0.005)


def _kl_gamma_of(u, d):
    """Least-squares slope of ``ln sqrt(KL)`` on ``ln u`` over the evaluations with ``u > 0``."""
    m = (u > 0) & (d > 0)
    return float(np.polyfit(np.log(u[m]), np.log(d[m]), 1)[0])


def _hack_exponent_of(u, gold):
    """The exponent ``g`` whose ``x (1 - ln x)``, ``x = (u / u_peak)^g``, best fits a hacking
    run's gold gain normalised to 1 at its peak (least squares over ``u > 0``)."""
    pk = int(np.argmax(gold))
    y = (gold - gold[0]) / (gold[pk] - gold[0])
    m = u > 0
    sse = ((y[m][None, :] - _gao_shape(u[m][None, :], u[pk], _GRID[:, None])) ** 2).sum(axis=1)
    return float(_GRID[int(np.argmin(sse))])


def _early_share(u, gold):
    """Share of a run's final gold gain made by ``u = 1/6``."""
    gain = gold - gold[0]
    return float(np.interp(1.0 / 6.0, u, gain) / gain[-1])


def _model_early_share(ustar, gamma):
    return _gao_shape(1.0 / 6.0, ustar, gamma) / _gao_shape(1.0, ustar, gamma)


def _healthy_hi(share, gamma, lo):
    """``hi`` such that healthy ``u* ~ U(lo, hi)`` gives the median early share ``share``
    (bisection; the model's share falls as ``u*`` grows).  ``inf`` if out of reach."""
    q = np.linspace(0.0, 1.0, 501)
    med = lambda hi: float(np.median(_model_early_share(lo + (hi - lo) * q, gamma)))  # noqa: E731
    a, b = lo * (1 + 1e-9), 1e4
    if med(b) > share or med(a) < share:
        return float("inf") if med(b) > share else lo
    for _ in range(40):  # to ~1e-6 relative
        mid = np.sqrt(a * b)
        a, b = (mid, b) if med(mid) > share else (a, mid)
    return float(np.sqrt(a * b))


def _var_log_uniform(lo, hi, n=20001):
    x = np.log(np.linspace(lo, hi, n))
    return float(x.var())


def _per_run(runs):
    """The per-run statistics the knobs are medians / moments of (computed once)."""
    out = []
    for u, d, gold, score, hacking in runs:
        r = score - gold  # mean zero by construction: truth_gold is the expected score
        out.append({"hacking": hacking, "gamma": _kl_gamma_of(u, d),
                    "hack_exp": _hack_exponent_of(u, gold) if hacking else np.nan,
                    "rel": float(np.std(score - gold, ddof=1) / (gold.max() - gold[0])),
                    "n": len(u), "early": _early_share(u, gold) if not hacking else np.nan,
                    "lag_num": float((r[1:] * r[:-1]).sum()),
                    "lag_den": float((0.5 * (r[1:] ** 2 + r[:-1] ** 2)).sum())})
    return pl.DataFrame(out)


def _curve_statistics(st: pl.DataFrame, height, ustar_hacking_hi):
    """Every knob from the per-run statistics of a set of runs (see ``fit_curve_knobs``)."""
    gamma = float(st["gamma"].median())
    hk = st.filter(pl.col("hacking"))
    sharp = float(hk["hack_exp"].median()) / gamma if hk.height else np.nan
    rel = st["rel"].to_numpy()
    n_e = st["n"].to_numpy().astype(np.float64)
    # var ln(sigma_j / h_j) = s^2 + var ln h, plus the sampling error of a sd from n points.
    # One run has no variance between runs: NaN, without numpy's ddof warning (a user
    # fitting one run saw two RuntimeWarnings).
    s2 = (np.var(np.log(rel), ddof=1) - np.mean(1.0 / (2.0 * (n_e - 1.0)))
          - _var_log_uniform(*height)) if rel.size >= 2 else np.nan
    healthy = st.filter(~pl.col("hacking"))
    # no healthy run: nothing to fit the healthy knobs to (NaN, as a knob of no hacking run)
    healthy_share = float(healthy["early"].median()) if healthy.height else np.nan
    healthy_hi = (_healthy_hi(healthy_share, gamma, ustar_hacking_hi) if healthy.height
                  else np.nan)
    return {"kl_gamma": gamma, "hack_sharpness": sharp, "sigma_spread": float(np.sqrt(max(s2, 0.0))),
            "noise_rho": float(st["lag_num"].sum() / st["lag_den"].sum()),
            "ustar_healthy_hi": healthy_hi,
            "healthy_early_share": healthy_share, "noise_over_gain": float(np.median(rel))}


def fit_curve_knobs(traces: pl.DataFrame, height=None, ustar_hacking_hi=None,
                    n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """Fit the trace-grounded curve knobs of MODEL.md section 4 to a toy-RLHF trace set.

    Every knob comes from a shape statistic of the traces, never from detection rates
    (those are what ``simulator_comparison`` then checks, held out):

    * ``kl_gamma``: per run, the least-squares slope of ``ln sqrt(KL)`` on ``ln u``; the
      median over runs.
    * ``hack_sharpness``: per hacking run, the exponent ``g`` of ``x (1 - ln x)``,
      ``x = (u / u_peak)^g``, that best fits its gold gain (normalised to 1 at the peak);
      the median over hacking runs divided by ``kl_gamma`` (hacking gold is Gao's form in
      ``(d / d*)^m``, ``d ~ u^kl_gamma``).
    * ``sigma_spread``: ``s^2 = var ln(noise sd / gold gain) - 1 / (2 (n - 1)) - var ln h``
      over runs: the spread of the noise on the curve's scale, less the sampling error of
      a standard deviation from ``n`` evaluations and the spread of the model's heights.
    * ``noise_rho``: the pooled lag-1 autocorrelation of ``score - truth_gold`` about zero
      (``truth_gold`` is the score's expectation, so no mean is estimated and the short
      runs leave no bias from one), over the same pairs of evaluations in both sums.
    * ``ustar_healthy``: ``lo`` = the hacking range's upper end (peaks spread with no gap);
      ``hi`` such that the model's median share of the final gain made by ``u = 1/6``
      equals the healthy runs' median.

    ``value`` is the statistic on all runs; ``lo``/``hi`` a 95% percentile interval from
    ``n_boot`` resamples of the runs (hacking and healthy resampled separately, so each
    resample keeps the traces' base rate); ``n_boot`` is 0 (no intervals, NaN) or at least
    ``fastsim.stats.MIN_PERCENTILE_BOOT`` (``fastsim.stats.check_n_boot``).  ``height`` (the
    model's peak-height range, ``WorkloadConfig.height``) and ``ustar_hacking_hi`` (the upper
    end of ``ustar_hacking``) default to ``fastsim.defaults``' and are checked as the
    workload's.  Returns one row per knob.
    """
    from fastsim.config import RANGE_BOUNDS, WorkloadConfig

    n_boot = check_n_boot(n_boot, zero_ok=True)
    height = D.HEIGHT if height is None else height
    # checked as the workload's own: height=(0, 0) and a NaN or past-the-end peak were
    # fitted, to a NaN sigma_spread or ustar_healthy_hi or a number no run can have
    WorkloadConfig(height=height)
    hi_hack = D.USTAR_HACKING[1] if ustar_hacking_hi is None else ustar_hacking_hi
    lo, hi, _ = RANGE_BOUNDS["ustar_hacking"]  # ustar_hacking's upper end, as the workload's
    if not is_real(hi_hack) or not lo <= hi_hack <= hi:
        raise ConfigError(f"ustar_hacking_hi={hi_hack!r} is invalid; allowed: a number from "
                          f"{lo:g} to {hi:g} (the upper end of the hacking jobs' peak "
                          "progress, ustar_hacking's)")
    hi_hack = float(hi_hack)
    st = _per_run(_run_arrays(traces))
    point = _curve_statistics(st, height, hi_hack)
    hk = np.nonzero(st["hacking"].to_numpy())[0]
    ok = np.nonzero(~st["hacking"].to_numpy())[0]
    rng = np.random.default_rng(seed)
    boots = {k: [] for k in point}
    for _ in range(n_boot):
        rows = np.concatenate([rng.choice(hk, hk.size), rng.choice(ok, ok.size)])
        for k, v in _curve_statistics(st[rows], height, hi_hack).items():
            boots[k].append(v)
    rows = []
    for k, v in point.items():
        n_runs = (hk.size if k == "hack_sharpness" else
                  ok.size if k in ("ustar_healthy_hi", "healthy_early_share") else st.height)
        b = np.asarray(boots[k], dtype=np.float64)
        b = b[~np.isnan(b)]  # an infinite resample is a value (ustar_healthy_hi out of reach)
        # one run has no spread between runs to resample: no interval
        lo, hi = _percentiles(b, (2.5, 97.5)) if b.size and n_runs >= 2 else (np.nan, np.nan)
        rows.append({"statistic": k, "value": v, "lo": float(lo), "hi": float(hi),
                     "n_runs": n_runs})
    return pl.DataFrame(rows)


def _percentiles(b: np.ndarray, qs) -> list[float]:
    """``np.percentile`` (linear), also over infinite values: a percentile between a finite
    and an infinite neighbour is that infinity (numpy's interpolation gives NaN there, and
    dropping the infinities instead gives an interval that can miss its own estimate)."""
    if np.isfinite(b).all():
        return [float(x) for x in np.percentile(b, qs)]
    s = np.sort(b)
    out = []
    for q in qs:
        pos = q / 100.0 * (s.size - 1)
        i = int(np.floor(pos))
        j, t = min(i + 1, s.size - 1), pos - i
        if t == 0 or s[i] == s[j]:
            out.append(float(s[i]))
        elif np.isinf(s[j]) or np.isinf(s[i]):
            out.append(float(s[j] if np.isinf(s[j]) else s[i]))
        else:
            out.append(float(s[i] + t * (s[j] - s[i])))
    return out
