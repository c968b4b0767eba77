"""Cost-aware sampling (MODEL.md section 10; Mohri et al., arXiv 2604.28020).

Sampling distributions over a finite sum of ``n`` components with gradient-norm bounds
``G`` (n,) and per-sample costs ``c`` (n,), the quantities ``S(p)``, ``C(p)``,
``J(p) = S(p) C(p)``, draws from ``p`` and the bias-budgeted subset selection (greedy
and exact).  Kernels trust their inputs: ``fastsim.costaware`` validates them.
"""
import math

import numpy as np

from .jit import entry

# Sampling strategies (mirrored by ``fastsim.costaware.sampling.Strategy``).
UNIFORM = 0
GRADIENT_NORM = 1
COST_ONLY = 2
OPTIMAL = 3

# Random streams of the cost-aware system: >= 100, so disjoint from the cluster engine's
# (kernels/codes.py); the toy RLHF traces (kernels/toy_rlhf.py) reuse 101-103, which is
# harmless because no computation draws from both systems.
S_ROW_SCALE = 100
S_FEATURE = 101
S_TARGET = 102
S_NOISE = 103
S_COST = 104
S_SGD_PICK = 110
S_TASK_QUALITY = 120
S_TASK_DIFFICULTY = 121
S_TASK_FEATURE = 122
S_TASK_LENGTH = 123
S_TASK_NOISE = 124
S_TASK_PROMPT_LENGTH = 125
S_GRPO_PROMPT = 130
S_GRPO_RESPONSE = 131
S_GRPO_MINIBATCH = 132


# The smallest normal float64.  A sum of scores below it (or not finite) lost the scores'
# ratios: the subnormals they rounded to carry fewer bits, or underflowed to 0.  At or
# above it, a subnormal score's rounding error (<= 2^-1075) is at most half an ulp of 1
# relative to the total, so the plain sum is as good as a rescaled one.
MIN_NORMAL = 2.2250738585072014e-308


@entry
def normal_total_nb(total):
    """Whether a sum of non-negative scores can normalise them (finite and not subnormal)."""
    return MIN_NORMAL <= total < np.inf


@entry
def strategy_scores_nb(G, c, strategy, g_scale, out):
    """Write the scores of ``strategy`` with ``G / g_scale`` into ``out``; return their sum."""
    total = 0.0
    for i in range(G.shape[0]):
        if strategy == UNIFORM:
            s = 1.0
        elif strategy == GRADIENT_NORM:
            s = G[i] / g_scale
        elif strategy == COST_ONLY:
            s = 1.0 / math.sqrt(c[i])
        else:
            s = G[i] / g_scale / math.sqrt(c[i])
        out[i] = s
        total += s
    return total


@entry
def sampling_probs_nb(G, c, strategy, lam, out):
    """Write into ``out`` (n,) the distribution of ``strategy`` mixed with uniform.

    ``p = (1 - lam) q + lam / n`` with ``q`` proportional to 1, ``G``, ``1/sqrt(c)`` or
    ``G/sqrt(c)``.  A sum of scores that overflows or underflows is taken again with
    ``G / max(G)`` (the same ``q``; ``x / 1`` is exact, so other inputs keep every bit).
    A score vector that sums to zero falls back to uniform.
    """
    n = G.shape[0]
    total = strategy_scores_nb(G, c, strategy, 1.0, out)
    if not normal_total_nb(total):
        top = np.max(G)
        if top > 0.0:  # all zero: the uniform fallback below
            total = strategy_scores_nb(G, c, strategy, top, out)
    for i in range(n):
        q = out[i] / total if total > 0.0 else 1.0 / n
        out[i] = (1.0 - lam) * q + lam / n


@entry
def second_moment_nb(G, p):
    """``S(p) = sum_i G_i^2 / (n^2 p_i)``; a zero-probability term with ``G_i > 0`` is inf."""
    n = G.shape[0]
    s = 0.0
    for i in range(n):
        if G[i] == 0.0:
            continue
        if p[i] <= 0.0:
            return np.inf
        s += G[i] * G[i] / p[i]
    return s / (n * n)


@entry
def expected_cost_nb(c, p):
    """``C(p) = sum_i p_i c_i``: expected cost of one stochastic gradient."""
    s = 0.0
    for i in range(c.shape[0]):
        s += p[i] * c[i]
    return s


@entry
def optimal_j_nb(G, c):
    """Closed-form minimum ``J(p*) = ((1/n) sum_i G_i sqrt(c_i))^2`` (Cauchy-Schwarz)."""
    s = 0.0
    for i in range(G.shape[0]):
        s += G[i] * math.sqrt(c[i])
    s /= G.shape[0]
    return s * s


@entry
def draw_index_nb(cdf, u):
    """Index ``i`` with ``cdf[i-1] <= u * cdf[-1] < cdf[i]``; zero-mass indices are never hit."""
    i = np.searchsorted(cdf, u * cdf[cdf.shape[0] - 1], side="right")
    n = cdf.shape[0]
    # u < 1 keeps i < n in exact arithmetic; the guard absorbs a rounded last cdf entry.
    while i >= n or (i > 0 and cdf[i] == cdf[i - 1]):
        i -= 1
    return i


BUDGET_RTOL = 1e-12


@entry
def budget_nb(gamma, n):
    """The bias budget as a bound on the dropped ``sum G``: ``(1/n) sum G <= gamma``.

    Greedy and exact add the same ``G`` in different orders, so their sums differ in the
    last bits; a 1e-12 relative slack, shared by both (and by the tests' brute force),
    makes them agree on which sets fit.
    """
    return gamma * n * (1.0 + BUDGET_RTOL)


@entry
def subset_greedy_nb(G, c, gamma, keep):
    """Greedy min-cost knapsack: keep the cheapest samples until the bias bound holds.

    Dropping sample ``i`` removes ``G_i sqrt(c_i)`` from ``W = sum_K G_i sqrt(c_i)``
    and adds ``G_i / n`` to the bias bound.  The value/weight density is ``sqrt(c_i)``,
    so density order is cost order: drop the most expensive while the bias stays
    ``<= gamma``, stop at the first that does not fit (the "critical" sample).
    Writes ``keep`` (n,) bool; returns the critical index, or -1 if all were dropped.
    """
    n = G.shape[0]
    order = np.argsort(-c, kind="mergesort")  # most expensive first, ties by index
    for i in range(n):
        keep[i] = True
    budget = budget_nb(gamma, n)
    dropped = 0.0
    for j in range(n):
        i = order[j]
        if dropped + G[i] <= budget:
            dropped += G[i]
            keep[i] = False
        else:
            return i
    return -1


@entry
def subset_exact_nb(G, c, gamma, keep):
    """Exact min-cost knapsack by enumerating all ``2^n`` dropped sets (small ``n`` only).

    Minimises ``W(K) = sum_{i in K} G_i sqrt(c_i)`` subject to
    ``(1/n) sum_{i not in K} G_i <= gamma``; writes the optimal ``keep`` (n,) bool and
    returns the optimal dropped value ``sum_{i not in K} G_i sqrt(c_i)``.
    """
    n = G.shape[0]
    value = np.empty(n)
    for i in range(n):
        value[i] = G[i] * math.sqrt(c[i])
    best = -1.0
    best_mask = 0
    budget = budget_nb(gamma, n)
    for mask in range(1 << n):
        w = 0.0
        v = 0.0
        for i in range(n):
            if (mask >> i) & 1:
                w += G[i]
                v += value[i]
        if w <= budget and v > best:
            best = v
            best_mask = mask
    for i in range(n):
        keep[i] = not ((best_mask >> i) & 1)
    return best
