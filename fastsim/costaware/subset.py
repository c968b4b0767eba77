"""Subset selection under a bias budget (arXiv 2604.28020; MODEL.md section 10).

Training on a kept subset ``K`` with ``p ∝ G / sqrt(c)`` on ``K`` (weights ``1/(n p_i)``)
estimates ``(1/n) sum_{i in K} grad f_i`` instead of ``grad f``: the bias is at most
``(1/n) sum_{i not in K} G_i`` and the cost factor is ``J(K) = ((1/n) sum_{i in K}
G_i sqrt(c_i))^2``.  Choosing ``K`` is a min-cost knapsack::

    minimise  W(K) = sum_{i in K} G_i sqrt(c_i)   s.t.  (1/n) sum_{i not in K} G_i <= Gamma

Greedy keeps the cheapest samples until the bias bound holds (equivalently drops the
most expensive first, which is density order ``sqrt(c_i)``).  Its guarantee (LP
relaxation of the knapsack): ``W_greedy - W_exact <= G_k sqrt(c_k)`` for the critical
sample ``k``, the first one that no longer fit the budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from fastsim.costaware.configs import EXACT_MAX_N
from fastsim.costaware.sampling import (check_choices, check_costs, check_gradient_bounds,
                                        check_distinct, check_lam, check_nonnegative)
from fastsim.errors import ConfigError, counted, known_keywords
from fastsim.stats import Estimate, clopper_pearson, mean_ci
from fastsim.kernels import costaware as nb
from fastsim.kernels import costaware_sgd as nbs



@dataclass(frozen=True)
class SubsetSelection:
    """A kept subset and what it costs.

    ``keep`` (n,) bool; ``bias_bound = (1/n) sum_dropped G``; ``w_kept``/``w_all`` are
    ``W(K)``/``W(all)``; ``predicted_cost_saving = 1 - J(K)/J(all) = 1 - (w_kept/w_all)^2``;
    ``critical_value = G_k sqrt(c_k)`` of the greedy's critical sample (0 if none/exact).
    """

    method: str
    gamma: float
    keep: np.ndarray = field(repr=False)
    bias_bound: float
    w_kept: float
    w_all: float
    critical_value: float

    @property
    def n_kept(self) -> int:
        return int(self.keep.sum())

    @property
    def predicted_cost_saving(self) -> float:
        return 1.0 - (self.w_kept / self.w_all) ** 2


def check_gamma(gamma, field: str = "gamma") -> float:
    return check_nonnegative(gamma, field, "a finite bias budget >= 0")


#: the largest bias budget a fraction of ``mean(G)`` may be.  Below 1 by more than the
#: budget's slack (``kernels.costaware.BUDGET_RTOL``, 1e-12) and the rounding of
#: ``mean(G) * n`` against the greedy's running sum of ``G`` (at most n ulps, 1e-10 at a
#: million samples): 0.999999999999 dropped every sample as 1 does.
MAX_GAMMA_FRAC = 1.0 - 1e-9
GAMMA_FRAC_ALLOWED = (f"a fraction of mean(G) from 0 to {MAX_GAMMA_FRAC!r} (1 allows dropping "
                      "every sample, leaving none to run SGD on, and so does one within 1e-9 "
                      "of 1, by the budget's slack)")


def check_gamma_frac(frac, field: str = "gamma_frac") -> float:
    """A bias budget as a fraction of ``mean(G)``: below 1, which allows dropping every
    sample and leaves none to run SGD on (a larger one overflowed to an infinite budget),
    and at most ``MAX_GAMMA_FRAC``."""
    x = check_nonnegative(frac, field, GAMMA_FRAC_ALLOWED)
    if x > MAX_GAMMA_FRAC:
        raise ConfigError(f"{field}={frac!r} is invalid; allowed: {GAMMA_FRAC_ALLOWED}")
    return x


@known_keywords("fastsim.costaware.select_subset()")
def select_subset(G, c, gamma: float, method: str = "greedy") -> SubsetSelection:
    """Min-cost subset whose dropped samples have bias bound ``(1/n) sum G <= gamma``.

    Parameters
    ----------
    G, c : array_like (n,)
        Gradient-norm bounds (>= 0) and costs (> 0).
    gamma : float
        Bias budget, in gradient-norm units (``mean(G)`` allows dropping everything).
    method : "greedy" or "exact" (``n <= 22``)

    Examples
    --------
    >>> s = select_subset([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], gamma=0.4)
    >>> s.keep.tolist(), round(s.bias_bound, 3)
    ([True, True, False], 0.333)
    """
    c = check_costs(c)
    G = check_gradient_bounds(G, c.size)
    gamma = check_gamma(gamma)
    with np.errstate(over="ignore", under="ignore"):  # refused below, not warned of
        value = G * np.sqrt(c)
        w_all = float(value.sum())
    if not (math.isfinite(w_all) and w_all > 0.0):
        # W(K) / W(all) was inf / inf (the predicted saving NaN, and the exact search
        # compared infinite values: any set holding one looked as good), or x / 0 when W
        # underflowed (a ZeroDivisionError traceback)
        raise ConfigError("gradient_bounds and costs: W = sum G_i sqrt(c_i) is beyond a "
                          "float's range; allowed: a finite W above 0 (scale G and gamma "
                          "together)")
    keep = np.empty(c.size, np.bool_)
    critical = 0.0
    if method == "greedy":
        k = nb.subset_greedy_nb(G, c, gamma, keep)
        if k >= 0:
            critical = float(G[k] * np.sqrt(c[k]))
    elif method == "exact":
        if c.size > EXACT_MAX_N:
            raise ConfigError(f"method='exact' is invalid with n={c.size} samples; allowed: "
                              f"at most {EXACT_MAX_N} samples (it enumerates the 2^n subsets), "
                              "or method='greedy'")
        nb.subset_exact_nb(G, c, gamma, keep)
    else:
        raise ConfigError(f"method={method!r} is invalid; allowed: greedy, exact")
    return SubsetSelection(method, gamma, keep, float(G[~keep].sum() / c.size),
                           float(value[keep].sum()), w_all, critical)


@known_keywords("fastsim.costaware.subset_distribution()")
def subset_distribution(G, c, keep, lam: float = 0.0) -> np.ndarray:
    """``p ∝ G / sqrt(c)`` on the kept samples, mixed with uniform over the kept ones;
    zero on dropped samples.

    Examples
    --------
    >>> subset_distribution([1.0, 1.0], [1.0, 4.0], np.array([True, False])).tolist()
    [1.0, 0.0]
    """
    c = check_costs(c)
    G = check_gradient_bounds(G, c.size)
    lam = check_lam(lam)
    keep = np.asarray(keep)
    # a cast read any text as True ("False" kept a sample) and indices [0, 2] as a mask
    if keep.dtype != np.bool_:
        raise ConfigError(f"keep is invalid ({keep.dtype} values); allowed: a bool mask "
                          "(True keeps a sample)")
    if keep.shape != c.shape or not keep.any():
        raise ConfigError(f"keep is invalid (shape {keep.shape}, {int(keep.sum())} kept); "
                          f"allowed: a bool mask of the samples' shape {c.shape} with at least "
                          "one kept sample")
    with np.errstate(over="ignore"):  # an overflow is caught below, not warned of
        score = np.where(keep, G / np.sqrt(c), 0.0)
        total = score.sum()
    if not nb.normal_total_nb(total):
        # a sum that overflowed made p = 0 everywhere (G = 1e308, 1e308), one that
        # underflowed lost the costs (G = 5e-324 twice, c = 1, 4 gave 1, 0): the kept
        # samples' optimal distribution from the kernel, which rescales G (and falls back
        # to uniform over them when every kept G is 0)
        p = np.zeros(c.size)
        kept = np.empty(int(keep.sum()))
        nb.sampling_probs_nb(G[keep], c[keep], nb.OPTIMAL, lam, kept)
        p[keep] = kept
        return p
    return (1.0 - lam) * score / total + lam * keep / keep.sum()


@known_keywords("fastsim.costaware.subset_report()")
def subset_report(problem, gammas, methods=("greedy",), progress: bool = False) -> pl.DataFrame:
    """Subset selection on a ``Problem`` for each bias budget.

    ``gammas`` are fractions of ``mean(G)`` (the bound of dropping everything).  Columns:
    kept samples, bias bound, predicted cost saving ``1 - J(K)/J(all)``, the raw cost
    share kept, and the bias actually paid ``excess_loss = f(x*_K) - f*``, where
    ``x*_K`` minimises what SGD on ``K`` converges to, ``(1/n) sum_K f_i``: a Newton solve
    each, as long as ``make_problem``'s, whose steps ``progress`` shows on a bar as it does.
    """
    from fastsim.costaware.sgd import (  # the SGD module, loaded for its problems
        check_problem, newton_bar, newton_steps, optimum)
    from fastsim.values import check_flags

    check_problem(problem)
    given = check_choices(gammas, "gammas", "fractions of mean(G) from 0 to below 1")
    gammas = check_distinct(given, [check_gamma_frac(f, "gammas") for f in given],
                            "gammas", "distinct fractions of mean(G) from 0 to below 1")
    methods = check_choices(methods, "methods", "greedy, exact")
    check_distinct(methods, methods, "methods", "distinct methods from greedy, exact")
    check_flags(progress=progress)
    rows = []
    g_mean = float(problem.G.mean())
    solves = len(gammas) * len(methods)
    n, d = problem.A.shape
    with newton_bar("subset optima", n, d, solves * newton_steps(problem.code), progress,
                    count=f"{counted(solves, 'solve')}, ") as bar:
        for frac in gammas:
            for method in methods:
                sel = select_subset(problem.G, problem.c, frac * g_mean, method)
                weight = sel.keep.astype(np.float64)
                x_k = optimum(problem.code, problem.A, problem.b, problem.config.reg, weight,
                              bar)
                excess = float(nbs.full_loss_nb(problem.code, problem.A, problem.b,
                                                problem.config.reg, x_k)) - problem.f_star
                rows.append({
                    "gamma_frac": float(frac), "method": method, "n_kept": sel.n_kept,
                    "bias_bound": sel.bias_bound,
                    "predicted_cost_saving": sel.predicted_cost_saving,
                    "raw_cost_share_kept": float(problem.c[sel.keep].sum() / problem.c.sum()),
                    "excess_loss": max(excess, 0.0),
                    "excess_loss_rel": max(excess, 0.0) / (problem.f0 - problem.f_star),
                    "greedy_bound_W": sel.critical_value,
                })
    return pl.DataFrame(rows)


def greedy_vs_exact(instances: int, n: int, seed: int = 0) -> dict[str, Estimate]:
    """Greedy against the exact search on ``instances`` random problems of ``n`` samples
    (lognormal ``G`` and ``c``, a bias budget uniform in [0, 0.5] ``mean(G)``), each an
    independent replication: the share where greedy is optimal and where it breaks its
    knapsack bound or the budget (exact binomial intervals), and the mean and largest gap
    ``(W_greedy - W_exact) / W(all)`` (t interval; the largest with the bound there as
    its ``hi``)."""
    rng = np.random.default_rng(seed)
    gaps, bounds, viol = np.empty(instances), np.empty(instances), 0
    for i in range(instances):
        G, c = rng.lognormal(0.0, 1.0, n), rng.lognormal(0.0, 1.0, n)
        gamma = rng.uniform(0.0, 0.5) * G.mean()
        g, e = select_subset(G, c, gamma, "greedy"), select_subset(G, c, gamma, "exact")
        gaps[i] = (g.w_kept - e.w_kept) / e.w_all
        bounds[i] = g.critical_value / e.w_all
        viol += int(g.w_kept - e.w_kept > g.critical_value + 1e-9 or g.bias_bound > gamma + 1e-12)
    optimal = int((gaps < 1e-12).sum())
    worst = int(gaps.argmax())
    return {"greedy_optimal": Estimate(optimal / instances, *clopper_pearson(optimal, instances),
                                       instances),
            "mean_gap": mean_ci(gaps).within(0.0, np.inf),
            "max_gap": Estimate(float(gaps[worst]), np.nan, float(bounds[worst]), instances),
            "violations": Estimate(viol / instances, *clopper_pearson(viol, instances),
                                   instances)}


# Built by hand too: a misspelt keyword is one ConfigError naming the nearest field.
SubsetSelection.__init__ = known_keywords("SubsetSelection()")(SubsetSelection.__init__)
