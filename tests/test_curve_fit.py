"""The trace-grounded curve knobs are fitted by a procedure that recovers known values.

Synthetic trace sets are built from the simulator's own curve forms with known knobs
(KL curvature, hacking sharpness, noise spread, AR(1) noise); ``fit_curve_knobs`` must
find them, and ``fastsim traces fit-curves`` must reject bad input before any work.
"""
from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from fastsim.cli import main
from fastsim.replay.traces import fit_curve_knobs


def synthetic_traces(gamma=0.5, sharp=2.0, spread=0.0, rho=0.0, n_runs=40, n_evals=21,
                     noise=0.03, seed=0):
    """``n_runs`` runs, a quarter hacking: KL = (u^gamma)^2, gold Gao's form with
    ``x = (u / u*)^(gamma m)`` (hacking, u* in the run) or ``(u / u*)^gamma`` (healthy,
    u* = 6), gain 1, noise ``noise * exp(spread Z - spread^2/2)``, AR(1) with ``rho``."""
    rng = np.random.default_rng(seed)
    u = np.arange(n_evals) / (n_evals - 1)
    rows = []
    for r in range(n_runs):
        hacking = r % 4 == 0
        ustar = rng.uniform(0.35, 0.6) if hacking else 6.0
        g = gamma * sharp if hacking else gamma
        with np.errstate(divide="ignore", invalid="ignore"):
            ln_x = g * (np.log(u) - np.log(ustar))
            gold = np.where(u > 0, np.exp(ln_x) * (1 - ln_x), 0.0)
        gold = gold / gold.max()
        sd = noise * np.exp(spread * rng.normal() - spread ** 2 / 2)
        z = rng.normal(size=n_evals)
        eps = np.empty(n_evals)
        eps[0] = z[0]
        for e in range(1, n_evals):
            eps[e] = rho * eps[e - 1] + np.sqrt(1 - rho ** 2) * z[e]
        rows.append(pl.DataFrame({
            "job_id": f"r{r:03d}", "step": (u * 300).round().astype(np.int64), "score": gold + sd * eps,
            "truth_gold": gold, "truth_kl_nats": u ** (2 * gamma), "truth_hacking": hacking}))
    return pl.concat(rows)


def _fit(traces, **kw):
    f = fit_curve_knobs(traces, n_boot=200, **kw)
    return {r["statistic"]: r for r in f.iter_rows(named=True)}


def test_one_run_fits_without_numpy_warnings():
    """The noise spread is a variance between runs: with one run it is NaN, and numpy's
    'Degrees of freedom <= 0' and 'invalid value in divide' warnings reached the user."""
    import warnings

    one = synthetic_traces(n_runs=2).filter(pl.col("job_id") == "r001")  # a healthy run
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f = _fit(one)
    assert np.isnan(f["sigma_spread"]["value"]) and f["sigma_spread"]["n_runs"] == 1
    assert f["kl_gamma"]["value"] == pytest.approx(0.5)


@pytest.mark.parametrize("gamma,sharp", [(0.5, 2.0), (0.8, 1.0), (1.0, 1.0)])
def test_recovers_curvature_and_sharpness(gamma, sharp):
    f = _fit(synthetic_traces(gamma=gamma, sharp=sharp, noise=0.0 + 1e-6))
    assert f["kl_gamma"]["value"] == pytest.approx(gamma, abs=1e-9)
    # u* falls between evaluations and the fit centres on the best evaluation: ~2% bias
    assert f["hack_sharpness"]["value"] == pytest.approx(sharp, rel=0.04)
    assert f["kl_gamma"]["lo"] <= f["kl_gamma"]["value"] <= f["kl_gamma"]["hi"]


def test_recovers_noise_spread_and_correlation():
    iid = _fit(synthetic_traces(spread=0.0, n_runs=200, seed=1), height=(0.75, 0.75))
    assert iid["sigma_spread"]["value"] < 0.15  # only the sampling error, removed
    assert abs(iid["noise_rho"]["value"]) < 0.1
    assert iid["noise_rho"]["lo"] < 0.0 < iid["noise_rho"]["hi"]
    wide = _fit(synthetic_traces(spread=0.6, n_runs=200, seed=2), height=(0.75, 0.75))
    assert wide["sigma_spread"]["value"] == pytest.approx(0.6, abs=0.12)
    ar = _fit(synthetic_traces(rho=0.6, n_runs=200, seed=3))
    assert ar["noise_rho"]["lo"] < 0.6 < ar["noise_rho"]["hi"]


def test_healthy_range_starts_where_hacking_ends_and_grows_with_flatness():
    steep = _fit(synthetic_traces(gamma=0.8), ustar_hacking_hi=0.75)["ustar_healthy_hi"]["value"]
    flat = _fit(synthetic_traces(gamma=0.8), ustar_hacking_hi=0.5)["ustar_healthy_hi"]["value"]
    assert steep > 0.75 and flat > 0.5
    assert np.isfinite(steep)


def test_fit_curves_cli(tmp_path, capsys):
    path = tmp_path / "traces.parquet"
    synthetic_traces().write_parquet(path)
    assert main(["traces", "fit-curves", str(path), "--boot", "200", "--out",
                 str(tmp_path / "fit.csv")]) == 0
    out = capsys.readouterr().out
    assert "kl_gamma" in out and (tmp_path / "fit.csv").exists()


@pytest.mark.parametrize("args,msg", [
    (["missing.parquet"], "no such file"),
    (["{p}", "--boot", "-1"], "--boot"),
    # a traceback from numpy's generator, and a resampling loop of years
    (["{p}", "--seed", "-1", "--out", "fit.csv"], "--seed -1: allowed: an integer >= 0"),
    (["{p}", "--boot", "99999999999", "--out", "fit.csv"],
     "--boot 99999999999: allowed: an integer from 200 to 100000"),
    (["{p}", "--out", "fit.txt"], "--out"),
    (["{bad}"], "missing columns"),
])
def test_fit_curves_cli_rejects_bad_input(tmp_path, capsys, monkeypatch, args, msg):
    monkeypatch.chdir(tmp_path)  # fit.csv, were it written
    p = tmp_path / "traces.parquet"
    synthetic_traces(n_runs=8).write_parquet(p)
    bad = tmp_path / "bad.parquet"
    pl.DataFrame({"job_id": ["a"], "step": [0]}).write_parquet(bad)
    argv = ["traces", "fit-curves"] + [a.format(p=p, bad=bad) for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1
    assert not (tmp_path / "fit.csv").exists()


@pytest.mark.parametrize("damage, needle", [
    (lambda t: t.with_columns(pl.lit(-1.0).alias("truth_kl_nats")),
     "row 1: truth_kl_nats is -1.0; allowed: a KL divergence >= 0"),
    (lambda t: t.with_columns((pl.col("step") - 1000).alias("step")), "row 1: step is -1000"),
    (lambda t: t.filter(pl.col("step") <= 1), "fewer than 3 evaluations"),
    (lambda t: t.with_columns(pl.lit(0.0).alias("truth_kl_nats")),
     "truth_kl_nats above 0 at fewer than 2 evaluations after the first"),
    (lambda t: t.with_columns(pl.lit(0.5).alias("truth_gold")),
     "no truth_gold above its first evaluation's"),
    (lambda t: t.with_columns(pl.col("truth_gold").alias("score")),
     "score equals truth_gold at every evaluation")])
def test_fit_curves_names_a_trace_value_it_cannot_fit(tmp_path, capsys, monkeypatch, damage,
                                                      needle):
    """Each was a traceback (numpy's TypeError 'expected non-empty vector for x',
    LinAlgError, a ZeroDivisionError), or negative steps a fit of kl_gamma -8."""
    monkeypatch.chdir(tmp_path)
    damage(synthetic_traces(n_runs=8)).write_parquet("t.parquet")
    assert main(["traces", "fit-curves", "t.parquet", "--boot", "200", "--out", "fit.csv"]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "fit.csv").exists()


def test_noise_level_matches_noise_over_gain_on_both_sides():
    from dataclasses import replace

    from fastsim.config import WorkloadConfig
    from fastsim.replay.traces import noise_level
    from fastsim.workload import generate_workload

    runs = pl.DataFrame({"eval_noise_sd": [0.02, 0.03, 0.04], "gold_gain": [1.0, 1.0, 1.0]})
    wl = WorkloadConfig(n_jobs=40, mix=(0.0, 0.0, 1.0), n_evals=21)
    sigma = noise_level(runs, wl, n_clusters=5, seed=3)
    w = generate_workload(replace(wl, sigma=sigma), 5, seed=3)
    gain = w.gold.max(axis=2)
    ratio = np.std(w.score - w.gold, axis=2, ddof=1) / gain
    assert np.median(ratio) == pytest.approx(0.03, rel=1e-6)
    assert noise_level(runs) == pytest.approx(0.03 * 0.75)  # no workload: gain = mean h


def test_an_infinite_estimate_keeps_its_interval_and_one_run_has_none():
    """Infinite resamples (``ustar_healthy_hi`` out of reach) were dropped before the
    percentiles, so an infinite estimate got a finite interval that missed it; a knob
    from one run got a zero-width (or resampling-only) interval."""
    from fastsim.replay.traces import _percentiles

    inf = float("inf")
    assert _percentiles(np.array([1.0, 2.0, 3.0]), (2.5, 97.5)) == list(
        np.percentile([1.0, 2.0, 3.0], [2.5, 97.5]))
    lo, hi = _percentiles(np.array([1.0, 2.0, inf, inf]), (2.5, 97.5))
    assert lo == pytest.approx(1.075) and hi == inf
    assert _percentiles(np.array([-inf, 1.0, 2.0]), (2.5, 97.5)) == [-inf, pytest.approx(1.95)]
    one_hacking = synthetic_traces(n_runs=40)
    keep = one_hacking.filter(~pl.col("truth_hacking") | (pl.col("job_id") == "r000"))
    f = _fit(keep)
    assert f["hack_sharpness"]["n_runs"] == 1 and np.isnan(f["hack_sharpness"]["lo"])
    for r in f.values():
        if r["lo"] == r["lo"]:
            assert r["lo"] <= r["value"] <= r["hi"]


@pytest.mark.parametrize("kind, missing", [
    (True, ("ustar_healthy_hi", "healthy_early_share")), (False, ("hack_sharpness",))])
def test_a_set_of_one_kind_fits_the_other_kinds_knobs_as_nan(tmp_path, capsys, kind, missing):
    """A set with only hacking runs was a TypeError traceback (the healthy median of no
    run is None); the knobs of the absent kind are NaN with n 0, said so in the table."""
    path = tmp_path / "one_kind.parquet"
    synthetic_traces().filter(pl.col("truth_hacking") == kind).write_parquet(path)
    assert main(["traces", "fit-curves", str(path), "--boot", "200"]) == 0
    out = capsys.readouterr().out
    for name in missing:
        line = next(x for x in out.splitlines() if x.startswith(name))
        assert "nan" in line and "(no run of the kind it is fitted to)" in line and line.endswith("n 0")
    assert "kl_gamma" in out and "(no run of the kind" not in out.split("kl_gamma")[1].splitlines()[0]


@pytest.mark.parametrize("n_boot", [1, 50, True, 200.0])
def test_too_few_resamples_for_a_95_interval_are_refused(n_boot):
    """n_boot=1 gave a '95% percentile interval' of one resample, which can miss its own
    estimate."""
    from fastsim.errors import ConfigError

    with pytest.raises(ConfigError, match=f"n_boot={n_boot!r} is invalid; allowed: an integer >= 200"):
        fit_curve_knobs(synthetic_traces(n_runs=4), n_boot=n_boot)


@pytest.mark.parametrize("kw, needle", [
    ({"ustar_hacking_hi": float("nan")}, "ustar_hacking_hi=nan is invalid"),
    ({"ustar_hacking_hi": 5.0}, "ustar_hacking_hi=5.0 is invalid"),
    ({"ustar_hacking_hi": "0.8"}, "ustar_hacking_hi='0.8' is invalid"),
    ({"height": (0.9, 0.6)}, "height=(0.9, 0.6) is invalid"),
    ({"height": (0.0, 0.0)}, "height=(0.0, 0.0) is invalid")])
def test_a_bad_peak_range_or_height_is_refused_not_fitted_to_nan(kw, needle):
    """ustar_hacking_hi=nan gave ustar_healthy_hi NaN, 5.0 (past the run's end) a number,
    height=(0, 0) a NaN sigma_spread after numpy's warnings, and (0.9, 0.6) a fit: each
    returned as a result, with no error."""
    from fastsim.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(needle) + "; allowed: "):
        fit_curve_knobs(synthetic_traces(n_runs=4), n_boot=0, **kw)


def test_the_hacking_peaks_upper_end_is_held_to_the_workloads_own_bound(monkeypatch):
    """ustar_hacking_hi was checked against a restatement of ustar_hacking's bound (1 /
    MAX_EVALS to 1, written again here): it is now the workload's declaration itself, so a
    bound changed there is the one the fit is held to, in the same words."""
    from fastsim import config
    from fastsim.errors import ConfigError

    traces = synthetic_traces(n_runs=4)
    fit_curve_knobs(traces, n_boot=0, ustar_hacking_hi=0.005)
    monkeypatch.setitem(config.RANGE_BOUNDS, "ustar_hacking", (0.01, 0.9, False))
    with pytest.raises(ConfigError, match=r"^ustar_hacking_hi=0.005 is invalid; allowed: a "
                       r"number from 0.01 to 0.9 \(the upper end"):
        fit_curve_knobs(traces, n_boot=0, ustar_hacking_hi=0.005)


def test_no_resamples_is_no_interval_and_a_numpy_count_is_a_count():
    f = fit_curve_knobs(synthetic_traces(n_runs=4), n_boot=0)
    assert f["lo"].is_nan().all() and f["hi"].is_nan().all()
    assert fit_curve_knobs(synthetic_traces(n_runs=4), n_boot=np.int64(200))["lo"].is_not_nan().any()


@pytest.mark.parametrize("boot, header", [("0", "(no intervals: --boot 0):"),
                                          ("200", "(95% intervals: 200 resamples of the runs):")])
def test_the_header_says_whether_there_are_intervals(tmp_path, capsys, boot, header):
    # --boot 0 printed "95% intervals: 0 resamples of the runs" above rows of no interval
    path = tmp_path / "t.parquet"
    synthetic_traces(n_runs=4).write_parquet(path)
    assert main(["traces", "fit-curves", str(path), "--boot", boot]) == 0
    out = capsys.readouterr().out.splitlines()
    assert next(x for x in out if x.startswith("curve knobs fitted to")).endswith(header), out
