"""Cost-aware SGD simulator: exact optimum, bounds, reference agreement, thread invariance."""
import math

import numba
import numpy as np
import pytest

from fastsim.costaware.sgd import (ProblemConfig, SGDConfig, make_problem, run_sgd,
                                   summarize_sgd)
from fastsim.errors import ConfigError
from fastsim.kernels import costaware_sgd as nbs
from fastsim.kernels.rng import uniform_nb


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_optimum_is_stationary_and_bounds_hold(kind):
    pr = make_problem(ProblemConfig(kind=kind, n=40, d=4, reg=0.05, cost_sigma=1.0))
    g = np.empty(4)
    full = np.zeros(4)
    for i in range(40):
        nbs.sample_gradient_nb(pr.code, pr.A, pr.b, 0.05, i, pr.x_star, g)
        full += g / 40
    assert np.linalg.norm(full) < 1e-10
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.normal(size=4)
        x *= pr.radius * rng.uniform() / np.linalg.norm(x)
        f = nbs.full_loss_nb(pr.code, pr.A, pr.b, 0.05, x)
        assert f >= pr.f_star - 1e-12
        for i in range(40):
            nbs.sample_gradient_nb(pr.code, pr.A, pr.b, 0.05, i, x, g)
            assert np.linalg.norm(g) <= pr.G[i] * (1 + 1e-12)


def test_a_solve_stops_at_its_round_off_floor(monkeypatch):
    """The squared gradient norm of this instance falls to about 2.9e-17 in 7 steps and
    stays there, above NEWTON_TOL: the solve took all 100 steps (a logistic instance of
    n = 256, d = 1,000 ran 29-51 s for the 5 it needed).  It stops a few steps after it stalls,
    at an optimum as good as the 100 steps' to the objective's last bits."""
    import fastsim.costaware.sgd as sgd

    cfg = ProblemConfig(kind="logistic", n=300, d=1, noise=2.0, seed=159)
    taken = []
    step = nbs.newton_step_nb
    monkeypatch.setattr(nbs, "newton_step_nb", lambda *a: taken.append(a) or step(*a))
    pr = sgd.make_problem(cfg)
    assert 6 <= len(taken) <= 10
    monkeypatch.undo()
    x, weight = np.zeros(1), np.ones(300)
    for _ in range(nbs.NEWTON_MAX_ITER):  # the 100 steps it took
        x, grad_sq = nbs.newton_step_nb(pr.code, pr.A, pr.b, cfg.reg, weight, 300.0, x)
    assert grad_sq > nbs.NEWTON_TOL  # at the floor: the threshold was never met
    f_100 = nbs.full_loss_nb(pr.code, pr.A, pr.b, cfg.reg, x)
    assert abs(pr.f_star - f_100) <= 4 * np.spacing(f_100)
    at_stop = nbs.newton_step_nb(pr.code, pr.A, pr.b, cfg.reg, weight, 300.0, pr.x_star)[1]
    assert at_stop <= 2 * grad_sq
    # the kernel's solve stops where make_problem's does, to the last bit
    assert nbs.optimum_nb(pr.code, pr.A, pr.b, cfg.reg, weight).tobytes() == pr.x_star.tobytes()


def test_costs_are_normalised_and_correlated_as_asked():
    def rank_corr(a, b):
        ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
        return np.corrcoef(ra, rb)[0, 1]
    for corr, sign in ((0.9, 1), (-0.9, -1)):
        pr = make_problem(ProblemConfig(n=400, d=4, cost_sigma=1.0, cost_corr=corr))
        assert pr.c.mean() == pytest.approx(1.0, rel=1e-12)
        assert sign * rank_corr(pr.c, np.linalg.norm(pr.A, axis=1)) > 0.5
    pareto = make_problem(ProblemConfig(n=400, d=4, cost_dist="pareto", cost_alpha=1.2))
    assert pareto.c.max() / np.median(pareto.c) > 10  # heavy tail


def reference_sgd(pr, p, step, s_bound, gap_target, max_steps, seed, rep):
    """Slow, obvious re-implementation of one replication (same RNG coordinates)."""
    n, d = pr.A.shape
    reg = pr.config.reg
    cdf = np.cumsum(p)
    x = np.zeros(d)
    xbar = np.zeros(d)
    cost, next_check = 0.0, 1
    for t in range(max_steps):
        u = uniform_nb(seed, rep, 0, t, 110)
        i = int(np.searchsorted(cdf, u * cdf[-1], side="right"))
        z = pr.A[i] @ x
        if pr.config.kind == "least_squares":
            s = z - pr.b[i]
        else:
            s = -pr.b[i] / (1 + math.exp(pr.b[i] * z))
        grad = s * pr.A[i] + reg * x
        eta = (2 * pr.radius / math.sqrt(s_bound * (t + 1)) if step == "convex"
               else 2 / (pr.mu * (t + 2)))
        x = x - eta / (n * p[i]) * grad
        if np.linalg.norm(x) > pr.radius:
            x *= pr.radius / np.linalg.norm(x)
        cost += pr.c[i]
        w = 1 / (t + 1) if step == "convex" else 2 / (t + 2)
        xbar = xbar + w * (x - xbar)
        if t + 1 >= next_check:
            gap = nbs.full_loss_nb(pr.code, pr.A, pr.b, reg, xbar) - pr.f_star
            if gap <= gap_target:
                return cost, t + 1
            next_check = max(t + 2, int((t + 1) * 1.01))
    return np.nan, -1


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
@pytest.mark.parametrize("step", ["convex", "strongly_convex"])
def test_kernel_agrees_with_reference(kind, step):
    pr = make_problem(ProblemConfig(kind=kind, n=16, d=3, reg=0.1, cost_sigma=1.0))
    cfg = SGDConfig(step=step, eps=0.05, replications=3, strategies=("uniform", "optimal"),
                    max_steps=200_000, seed=4)
    runs = run_sgd(pr, cfg, progress=False)
    from fastsim.costaware import sampling_distribution, second_moment
    for s in ("uniform", "optimal"):
        p = sampling_distribution(pr.G, pr.c, s)
        got = runs.filter(runs["strategy"] == s).sort("replication")
        for r in range(3):
            cost, steps = reference_sgd(pr, p, step, second_moment(pr.G, p),
                                        0.05 * (pr.f0 - pr.f_star), 200_000, 4, r)
            assert got["steps"][r] == steps
            assert got["cost_units"][r] == pytest.approx(cost, rel=1e-9)


def test_results_do_not_depend_on_thread_count():
    pr = make_problem(ProblemConfig(n=32, d=3, cost_sigma=1.0))
    cfg = SGDConfig(eps=0.05, replications=8)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run_sgd(pr, cfg, progress=False)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = run_sgd(pr, cfg, progress=False)
    finally:
        numba.set_num_threads(before)
    assert one.equals(two)


def test_optimal_sampling_is_cheaper_when_costs_vary():
    pr = make_problem(ProblemConfig(n=64, d=4, cost_sigma=1.5))
    cfg = SGDConfig(step="convex", eps=0.02, replications=48)
    summary = summarize_sgd(run_sgd(pr, cfg, progress=False), pr)
    uni = summary.filter(summary["strategy"] == "uniform").row(0, named=True)
    assert uni["reached_frac"] == 1.0
    assert uni["predicted_ratio"] > 2.0
    assert uni["simulated_ratio_lo"] > 1.5  # uniform costs clearly more than p*
    opt = summary.filter(summary["strategy"] == "optimal").row(0, named=True)
    assert opt["simulated_ratio"] == 1.0 and opt["predicted_ratio"] == 1.0


def test_bad_sgd_config():
    with pytest.raises(ConfigError, match="eps=0"):
        SGDConfig(eps=0)
    with pytest.raises(ConfigError, match="step='adam'"):
        SGDConfig(step="adam")
    with pytest.raises(ConfigError, match="strategies='fast'"):
        SGDConfig(strategies=("uniform", "fast"))
    with pytest.raises(ConfigError, match="reg=0"):
        ProblemConfig(kind="logistic", reg=0.0)


def test_a_strategy_named_twice_or_a_lone_name_is_refused():
    """("uniform", "optimal", "optimal") ran optimal twice and summarize_sgd then paired
    its 2n runs with n baseline runs: a numpy broadcast traceback; a lone name was read
    letter by letter ('o' is not a sampling strategy)."""
    with pytest.raises(ConfigError, match=r"strategies=\['uniform', 'optimal', 'optimal'\] "
                                          r"names optimal twice; allowed: distinct strategies"):
        SGDConfig(strategies=("uniform", "optimal", "Optimal"))
    with pytest.raises(ConfigError, match=r"strategies='optimal' is invalid; allowed: a list"):
        SGDConfig(strategies="optimal")


def _capped_and_uncapped(max_steps, summarize=True):
    pr = make_problem(ProblemConfig(n=200, d=5))
    runs = [run_sgd(pr, SGDConfig(replications=200, max_steps=m), progress=False)
            for m in (max_steps, 2_000_000)]
    return [summarize_sgd(r, pr).sort("strategy") for r in runs] if summarize else runs


def test_a_censored_run_records_what_it_spent_by_the_cap():
    capped, full = _capped_and_uncapped(200, summarize=False)
    missed = ~capped["reached"].to_numpy()
    at_cap = capped["cost_units_at_cap"].to_numpy()
    assert missed.any() and np.isfinite(at_cap[missed]).all() and np.isnan(at_cap[~missed]).all()
    assert (capped["steps"].to_numpy()[missed] == -1).all()
    # same draws (common random numbers): the uncapped run spent more to reach eps
    assert (full["cost_units"].to_numpy()[missed] > at_cap[missed]).all()


def test_a_step_cap_leaves_the_median_interval_of_the_uncapped_runs():
    capped, full = _capped_and_uncapped(200)  # censors 4-41% of the runs, by strategy
    assert (full["reached_frac"] == 1.0).all() and (capped["reached_frac"] < 1.0).all()
    for c, f in zip(capped.iter_rows(named=True), full.iter_rows(named=True)):
        # steps: the cap is a fixed step count, so the order statistics below it are the same
        for col in ("steps_median", "steps_median_lo", "steps_median_hi"):
            assert c[col] == f[col], (c["strategy"], col)
        # cost: a censored run counts at its cost by the cap for the lower bound and as
        # +inf for the upper one, so the capped interval holds the uncapped one (a mean
        # over the runs that reached eps, the old statistic, excluded the uncapped one)
        assert c["cost_units_median_lo"] <= f["cost_units_median_lo"]
        assert c["cost_units_median_hi"] >= f["cost_units_median_hi"]
        assert c["cost_units_median_lo"] <= f["cost_units_median"] <= c["cost_units_median_hi"]
        assert f["cost_units_median_lo"] <= c["cost_units_median"] <= f["cost_units_median_hi"]
        assert np.isnan(c["cost_units_mean"]) and np.isnan(c["simulated_ratio"])
        assert c["n"] == f["n"] == 200 and c["reached_lo"] < c["reached_frac"] < c["reached_hi"]


def test_too_much_censoring_is_not_stated():
    capped, _ = _capped_and_uncapped(60)
    uni = capped.filter(capped["strategy"] == "uniform").row(0, named=True)
    assert uni["reached_frac"] < 0.5
    assert np.isnan(uni["cost_units_median"]) and uni["cost_units_median_hi"] == np.inf
    assert np.isfinite(uni["cost_units_median_lo"])  # above every cost seen, no further


def test_all_reached_still_has_a_reached_interval():
    pr = make_problem(ProblemConfig(n=32, d=3))
    s = summarize_sgd(run_sgd(pr, SGDConfig(replications=8, eps=0.1), progress=False), pr)
    assert (s["reached_frac"] == 1.0).all() and (s["reached_lo"] < 0.7).all()
    assert (s["n"] == 8).all() and s["cost_units_mean"].is_finite().all()


def test_cost_and_steps_intervals_stay_at_zero_and_above():
    """With 2 replications the t interval of the mean cost reached below 0 ([-31.6, 64.3]),
    and the medians' lower bounds were -inf (too few runs for an order statistic): costs
    and steps are >= 0, and fastsim run's and the GRPO summary's intervals are cut so."""
    pr = make_problem(ProblemConfig(n=16, d=2))
    s = summarize_sgd(run_sgd(pr, SGDConfig(replications=2), progress=False), pr)
    assert (s["reached_frac"] == 1.0).all()
    for col in ("cost_units_lo", "cost_units_median_lo", "steps_median_lo"):
        assert (s[col] >= 0.0).all(), col
    assert (s["cost_units_lo"] <= s["cost_units_mean"]).all()


def test_when_every_run_hits_the_cap_the_steps_median_still_has_a_lower_bound():
    # every run is known to need more than max_steps: that is a lower bound, not NaN
    pr = make_problem(ProblemConfig(n=200, d=5))
    runs = run_sgd(pr, SGDConfig(replications=40, max_steps=3), progress=False)
    assert not runs["reached"].any()
    summary = summarize_sgd(runs, pr)
    assert (summary["steps_median_lo"] == 3.0).all() and summary["steps_median"].is_nan().all()


def test_sgd_configs_default_strategies_are_every_sampling_strategy():
    """``fastsim.costaware.configs`` spells the strategies out (the parser imports it, and
    ``sampling`` brings the kernels): the two lists must agree."""
    from fastsim.costaware import configs, sampling

    assert configs.STRATEGIES == sampling.STRATEGIES == SGDConfig().strategies


def test_the_limits_keep_the_names_of_the_modules_that_defined_them():
    """The configurations moved to ``fastsim.costaware.configs`` with their limits;
    ``sgd`` and ``experiment`` import the configurations under the same names, and the
    limits they defined too (``from fastsim.costaware.sgd import MAX_DESIGN`` was an
    ImportError)."""
    from fastsim.costaware import configs, experiment, sgd

    assert sgd.MAX_DESIGN == configs.MAX_DESIGN
    assert (experiment.MAX_RESPONSES, experiment.MAX_CURVE_POINTS) == (
        configs.MAX_RESPONSES, configs.MAX_CURVE_POINTS)


def test_numpy_integers_are_checked_as_the_numbers_they_are():
    """n * d of two np.int32 wrapped to 0 and passed the size check (a 34 GB design);
    prompts * group the same, refused as 'batch=32 ... prompts*group = 0'."""
    from fastsim.costaware.configs import GRPOConfig

    with pytest.raises(ConfigError, match=r"^n\*d = 4294967296 is too large"):
        ProblemConfig(n=np.int32(524288), d=np.int32(8192))
    with pytest.raises(ConfigError, match=r"^prompts\*group = 4294967296 is too large"):
        GRPOConfig(prompts=np.int32(2**20), group=np.int32(4096))
    cfg = ProblemConfig(n=np.int32(300), d=np.int64(4), reg=np.float32(0.5))
    assert (cfg, type(cfg.n)) == (ProblemConfig(n=300, d=4, reg=0.5), int)


@pytest.mark.parametrize("dist, said", [
    ({"mine": [0.5, 0.5]}, r"distributions\['mine'\] has shape \(2,\); allowed: \(32,\)"),
    ({"mine": -np.ones(32) / 32}, r"distributions\['mine'\] is invalid \(its sum is .*\); "
     r"allowed: probabilities finite and >= 0, summing to 1"),
    ({"mine": np.full(32, np.nan)}, r"distributions\['mine'\] is invalid .*; allowed: "
     r"probabilities finite"),
    ({"mine": np.ones(32)}, r"distributions\['mine'\] is invalid \(its sum is 32"),
    ({"uniform": np.ones(32) / 32}, r"distributions label 'uniform' is invalid"),
    ([np.ones(32) / 32], r"distributions=list is invalid"),
])
def test_run_sgd_refuses_an_explicit_distribution_that_is_none(dist, said):
    """A vector of another length was a numpy broadcast traceback; a negative, NaN or
    unnormalised one ran SGD on it and reported its costs without a word."""
    pr = make_problem(ProblemConfig(n=32, d=2))
    cfg = SGDConfig(replications=2, strategies=("uniform",), max_steps=100)
    with pytest.raises(ConfigError, match=said):
        run_sgd(pr, cfg, progress=False, distributions=dist)
    with pytest.raises(ConfigError, match=r"cfg=dict is invalid; allowed: a SGDConfig"):
        run_sgd(pr, {"eps": 0.1})
    ok = run_sgd(pr, cfg, progress=False, distributions={"mine": np.ones(32) / 32})
    assert set(ok["strategy"]) == {"uniform", "mine"}


def test_what_is_not_a_problem_or_runs_is_refused_in_one_line():
    """subset_report(G-list, ...) and run_sgd(None, ...) were AttributeErrors, and
    summarize_sgd of another table a Polars ColumnNotFoundError."""
    import polars as pl

    from fastsim.costaware.sgd import summarize_sgd
    from fastsim.costaware.subset import subset_report

    pr = make_problem(ProblemConfig(n=32, d=2))
    with pytest.raises(ConfigError, match=r"^problem=list is invalid; allowed: a Problem"):
        subset_report([1.0, 2.0], [0.1])
    with pytest.raises(ConfigError, match=r"^problem=NoneType is invalid"):
        run_sgd(None, SGDConfig(replications=2))
    with pytest.raises(ConfigError, match=r"runs has no column 'strategy'; allowed: the rows"):
        summarize_sgd(pl.DataFrame({"a": [1]}), pr)


def test_max_steps_beyond_the_cap_is_refused():
    """SGDConfig(max_steps=2**62) with an eps out of reach was a run that never ended."""
    from fastsim.costaware.configs import MAX_SGD_STEPS

    with pytest.raises(ConfigError, match=r"^max_steps=4611686018427387904 is invalid; "
                       r"allowed: an integer from 1 to 1000000000$"):
        SGDConfig(max_steps=2**62)
    assert SGDConfig(max_steps=MAX_SGD_STEPS).max_steps == MAX_SGD_STEPS


def test_summarize_sgd_names_a_frame_of_another_library():
    """A pandas frame of run_sgd's rows was refused as 'runs has no column 'strategy'',
    though it has one: the message names what runs is, as summarize's does."""
    pr = make_problem(ProblemConfig(n=16, d=2))
    runs = run_sgd(pr, SGDConfig(replications=2, eps=0.2), progress=False)
    with pytest.raises(ConfigError, match=r"^summarize_sgd\(\): runs is a pandas DataFrame; "
                                          r"allowed: the rows of run_sgd"):
        summarize_sgd(runs.to_pandas(), pr)


def test_a_first_run_sgd_announces_its_compile_in_one_line(capsys, monkeypatch, forget_compiled):
    """run_sgd(..., progress=False) compiled the SGD kernel for 10-20 s in silence on a
    machine's first call (a notebook); it says so once per process (a sweep's loop of
    calls without the on-disk cache too), after its arguments are checked."""
    import fastsim.compile_notice as notice

    pr = make_problem(ProblemConfig(n=16, d=2))
    monkeypatch.setattr(notice, "kernels_cached", lambda *names: False)
    forget_compiled()
    with pytest.raises(ConfigError):
        run_sgd(pr, SGDConfig(replications=2, eps=0.2), progress="no")
    assert capsys.readouterr().err == ""
    run_sgd(pr, SGDConfig(replications=2, eps=0.2), progress=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiling the cost-aware kernels"), err
    run_sgd(pr, SGDConfig(replications=2, eps=0.2), progress=False)  # compiled: in memory
    assert capsys.readouterr().err == ""
    forget_compiled()
    monkeypatch.setattr(notice, "kernels_cached", lambda *names: True)  # another process
    run_sgd(pr, SGDConfig(replications=2, eps=0.2), progress=False)
    assert capsys.readouterr().err == ""


def test_an_integer_beyond_a_floats_range_is_refused_by_name(tmp_path):
    """ProblemConfig(reg=10**400), SGDConfig(lam=10**400), select_subset(gamma=10**400) and a
    sweep file's `reg = 1000...0` raised OverflowError from float() inside the checks."""
    import fastsim.costaware as ca
    from fastsim.cli import main
    from fastsim.errors import ConfigError

    huge = 10**400
    for make, field in [(lambda: ca.ProblemConfig(reg=huge), "reg"),
                        (lambda: ca.ProblemConfig(cost_corr=-huge), "cost_corr"),
                        (lambda: ca.SGDConfig(lam=huge), "lam"),
                        (lambda: ca.SGDConfig(eps=huge), "eps"),
                        (lambda: ca.GRPOConfig(lr=huge), "lr"),
                        (lambda: ca.select_subset([1.0], [1.0], huge), "gamma"),
                        (lambda: ca.cost_aware_probs([1.0, -1.0], [1.0, 1.0], floor=huge),
                         "floor"),
                        (lambda: ca.sampling_distribution([1.0], [1.0], "optimal", huge), "lam")]:
        with pytest.raises(ConfigError, match=f"^{field}=-?1000"):
            make()
    sweep = tmp_path / "big.toml"
    sweep.write_text(f'experiment = "subset"\ngamma_fracs = [{huge}]\n')
    assert main(["costaware", "sweep", str(sweep), "--out", str(tmp_path / "out")]) == 2
    assert not (tmp_path / "out").exists()


def test_an_unregularised_least_squares_instance_with_fewer_samples_than_dimensions_is_refused(
        capsys):
    """reg=0 with n < d: A'A is singular, so x* is not unique.  Some instances were refused
    after the solve ('not strongly convex (mu=-6e-17)', advising step='convex', which
    changes nothing), one raised numpy's 'Matrix is singular', and one (n=7, d=8) passed
    with mu = 1.3e-17 from rounding: strongly convex steps of 1e17."""
    import fastsim.costaware as ca
    from fastsim.cli import main
    from fastsim.errors import ConfigError

    for n, seed in [(7, 0), (3, 1), (2, 0)]:
        with pytest.raises(ConfigError, match=rf"^reg=0.0 is invalid; allowed: a number "
                           rf"above 0 with kind='least_squares' and n={n} < d=8 .*, or at "
                           "least as many samples as dimensions$"):
            ca.ProblemConfig(reg=0.0, n=n, d=8, seed=seed)
    assert ca.ProblemConfig(reg=0.0, n=8, d=8).reg == 0.0  # n >= d: A'A is invertible
    assert main(["costaware", "ratios", "--reg", "0", "--n", "3", "--d", "8",
                 "--seed", "1"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and len(cap.err.strip().splitlines()) == 1, cap.err


def test_summarize_sgd_refuses_runs_it_would_pair_wrongly():
    """The simulated ratio pairs each strategy's replications with the baseline's in order:
    two tables concatenated counted every run twice (n 12 of 6 runs, the interval narrowed),
    a baseline of replications 0-3 beside strategies of 2-5 paired 2 with 0 without a word,
    and a baseline of fewer runs was numpy's broadcast error."""
    import polars as pl

    pr = make_problem(ProblemConfig(n=32, d=3))
    runs = run_sgd(pr, SGDConfig(replications=6, eps=0.1), progress=False)
    optimal = pl.col("strategy") == "optimal"
    calls = [
        (pl.concat([runs, runs]), r"runs holds replication 0 of strategy 'uniform' twice; "
         r"allowed: the rows of run_sgd, each \(strategy, replication\) once"),
        (runs.filter((optimal & (pl.col("replication") < 4))
                     | (~optimal & (pl.col("replication") >= 2))),
         r"runs holds replication 0 of strategy 'optimal' and not of 'uniform'; allowed: the "
         r"rows of run_sgd, the baseline's replications in every strategy"),
        (runs.filter(~optimal | (pl.col("replication") < 4)),
         r"runs holds replication 4 of strategy 'uniform' and not of 'optimal'"),
    ]
    for table, message in calls:
        with pytest.raises(ConfigError, match=r"^summarize_sgd\(\): " + message):
            summarize_sgd(table, pr)
    shuffled = runs.sample(fraction=1.0, shuffle=True, seed=1)  # row order is free
    assert summarize_sgd(shuffled, pr).sort("strategy").equals(
        summarize_sgd(runs, pr).sort("strategy"))
    summarize_sgd(runs.filter(~optimal), pr)  # no baseline run: no ratio, nothing to pair


def test_a_problem_changed_by_hand_is_checked_as_the_kernels_trust_it():
    """dataclasses.replace(problem, b=b[:16]) of a 32-sample problem ran SGD reading past b
    without a word, and a NaN mu or a radius of 0 gave every run a NaN cost (counted as runs
    that missed eps): each is one ConfigError naming the field."""
    import dataclasses

    pr = make_problem(ProblemConfig(n=32, d=3))
    calls = [
        ({"b": np.ones(16)}, r"^Problem\(\): b has shape \(16,\); allowed: \(32,\), as "
         r"config.n=32 and config.d=3 say"),
        ({"A": pr.A[:, :2]}, r"^Problem\(\): A has shape \(32, 2\); allowed: \(32, 3\)"),
        ({"c": np.r_[np.inf, pr.c[1:]]}, r"^Problem\(\): c holds NaN or inf"),
        ({"c": np.r_[0.0, pr.c[1:]]}, r"^Problem\(\): c\[0\]=0.0 is invalid"),
        ({"mu": math.nan}, r"^Problem\(\): mu=nan is invalid; allowed: a finite number above 0"),
        ({"radius": 0}, r"^Problem\(\): radius=0 is invalid"),
        ({"f_star": pr.f0 + 1.0}, r"^Problem\(\): f_star=.* is above f0="),
        ({"config": {"n": 32}}, r"^Problem\(\): config=dict is invalid"),
    ]
    for change, message in calls:
        with pytest.raises(ConfigError, match=message):
            dataclasses.replace(pr, **change)
    same = dataclasses.replace(pr, c=list(pr.c))  # a list of the same costs is the same problem
    assert same.c.dtype == np.float64 and np.array_equal(same.c, pr.c)


def test_summarize_sgd_names_a_baseline_or_label_it_cannot_read():
    """baseline=3 was a polars ComputeError traceback; runs of a distribution summarised
    without distributions=, and a distribution's label as the baseline, were both
    "strategy='x' is not a sampling strategy" (x was a label the caller gave, not a
    strategy it asked for).  A distribution's label is a baseline now."""
    pr = make_problem(ProblemConfig(n=16, d=2))
    dists = {"x": np.ones(16) / 16}  # uniform, under another name
    runs = run_sgd(pr, SGDConfig(replications=2, eps=0.5), progress=False, distributions=dists)
    with pytest.raises(ConfigError, match=r"^summarize_sgd\(\): baseline=3 is invalid; allowed: "
                       r"a strategy \(uniform, .*\) or a label of distributions"):
        summarize_sgd(runs, pr, distributions=dists, baseline=3)
    with pytest.raises(ConfigError, match=r"^summarize_sgd\(\): runs holds strategy 'x', "
                       "neither a sampling strategy nor a label of distributions"):
        summarize_sgd(runs, pr)
    s = summarize_sgd(runs, pr, distributions=dists, baseline="x")
    ratio = dict(zip(s["strategy"], s["predicted_ratio"]))
    assert ratio["x"] == 1.0 and ratio["uniform"] == pytest.approx(1.0)
