"""Cost-aware learning (MODEL.md section 10; Mohri et al., "Cost-Aware Learning", arXiv 2604.28020).

When per-sample gradient costs ``c_i`` differ, sample ``i`` with ``p_i ∝ G_i / sqrt(c_i)``.
This package is the API over the numba kernels in ``kernels/costaware*.py`` and
``kernels/grpo.py``:

* ``sampling``: distributions (uniform, gradient_norm, cost_only, optimal, mixed with
  uniform by ``lam``), ``S(p)``, ``C(p)``, ``J(p)`` and the closed-form optimum;
* ``sgd``: finite-sum problems with known optimum and the cost to reach ``eps`` of
  importance-weighted SGD, many replications in parallel;
* ``subset``: min-cost knapsack under a bias budget (greedy and exact);
* ``grpo``: the Cost-Aware GRPO mini-batch sampler, for your own GRPO loop;
* ``experiment``: a small real GRPO experiment, uniform vs cost-aware mini-batches;
* ``sweep``: TOML sweeps writing Parquet for ``figures/costaware_*.py``.
"""
from fastsim.lazy import lazy_names

# The names above, by module; they load on first use: ``fastsim costaware --help``
# imports this package, and its modules bring numba and polars.
_EXPORTS = {
    **dict.fromkeys(["GRPOConfig", "ablation_table", "curve_summary", "run_grpo",
                     "summarize_grpo", "tokens_to_uniform_peak"], "experiment"),
    **dict.fromkeys(["GRPOBatch", "cost_aware_batch", "cost_aware_draw", "cost_aware_probs",
                     "group_advantages"], "grpo"),
    **dict.fromkeys(["STRATEGIES", "Strategy", "cost_factor", "expected_cost",
                     "optimal_cost_factor", "ratio_table", "sampling_distribution",
                     "second_moment"], "sampling"),
    **dict.fromkeys(["Problem", "ProblemConfig", "SGDConfig", "make_problem", "run_sgd",
                     "summarize_sgd"], "sgd"),
    **dict.fromkeys(["SubsetSelection", "select_subset", "subset_distribution",
                     "subset_report"], "subset"),
    **dict.fromkeys(["load_costaware_sweep", "run_costaware_sweep"], "sweep"),
}

__all__ = [
    "GRPOBatch", "GRPOConfig", "ablation_table", "Problem", "ProblemConfig", "SGDConfig", "STRATEGIES", "Strategy",
    "SubsetSelection", "cost_aware_batch", "cost_aware_draw", "cost_aware_probs", "cost_factor", "curve_summary",
    "expected_cost", "group_advantages", "load_costaware_sweep", "make_problem", "optimal_cost_factor",
    "ratio_table", "run_grpo", "run_sgd", "run_costaware_sweep", "sampling_distribution", "second_moment",
    "select_subset", "subset_distribution", "subset_report", "summarize_grpo", "summarize_sgd",
    "tokens_to_uniform_peak",
]


__getattr__, __dir__ = lazy_names(
    __name__, {name: f"{__name__}.{module}" for name, module in _EXPORTS.items()}, globals())
