"""The online detectors: streaming == batch == plain-Python reference, and the rules' edges.

Streaming is each detector's own step kernel fed one score at a time from Python (as the
monitor does), and the dispatcher's step (``detector_step_nb``); batch is the one generic
scan ``detector_trigger_nb`` (the simulator's and replay's); the reference recomputes each
decision from the whole prefix (tests/detectors_reference.py).
"""
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsim.config import PolicyConfig
from fastsim.errors import ConfigError
from fastsim.kernels import detectors_online as D
from fastsim.kernels.detectors import evalstop_trigger_nb
import detectors_reference as R  # tests/ is on sys.path (rootdir-relative test modules)

STEP = {
    "patience": (D.patience_step_nb, lambda n: np.array([np.nan, 0.0])),
    "margin": (D.margin_step_nb, D.margin_init),
    "cusum": (D.cusum_step_nb, D.cusum_init),
    "peak": (D.peak_step_nb, D.peak_init),
    "bocpd": (D.bocpd_step_nb, D.bocpd_init),
}
CODE = {"patience": D.PATIENCE, "margin": D.MARGIN, "cusum": D.CUSUM, "peak": D.PEAK,
        "bocpd": D.BOCPD}


def streaming_trigger(name, scores, params):
    step, init = STEP[name]
    if name == "peak":  # the window sizes the state
        state, params = D.peak_init(len(scores), params[4]), params[:4] + params[5:]
    else:
        state = init(len(scores))
    for e, s in enumerate(scores):
        if step(state, float(s), *params):
            return e + 1
    return 0


def params_of(name, draw):
    f = lambda lo, hi: draw(st.floats(lo, hi, allow_nan=False))  # noqa: E731
    if name == "patience":
        return (float(draw(st.integers(1, 4))), f(0.0, 0.1))
    if name == "margin":
        return (float(draw(st.integers(1, 3))), f(0.0, 3.0), f(0.0, 0.2))
    if name == "cusum":
        return (f(0.0, 1.0), f(0.0, 5.0), f(0.0, 0.2))
    if name == "peak":
        return (f(0.0, 3.0), f(0.0, 0.2), float(draw(st.integers(2, 6))),
                float(draw(st.integers(0, 1))), draw(st.sampled_from([0, 3, 4, 6])),
                draw(st.sampled_from([1.0, 0.5, 0.43])))
    return (f(0.01, 0.9), f(0.0, 3.0), f(0.0, 0.2), f(0.01, 1.0))


@st.composite
def series(draw):
    """Rise-then-maybe-fall curves with noise, or arbitrary values with ties."""
    n = draw(st.integers(1, 12))
    if draw(st.booleans()):
        ustar = draw(st.floats(0.2, 4.0))
        sigma = draw(st.sampled_from([0.0, 0.01, 0.05, 0.15]))
        noise = draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n))
        xs = [(e + 1) / n / ustar for e in range(n)]
        return [x * (1.0 - math.log(x)) + sigma * z for x, z in zip(xs, noise)]
    return draw(st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.3, 0.5]) | st.floats(-1, 1),
                         min_size=n, max_size=n))


@st.composite
def series_with_infinities(draw):
    """``series``, with an infinite reading (a diverged loss, or a logging error) at some
    places in one case of three."""
    scores = draw(series())
    if draw(st.integers(0, 2)) == 0:
        for _ in range(draw(st.integers(1, 2))):
            scores[draw(st.integers(0, len(scores) - 1))] = draw(st.sampled_from([-math.inf,
                                                                                 math.inf]))
    return scores


@pytest.mark.parametrize("name", sorted(STEP))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_streaming_batch_reference_agree(name, data):
    scores = data.draw(series_with_infinities())
    params = params_of(name, data.draw)
    ref = R.REFERENCE[name](scores, *params)
    arr = np.asarray(scores, dtype=np.float64)
    assert streaming_trigger(name, scores, params) == ref
    # the policies' dispatchers: batch (simulator, replay) and streaming (live monitor)
    p = np.asarray(params, np.float64)
    assert D.detector_trigger_nb(CODE[name], p, arr) == ref
    state = D.detector_init_nb(CODE[name], p, len(scores))
    fired = [D.detector_step_nb(CODE[name], p, state, float(s)) for s in scores]
    assert (fired.index(True) + 1 if True in fired else 0) == ref
    if ref:
        assert D.best_observed_eval_nb(arr, ref) == 1 + int(np.argmax(arr[:ref]))


@settings(max_examples=100, deadline=None)
@given(scores=series(), k=st.integers(1, 4))
def test_evalstop_baseline_matches_reference(scores, k):
    assert evalstop_trigger_nb(np.asarray(scores, dtype=np.float64), k) == \
        R.evalstop_trigger(scores, k)


@settings(max_examples=100, deadline=None)
@given(scores=st.lists(st.floats(-1, 1), min_size=3, max_size=15), origin=st.booleans())
def test_gao_fit_matches_lstsq(scores, origin):
    """The adjugate solution of the normal equations equals numpy's least squares."""
    t = float(len(scores))
    state = D.peak_init(len(scores))
    for e, s in enumerate(scores):
        D.fit_update_nb(state, e + 1.0, s)
    solve = D.fit_solve_origin_nb if origin else D.fit_solve_nb
    slope, quad, rss, dof = solve(state, t)
    ls_slope, ls_quad, ls_rss = R.fit_lstsq(scores, t, origin)
    assert dof == len(scores) - (2 if origin else 3)
    assert slope == pytest.approx(ls_slope, abs=1e-7)
    assert quad == pytest.approx(ls_quad, rel=1e-6)
    assert rss == pytest.approx(ls_rss, abs=1e-7)


def test_gao_form_is_fitted_exactly():
    """Noise-free Gao curves lie in the fit's span: the slope's sign is the curve's."""
    n = 6
    for ustar, falling in ((0.5, True), (2.5, False)):
        xs = np.arange(1, n + 1) / n / ustar
        gold = 0.8 * xs * (1 - np.log(xs))
        state = D.peak_init(n)
        for e, s in enumerate(gold):
            D.fit_update_nb(state, e + 1.0, s)
        for solve in (D.fit_solve_nb, D.fit_solve_origin_nb):
            slope, _, rss, _ = solve(state, float(n))
            assert rss < 1e-12
            assert (slope < 0) == falling


def patience_trigger(scores, patience, threshold):
    return D.detector_trigger_nb(D.PATIENCE, np.array([patience, threshold], np.float64),
                                 np.array(scores, np.float64))


def test_patience_is_hf_rule():
    """Hugging Face's counter: any non-improvement over the best by more than the
    threshold counts, not only consecutive declines; a small improvement still moves the
    best but does not reset the counter."""
    # 0.50 -> 0.52 improves by 0.02 <= threshold 0.05: counter 1, best 0.52; 0.51: counter 2
    assert patience_trigger([0.5, 0.52, 0.51], 2, 0.05) == 3
    # threshold 0: any strict improvement resets
    assert patience_trigger([0.5, 0.52, 0.51], 2, 0.0) == 0
    # a rise that stays below the best is not an improvement (EvalStop would reset here)
    assert patience_trigger([0.6, 0.4, 0.5, 0.45], 3, 0.0) == 4
    assert evalstop_trigger_nb(np.array([0.6, 0.4, 0.5, 0.45]), 3) == 0


def test_zero_noise_no_detector_fires_on_a_rising_curve():
    """At zero noise a rising concave curve never trips a detector (with no noise prior
    either), whether the fit is global, through the origin or local."""
    rising = np.linspace(0.1, 0.6, 6) ** 0.5
    for name, params in (("margin", (1.0, 2.0, 0.0)), ("cusum", (0.5, 3.0, 0.0)),
                         ("peak", (2.0, 0.0, 4.0, 1.0, 0, 1.0)), ("peak", (2.0, 0.0, 4.0, 0.0, 0, 1.0)),
                         ("peak", (2.0, 0.0, 4.0, 0.0, 4, 1.0)), ("bocpd", (0.2, 1.64, 0.0, 0.3))):
        assert D.detector_trigger_nb(CODE[name], np.array(params, np.float64), rising) == 0, name


def test_bocpd_truncation_keeps_mass():
    """A streaming state shorter than the series merges long runs and stays a
    distribution (the monitor's O(1) form)."""
    rng = np.random.default_rng(0)
    scores = np.cumsum(rng.normal(0.01, 0.02, 40))
    state = D.bocpd_init(5)
    for s in scores:
        D.bocpd_step_nb(state, s, 0.1, 1.64, 0.02, 0.3)
    m = (state.shape[0] - 2 - D.N_FIT) // 3
    prob = state[2 + D.N_FIT:2 + D.N_FIT + m]
    assert prob.sum() == pytest.approx(1.0)
    assert np.all(prob >= 0)


LONG_SCAN = """
import numpy as np
from fastsim.bench import own_peak_rss_mb
from fastsim.kernels import detectors_online as D
p = np.array((0.2, 0.5, 0.015, 0.1))
s = np.zeros(10_000_000)  # pages past the first never touched: the input costs no memory
s[:40] = 0.5 + 0.01 * np.arange(40)  # rising, then a fall to 0 at evaluation 41
small = D.detector_trigger_nb(D.BOCPD, p, s[:1000]), own_peak_rss_mb()
print(*small, D.detector_trigger_nb(D.BOCPD, p, s), own_peak_rss_mb())
"""


def test_bocpd_batch_keeps_the_monitors_run_lengths_on_a_long_job():
    """Replay's scan keeps at most MAX_EVALS run lengths, as the monitor's state does: it
    kept one per evaluation, O(n^2) time in a replayed job's length (a job of 10^6
    evaluations took hours) and 24 bytes of state an evaluation, which is what this
    asserts (memory, unlike time, is stable enough to): a scan of 10^7 evaluations firing
    at the 41st held 229 MB more than one of 1,000.  Decisions stay the monitor's."""
    out = subprocess.run([sys.executable, "-c", LONG_SCAN], check=True, capture_output=True,
                         text=True).stdout.split()
    assert out[0] == out[2] == "41"
    assert float(out[3]) - float(out[1]) < 50, out
    rising = 0.5 + 1e-7 * np.arange(1500)
    p = np.array((0.2, 0.5, 0.015, 0.1))
    falls = np.concatenate([rising[:1500], rising[1499] - 0.01 * np.arange(1, 20)])
    state = D.detector_init_nb(D.BOCPD, p, D.MAX_EVALS)
    live = next(e + 1 for e, s in enumerate(falls) if D.detector_step_nb(D.BOCPD, p, state, s))
    assert D.detector_trigger_nb(D.BOCPD, p, falls) == live > 1500


@pytest.mark.parametrize("name", ["margin", "cusum", "peak", "bocpd"])
def test_one_infinite_reading_leaves_the_detector_on(name):
    """An infinite reading stays out of every fit: a job that logged one (here the best
    possible, +inf, so that no detector fires on it) is judged afterwards as if that
    reading were missing, not switched off for the rest of its run (the fit's sums were
    NaN from there on, so no later decline could fire)."""
    params = {"margin": (2.0, 1.0, 0.02), "cusum": (0.0, 3.0, 0.02),
              "peak": (1.65, 0.02, 4.0, 1.0, 0, 1.0), "bocpd": (0.2, 1.65, 0.02, 0.1)}[name]
    rise_fall = [0.1, 0.3, 0.45, 0.55, 0.6, 0.58, 0.5, 0.4, 0.3, 0.2, 0.1, 0.0]
    clean = streaming_trigger(name, rise_fall, params)
    assert clean > 0
    with_inf = rise_fall[:1] + [math.inf] + rise_fall[1:]
    assert streaming_trigger(name, with_inf, params) > 0
    assert streaming_trigger(name, with_inf, params) == R.REFERENCE[name](with_inf, *params)


@pytest.mark.parametrize("name", ["margin", "cusum", "peak", "bocpd"])
def test_a_fall_to_minus_infinity_is_a_decline(name):
    """docs/replay.md: a loss that diverges to inf (score -inf) is a decline; the
    detectors that stop on one decline stop there."""
    params = {"margin": (1.0, 1.0, 0.02), "cusum": (0.0, 3.0, 0.02),
              "peak": (1.65, 0.02, 4.0, 1.0, 0, 1.0), "bocpd": (0.2, 1.65, 0.02, 0.1)}[name]
    scores = [0.1, 0.2, 0.3, 0.4, -math.inf, 0.5]
    assert streaming_trigger(name, scores, params) == 5 == R.REFERENCE[name](scores, *params)


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_bocpd_starts_afresh_where_no_run_length_explains_a_score(bad):
    # An infinite difference has zero predictive weight under every run length: the
    # update divided by zero (a traceback in replay and the monitor); it now restarts
    # from the prior, as the reference does.
    scores = [0.1, 0.2, 0.3, bad, 0.25, 0.2, 0.1, 0.0, -0.1]
    params = (0.2, 0.5, 0.015, 0.1)
    assert streaming_trigger("bocpd", scores, params) == R.REFERENCE["bocpd"](scores, *params)


@pytest.mark.parametrize("origin, window", [(0.0, 0), (0.0, 4)])
@pytest.mark.parametrize("scores", [[0.0, 0.1, 0.2, 0.3, 0.4, 0.5], [0.5, 0.4, 0.3, 0.2, 0.1, 0.0]])
def test_peak_with_gamma_near_zero_matches_the_reference(scores, origin, window):
    # gamma = 1e-9 (the kernel's arithmetic; a spec allows 0.05 and up, the next test)
    # makes every t^gamma about 1, and round-off turns
    # the fit's positive quadratic form negative: the reference raised on its square root
    # (a math domain error in the simulator's reference run) where the kernel makes no
    # decision at that evaluation.
    params = (1.65, 0.015, 3.0, origin, window, 1e-9)
    assert R.fit_solve(scores[:3], 3.0 ** 1e-9, 1, 1e-9)[1] < 0.0  # the case is the case
    ref = R.REFERENCE["peak"](scores, *params)
    assert streaming_trigger("peak", scores, params) == ref
    assert D.detector_trigger_nb(CODE["peak"], np.asarray(params), np.asarray(scores)) == ref


@pytest.mark.parametrize("gamma", ["1e-6", "0.001", "0.049"])
def test_peak_gamma_starts_where_the_fit_is_well_conditioned(gamma):
    # Near 0 every t^gamma is about 1 and the fit's columns nearly collinear: gamma=1e-6
    # stopped every hacking job and 40% of healthy ones (precision 60% on 50 clusters),
    # gamma=1e-12 none, both printed as results.  The bound is the workload's kl_gamma's.
    with pytest.raises(ConfigError, match=rf"^policy.gamma={float(gamma):g} is invalid; allowed: a "
                       r"number in \[0.05, 2\]$"):
        PolicyConfig.parse(f"peak:gamma={gamma}")
    assert dict(PolicyConfig.parse("peak:gamma=0.05").params)["gamma"] == 0.05
