"""Toy RLHF traces: deterministic per seed, and genuine over-optimisation for a data-poor proxy."""
import re

import numpy as np
import polars as pl
import pytest

from fastsim.errors import ConfigError
from fastsim.replay.logs import EvalLog
from fastsim.replay.policies import replay
from fastsim.replay.traces import (ToyRLHFConfig, build_world, comparison_pool, fit_bradley_terry,
                                   fit_gao, gao_fit_groups, gao_run_medians, generate_toy_rlhf,
                                   kl_curvature, max_kl_coef, prompt_moment, run_summary)

POOR, RICH = 100, 3200


@pytest.fixture(scope="module")
def traces():
    cfg = ToyRLHFConfig(n_comparisons=(POOR, RICH), kl_coefs=(0.02,), seeds=(0,))
    return generate_toy_rlhf(cfg, progress=False)


def test_deterministic_per_seed():
    cfg = ToyRLHFConfig(n_comparisons=(POOR,), kl_coefs=(0.1,), seeds=(1,), n_steps=30, eval_every=10)
    a = generate_toy_rlhf(cfg, progress=False)
    b = generate_toy_rlhf(cfg, progress=False)
    assert a.equals(b)
    c = generate_toy_rlhf(ToyRLHFConfig(n_comparisons=(POOR,), kl_coefs=(0.1,), seeds=(2,), n_steps=30,
                                        eval_every=10), progress=False)
    assert not np.array_equal(a["score"].to_numpy(), c["score"].to_numpy())


def test_data_poor_proxy_overoptimises_data_rich_does_not(traces):
    poor = traces.filter(pl.col("n_comparisons") == POOR).sort("step")
    gold, proxy = poor["truth_gold"].to_numpy(), poor["truth_proxy"].to_numpy()
    peak = int(gold.argmax())
    assert 0 < peak < gold.size - 1, "gold should peak inside the run"
    assert gold[peak] - gold[-1] > 0.05 * (gold[peak] - gold[0]), "and then fall (the hacking margin)"
    assert proxy[-1] > proxy[peak] and np.mean(np.diff(proxy) > 0) > 0.9, "while the proxy rises"
    assert poor["truth_hacking"][0] and poor["truth_gold_peak_step"][0] == poor["step"][peak]
    rich = traces.filter(pl.col("n_comparisons") == RICH).sort("step")
    g = rich["truth_gold"].to_numpy()
    assert not rich["truth_hacking"][0] and g[-1] >= g.max() - 0.05 * (g.max() - g[0])
    # the observed score is a finite-sample estimate: noisy, but centred on the truth
    err = traces["score"].to_numpy() - traces["truth_gold"].to_numpy()
    assert 0.02 < err.std() < 0.5 and abs(err.mean()) < 3 * err.std() / np.sqrt(err.size)


def test_trace_set_is_a_replayable_long_table(traces):
    assert {"job_id", "step", "score", "loss", "proxy_reward", "job_type"} <= set(traces.columns)
    assert traces.group_by("job_id").len()["len"].to_list() == [21, 21]
    t = traces.with_columns(pl.col("score").alias("metric"))
    res = replay(EvalLog(t, "score", True), ["evalstop:k=2", "oracle"])
    oracle = res.filter(pl.col("policy").str.starts_with("oracle"))
    assert oracle["stopped"].to_list() == traces.group_by("job_id", maintain_order=True) \
        .agg(pl.col("truth_hacking").first())["truth_hacking"].to_list()


def test_proxy_fit_improves_with_data():
    cfg = ToyRLHFConfig()
    world = build_world(cfg)
    x, lab = comparison_pool(world, 3200, seed=0)
    gold = world.w_gold.ravel()
    cos = []
    for n in (100, 3200):
        w = fit_bradley_terry(x[:n], lab[:n], cfg.l2)
        cos.append(w @ gold / np.linalg.norm(w) / np.linalg.norm(gold))
    assert cos[1] > cos[0] and cos[1] > 0.9


def test_gao_fit_and_summaries(traces):
    d = np.linspace(0.05, 3.0, 30)
    a, b, r2 = fit_gao(d, d * (1.5 - 0.7 * np.log(d)))
    assert a == pytest.approx(1.5) and b == pytest.approx(0.7) and r2 == pytest.approx(1.0)
    assert np.isnan(fit_gao([0.0], [0.0])[0])
    runs = run_summary(traces)
    assert runs.height == 2 and (runs["gao_r2"] > 0.5).all()
    poor = runs.filter(pl.col("n_comparisons") == POOR).row(0, named=True)
    rich = runs.filter(pl.col("n_comparisons") == RICH).row(0, named=True)
    assert poor["gao_beta"] > rich["gao_beta"] > 0  # over-optimisation is the -beta d ln d term
    fits = gao_fit_groups(traces)
    assert fits.height == 2 and set(fits.columns) >= {"gao_alpha", "gao_beta", "gao_r2", "d_peak"}


def _gao_traces(alphas, betas, d=np.linspace(0.0, 2.5, 21)):
    """Exact Gao-form runs, one per seed of one cell: per-seed fits recover each seed's
    parameters exactly."""
    frames = []
    for s, (a, b) in enumerate(zip(alphas, betas)):
        dd = np.maximum(d, 1e-300)
        gold = np.where(d > 0, dd * (a - b * np.log(dd)), 0.0) + 1.0
        frames.append(pl.DataFrame({"job_id": f"n100_kl0.1_s{s}", "step": np.arange(d.size) * 15,
                                    "truth_gold": gold, "truth_kl_nats": d ** 2, "seed": s,
                                    "n_comparisons": 100, "kl_coef": 0.1, "truth_hacking": b > 1}))
    return pl.concat(frames)


def test_gao_fit_groups_gives_a_t_interval_over_seeds():
    from scipy import stats

    alphas, betas = np.array([2.0, 2.5, 3.0, 3.4]), np.array([0.4, 0.5, 1.5, 0.9])
    fits = gao_fit_groups(_gao_traces(alphas, betas))
    r = fits.row(0, named=True)
    assert r["n_seeds"] == 4 and r["n_runs"] == 4 and r["hacking_share"] == 0.25
    t = stats.t.ppf(0.975, 3)
    for name, x in (("gao_alpha", alphas), ("gao_beta", betas)):
        half = t * x.std(ddof=1) / 2.0
        assert r[f"{name}_seed_mean"] == pytest.approx(x.mean())
        assert (r[f"{name}_lo"], r[f"{name}_hi"]) == pytest.approx((x.mean() - half, x.mean() + half))
        assert r[f"{name}_lo"] < r[name] < r[f"{name}_hi"]  # the pooled fit, inside here
    # every seed fits exactly: R^2 1 in each, no spread, so no interval (never past 1)
    assert r["gao_r2_seed_mean"] == pytest.approx(1.0) and not r["gao_r2_hi"] > 1.0
    assert r["gao_r2"] < 1.0  # pooling seeds with different parameters loses fit
    one = gao_fit_groups(_gao_traces(alphas[:1], betas[:1])).row(0, named=True)
    assert one["n_seeds"] == 1 and np.isnan(one["gao_alpha_lo"])  # no interval from one seed


def test_gao_run_medians_bootstrap_runs():
    runs = pl.DataFrame({"truth_hacking": [False] * 5 + [True] * 3,
                         "gao_alpha": [3.0, 3.1, 3.2, 3.3, 3.4, 2.0, 2.5, 3.0],
                         "gao_beta": [0.5] * 5 + [1.0, 2.0, float("nan")],
                         "gao_r2": [0.99] * 5 + [0.6, 0.7, 0.8]})
    m = {(r["runs"], r["statistic"]): r for r in gao_run_medians(runs, n_boot=500).iter_rows(named=True)}
    assert m[("healthy", "gao_alpha")]["median"] == pytest.approx(3.2)
    assert m[("all", "gao_alpha")]["n_runs"] == 8 and m[("hacking", "gao_beta")]["n_runs"] == 2
    assert m[("hacking", "gao_r2")]["min"] == pytest.approx(0.6)
    for r in m.values():
        assert r["lo"] <= r["median"] <= r["hi"]
    assert m[("healthy", "gao_alpha")]["lo"] >= 3.0 and m[("healthy", "gao_alpha")]["hi"] <= 3.4
    assert m[("healthy", "gao_alpha")]["hi"] > m[("healthy", "gao_alpha")]["lo"]


def test_gao_run_medians_one_run_has_no_interval():
    runs = pl.DataFrame({"truth_hacking": [False, False, True], "gao_alpha": [3.0, 3.2, 2.0],
                         "gao_beta": [0.5, 0.6, 1.0], "gao_r2": [0.99, 0.98, 0.6]})
    m = {(r["runs"], r["statistic"]): r for r in gao_run_medians(runs, n_boot=200).iter_rows(named=True)}
    assert m[("hacking", "gao_alpha")]["n_runs"] == 1
    assert np.isnan(m[("hacking", "gao_alpha")]["lo"]) and np.isnan(m[("hacking", "gao_alpha")]["hi"])
    assert m[("healthy", "gao_alpha")]["lo"] <= 3.1 <= m[("healthy", "gao_alpha")]["hi"]


@pytest.mark.parametrize("kw,pattern", [({"n_steps": 0}, "n_steps"),
                                        # one evaluation: NaN fits and numpy's warnings
                                        ({"n_steps": 14}, "n_steps=14 is invalid; allowed: at "
                                                          "least eval_every=15"),
                                        ({"n_steps": 9, "eval_every": 10}, "at least eval_every=10"),
                                        ({"vocab": 20, "length": 5}, "vocab=20 and length=5 are "
                                                                     "invalid .*enumerated"),
                                        ({"kl_coefs": (-1.0,)}, "kl_coefs"), ({"lr": float("nan")}, "lr"),
                                        ({"seeds": (0, 1, 0)}, r"seeds=\(0, 1, 0\) is invalid \(0 appears twice\)"),
                                        ({"n_comparisons": (100, 100)}, "n_comparisons.*100 appears twice"),
                                        ({"kl_coefs": (0.1, 0.1)}, "kl_coefs.*0.1 appears twice"),
                                        ({"kl_coefs": (1, 1.0)}, "kl_coefs.*1.0 appears twice"),
                                        # a fractional count is no count (it shared a job id)
                                        ({"seeds": (1, 1.5)}, r"seeds=\(1, 1\.5\) is invalid; allowed: "
                                                              r"a non-empty list of integers"),
                                        ({"n_comparisons": (100, 100.5)}, "n_comparisons=.*a non-empty list "
                                                                     "of integers"),
                                        # values that differ but share a job id name its part
                                        ({"kl_coefs": (0.1, 0.1 + 1e-9)}, "both name their runs kl0.1 in")])
def test_config_validation(kw, pattern):
    with pytest.raises(ConfigError, match=pattern):
        ToyRLHFConfig(**kw)


def test_kl_coefficients_beyond_the_kl_steps_stability_bound_are_refused():
    # lr kl_coef lambda mu < 2: lambda 0.308 (default world), mu 1.29 (3 prompt features,
    # 16 prompts a step); the bound, 20.15, is named rounded down
    assert kl_curvature(ToyRLHFConfig()) == pytest.approx(0.3077, abs=1e-4)
    assert prompt_moment(ToyRLHFConfig()) == pytest.approx(1.2904, abs=1e-4)
    assert max_kl_coef(ToyRLHFConfig()) == 20.1
    assert ToyRLHFConfig(kl_coefs=(20.1,)).kl_coefs == (20.1,)
    with pytest.raises(ConfigError, match=r"kl_coefs=\(0\.1, 20\.2\) is invalid: 20\.2 is beyond .* "
                       r"lr 0\.25 .* from 0 to 20\.1 at this lr$"):
        ToyRLHFConfig(kl_coefs=(0.1, 20.2))
    # the bound scales as 1 / lr and shrinks with smaller batches; no step at lr 0
    assert max_kl_coef(ToyRLHFConfig(lr=0.1)) == 50.3
    assert max_kl_coef(ToyRLHFConfig(batch=4)) == 12.0
    with pytest.raises(ConfigError, match="from 0 to 12 at this lr"):
        ToyRLHFConfig(batch=4, kl_coefs=(13.0,))
    ToyRLHFConfig(lr=0.0, kl_coefs=(1e6,))


def test_the_kl_bound_keeps_3_digits_at_a_decade_boundary():
    # at lr 0.50396 the exact bound is 9.996: 3 digits of it are 9.99, not 9.9
    assert 2 / (0.50396 * kl_curvature(ToyRLHFConfig()) * prompt_moment(ToyRLHFConfig())) == \
        pytest.approx(9.996, abs=1e-3)
    assert max_kl_coef(ToyRLHFConfig(lr=0.50396)) == 9.99
    assert ToyRLHFConfig(lr=0.50396, kl_coefs=(9.95,)).kl_coefs == (9.95,)
    from fastsim.replay.traces import _floor_3_digits
    # a value with 3 digits already stays (binary division takes 10.1 to 10.0), none rises
    for x, want in ((20.1, 20.1), (10.1, 10.1), (20.15, 20.1), (99.96, 99.9), (100.0, 100.0),
                    (0.0012345, 0.00123)):
        assert _floor_3_digits(x) == want and _floor_3_digits(x) <= x


def test_the_kl_bound_in_the_help_is_the_codes(capsys):
    from fastsim.cli import main

    with pytest.raises(SystemExit):
        main(["traces", "toy-rlhf", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for seed in (0, 1):
        bound = max_kl_coef(ToyRLHFConfig(world_seed=seed))
        assert f"{bound:g} with" in text, (seed, bound)


def test_inside_the_kl_bound_the_policy_stays_near_the_reference():
    cfg = ToyRLHFConfig(n_comparisons=(POOR,), kl_coefs=(20.1,), seeds=(0,), n_steps=150)
    inside = generate_toy_rlhf(cfg, progress=False)["truth_kl_nats"].max()
    # the bound is not vacuous: 2.5 times it (past the check, which a frozen config only
    # lets a test do) the penalty step overshoots and the KL grows ~300 times
    object.__setattr__(cfg, "kl_coefs", (50.0,))
    beyond = generate_toy_rlhf(cfg, progress=False)["truth_kl_nats"].max()
    assert inside < 0.05 and beyond > 0.5, (inside, beyond)


def test_simulator_comparison_draws_hacking_peaks_where_the_traces_peak():
    from fastsim.replay.traces import simulator_comparison, trace_peak_range

    runs = pl.DataFrame({"truth_hacking": [True, True, False, True],
                         "truth_gold_peak_step": [30, 80, 100, 55], "final_step": [100] * 4,
                         "n_evals": [11] * 4, "eval_noise_sd": [0.02] * 4,
                         "gold_gain": [0.5] * 4})
    assert trace_peak_range(runs) == (0.3, 0.8)
    # a hacking range that did not start where the traces peak would be refused or differ:
    # with the traces' range the healthy range starts at its upper end (no gap)
    rows = simulator_comparison(runs, ["evalstop:k=2"], n_clusters=2, n_jobs=10, sigma=0.02)
    assert rows.height == 1 and 0.0 <= rows["recall"][0] <= 1.0


SMALL = ["--n-comparisons", "100", "--kl-coefs", "0.1", "--seeds", "1", "--steps", "30"]


def test_trace_files_record_their_generating_parameters_and_regenerate(tmp_path, capsys):
    from fastsim.cli import main
    from fastsim.replay.traces import read_trace_config

    assert main(["traces", "toy-rlhf", *SMALL, "--world-seed", "3", "--out", str(tmp_path / "a")]) == 0
    want = ToyRLHFConfig(n_comparisons=(100,), kl_coefs=(0.1,), seeds=(0,), n_steps=30, world_seed=3)
    for name in ("traces", "runs", "gao_fits"):
        assert read_trace_config(tmp_path / "a" / f"{name}.parquet") == want
    # the file alone regenerates the set, bit for bit; the world seed matters
    assert main(["traces", "toy-rlhf", "--like", str(tmp_path / "a" / "runs.parquet"),
                 "--out", str(tmp_path / "b")]) == 0
    a, b = (pl.read_parquet(tmp_path / d / "traces.parquet") for d in ("a", "b"))
    assert a.equals(b)
    assert main(["traces", "toy-rlhf", "--like", str(tmp_path / "a" / "traces.parquet"),
                 "--world-seed", "0", "--out", str(tmp_path / "c")]) == 0
    assert read_trace_config(tmp_path / "c" / "traces.parquet").world_seed == 0
    c = pl.read_parquet(tmp_path / "c" / "traces.parquet")
    assert not np.array_equal(a["truth_gold"].to_numpy(), c["truth_gold"].to_numpy())
    capsys.readouterr()
    assert main(["traces", "fit-curves", str(tmp_path / "a" / "traces.parquet"), "--boot", "0"]) == 0
    assert "generated with world_seed 3" in capsys.readouterr().out


def test_an_older_trace_file_without_parameters_still_loads(tmp_path, capsys):
    from fastsim.cli import main
    from fastsim.replay.traces import read_trace_config

    assert main(["traces", "toy-rlhf", *SMALL, "--out", str(tmp_path / "a")]) == 0
    old = tmp_path / "old.parquet"
    pl.read_parquet(tmp_path / "a" / "traces.parquet").write_parquet(old)  # no metadata
    assert read_trace_config(old) is None
    capsys.readouterr()
    assert main(["traces", "fit-curves", str(old), "--boot", "0"]) == 0
    assert "records no generating parameters" in capsys.readouterr().out
    assert main(["traces", "toy-rlhf", "--like", str(old), "--out", str(tmp_path / "b")]) == 2
    assert "records no generating parameters" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_like_a_table_toy_rlhf_did_not_write_does_not_call_it_old(tmp_path, capsys):
    """--like on fit-curves' own output said it "records no generating parameters (written
    before fastsim recorded them)": an old trace file, which it is not."""
    from fastsim.cli import main

    fits = tmp_path / "fits.parquet"
    pl.DataFrame({"statistic": ["kl_gamma"], "value": [0.5]}).write_parquet(fits)
    assert main(["traces", "toy-rlhf", "--like", str(fits), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "not written by fastsim traces toy-rlhf, or written before" in err, err
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("text, why", [("{not json", "not valid"), ('{"colour": 1}', "unknown fields"),
                                       # json's place: said neither line nor column
                                       ('{"world_seed": 1,\n "sigma" 2}',
                                        "(Expecting ':' delimiter at line 2, column 10)"),
                                       ('{"world_seed": -1}', "world_seed"),
                                       # the last value was kept silently
                                       ('{"world_seed": 1, "world_seed": 2}',
                                        "key 'world_seed' appears twice in one object"),
                                       # deeper than json parses: was a RecursionError traceback
                                       ("[" * 5000 + "]" * 5000, "nested too deeply")])
def test_a_garbled_parameter_record_is_one_error(tmp_path, capsys, text, why):
    from fastsim.cli import main
    from fastsim.io import table_writer
    from fastsim.replay.traces import CONFIG_KEY

    path = tmp_path / "t.parquet"
    table_writer(pl.DataFrame({"job_id": ["a"]}), path, {CONFIG_KEY: text})(path)
    assert main(["traces", "toy-rlhf", "--like", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert why in err and CONFIG_KEY in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def _old_trace_files(tmp_path, **kw):
    """traces and runs files as older fastsim wrote them: the config recorded unchecked
    (150 steps: with KL 0.02 and 25 the first run hacks, which compare-sim needs)."""
    from fastsim.io import table_writer
    from fastsim.replay.traces import ToyRLHFConfig as C, config_metadata

    cfg = C._from_record(dict(n_comparisons=(100,), seeds=(0,), n_steps=150, **kw))
    traces = generate_toy_rlhf(cfg, progress=False)
    for name, df in (("traces", traces), ("runs", run_summary(traces))):
        table_writer(df, tmp_path / f"{name}.parquet", config_metadata(cfg))(tmp_path / f"{name}.parquet")
    return cfg


def test_an_older_file_with_a_kl_coefficient_past_the_bound_reads_but_does_not_regenerate(tmp_path, capsys):
    from fastsim.cli import main
    from fastsim.replay.traces import read_trace_config

    cfg = _old_trace_files(tmp_path, kl_coefs=(0.02, 25.0))
    with pytest.raises(ConfigError, match="25.0 is beyond"):
        ToyRLHFConfig(**{f: getattr(cfg, f) for f in ToyRLHFConfig.field_names()})
    assert read_trace_config(tmp_path / "traces.parquet") == cfg
    capsys.readouterr()
    assert main(["traces", "fit-curves", str(tmp_path / "traces.parquet"), "--boot", "0"]) == 0
    assert main(["traces", "compare-sim", str(tmp_path / "runs.parquet"), "--clusters", "2"]) == 0
    assert capsys.readouterr().out.count("generated with world_seed 0, 2 runs, 150 steps") == 2
    # regenerating would run the unstable penalty step again: one line, value and bound
    assert main(["traces", "toy-rlhf", "--like", str(tmp_path / "runs.parquet"),
                 "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "25.0 is beyond" in err and "from 0 to 20.1" in err, err
    assert not (tmp_path / "o").exists()
    # the options override the record: within the bound, it regenerates
    assert main(["traces", "toy-rlhf", "--like", str(tmp_path / "runs.parquet"), "--kl-coefs", "0.1",
                 "--out", str(tmp_path / "o")]) == 0


def test_an_older_file_made_with_repeated_values_is_refused_as_ambiguous(tmp_path, capsys):
    from fastsim.cli import main

    _old_trace_files(tmp_path, kl_coefs=(0.1, 0.1))
    for argv in (["fit-curves", str(tmp_path / "traces.parquet"), "--boot", "0"],
                 ["compare-sim", str(tmp_path / "runs.parquet"), "--clusters", "2"],
                 ["toy-rlhf", "--like", str(tmp_path / "runs.parquet"), "--out", str(tmp_path / "o")]):
        assert main(["traces", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "made with repeated kl_coefs (0.1, 0.1)" in err, err
        assert "rows are ambiguous" in err and "regenerate" in err


def test_traces_without_a_hacking_run_are_one_line_for_compare_sim():
    # the peak range was the minimum of an empty array: a raw ValueError
    from fastsim.errors import ConfigError
    from fastsim.replay.traces import trace_peak_range

    runs = pl.DataFrame({"truth_hacking": [False, False], "truth_gold_peak_step": [10, 20],
                         "final_step": [30, 30]})
    with pytest.raises(ConfigError, match="no hacking run \\(of 2\\)"):
        trace_peak_range(runs)


@pytest.mark.parametrize("flag, needle", [("--kl-coefs", "--kl-coefs= is invalid; allowed: a non-empty"),
                                          ("--seeds", "--seeds= is invalid; allowed: a non-empty"),
                                          ("--n-comparisons", "--n-comparisons= is invalid; allowed: a non-empty")])
def test_an_empty_list_option_is_refused_not_read_as_the_default(tmp_path, capsys, flag, needle):
    """--kl-coefs "" generated the default 72-run set, as if the option were not given."""
    from fastsim.cli import main

    out = tmp_path / "o"
    assert main(["traces", "toy-rlhf", flag, "", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("column, value, needle", [
    ("eval_noise_sd", -1.0, "row 1: eval_noise_sd is -1.0; allowed: a standard deviation >= 0"),
    ("gold_gain", -0.5, "row 1: gold_gain is -0.5; allowed: a gain >= 0"),
    ("gold_gain", 0.0, "no run has a positive gold_gain"),
    ("n_evals", 1, "row 1: n_evals is 1; allowed: an integer from 2 to 1000"),
    ("final_step", 0, "row 1: final_step is 0; allowed: a positive step"),
    ("truth_gold_peak_step", 10**6, "row 1: truth_gold_peak_step is 1000000; allowed: a step")])
def test_compare_sim_names_the_runs_file_value_it_cannot_use(traces, tmp_path, capsys, column,
                                                              value, needle):
    """These were refused as the values derived from them, in no file's words: 'sigma=-0.15
    is invalid', 'ustar_hacking=(inf, inf) is invalid', 'n_evals=1 is invalid'."""
    from fastsim.cli import main

    runs = run_summary(traces).with_columns(pl.lit(value).cast(pl.Int64 if isinstance(value, int)
                                                               else pl.Float64).alias(column))
    path, out = tmp_path / "runs.parquet", tmp_path / "cmp.csv"
    runs.write_parquet(path)
    assert main(["traces", "compare-sim", str(path), "--clusters", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: {needle}" in err and len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_runs_file_is_held_to_the_workloads_own_n_evals_bound(traces, monkeypatch):
    """The runs file's n_evals was checked against a restatement of the workload's bound
    (2 to MAX_EVALS, written again here): it is now the workload's declaration itself, so a
    bound changed there is the one a runs file is held to, in the same words."""
    from fastsim import config
    from fastsim.replay.traces import check_run_values

    runs = run_summary(traces)
    assert check_run_values(runs, "runs.parquet") is runs
    n = runs["n_evals"][0]
    monkeypatch.setitem(config.BOUNDS, "n_evals", config.Bound(2, n - 1, integer=True))
    with pytest.raises(ConfigError, match=rf"^runs.parquet: row 1: n_evals is {n}; allowed: an "
                       rf"integer from 2 to {n - 1} \(the simulator's evaluations per job\)"):
        check_run_values(runs, "runs.parquet")


def test_compare_sim_with_no_policy_but_none_is_one_line(traces, tmp_path, capsys):
    """--policy none ran, skipped its only policy and then raised polars'
    ColumnNotFoundError ('sigma' not found) printing the empty result."""
    from fastsim.cli import main

    path, out = tmp_path / "runs.parquet", tmp_path / "cmp.csv"
    run_summary(traces).write_parquet(path)
    assert main(["traces", "compare-sim", str(path), "--policy", "none", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--policy none only" in err and len(err.strip().splitlines()) == 1 and not out.exists()


def _unit_runs():
    return pl.DataFrame({"truth_hacking": [True, True, False, True],
                         "truth_gold_peak_step": [30, 80, 100, 55], "final_step": [100] * 4,
                         "n_evals": [11] * 4, "eval_noise_sd": [0.02] * 4, "gold_gain": [0.5] * 4})


def test_simulator_comparison_labels_each_row_with_the_scope_it_ran():
    """The rows said evalstop(k=2)[scope=all] (replay's default scope) while the
    simulator ran the policy with scope rlhf."""
    from fastsim.replay.traces import simulator_comparison

    rows = simulator_comparison(_unit_runs(), ["evalstop:k=2", "stop_at:f=0.65,scope=all"],
                                n_clusters=2, n_jobs=10, sigma=0.02)
    assert rows["policy"].to_list() == ["evalstop(k=2)", "stop_at(f=0.65)"]


def test_a_policy_the_traces_are_too_short_for_is_refused_before_any_run(monkeypatch):
    """The policies were checked against the traces' evaluation count one by one as they
    ran: evalstop:k=20 was refused after evalstop:k=2 had run, as 'n_evals=11 is invalid',
    an option nobody typed, not naming the traces."""
    import fastsim.api
    from fastsim.replay.traces import simulator_comparison

    monkeypatch.setattr(fastsim.api, "simulate", lambda *a, **k: pytest.fail("a run began"))
    with pytest.raises(ConfigError, match=r"^runs\.parquet: the simulator setting derived from "
                                          r"the traces \(the median n_evals\) is refused: "
                                          r"n_evals=11 is invalid"):
        simulator_comparison(_unit_runs(), ["evalstop:k=2", "evalstop:k=20"], n_clusters=2,
                             n_jobs=10, sigma=0.02, source="runs.parquet")


def test_simulator_comparison_takes_one_spec_and_refuses_nothing_to_compare(monkeypatch):
    """simulator_comparison(runs, "evalstop:k=2") read the spec letter by letter ("policy='e'
    is invalid"); [] and ["none"] returned an empty frame, and n_clusters=1 a row whose
    wasted-share interval was NaN, where fastsim traces compare-sim refuses each."""
    import fastsim.api
    from fastsim.replay.traces import simulator_comparison

    one = simulator_comparison(_unit_runs(), "evalstop:k=2", n_clusters=2, n_jobs=10, sigma=0.02)
    assert one["policy"].to_list() == ["evalstop(k=2)"]
    monkeypatch.setattr(fastsim.api, "simulate", lambda *a, **k: pytest.fail("a run began"))
    for policies, needle in (([], "policies=[] holds no stop policy"),
                             (["none"], "policies=['none'] holds no stop policy"),
                             (5, "policies=5 is invalid")):
        with pytest.raises(ConfigError, match=re.escape(needle)):
            simulator_comparison(_unit_runs(), policies, n_clusters=2, n_jobs=10, sigma=0.02)
    with pytest.raises(ConfigError, match=r"n_clusters=1 is invalid; allowed: an integer >= 2"):
        simulator_comparison(_unit_runs(), ["evalstop:k=2"], n_clusters=1, n_jobs=10, sigma=0.02)


def test_the_wasted_share_interval_stays_within_0_and_1():
    """With 2 clusters the t interval of the wasted share read [-1.53, 1.94]."""
    from fastsim.replay.traces import simulator_comparison

    rows = simulator_comparison(_unit_runs(), ["stop_at:f=0.65"], n_clusters=2, n_jobs=10,
                                sigma=0.02, seed=1)
    assert rows["wasted_share_lo"][0] < rows["wasted_share"][0] < rows["wasted_share_hi"][0]
    assert (rows["wasted_share_lo"] >= 0.0).all() and (rows["wasted_share_hi"] <= 1.0).all()


def test_compare_sim_runs_a_policy_given_twice_once(traces, tmp_path, capsys):
    """--policy evalstop:k=2 --policy evalstop:k=2 printed (and wrote) the row twice."""
    from fastsim.cli import main

    path, out = tmp_path / "runs.parquet", tmp_path / "cmp.csv"
    run_summary(traces).write_parquet(path)
    assert main(["traces", "compare-sim", str(path), "--clusters", "2", "--policy", "evalstop:k=2",
                 "--policy", "evalstop:k=2", "--policy", "evalstop:k=2,scope=all",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.count("evalstop(k=2) ") == 1
    assert pl.read_csv(out)["policy"].to_list() == ["evalstop(k=2)"]


@pytest.mark.parametrize("sigma", ["-1", "nan", "2"])
def test_compare_sim_names_the_sigma_option_it_refuses(traces, tmp_path, capsys, sigma):
    """The refusal named the workload field (sigma=-1.0 is invalid), not the option."""
    from fastsim.cli import main

    path, out = tmp_path / "runs.parquet", tmp_path / "cmp.csv"
    run_summary(traces).write_parquet(path)
    try:  # argparse exits on its own usage errors
        code = main(["traces", "compare-sim", str(path), "--clusters", "2", "--sigma", sigma,
                     "--out", str(out)])
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    cap = capsys.readouterr()
    said = ("--sigma='nan' is invalid; allowed: a number" if sigma == "nan"
            else f"--sigma={sigma} is invalid; allowed: an evaluation-noise standard deviation "
            "in [0, 1]")
    assert cap.err.count("\n") == 1 and said in cap.err, cap.err
    assert not cap.out and not out.exists()


@pytest.mark.parametrize("boot", ["1", "199", "-1"])
def test_fit_curves_refuses_too_few_resamples_for_a_95_interval(traces, tmp_path, capsys, boot):
    """--boot 1 printed a '95% interval' of one resample, which can miss its own estimate."""
    from fastsim.cli import main

    path, out = tmp_path / "traces.parquet", tmp_path / "fit.csv"
    traces.write_parquet(path)
    assert main(["traces", "fit-curves", str(path), "--boot", boot, "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert cap.err.count("\n") == 1 and f"--boot {boot}: allowed: an integer from 200 to " in cap.err
    assert "or 0 for no intervals" in cap.err and not cap.out and not out.exists()


@pytest.mark.parametrize("argv", [["traces", "fit-curves", "{p}", "--boot", "0"],
                                  ["detectors", "--traces", "{p}", "--quick", "--out", "{o}"]])
def test_a_trace_score_beyond_the_detectors_range_names_its_row(traces, tmp_path, capsys, argv):
    """A trace score of 1e308 was read: the detectors' noise fits overflowed (they never
    fired again in that run) and the fitted noise was inf; replay refuses it in a log."""
    from fastsim.cli import main

    p, o = tmp_path / "traces.parquet", tmp_path / "out"
    traces.with_columns(pl.when(pl.int_range(pl.len()) == 2).then(1e308).otherwise(pl.col("score"))
                        .alias("score")).write_parquet(p)
    assert main([a.format(p=p, o=o) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{p}: row 3: score is 1e+308; allowed: finite numbers from -1e150 to 1e150" in err
    assert err.count("\n") == 1 and not o.exists()


@pytest.mark.parametrize("kw", [{"lr": True}, {"world_seed": True}, {"kl_coefs": (True,)},
                                {"kl_coefs": ("0.1",)}, {"n_comparisons": (100.7,)},
                                {"n_comparisons": ("100",)}, {"seeds": (0.5,)}])
def test_toy_rlhf_counts_and_numbers_are_not_bools_text_or_fractions(kw):
    # a bool ran as 1, int() read 100.7 as 100 and "100" as 100 (text for the kernels),
    # and a text KL coefficient was a TypeError traceback
    from fastsim.replay.traces import ToyRLHFConfig

    with pytest.raises(ConfigError, match=f"^{next(iter(kw))}="):
        ToyRLHFConfig(**kw)


def test_numpy_integers_are_checked_as_the_numbers_they_are():
    """vocab=np.int16(256) ** length=np.int16(4) wrapped to 0 and passed the check of at
    most 20000 enumerable responses (2^32 of them)."""
    with pytest.raises(ConfigError, match=r"vocab\*\*length = 4294967296 responses"):
        ToyRLHFConfig(vocab=np.int16(256), length=np.int16(4), kl_coefs=(0.0,))
    cfg = ToyRLHFConfig(n_comparisons=(np.int64(100),), kl_coefs=(0.02,), seeds=(0,),
                        n_steps=np.int32(30))
    assert cfg == ToyRLHFConfig(n_comparisons=(100,), kl_coefs=(0.02,), seeds=(0,), n_steps=30)
    assert type(cfg.n_steps) is int


@pytest.mark.parametrize("given", [(-0.0,), (0,), (-0.0, 0.3)])
def test_a_kl_coefficient_of_minus_zero_or_an_int_is_the_float_it_stands_for(given):
    """--kl-coefs -0 ran as kl_coef -0.0: its runs were named n00100_kl-0_s0, not
    n00100_kl0_s0 as the same run made with 0 is, and the file recorded -0.0; 0 and 0.0
    were two records of one set."""
    from fastsim.replay.traces import job_id_of

    cfg = ToyRLHFConfig(n_comparisons=(100,), kl_coefs=given, seeds=(0,), n_steps=30)
    assert all(type(c) is float and np.copysign(1.0, c) == 1.0 for c in cfg.kl_coefs)
    assert job_id_of(100, cfg.kl_coefs[0], 0) == "n00100_kl0_s0"
    assert cfg.kl_coefs[0] == 0.0 and repr(cfg) == repr(ToyRLHFConfig(
        n_comparisons=(100,), kl_coefs=(0.0,) + tuple(given[1:]), seeds=(0,), n_steps=30))


def test_toy_rlhf_shows_its_progress_in_a_log_too(tmp_path, capsys):
    """Its bars were drawn on a terminal only: `fastsim traces toy-rlhf 2>&1 | tee log`, the
    default set's 70-120 s, printed nothing until the end.  A log gets the bars' lines,
    as a sweep's does (fastsim.progress)."""
    from fastsim.cli import main

    assert main(["traces", "toy-rlhf", *SMALL[:-1], "15", "--out", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    assert "toy RLHF runs: 100%" in err and "\r" not in err, err


def test_toy_rlhf_counts_one_run_and_one_seed_in_the_singular(tmp_path, capsys):
    """One run said '1 runs x 2 evaluations', 'over 1 seeds' and 'n 1 runs'."""
    from fastsim.cli import main

    assert main(["traces", "toy-rlhf", *SMALL, "--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("toy-rlhf: 1 run x 3 evaluations in "), out
    assert "95% t interval over 1 seed])" in out and "n 1 run\n" in out and "n 0 runs\n" in out, out
    assert not re.search(r"\b1 (runs|seeds)\b", out), out
    # the provenance line fit-curves and compare-sim print
    from fastsim.replay.traces import trace_origin

    assert ", 1 run, 30 steps " in trace_origin(tmp_path / "a" / "runs.parquet")


def test_compare_sim_names_the_clusters_option_that_cannot_fit(traces, tmp_path, capsys):
    """--clusters beyond memory was refused as `n_clusters 1000000000000 with ...: largest
    feasible: n_clusters 405037`, simulate's argument, which the command has no option of."""
    from fastsim.cli import main

    path = tmp_path / "runs.parquet"
    run_summary(traces).write_parquet(path)
    n_evals = int(run_summary(traces)["n_evals"].median())
    assert main(["traces", "compare-sim", str(path), "--clusters", "1000000000000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert re.search(rf"^fastsim traces compare-sim: error: --clusters 1000000000000 with n_jobs=100, "
                     rf"n_evals={n_evals} needs about .* GiB of memory, .* GiB available; "
                     r"largest feasible: --clusters \d+$", err.strip()), err
