"""Sampling distributions, S/C/J and unbiasedness of importance-weighted gradients."""
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsim.costaware import (cost_aware_batch, cost_factor, expected_cost,
                               optimal_cost_factor, ratio_table, sampling_distribution,
                               second_moment)
from fastsim.costaware.sgd import ProblemConfig, make_problem
from fastsim.errors import ConfigError
from fastsim.kernels import costaware as nbc
from fastsim.kernels import costaware_sgd as nbs
from fastsim.kernels.rng import uniform_nb

positive = st.floats(0.01, 100.0, allow_nan=False, allow_infinity=False)


@st.composite
def instances(draw):
    n = draw(st.integers(2, 12))
    G = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    c = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    w = np.array(draw(st.lists(st.floats(1e-3, 1.0), min_size=n, max_size=n)))
    return G, c, w / w.sum()


@settings(max_examples=200, deadline=None)
@given(instances())
def test_optimal_attains_closed_form_and_beats_random(inst):
    G, c, p_random = inst
    p_star = sampling_distribution(G, c, "optimal")
    j_star = cost_factor(G, c, p_star)
    closed = optimal_cost_factor(G, c)
    assert j_star == pytest.approx(closed, rel=1e-10)
    assert closed == pytest.approx(np.mean(G * np.sqrt(c)) ** 2, rel=1e-12)
    assert cost_factor(G, c, p_random) >= closed * (1 - 1e-10)
    for s in ("uniform", "gradient_norm", "cost_only"):
        for lam in (0.0, 0.3):
            assert cost_factor(G, c, sampling_distribution(G, c, s, lam)) >= closed * (1 - 1e-10)


def test_golden_two_samples():
    # G = (1, 1), c = (1, 4): p* = (2/3, 1/3), J* = ((1 + 2) / 2)^2 = 2.25; uniform 1 * 2.5
    p = sampling_distribution([1.0, 1.0], [1.0, 4.0], "optimal")
    np.testing.assert_allclose(p, [2 / 3, 1 / 3], rtol=1e-12)
    assert second_moment([1.0, 1.0], p) == pytest.approx(0.25 * (1.5 + 3.0))
    assert expected_cost([1.0, 4.0], p) == pytest.approx(2.0)
    assert cost_factor([1.0, 1.0], [1.0, 4.0], p) == pytest.approx(2.25)
    assert cost_factor([1.0, 1.0], [1.0, 4.0], [0.5, 0.5]) == pytest.approx(2.5)


def test_strategy_definitions_and_mixing():
    rng = np.random.default_rng(3)
    G, c = rng.lognormal(size=20), rng.lognormal(size=20)
    cases = {"uniform": np.ones(20), "gradient_norm": G, "cost_only": 1 / np.sqrt(c),
             "optimal": G / np.sqrt(c)}
    for name, score in cases.items():
        q = score / score.sum()
        np.testing.assert_allclose(sampling_distribution(G, c, name), q, rtol=1e-12)
        np.testing.assert_allclose(sampling_distribution(G, c, name, 0.25), 0.75 * q + 0.25 / 20,
                                   rtol=1e-12)
    uni = ratio_table(G, c, ["uniform"])["J_cost_units"].item()
    assert uni == pytest.approx(np.mean(G ** 2) * np.mean(c), rel=1e-12)


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_importance_weighted_gradient_is_unbiased_exactly(kind):
    pr = make_problem(ProblemConfig(kind=kind, n=12, d=3, cost_sigma=1.0, reg=0.1))
    rng = np.random.default_rng(0)
    g = np.empty(3)
    for strategy in ("uniform", "gradient_norm", "cost_only", "optimal"):
        p = sampling_distribution(pr.G, pr.c, strategy, 0.0)
        for _ in range(5):
            x = rng.normal(size=3)
            x *= pr.radius * rng.uniform() / np.linalg.norm(x)
            full = np.zeros(3)
            expect = np.zeros(3)
            second = 0.0
            for i in range(12):
                nbs.sample_gradient_nb(pr.code, pr.A, pr.b, 0.1, i, x, g)
                full += g / 12
                expect += p[i] * g / (12 * p[i])
                second += p[i] * np.sum((g / (12 * p[i])) ** 2)
            np.testing.assert_allclose(expect, full, rtol=1e-12, atol=1e-14)
            # the second moment is bounded by S(p) inside the projection ball
            assert second <= second_moment(pr.G, p) * (1 + 1e-12)


def test_draws_follow_p_and_skip_zero_mass():
    p = np.array([0.5, 0.0, 0.2, 0.3, 0.0])
    cdf = np.cumsum(p)
    draws = np.array([nbc.draw_index_nb(cdf, uniform_nb(5, 0, 0, t, 110)) for t in range(20000)])
    freq = np.bincount(draws, minlength=5) / draws.size
    assert freq[1] == 0 and freq[4] == 0
    np.testing.assert_allclose(freq, p, atol=0.015)


@pytest.mark.parametrize("call, field", [
    (lambda: sampling_distribution([1.0, 1.0], [1.0, -2.0]), "costs[1]"),
    (lambda: sampling_distribution([1.0, 1.0], [1.0, 0.0]), "costs[1]"),
    (lambda: sampling_distribution([1.0, -1.0], [1.0, 1.0]), "gradient_bounds[1]"),
    (lambda: sampling_distribution([0.0, 0.0], [1.0, 1.0]), "all zero"),
    (lambda: sampling_distribution([1.0], [1.0, 1.0]), "allowed: one per cost"),
    (lambda: sampling_distribution([1.0, 1.0], [1.0, 1.0], lam=1.5), "lam=1.5"),
    (lambda: sampling_distribution([1.0, 1.0], [1.0, 1.0], lam=-0.1), "lam=-0.1"),
    (lambda: sampling_distribution([1.0, 1.0], [1.0, 1.0], "best"), "strategy='best'"),
    (lambda: ProblemConfig(cost_corr=2.0), "cost_corr=2.0"),
    (lambda: ProblemConfig(kind="svm"), "kind='svm'"),
    (lambda: sampling_distribution(["a", 1.0], [1.0, 1.0]), "gradient_bounds is invalid"),
    (lambda: sampling_distribution([1.0, 1.0], [None, 1.0]), "costs is invalid"),
    (lambda: sampling_distribution([1.0, 1j], [1.0, 1.0]), "gradient_bounds is invalid"),
    (lambda: second_moment([1.0, 1.0], ["0.5", "0.5"]), "p is invalid"),
    # bools were read as 1 and 0 without a word
    (lambda: sampling_distribution([True, False], [1.0, 1.0]), r"gradient_bounds is invalid "
     r"\(True or False among them\); allowed: numbers"),
    (lambda: sampling_distribution([1.0, 1.0], [True, 2.0]), r"costs is invalid \(True or "
     r"False among them\); allowed: numbers"),
    (lambda: sampling_distribution(np.array([True, True]), [1.0, 1.0]), "gradient_bounds"),
    (lambda: second_moment([1.0, 1.0], [False, True]), r"p is invalid \(True or False "
     r"among them\); allowed: numbers"),
    # np.asarray drops a mask: the number under a masked entry was read without a word
    (lambda: sampling_distribution(np.ma.masked_array([1.0, 2.0], mask=[True, False]),
                                   [1.0, 1.0]), r"gradient_bounds is invalid \(masked entries, "
     r"the first at flat index 0\)"),
    (lambda: cost_aware_batch(np.ma.masked_array([[1.0, 0.0], [0.0, 1.0]],
                                                 mask=[[False, False], [False, True]]),
                              [[1.0, 1.0], [1.0, 1.0]], 2), r"rewards is invalid \(masked "
     r"entries, the first at flat index 3\)"),
    # a list of masked rows: np.asarray dropped their masks too
    (lambda: cost_aware_batch([np.ma.masked_array([1.0, 2.0], mask=[False, True]), [0.0, 1.0]],
                              [[1.0, 1.0], [1.0, 1.0]], 2), r"rewards is invalid \(masked "
     r"entries, the first at flat index 1\)"),
])
def test_bad_inputs_raise_clear_errors(call, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")):
        call()


@pytest.mark.parametrize("strategy", ["gradient_norm", "optimal"])
@pytest.mark.parametrize("G", [1e308, 5e-324])
def test_scores_that_overflow_or_underflow_still_normalise(strategy, G):
    """A sum of scores that overflowed gave p = 0 everywhere ([1e308] * 3), one that
    underflowed lost the cost ([5e-324] * 3 with c = 1, 1, 4 gave .5, .5, 0): finite inputs
    that pass the checks, probabilities that are not a distribution."""
    c = [1.0, 1.0, 4.0]
    want = sampling_distribution([1.0] * 3, c, strategy, 0.1)
    got = sampling_distribution([G] * 3, c, strategy, 0.1)
    np.testing.assert_allclose(got, want, rtol=1e-15)
    np.testing.assert_allclose(sampling_distribution([G, G, 0.0], [5e-324, 1.0, 4.0],
                                                     strategy).sum(), 1.0)


@pytest.mark.parametrize("scale_G, scale_c", [(1e200, 1.0), (1e-200, 1.0), (1.0, 1e-320),
                                              (1e160, 1e-300)])
def test_ratio_table_ratios_survive_an_overflow_or_underflow(scale_G, scale_c):
    """J / J(p*) does not change with the scale of G or c; G = 1e200 gave inf / inf = NaN
    for every strategy, and G = 1e-200 a ZeroDivisionError (J(p*) underflowed to 0)."""
    G, c = np.array([1.0, 2.0, 0.5]), np.array([1.0, 4.0, 2.0])
    want = ratio_table(G, c, lams=(0.0, 0.5))["j_over_jopt"].to_numpy()
    got = ratio_table(G * scale_G, c * scale_c, lams=(0.0, 0.5))["j_over_jopt"].to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_ratio_table_refuses_scales_no_float_holds():
    with pytest.raises(ConfigError, match="J\\(p\\*\\) underflows"):
        ratio_table([1.0, 5e-324], [5e-324, 1.0])


@pytest.mark.parametrize("kw, said", [({"lams": 0.5}, "lams=0.5"), ({"lams": ()}, "lams=()"),
                                      ({"strategies": "optimal"}, "strategies='optimal'"),
                                      ({"strategies": []}, "strategies=[]")])
def test_ratio_table_refuses_a_lone_value_or_none_in_place_of_a_list(kw, said):
    """A single lam was a TypeError traceback, a strategy's name was read letter by letter
    ('o' is not a strategy) and an empty list gave an empty table without a word."""
    with pytest.raises(ConfigError, match=re.escape(said) + " is invalid; allowed: a non-empty list"):
        ratio_table([1.0, 2.0], [1.0, 4.0], **kw)


def test_lists_given_as_numpy_arrays_of_another_dimension_are_refused_in_one_line():
    """A 0-d array (np.array(0.5), what np.float64 arithmetic on arrays can leave) was a
    TypeError traceback, 'len() of unsized object', in ratio_table and subset_report; a 2-D
    one was read row by row, refusing a row as if it were one lam.  A 1-D array is a list."""
    from fastsim.costaware import ProblemConfig, make_problem, subset_report

    for kw, said in [({"lams": np.array(0.5)}, "lams=array(0.5)"),
                     ({"strategies": np.array("uniform")}, "strategies=array('uniform'"),
                     ({"lams": np.array([[0.0, 0.5]])}, "lams=array([[0. , 0.5]])")]:
        with pytest.raises(ConfigError, match=re.escape(said) + ".* is invalid; allowed: a "
                           "non-empty list"):
            ratio_table([1.0, 2.0], [1.0, 4.0], **kw)
    assert ratio_table([1.0, 2.0], [1.0, 4.0], lams=np.array([0.0, 0.5])).height == 8
    problem = make_problem(ProblemConfig(n=16, d=2))
    for kw in ({"gammas": np.array(0.1)}, {"gammas": [0.1], "methods": np.array("greedy")}):
        with pytest.raises(ConfigError, match=r"=array\(.* is invalid; allowed: a non-empty"):
            subset_report(problem, **kw)


def test_every_cost_aware_name_refuses_a_misspelt_keyword_in_one_line():
    """GRPOConfig(steps=20) (its field is n_steps), ProblemConfig(nn=32) and the functions'
    keyword slips were Python's TypeError ('__init__() got an unexpected keyword
    argument'), with no hint; as fastsim's own names do, each says the nearest one and all
    it takes."""
    import fastsim.costaware as ca

    for name in ca.__all__:
        obj = getattr(ca, name)
        if not callable(obj) or name == "Strategy":  # an IntEnum: Strategy(3), no keywords
            continue
        with pytest.raises(ConfigError, match=r"keyword 'lamda' is unknown.*; allowed: "):
            obj(lamda=0.1)
    with pytest.raises(ConfigError, match=r"^GRPOConfig\(\) keyword 'steps' is unknown "
                                          r"\(did you mean n_steps\?\); allowed: seeds, seed, "):
        ca.GRPOConfig(steps=20)


def test_probabilities_sum_to_one_as_a_workload_mix_does():
    """p summing to 1 - 5e-6 was taken (numpy's isclose adds a relative 1e-5 to its atol),
    a mix 1e-9 off refused: one rule now, fastsim.values.sums_to_one."""
    from fastsim.config import WorkloadConfig

    off = [0.5, 0.5 - 5e-6]
    with pytest.raises(ConfigError, match=r"^p is invalid \(its sum is .*\); allowed: probabilities "
                       r"finite and >= 0, summing to 1 within 1e-09 \(4\.8e-07 for float32 "
                       r"values\)$"):
        second_moment([1.0, 1.0], off)
    with pytest.raises(ConfigError, match=r"^mix=.* summing to 1 within 1e-09"):
        WorkloadConfig(mix=(0.5, 0.0, 0.5 - 5e-6))
    # probabilities normalised in float32, and float64 ones cast to float32, are taken,
    # as float32 fractions of a mix are
    w = np.random.default_rng(1).random(1000).astype(np.float32) ** 3
    for p in (w / w.sum(), (w.astype(np.float64) / w.sum(dtype=np.float64)).astype(np.float32)):
        assert abs(float(p.sum(dtype=np.float64)) - 1) > 1e-9
        assert second_moment(np.ones(1000), p) > 0
    mix = WorkloadConfig(mix=tuple(np.float32([0.2, 0.3, 0.5]))).mix_fractions
    assert mix[0] == np.float32(0.2)


def test_fractions_whose_sum_overflows_are_refused_not_a_traceback(capsys):
    """Finite fractions or probabilities whose sum is beyond a float (1e308 twice) were an
    OverflowError traceback from math.fsum, in `fastsim run --mix`, a sweep file's mix and
    second_moment's p; they are a sum that is not 1, refused in one line."""
    from conftest import one_line

    from fastsim.config import WorkloadConfig
    from fastsim.values import exact_sum

    with pytest.raises(ConfigError, match=r"^p is invalid \(its sum is inf\); allowed: "):
        second_moment([1.0, 1.0], [1e308, 1e308])
    with pytest.raises(ConfigError, match=r"^mix=\(1e\+308, 1e\+308, 0\.0\) is invalid; "):
        WorkloadConfig(mix=(1e308, 1e308, 0.0))
    one_line(capsys, ["run", "--mix", "1e308,1e308,0"], "--mix=1e308,1e308,0 is invalid; "
             "allowed: three non-negative fractions")
    # the sum itself, where a partial sum overflows and the whole does not
    assert exact_sum([1e308, 1e308, -1e308]) == 1e308
    assert exact_sum(np.array([1.7e308] * 7 + [-1.7e308] * 7 + [1.0])) == 1.0
    assert exact_sum([-1e308, -1e308]) == -np.inf
    # no sum at all (inf beside -inf, a NaN): the refusal's echo raised fsum's ValueError
    assert np.isnan(exact_sum([np.inf, -np.inf])) and np.isnan(exact_sum([np.nan, 1.0]))
    with pytest.raises(ConfigError, match=r"^p is invalid \(its sum is nan\); allowed: "):
        second_moment([1.0, 1.0], [np.inf, -np.inf])


def test_ratio_table_refuses_a_row_given_twice_and_reads_minus_zero_as_zero():
    """ratio_table(lams=[0.0, -0.0]) gave every strategy twice, once headed lam -0.0, and
    strategies=["optimal", "optimal"] two identical rows; `costaware ratios --lams` refuses
    a value given twice (each is a row of the table), and SGDConfig a strategy named twice."""
    from fastsim.costaware.sampling import ratio_table
    from fastsim.errors import ConfigError

    G, c = [1.0, 2.0, 3.0], [1.0, 1.0, 4.0]
    with pytest.raises(ConfigError, match=r"^lams=\[0.0, -0.0\] gives 0.0 twice; allowed: "):
        ratio_table(G, c, lams=[0.0, -0.0])
    with pytest.raises(ConfigError, match=r"^strategies=\['optimal', 'optimal'\] gives 'optimal' "
                       "twice; allowed: "):
        ratio_table(G, c, strategies=["optimal", "optimal"])
    lams = ratio_table(G, c, strategies=["optimal"], lams=[-0.0, 0.5])["lam"].to_list()
    assert lams == [0.0, 0.5] and str(lams[0]) == "0.0"
