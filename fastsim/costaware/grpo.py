"""Cost-Aware GRPO mini-batch sampler, to drop into any GRPO loop (arXiv 2604.28020).

In GRPO each prompt gets a group of ``G`` sampled responses with rewards ``r``; the
group-normalised advantage is ``A = (r - mean) / std`` within the group.  Computing the
policy gradient of a response costs about its token count ``len``, and ``|A|`` proxies
its gradient norm, so the cost-aware distribution over the ``N = P G`` responses is::

    q_i ∝ max(|A_i|, floor) / sqrt(len_i),      p_i = (1 - lam) q_i + lam / N

Draw a mini-batch of ``B <= N`` indices with replacement from ``p`` and weight each drawn
loss term by ``w_i = 1 / (N p_i)``: then ``E[(1/B) sum_b w_{i_b} loss_{i_b}] =
(1/N) sum_i loss_i``, the full-batch GRPO loss, exactly.

Zero advantages, deliberately: a response with ``A_i = 0`` contributes exactly zero
policy gradient, so with ``lam = floor = 0`` it is never drawn and nothing is lost.  If
your loss has terms that do not vanish with ``A`` (a KL penalty, an entropy bonus), keep
``lam > 0`` (every response can be drawn, so the weighted loss stays unbiased for any
per-response loss) or set ``floor > 0`` (zero-advantage responses compete like
responses with ``|A| = floor``).  A batch whose advantages are *all* zero carries no
policy-gradient signal: ``cost_aware_batch`` raises ``ConfigError`` so the caller skips
it (or regenerates) on purpose.

Usage in a training loop::

    batch = cost_aware_batch(rewards, lengths, batch_size=64, lam=0.1, seed=0, step=t)
    for i, w in zip(batch.indices, batch.weights):
        loss += w * grpo_loss(response[i], advantage=batch.advantages.flat[i]) / batch_size
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fastsim.costaware.sampling import check_lam, check_nonnegative, real_array
from fastsim.errors import ConfigError, known_keywords
from fastsim.kernels import costaware as nbc
from fastsim.kernels import grpo as nb


@dataclass(frozen=True)
class GRPOBatch:
    """A sampled mini-batch.

    Attributes
    ----------
    advantages : (P, G) group-normalised advantages
    probs : (N,) sampling probabilities over the flattened responses (row-major)
    indices : (B,) int64 drawn flat indices (with replacement)
    weights : (B,) importance weights ``1 / (N p_i)`` of the drawn indices
    tokens : summed lengths of the drawn responses (a duplicate counts twice)
    """

    advantages: np.ndarray = field(repr=False)
    probs: np.ndarray = field(repr=False)
    indices: np.ndarray
    weights: np.ndarray
    tokens: float


def _rewards(rewards) -> np.ndarray:
    r = real_array(rewards, "rewards", bools=True)  # pass/fail rewards
    if r.ndim != 2 or r.shape[0] < 1 or r.shape[1] < 2:
        raise ConfigError(f"rewards is invalid (shape {r.shape}); allowed: a 2-D array "
                          "(prompts, group) with a group of at least 2 responses")
    if not np.isfinite(r).all():
        raise ConfigError("rewards contain NaN or inf; allowed: finite rewards")
    return r


def _lengths(lengths, n: int, shape: tuple[int, ...] = ()) -> np.ndarray:
    """The lengths (or costs) as one flat float64 array: one per response, finite and above
    0, in the responses' ``shape`` or flat.  Another shape of as many entries (the
    transpose, (G, P) for (P, G)) gave each response another's length without a word."""
    x = real_array(lengths, "lengths")
    if x.size != n:
        raise ConfigError(f"lengths is invalid ({x.size} entries, {n} responses); allowed: "
                          "one per response")
    if x.ndim > 1 and len(shape) > 1 and x.shape != tuple(shape):
        raise ConfigError(f"lengths is invalid (shape {x.shape}, the responses' is "
                          f"{tuple(shape)}); allowed: one per response, in their shape or "
                          "flat (row-major)")
    x = x.reshape(-1)
    bad = ~np.isfinite(x) | (x <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ConfigError(f"lengths[{i}]={float(x[i])!r} is invalid; allowed: a finite token "
                          "count above 0")
    return x


def _advantages(advantages) -> np.ndarray:
    """The advantages as one flat float64 array: finite, at least one (none was refused
    as 'all advantages are zero', or as a batch_size beyond 0 responses)."""
    a = real_array(advantages, "advantages").reshape(-1)
    if a.size == 0:
        raise ConfigError("advantages is empty; allowed: the advantages of one or more "
                          "responses")
    if not np.isfinite(a).all():
        raise ConfigError("advantages contain NaN or inf")
    return a


@known_keywords("fastsim.costaware.group_advantages()")
def group_advantages(rewards) -> np.ndarray:
    """Group-normalised advantages ``(r - mean) / std`` per row; rows of equal rewards -> 0.

    Examples
    --------
    >>> group_advantages([[1.0, 0.0], [1.0, 1.0]]).tolist()
    [[1.0, -1.0], [0.0, 0.0]]
    """
    r = _rewards(rewards)
    out = np.empty_like(r)
    nb.group_advantages_nb(r, out)
    return out


@known_keywords("fastsim.costaware.cost_aware_probs()")
def cost_aware_probs(advantages, lengths, lam: float = 0.1, floor: float = 0.0) -> np.ndarray:
    """``p_i = (1 - lam) q_i + lam / N`` with ``q_i ∝ max(|A_i|, floor) / sqrt(len_i)``.

    Parameters
    ----------
    advantages : array_like, (P, G) or (N,)
    lengths : array_like, one token count > 0 per response: in the advantages' shape, or
        flat (row-major)
    lam : float in [0, 1], uniform mixing
    floor : float >= 0, the smallest ``|A|`` a response is scored with

    Examples
    --------
    >>> cost_aware_probs([1.0, -1.0, 0.0], [1.0, 4.0, 1.0], lam=0.0).round(4).tolist()
    [0.6667, 0.3333, 0.0]
    """
    adv = real_array(advantages, "advantages")
    a = _advantages(adv)
    lens = _lengths(lengths, a.size, adv.shape)
    lam = check_lam(lam)
    floor = check_nonnegative(floor, "floor")
    if floor == 0.0 and not (a != 0.0).any():
        raise ConfigError("all advantages are zero (every group has identical rewards): the "
                          "policy-gradient loss of this batch is zero; skip the batch, or set "
                          "floor > 0 if your loss has advantage-free terms")
    p = np.empty(a.size)
    nb.grpo_probs_nb(a, lens, nb.ARM_COST_AWARE, lam, floor, p)
    return p


def _draw_args(batch_size, seed, step, n: int):
    # a mini-batch of the n responses: more draws only repeat them, and a huge batch_size
    # allocated its index and weight arrays (8 bytes a draw each) before failing
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or not 1 <= batch_size <= n:
        raise ConfigError(f"batch_size={batch_size!r} is invalid; allowed: an integer from 1 "
                          f"to {n} (the number of responses)")
    for name, value in (("seed", seed), ("step", step)):
        # RNG coordinates are int64 in the kernel: 2^63 was an OverflowError, 2^64 a
        # numba TypingError
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                or not 0 <= value <= 2**63 - 1:
            raise ConfigError(f"{name}={value!r} is invalid; allowed: an integer from 0 to "
                              "2^63-1")


@known_keywords("fastsim.costaware.cost_aware_draw()")
def cost_aware_draw(advantages, costs, batch_size: int, lam: float = 0.1, floor: float = 0.0,
                    seed: int = 0, step: int = 0, process: int = 0) -> GRPOBatch:
    """A mini-batch drawn with ``p ∝ max(|A|, floor) / sqrt(c)`` from advantages you already have.

    The same sampler as ``cost_aware_batch``, for a trainer that computes its own
    advantages (TRL's ``GRPOTrainer`` scales by ``std + 1e-4``, or not at all) and whose
    cost is prompt + response tokens.  ``advantages`` and ``costs`` have the same number
    of entries, in one shape or either flat (row-major); ``indices`` are flat.
    ``process``: the data-parallel process drawing (a coordinate of the RNG, so processes
    draw independently; 0 for one).

    Examples
    --------
    >>> b = cost_aware_draw([1.0, -1.0, 0.0, 0.0], [10, 40, 20, 30], 3, lam=0.0)
    >>> b.probs.round(4).tolist()
    [0.6667, 0.3333, 0.0, 0.0]
    """
    adv = real_array(advantages, "advantages")
    _advantages(adv)
    _draw_args(batch_size, seed, step, adv.size)
    if isinstance(process, bool) or not isinstance(process, (int, np.integer)) \
            or not 0 <= process < 2**31:
        raise ConfigError(f"process={process!r} is invalid; allowed: an integer from 0 to "
                          "2^31-1")
    c = _lengths(costs, adv.size, adv.shape)
    p = cost_aware_probs(adv, c, lam, floor)
    idx = np.empty(int(batch_size), np.int64)
    nb.sample_minibatch_nb(p, int(batch_size), int(seed), int(process), int(step),
                           nbc.S_GRPO_MINIBATCH, idx)
    weights = 1.0 / (p.size * p[idx])
    return GRPOBatch(adv, p, idx, weights, float(c[idx].sum()))


@known_keywords("fastsim.costaware.cost_aware_batch()")
def cost_aware_batch(rewards, lengths, batch_size: int, lam: float = 0.1, floor: float = 0.0,
                     seed: int = 0, step: int = 0) -> GRPOBatch:
    """Advantages, cost-aware probabilities, a mini-batch and its importance weights.

    Parameters
    ----------
    rewards : array_like (P, G)
        Rewards of ``G`` responses to each of ``P`` prompts.
    lengths : array_like (P, G), or flat (P G,) row-major
        Token counts of those responses (the cost of their gradient).
    batch_size : int
        Draws with replacement, 1 to ``P G``; the weighted mean loss over them is unbiased.
    lam, floor : see ``cost_aware_probs``
    seed, step : counter-based RNG coordinates, integers from 0 to 2^63-1: the same
        ``(seed, step)`` gives the same
        batch on any machine and thread count.

    Raises
    ------
    ConfigError
        Bad shapes or values, or every advantage zero with ``floor = 0``.

    Examples
    --------
    >>> b = cost_aware_batch([[1, 0, 0, 1], [0, 0, 0, 0]], [[10, 30, 20, 40]] * 2, 4)
    >>> b.indices.shape, bool(np.all(b.weights > 0)), b.advantages[1].tolist()
    ((4,), True, [0.0, 0.0, 0.0, 0.0])
    """
    r = _rewards(rewards)
    _lengths(lengths, r.size, r.shape)
    _draw_args(batch_size, seed, step, r.size)
    return cost_aware_draw(group_advantages(r), lengths, batch_size, lam, floor, seed, step)


# Built by hand too: a misspelt keyword is one ConfigError naming the nearest field.
GRPOBatch.__init__ = known_keywords("GRPOBatch()")(GRPOBatch.__init__)
