"""Cost-Aware GRPO sampler (unbiasedness, errors) and the toy GRPO experiment."""
import warnings

import numba
import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsim.costaware import (GRPOConfig, cost_aware_batch, cost_aware_draw, cost_aware_probs,
                               group_advantages, run_grpo, summarize_grpo)
from fastsim.errors import ConfigError
from fastsim.kernels import grpo as nb


def test_group_advantages():
    r = np.array([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [3.0, 1.0, 2.0, 2.0]])
    a = group_advantages(r)
    np.testing.assert_allclose(a[0], [1, -1, -1, 1])
    assert (a[1] == 0).all()
    np.testing.assert_allclose(a[2].mean(), 0, atol=1e-15)
    np.testing.assert_allclose(a[2].std(), 1, rtol=1e-12)


@st.composite
def grpo_batches(draw):
    P = draw(st.integers(1, 4))
    G = draw(st.integers(2, 5))
    rewards = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=P * G,
                                     max_size=P * G))).reshape(P, G)
    lengths = np.array(draw(st.lists(st.integers(1, 2000), min_size=P * G,
                                     max_size=P * G)), float)
    lam = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    floor = draw(st.sampled_from([0.0, 0.2]))
    return rewards, lengths, lam, floor


@settings(max_examples=150, deadline=None)
@given(grpo_batches(), st.integers(0, 2 ** 31))
def test_weights_make_minibatch_loss_unbiased(batch, loss_seed):
    rewards, lengths, lam, floor = batch
    adv = group_advantages(rewards).ravel()
    if floor == 0.0 and not adv.any():
        with pytest.raises(ConfigError, match="all advantages are zero"):
            cost_aware_probs(adv, lengths, lam, floor)
        return
    p = cost_aware_probs(adv, lengths, lam, floor)
    N = adv.size
    assert p.sum() == pytest.approx(1.0) and (p >= 0).all()
    score = np.maximum(np.abs(adv), floor) / np.sqrt(lengths)
    np.testing.assert_allclose(p, (1 - lam) * score / score.sum() + lam / N, rtol=1e-12)
    w = np.where(p > 0, 1.0 / (N * np.where(p > 0, p, 1.0)), 0.0)
    # per-response GRPO loss A_i * z_i (z_i stands for -log pi): zero where A_i = 0
    z = np.random.default_rng(loss_seed).normal(size=N)
    pg_loss = adv * z
    assert np.sum(p * w * pg_loss) == pytest.approx(pg_loss.mean(), abs=1e-12)
    if (p > 0).all():  # lam > 0 or floor > 0: any per-response loss (KL, entropy) is unbiased
        assert np.sum(p * w * z) == pytest.approx(z.mean(), abs=1e-12)


def test_sampled_minibatch_loss_is_unbiased_in_monte_carlo():
    rewards = np.array([[1, 0, 0, 0], [1, 1, 0, 1], [0, 0, 0, 0]], float)
    lengths = np.array([[50, 400, 120, 900], [30, 60, 700, 200], [100, 100, 100, 100]], float)
    loss = np.random.default_rng(0).normal(size=12)
    adv = group_advantages(rewards).ravel()
    full = np.mean(adv * loss)
    est = []
    for step in range(4000):
        b = cost_aware_batch(rewards, lengths, batch_size=8, lam=0.1, seed=3, step=step)
        est.append(np.mean(b.weights * adv[b.indices] * loss[b.indices]))
        assert b.tokens == pytest.approx(lengths.ravel()[b.indices].sum())
    est = np.array(est)
    se = est.std(ddof=1) / np.sqrt(est.size)
    assert abs(est.mean() - full) < 4 * se
    # and cost-aware batches are cheaper than uniform ones: E tokens = B sum p_i len_i
    p = cost_aware_probs(adv, lengths, 0.1)
    assert 8 * p @ lengths.ravel() < 8 * lengths.mean()


@pytest.mark.parametrize("call, message", [
    (lambda: cost_aware_batch([[1, 1], [0, 0]], [[1, 2], [3, 4]], 4), "all advantages are zero"),
    (lambda: cost_aware_batch([[1, 0]], [[1, 2]], 2, lam=1.2), "lam=1.2"),
    (lambda: cost_aware_batch([[1, 0]], [[1, -2]], 2), r"lengths\[1\]=-2.0"),
    (lambda: cost_aware_batch([[1, 0]], [[1, 2, 3]], 2), r"lengths is invalid \(3 "
     r"entries, 2 responses\); allowed: one per response"),
    (lambda: cost_aware_batch([[1, 0]], [[1, 2]], 0), "batch_size=0"),
    (lambda: cost_aware_batch([1, 0], [1, 2], 2), "2-D array"),
    (lambda: cost_aware_probs([1.0, -1.0], [1, 1], floor=-1), "floor=-1"),
    (lambda: GRPOConfig(lam=-0.5), "lam=-0.5"),
    # numpy's cast of text was a ValueError traceback, 'could not convert string to float'
    (lambda: cost_aware_probs(["a", 1.0], [1, 1]), "advantages is invalid"),
    (lambda: cost_aware_probs([1.0, -1.0], ["x", 1]), "lengths is invalid"),
    (lambda: group_advantages([["x", "y"]]), "rewards is invalid"),
    # groups of two sizes were numpy's ValueError traceback ('inhomogeneous shape')
    (lambda: group_advantages([[1.0, 0.0], [1.0]]), r"^rewards is invalid \(rows of "
     r"different lengths\); allowed: numbers"),
    (lambda: cost_aware_probs([1.0, -1.0], [[1], [1, 2]]), r"^lengths is invalid"),
    (lambda: cost_aware_draw([1.0, None], [1, 1], 2), "advantages is invalid"),
    # a length or advantage of True was read as 1 (pass/fail rewards stay allowed)
    (lambda: cost_aware_probs([True, False], [1, 1]), r"advantages is invalid \(True "
     r"or False among them\); allowed: numbers"),
    (lambda: cost_aware_probs([1.0, -1.0], [True, 1]), r"lengths is invalid \(True or "
     r"False among them\); allowed: numbers"),
    (lambda: GRPOConfig(group=1), "group=1"),
    # sizes that would allocate tens of GB (or fail inside the kernel) are refused up front
    (lambda: GRPOConfig(n_train=10**12),
     r"n_train=1000000000000 is invalid; allowed: an integer from 1 to 1000000"),
    (lambda: GRPOConfig(n_steps=10**12), r"n_steps=1000000000000 is invalid"),
    (lambda: GRPOConfig(batch=10**12), r"batch=1000000000000 is invalid"),
    (lambda: GRPOConfig(n_train=10**6, n_traces=100),
     r"\(n_train\+n_test\)\*n_traces\*n_features"),
    (lambda: GRPOConfig(prompts=100_000, group=200), r"prompts\*group = 20000000 is too large"),
    (lambda: GRPOConfig(seeds=100_000, eval_every=1),
     r"seeds\*arms\*n_evals = 120200000 .*eval_every"),
])
def test_bad_grpo_inputs(call, message):
    with pytest.raises(ConfigError, match=message):
        call()


def test_huge_and_tiny_advantages_still_normalise():
    """Advantages of +-1e308 overflowed the sum of scores (p summed to lam = 0.1, the draw's
    weights were wrong), 5e-324 underflowed it (p was NaN), and rewards of +-1e308
    overflowed the group's variance (advantages 0 in a group of distinct rewards)."""
    p = cost_aware_probs(np.array([1e308, -1e308] * 2), np.ones(4))
    np.testing.assert_array_equal(p, [0.25] * 4)
    b = cost_aware_draw(np.array([1e308, -1e308] * 2), np.ones(4), 4)
    np.testing.assert_array_equal(b.weights, np.ones(4))
    p = cost_aware_probs([5e-324, 0.0, 5e-324], [4.0, 1.0, 1.0], lam=0.0)
    np.testing.assert_allclose(p, [1 / 3, 0, 2 / 3])
    a = group_advantages(np.array([[1e308, -1e308], [0.0, 1.0], [1e308, 1e308]]))
    np.testing.assert_array_equal(a, [[1, -1], [-1, 1], [0, 0]])


@pytest.mark.parametrize("kw, message", [
    # 2^64 was a numba TypingError, 2^63 an OverflowError, from inside the draw
    (dict(seed=2**64), r"seed=18446744073709551616 is invalid; allowed: an integer from 0 to 2\^63-1"),
    (dict(step=2**63), r"step=9223372036854775808 is invalid; allowed: an integer from 0 to 2\^63-1"),
    (dict(seed=-1), r"seed=-1 is invalid; allowed: an integer from 0 to 2\^63-1"),
])
def test_rng_coordinates_are_bounded(kw, message):
    with pytest.raises(ConfigError, match=message):
        cost_aware_draw([1.0, -1.0], [1, 2], 2, **kw)
    with pytest.raises(ConfigError, match=message):
        cost_aware_batch([[1.0, 0.0]], [[1, 2]], 2, **kw)
    cost_aware_draw([1.0, -1.0], [1, 2], 2, seed=2**63 - 1, step=2**63 - 1)  # the largest


def test_floor_keeps_all_zero_batches_usable():
    b = cost_aware_batch([[1, 1], [0, 0]], [[1, 4], [1, 4]], 4, lam=0.0, floor=0.5)
    np.testing.assert_allclose(b.probs, [1 / 3, 1 / 6, 1 / 3, 1 / 6])


TINY = dict(seeds=4, n_train=32, n_test=32, n_steps=40, eval_every=10, prompts=8, batch=16)


def test_grpo_experiment_trains_and_counts_tokens():
    curves = run_grpo(GRPOConfig(**TINY), progress=False)
    for arm in ("uniform", "cost_aware"):
        a = curves.filter(curves["arm"] == arm).sort(["seed", "eval"])
        acc = a["accuracy"].to_numpy().reshape(4, -1)
        tok = a["tokens"].to_numpy().reshape(4, -1)
        assert (acc[:, -1] > acc[:, 0] + 0.05).all()  # a genuinely trained policy
        assert (np.diff(tok, axis=1) >= 0).all() and (tok[:, 0] == 0).all()
    init = curves.filter(curves["eval"] == 0).sort(["seed", "arm"])["accuracy"].to_numpy()
    np.testing.assert_array_equal(init[0::2], init[1::2])  # same task per seed in both arms
    s = summarize_grpo(curves)
    per_step = s.filter(s["metric"] == "token_saving_per_step").row(0, named=True)
    assert 0.0 < per_step["mean"] < 1.0


def test_uniform_arm_is_plain_grpo_minibatch():
    p = np.empty(6)
    nb.grpo_probs_nb(np.array([1.0, -1, 0, 0, 2, -2]), np.arange(1.0, 7.0), nb.ARM_UNIFORM, 0.1,
                     0.0, p)
    np.testing.assert_array_equal(p, np.full(6, 1 / 6))  # weights 1 / (N p) = 1


def test_grpo_does_not_depend_on_thread_count_or_chunking():
    cfg = GRPOConfig(**TINY)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run_grpo(cfg, progress=False, chunk=4)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = run_grpo(cfg, progress=False, chunk=1)
    finally:
        numba.set_num_threads(before)
    assert one.equals(two)


def _metrics(summary):
    return {r["metric"]: r for r in summary.iter_rows(named=True)}


def test_reached_shares_have_exact_binomial_intervals():
    m = _metrics(summarize_grpo(run_grpo(GRPOConfig(**TINY), progress=False)))
    target = m["reached_target_frac"]
    assert target["mean"] == 1.0 and target["n"] == 4  # every seed reached it
    # a t interval on 0/1 outcomes was [1, 1]; Clopper-Pearson for 4/4 is [0.398, 1]
    assert target["lo"] == pytest.approx(0.025 ** 0.25) and target["hi"] == 1.0
    assert np.isfinite(m["token_saving_to_target"]["mean"])


def test_censored_seeds_make_pooled_savings_na_and_count_in_the_median():
    cfg = GRPOConfig(**{**TINY, "seeds": 8, "n_steps": 20, "cost_aware_step_factor": 1.0})
    m = _metrics(summarize_grpo(run_grpo(cfg, progress=False)))
    peak = m["reached_frac"]
    assert 0 < peak["mean"] < 1 and peak["lo"] < peak["mean"] < peak["hi"]
    for name in ("token_saving_to_uniform_peak", "token_saving_to_uniform_peak_paired_mean"):
        assert np.isnan(m[name]["mean"]) and "n/a" in m[name]["note"]
    med = m["token_saving_to_uniform_peak_median"]
    assert med["n"] == 8 and med["lo"] == -np.inf  # a never-reaching seed is the worst saving


def test_seeds_where_uniform_spent_no_tokens_have_no_share_and_no_warning(capsys):
    """A task every response solves (all advantages zero, every batch skipped): the share
    that reached the uniform peak was 1.0 next to savings of n = 0 seeds, and
    token_saving_per_step divided 0 tokens by 0 with a numpy RuntimeWarning."""
    cfg = GRPOConfig(**{**TINY, "seeds": 2, "n_steps": 1, "eval_every": 1,
                        "difficulty_mean": 8.0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = _metrics(summarize_grpo(run_grpo(cfg, progress=False)))
    for name in ("reached_frac", "reached_target_frac", "token_saving_to_uniform_peak_median",
                 "token_saving_per_step"):
        assert np.isnan(m[name]["mean"]) and m[name]["n"] == 0, (name, m[name])
    assert "n/a: 2 seeds where uniform reached it at 0 tokens" in m["reached_frac"]["note"]


def test_data_parallel_processes_draw_independently():
    # one seed on every process: the same uniforms took the same positions on each
    from fastsim.costaware import cost_aware_draw

    adv, cost = np.linspace(-1, 1, 64), np.full(64, 20.0)
    p0 = cost_aware_draw(adv, cost, 32, lam=1.0, seed=3, step=5)
    assert np.array_equal(cost_aware_draw(adv, cost, 32, lam=1.0, seed=3, step=5, process=0).indices,
                          p0.indices)
    p1 = cost_aware_draw(adv, cost, 32, lam=1.0, seed=3, step=5, process=1)
    assert not np.array_equal(p0.indices, p1.indices)
    with pytest.raises(ConfigError, match="process=-1 is invalid; allowed: an integer from 0"):
        cost_aware_draw(adv, cost, 32, process=-1)


@pytest.mark.parametrize("call, message", [
    # 10^12 draws of 4 responses: a MemoryError (7.3 TiB of indices), 10^8 took ~9 s and
    # 1.5 GB before the weights' array ran out of memory
    (lambda: cost_aware_draw([1.0, -1.0, 0.5, 0.0], [10, 40, 20, 30], 10**12),
     r"batch_size=1000000000000 is invalid; allowed: an integer from 1 to 4 \(the number of "
     r"responses\)"),
    (lambda: cost_aware_batch([[1, 0], [0, 1]], [[1, 2], [3, 4]], 5), "batch_size=5 is invalid"),
    # the toy experiment's kernel allocated and drew `batch` per step in every seed
    (lambda: GRPOConfig(batch=10**12), r"batch=1000000000000 is invalid; allowed: an integer "
                                       r"from 1 to prompts\*group = 128"),
    (lambda: GRPOConfig(prompts=2, group=4, batch=9), "batch=9 is invalid"),
])
def test_more_draws_than_responses_are_refused_before_any_allocation(call, message):
    with pytest.raises(ConfigError, match=message):
        call()
    cost_aware_draw([1.0, -1.0, 0.5, 0.0], [10, 40, 20, 30], 4)  # all of them is fine
    GRPOConfig(prompts=2, group=4, batch=8)


def test_grpo_intervals_stay_within_what_accuracies_and_ratios_can_be():
    # with 2 seeds the t intervals reached below 0 and above 1 for accuracies, and below 0
    # for ratios of positive moments; fastsim.summary cuts a metric's interval the same way
    from fastsim.costaware.experiment import (GRPOConfig, ablation_table, curve_summary,
                                              run_grpo)

    curves = run_grpo(GRPOConfig(seeds=2, n_steps=10, n_train=16, n_test=16, eval_every=10))
    t = ablation_table(curves)
    acc = t.filter(pl.col("metric").str.contains("accuracy")
                   & ~pl.col("metric").str.contains("diff"))
    assert acc.height and acc["lo"].min() >= 0 and acc["hi"].max() <= 1
    ratios = t.filter(pl.col("metric").str.starts_with("predicted_"))
    assert ratios.height and ratios["lo"].min() >= 0
    assert t.filter(pl.col("metric").str.contains("saving"))["hi"].max() <= 1
    c = curve_summary(curves)
    assert c["accuracy_lo"].min() >= 0 and c["accuracy_hi"].max() <= 1


@pytest.mark.parametrize("kw, said", [
    ({"chunk": -1}, "chunk=-1 is invalid; allowed: an integer >= 1"),  # rows of garbage
    ({"chunk": 0}, "chunk=0 is invalid"),  # range()'s ValueError
    ({"progress": "no"}, "progress='no' is invalid"),
    ({"cfg": {"seeds": 2}}, "cfg=dict is invalid; allowed: a GRPOConfig"),  # AttributeError
])
def test_run_grpo_refuses_its_arguments_before_any_seed(kw, said):
    """chunk=-1 made the loop over seeds empty, and run_grpo returned its uninitialised
    arrays as accuracies and token counts (4.7e-310, 94581766794017 skipped batches)."""
    from fastsim.costaware.experiment import run_grpo

    args = {"cfg": GRPOConfig(seeds=2, n_steps=10, n_train=16, n_test=16), "progress": False,
            **kw}
    with pytest.raises(ConfigError, match=said):
        run_grpo(**args)


def test_make_problem_refuses_what_is_not_a_problem_config():
    from fastsim.costaware.sgd import make_problem

    with pytest.raises(ConfigError, match=r"cfg=dict is invalid; allowed: a ProblemConfig"):
        make_problem({"n": 10})


def test_no_advantages_is_refused_as_none():
    """cost_aware_probs([], []) was refused as 'all advantages are zero (every group has
    identical rewards)', and cost_aware_draw([], [], 1) as 'batch_size=1 must be an integer
    from 1 to 0'."""
    for call in (lambda: cost_aware_probs([], []), lambda: cost_aware_draw([], [], 1)):
        with pytest.raises(ConfigError, match=r"^advantages is empty; allowed: the advantages "
                                              r"of one or more responses$"):
            call()


def test_lengths_in_another_shape_are_refused_not_misassigned():
    """Lengths of rewards (2, 3) given as (3, 2), the transpose, have as many entries: each
    response was scored with another's length without a word.  Their shape, or flat, is
    read; another is one line."""
    rewards = [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]
    lengths = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]])
    want = cost_aware_probs(group_advantages(rewards), lengths, 0.0)
    assert np.array_equal(cost_aware_probs(group_advantages(rewards), lengths.ravel(), 0.0), want)
    assert np.array_equal(cost_aware_probs(group_advantages(rewards).ravel(), lengths, 0.0), want)
    message = r"^lengths is invalid \(shape \(3, 2\), the responses' is \(2, 3\)\)"
    for call in (lambda: cost_aware_batch(rewards, lengths.T, 2),
                 lambda: cost_aware_draw(group_advantages(rewards), lengths.T, 2),
                 lambda: cost_aware_probs(group_advantages(rewards), lengths.T)):
        with pytest.raises(ConfigError, match=message):
            call()
    assert cost_aware_batch(rewards, lengths.ravel(), 2).tokens > 0


def test_pass_fail_rewards_may_be_bools():
    """A 0/1 reward is a bool reward; only gradient bounds, costs, lengths, advantages and
    probabilities refuse True and False."""
    assert np.array_equal(group_advantages([[True, False]]), group_advantages([[1.0, 0.0]]))


def test_grpo_summaries_refuse_what_they_cannot_read_in_one_line():
    """summarize_grpo(curves, arm="cost_awar") was numpy's 'cannot reshape array of size 0',
    a pandas frame a TypeError about Index(...), a frame without run_grpo's columns a
    Polars ColumnNotFoundError: each is one line naming the argument and what it takes."""
    from fastsim.costaware import ablation_table, curve_summary, tokens_to_uniform_peak

    curves = run_grpo(GRPOConfig(**{**TINY, "n_steps": 10}), progress=False)
    calls = [
        (lambda: summarize_grpo(curves, arm="cost_awar"),
         r"^summarize_grpo\(\): arm='cost_awar' is not an arm of curves \(did you mean "
         r"cost_aware\?\); allowed: cost_aware"),
        (lambda: tokens_to_uniform_peak(curves.filter(pl.col("arm") != "uniform")),
         r"^tokens_to_uniform_peak\(\): curves has no uniform arm"),
        (lambda: summarize_grpo(curves.to_pandas()),
         r"^summarize_grpo\(\): curves is a pandas DataFrame; allowed: the rows of run_grpo"),
        (lambda: curve_summary(curves.to_pandas()), r"^curve_summary\(\): curves is a pandas"),
        (lambda: ablation_table(curves.drop("tokens")),
         r"^ablation_table\(\): curves has no column 'tokens'; allowed: the rows of run_grpo"),
    ]
    for call, message in calls:
        with pytest.raises(ConfigError, match=message) as e:
            call()
        assert "\n" not in str(e.value)


def test_grpo_summaries_refuse_curves_they_would_pair_wrongly():
    """The arms are compared seed by seed: uniform's seeds 0-2 beside cost_aware's 1-3 paired
    seed 0 with seed 1 (and so on) without a word, two tables concatenated counted each seed
    twice, and a seed missing evaluations was read across into the next seed's row."""
    from fastsim.costaware import curve_summary, tokens_to_uniform_peak

    curves = run_grpo(GRPOConfig(**{**TINY, "seeds": 3, "n_steps": 10}), progress=False)
    arm = pl.col("arm") == "cost_aware"
    calls = [
        (lambda: tokens_to_uniform_peak(curves.filter(~arm | (pl.col("seed") > 0))),
         r"curves holds seed 0 in arm 'uniform' and not in arm 'cost_aware'; allowed: the "
         r"rows of run_grpo, the same seeds in both arms"),
        (lambda: summarize_grpo(pl.concat([curves, curves])),
         r"curves holds seed 0, arm '\w+', eval 0 twice"),
        (lambda: curve_summary(pl.concat([curves, curves])), r"eval 0 twice"),
        (lambda: summarize_grpo(curves.filter(~arm | (pl.col("seed") != 1)
                                              | (pl.col("eval") != 1))),
         r"curves holds evals 0 to \d+ of seed 1, arm 'cost_aware' with \d+ rows"),
        (lambda: summarize_grpo(curves.filter(~arm | (pl.col("eval") < 1))),
         r"curves holds 1 evals of arm 'cost_aware' and \d+ of arm 'uniform'"),
        (lambda: summarize_grpo(curves.filter(~arm | (pl.col("seed") != 1)
                                              | (pl.col("eval") < 1))),
         r"curves holds seeds of 1 and of \d+ evals in arm 'cost_aware'"),
    ]
    for call, message in calls:
        with pytest.raises(ConfigError, match=message):
            call()
    summarize_grpo(curves.sample(fraction=1.0, shuffle=True, seed=0))  # row order is free


@pytest.mark.parametrize("unit", [1e-13, 1e-200, 1.0, 1e6, 1e300])
def test_group_advantages_do_not_depend_on_the_rewards_unit(unit):
    # rewards in any unit carry the same signal: a spread of 1e-13 read as "no spread"
    # gave [[0, 0]], and cost_aware_probs then refused the batch as all-zero
    r = np.array([[1.0, 0.0, 0.5, 1.0], [0.25, 0.25, 0.25, 0.25]])
    want = group_advantages(r)
    got = group_advantages(r * unit)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert (got[1] == 0).all()


def test_equal_rewards_whose_mean_rounds_carry_no_signal():
    # 0.1 * 3 / 3 is not 0.1 in float: equal rewards still have advantage 0, not +-1
    assert (group_advantages([[0.1, 0.1, 0.1], [1e300, 1e300, 1e300]]) == 0).all()


def test_steps_never_evaluated_are_refused():
    """Evaluations fall every eval_every steps: n_steps=7 at eval_every=5 trained 7 steps
    and reported step 5 as 'at the uniform horizon', and the cost-aware arm's 14 steps
    ended at step 10 under 'end of the longer run', without a word."""
    with pytest.raises(ConfigError, match=r"^n_steps=7 with eval_every=5 leave the last 2 "
                       r"steps of a run never evaluated; allowed: every arm's steps a "
                       r"multiple of the evaluation interval"):
        GRPOConfig(n_steps=7)
    with pytest.raises(ConfigError, match=r"^n_steps=10 and cost_aware_step_factor=1.25 \(the "
                       r"other arms' 12 steps\) with eval_every=5 leave the last 2 steps"):
        GRPOConfig(n_steps=10, cost_aware_step_factor=1.25)
    assert GRPOConfig(n_steps=7, eval_every=7, arms=("uniform",),
                      cost_aware_step_factor=1.3).n_evals == 2  # one arm: no factor
    curves = run_grpo(GRPOConfig(seeds=2, n_steps=10, n_train=8, n_test=8, eval_every=5,
                                 cost_aware_step_factor=1.5), progress=False)
    assert curves.group_by("arm").agg(pl.col("step").max()).sort("arm").rows() == [
        ("cost_aware", 15), ("uniform", 10)]  # each run's last step is its last evaluation
