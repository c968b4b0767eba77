"""Bias-budgeted subset selection: greedy vs exact within the knapsack bound."""
import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsim.costaware import make_problem, select_subset, subset_distribution, subset_report
from fastsim.costaware.sgd import ProblemConfig
from fastsim.errors import ConfigError
from fastsim.kernels.costaware import budget_nb

positive = st.floats(0.01, 50.0, allow_nan=False)


@st.composite
def knapsacks(draw, max_n=10):
    n = draw(st.integers(1, max_n))
    G = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    c = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    frac = draw(st.floats(0.0, 1.0))
    return G, c, frac * G.mean()


@settings(max_examples=200, deadline=None)
@given(knapsacks())
def test_greedy_respects_gamma_and_is_within_bound_of_exact(inst):
    G, c, gamma = inst
    g = select_subset(G, c, gamma, "greedy")
    e = select_subset(G, c, gamma, "exact")
    n = G.size
    assert g.bias_bound <= gamma * (1 + 1e-12) + 1e-15
    assert e.bias_bound <= gamma * (1 + 1e-9) + 1e-15
    assert g.bias_bound == pytest.approx(G[~g.keep].sum() / n)
    # exact is optimal, greedy is within the value of its critical sample
    assert e.w_kept <= g.w_kept + 1e-9 * g.w_all
    assert g.w_kept - e.w_kept <= g.critical_value + 1e-9 * g.w_all
    # greedy keeps a cheapest-first prefix
    if (~g.keep).any() and g.keep.any():
        assert c[g.keep].max() <= c[~g.keep].min()


@settings(max_examples=60, deadline=None)
@given(knapsacks(max_n=7))
def test_exact_matches_brute_force(inst):
    G, c, gamma = inst
    n = G.size
    best = np.inf
    for dropped in itertools.product([0, 1], repeat=n):
        d = np.array(dropped, bool)
        if G[d].sum() <= budget_nb(gamma, n):  # the solvers' shared definition of "fits"
            best = min(best, float((G[~d] * np.sqrt(c[~d])).sum()))
    assert select_subset(G, c, gamma, "exact").w_kept == pytest.approx(best, rel=1e-9, abs=1e-12)


def test_golden_subset():
    # drop 9 (bias 1/3 <= 0.4), then 2 would make 2/3: stop.  W = 1 + sqrt 2 vs 1 + sqrt2 + 3
    s = select_subset([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], 0.4)
    assert s.keep.tolist() == [True, True, False]
    assert s.predicted_cost_saving == pytest.approx(1 - ((1 + 2 ** 0.5) / (4 + 2 ** 0.5)) ** 2)
    assert s.critical_value == pytest.approx(2 ** 0.5)
    p = subset_distribution([1.0, 1.0, 1.0], [1.0, 2.0, 9.0], s.keep)
    assert p[2] == 0.0 and p.sum() == pytest.approx(1.0)


def test_report_bias_paid_grows_from_zero():
    pr = make_problem(ProblemConfig(n=64, d=4, cost_sigma=1.5))
    rep = subset_report(pr, [0.0, 0.05, 0.2])
    assert rep["n_kept"].to_list()[0] == 64
    assert rep["excess_loss"][0] == pytest.approx(0.0, abs=1e-12)
    assert rep["predicted_cost_saving"][0] == pytest.approx(0.0, abs=1e-12)
    assert rep["predicted_cost_saving"][2] > rep["predicted_cost_saving"][1] > 0
    assert rep["excess_loss"][2] > 0


def test_bad_subset_inputs():
    with pytest.raises(ConfigError, match="gamma=-1"):
        select_subset([1.0], [1.0], -1)
    with pytest.raises(ConfigError, match=r"method=.exact. is invalid with n=30 samples; "
                                          r"allowed: at most 22 samples"):
        select_subset(np.ones(30), np.ones(30), 0.1, "exact")
    with pytest.raises(ConfigError, match="method='dp'"):
        select_subset([1.0], [1.0], 0.1, "dp")
    with pytest.raises(ConfigError, match=r"costs\[0\]"):
        select_subset([1.0], [-1.0], 0.1)
    # W(K) / W(all) was inf / inf: a NaN predicted saving, and an exact search among infinities
    # or W underflowed to 0: x / 0, a ZeroDivisionError traceback
    for method in ("greedy", "exact"):
        for G, c, gamma in (([1e308, 1e308, 1.0], [1.0, 1.0, 1.0], 1e307),
                            ([1e-320, 2e-320, 3e-320], [1e-10, 2e-10, 3e-10], 0.0)):
            with pytest.raises(ConfigError, match=r"W = sum G_i sqrt\(c_i\) is beyond a "):
                select_subset(G, c, gamma, method).predicted_cost_saving


@pytest.mark.parametrize("keep", [["False", "True"], [0.5, 0.0], [1, 0]])
def test_subset_distribution_refuses_a_mask_that_is_not_bool(keep):
    """Cast to bool, the text "False" kept its sample (p = 0.5, 0.5), as 0.5 did."""
    with pytest.raises(ConfigError, match=r"keep is invalid \([^)]+ values\); allowed: a bool mask"):
        subset_distribution([1.0, 1.0], [1.0, 1.0], keep)


@pytest.mark.parametrize("fracs", [(0.02, 0.05), (0.0123456789,)])
def test_subset_experiment_reports_the_simulated_ratio_of_every_budget(fracs):
    # the subsets' simulated columns were all null: summarize_sgd dropped every strategy
    # given as a distribution, and a frac printed with 6 digits matched no report row
    from fastsim.costaware.sgd import SGDConfig
    from fastsim.costaware.sweep import subset_experiment

    report, _ = subset_experiment(ProblemConfig(n=64), SGDConfig(replications=4, eps=0.1),
                                  fracs)
    assert report["gamma_frac"].to_list() == list(fracs)
    assert report["reached_frac"].null_count() == 0
    assert report["predicted_ratio"].null_count() == 0


@pytest.mark.parametrize("G, c, want", [
    ([1e308, 1e308, 3.0], [1.0, 1.0, 1.0], [0.5, 0.5, 0.0]),
    ([5e-324, 5e-324, 3.0], [1.0, 4.0, 1.0], [2 / 3, 1 / 3, 0.0]),
    ([1e300, 1.0, 3.0], [1e-300, 1.0, 1.0], [1.0, 0.0, 0.0]),
])
def test_subset_distribution_whose_scores_overflow_or_underflow_is_a_distribution(G, c, want):
    """Kept scores summing to inf gave p = 0 everywhere, ones summing to a subnormal lost
    the costs (2/3, 1/3 read 1, 0): finite inputs that pass the checks."""
    keep = np.array([True, True, False])
    np.testing.assert_allclose(subset_distribution(G, c, keep), want, rtol=1e-12, atol=1e-300)
    mixed = subset_distribution(G, c, keep, lam=0.5)
    np.testing.assert_allclose(mixed, 0.5 * np.array(want) + 0.25 * keep, rtol=1e-12)


@pytest.mark.parametrize("kw, said", [({"gammas": 0.1}, "gammas=0.1"), ({"gammas": []}, "gammas=[]"),
                                      ({"gammas": [0.1], "methods": "exact"}, "methods='exact'")])
def test_subset_report_refuses_a_lone_value_or_none_in_place_of_a_list(kw, said):
    pr = make_problem(ProblemConfig(n=8, d=2))
    with pytest.raises(ConfigError, match=re.escape(said) + " is invalid; allowed: a non-empty list"):
        subset_report(pr, **kw)


def test_greedy_vs_exact_gives_each_share_and_the_mean_gap_an_interval_over_instances():
    # the check printed 'greedy optimal in 15.5%, mean gap 0.0599' of 200 instances with
    # no interval; the shares get exact binomial ones, the mean gap a t interval
    from fastsim.costaware.subset import greedy_vs_exact
    from fastsim.stats import clopper_pearson

    r = greedy_vs_exact(40, 8, seed=3)
    opt = r["greedy_optimal"]
    assert opt.n == 40 and (opt.lo, opt.hi) == clopper_pearson(round(opt.mean * 40), 40)
    gap = r["mean_gap"]
    assert gap.n == 40 and 0.0 <= gap.lo < gap.mean < gap.hi
    assert r["violations"].mean == 0.0 and r["violations"].hi == clopper_pearson(0, 40)[1]
    assert r["max_gap"].mean <= r["max_gap"].hi  # within the knapsack bound


def test_subset_report_refuses_a_row_given_twice_and_reads_minus_zero_as_zero():
    """subset_report(problem, [-0.0, 0.0]) gave the same budget twice, once headed -0.0,
    and methods=["greedy", "greedy"] two identical rows, without a word; `costaware subset
    --gammas` and a sweep's gamma_fracs refuse a value given twice."""
    from fastsim.costaware import ProblemConfig, make_problem, subset_report
    from fastsim.errors import ConfigError

    problem = make_problem(ProblemConfig(n=16, d=2))
    with pytest.raises(ConfigError, match=r"^gammas=\[-0.0, 0.0\] gives 0.0 twice; allowed: "):
        subset_report(problem, [-0.0, 0.0])
    with pytest.raises(ConfigError, match=r"^methods=\['greedy', 'greedy'\] gives 'greedy' "
                       "twice; allowed: "):
        subset_report(problem, [0.1], methods=["greedy", "greedy"])
    fracs = subset_report(problem, [-0.0, 0.1])["gamma_frac"].to_list()
    assert fracs == [0.0, 0.1] and str(fracs[0]) == "0.0"


@pytest.mark.parametrize("method", ["greedy", "exact"])
def test_a_budget_of_minus_zero_is_the_budget_0(method):
    """select_subset(gamma=-0.0) kept -0.0 as its gamma (repr 'gamma=-0.0'), where every
    other entry point reads -0.0 as 0.0 (a config's fields, --gammas, subset_report)."""
    import math

    s = select_subset([1.0, 2.0], [1.0, 4.0], gamma=-0.0, method=method)
    assert math.copysign(1.0, s.gamma) == 1.0 and "gamma=0.0," in repr(s), repr(s)
    zero = select_subset([1.0, 2.0], [1.0, 4.0], gamma=0.0, method=method)
    assert s.keep.all() and zero.keep.all() and repr(s) == repr(zero)


def test_subset_report_shows_the_newton_steps_of_its_solves(monkeypatch, capsys):
    """`costaware subset` at a large d showed the instance's solve on a bar, then solved
    once per budget in silence (each solve as long as the instance's); the optima are
    optimum_nb's to the last bit."""
    import fastsim.costaware.sgd as sgd
    from fastsim.kernels import costaware_sgd as nbs

    problem = make_problem(ProblemConfig(kind="logistic", n=40, d=6))
    quiet = subset_report(problem, [0.05, 0.2], progress=True)  # small: no bar
    assert "Newton" not in capsys.readouterr().err
    monkeypatch.setattr(sgd, "BAR_FROM_WORK", 0)
    shown = subset_report(problem, [0.05, 0.2], progress=True)
    assert "subset optima (2 solves, n=40, d=6): Newton steps" in capsys.readouterr().err
    assert shown.equals(quiet)
    sel = select_subset(problem.G, problem.c, 0.2 * float(problem.G.mean()))
    x_k = nbs.optimum_nb(problem.code, problem.A, problem.b, problem.config.reg,
                         sel.keep.astype(np.float64))
    excess = float(nbs.full_loss_nb(problem.code, problem.A, problem.b, problem.config.reg,
                                    x_k)) - problem.f_star
    assert shown["excess_loss"][1] == max(excess, 0.0)
