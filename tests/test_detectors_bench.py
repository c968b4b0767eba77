"""The detector benchmark's engine-free shortcut agrees with the simulator, and its
outputs carry intervals and n."""
import numpy as np
import polars as pl
import pytest

from fastsim import detectors as det
from fastsim.api import simulate
from fastsim.config import SimConfig
from fastsim.workload import generate_workload
from fastsim.kernels.codes import RLHF


@pytest.mark.parametrize("sigma", [0.01, 0.12])
def test_evalstop_counts_and_freed_gpu_hours_match_the_simulator(sigma):
    """Decisions and the GPU-hours a stop frees do not depend on the schedule, so the
    benchmark's counts equal the engine's (MODEL.md section 8)."""
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=40, gpus=32, sigma=sigma)
    n = 4
    w = generate_workload(cfg.workload, n, seed=3)
    scope = w.job_type == RLHF
    cnt = det.cluster_counts(w, *det.triggers("evalstop", {"k": 2}, w.score, scope))
    sim = simulate(cfg, n, seed=3).clusters
    base = simulate(cfg.with_policy("none"), n, seed=3).clusters
    for m in ("tp", "fp", "fn", "tn"):
        assert cnt[m].tolist() == sim[m].to_list(), m
    for m, column in (("stop_tp", "tp_freed"), ("stop_fp", "fp_freed")):
        assert cnt[m].tolist() == sim[column].to_list(), m
    assert cnt["delay"].tolist() == pytest.approx(sim["delay_sum"].to_list())
    freed = (base["gpu_h_total"] - sim["gpu_h_total"]).to_numpy()
    np.testing.assert_allclose(cnt["reclaimed_gpu_h"] + cnt["lost_gpu_h"], freed, rtol=1e-9)


def test_grid_rows_have_intervals_and_n():
    df = det.run_grid([0.05], [0.6], lambda s: [("peak", det.default_params("peak", s)),
                                               ("evalstop", {"k": 2})],
                      n_clusters=3, n_jobs=30)
    assert df.height == 2
    for m in ("precision", "recall", "stop_recall", "fpr", "stop_fpr", "reclaimed_gpu_h",
              "d_reclaimed_gpu_h"):
        assert {m, f"{m}_lo", f"{m}_hi"} <= set(df.columns)
    assert (df["n_clusters"] == 3).all()
    base = df.filter(pl.col("setting") == "evalstop(k=2)")
    assert base["d_reclaimed_gpu_h"][0] == 0.0


def test_decisions_see_observed_scores_only():
    """Changing every hidden array leaves every trigger unchanged."""
    cfg = SimConfig.from_specs("srtf_est", "none", n_jobs=30, sigma=0.05).workload
    w = generate_workload(cfg, 2, seed=1)
    scope = w.job_type == RLHF
    rng = np.random.default_rng(0)
    scrambled = w.with_arrays(hacking=~w.hacking, gold=rng.random(w.gold.shape),
                              duration_h=w.duration_h * 7, ustar=w.ustar[:, ::-1].copy())
    for name in det.DETECTORS:
        p = det.default_params(name, 0.05)
        a = det.triggers(name, p, w.score, scope)
        b = det.triggers(name, p, scrambled.score, scrambled.job_type == RLHF)
        assert all(np.array_equal(x, y) for x, y in zip(a, b)), name


def test_bayes_posterior_separates_clean_curves():
    from fastsim import detector_bounds as bounds

    cfg = SimConfig.from_specs("srtf_est", "none", n_jobs=40, sigma=0.02).workload
    w = generate_workload(cfg, 2, seed=0)
    scope = w.job_type == RLHF
    post = bounds.bayes_posterior(w.score[scope], cfg)
    hack = w.hacking[scope]
    thr = bounds.threshold_at_precision(post, hack, 0.95)
    fire = post >= thr
    assert (fire & hack).sum() / hack.sum() > 0.9 and (fire & ~hack).sum() / (~hack).sum() < 0.2
    # seeing fewer evaluations can only blur it
    early = bounds.bayes_posterior(w.score[scope], cfg, upto=3)
    assert np.abs(early - hack).mean() > np.abs(post - hack).mean()


def test_bounds_rows_have_intervals_and_n():
    from fastsim import detector_bounds as bounds

    b = bounds.bounds((0.05,), n_clusters=4, n_jobs=40)
    assert b["bound"].to_list() == ["offline Bayes", "online Bayes", "offline Bayes, run length unknown",
                                     "noiseless peak"]
    assert (b["n_clusters"] == 2).all()
    for m in ("precision", "recall", "fpr"):
        assert (b[f"{m}_lo"] <= b[m]).all() and (b[m] <= b[f"{m}_hi"]).all()


@pytest.mark.parametrize("workload", [{}, {"noise_rho": 0.3, "sigma_spread": 0.0, "base_rate": 0.3}])
def test_bounds_grid_in_blocks_on_threads_equals_one_pass(monkeypatch, workload):
    """The likelihood grid integrated in blocks of jobs on 1 or 2 threads, and shared
    between the bounds, is bit for bit the one-pass reference's."""
    import numba

    from fastsim import detector_bounds as bounds
    import detector_bounds_reference as ref  # tests/ is on sys.path

    cfg = SimConfig.from_specs("srtf_est", "none", n_jobs=40, sigma=0.05, **workload).workload
    w = generate_workload(cfg, 3, seed=2)
    score = w.score[w.job_type == RLHF]
    monkeypatch.setattr(bounds, "ROWS", 7)  # many blocks, the last one short
    assert score.shape[0] % 7 and score.shape[0] > 14
    before = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            lm = bounds.marginals(score, cfg)
            for hacking in (True, False):
                for upto, n_run in ((None, None), (3, None), (None, 2 * cfg.n_evals)):
                    assert np.array_equal(bounds.log_marginal(score, cfg, hacking, upto, n_run),
                                          ref.log_marginal(score, cfg, hacking, upto, n_run))
            assert np.array_equal(bounds.bayes_posterior(score, cfg, marginal=lm),
                                  ref.bayes_posterior(score, cfg))
            assert np.array_equal(bounds.bayes_posterior(score, cfg, 4, lm),
                                  ref.bayes_posterior(score, cfg, 4))
    finally:
        numba.set_num_threads(before)


def test_a_block_that_fails_leaves_the_queued_blocks_unrun(monkeypatch):
    """A block's error (or Ctrl-C) re-raises once the blocks already running end, not
    after every queued block of the grid has run."""
    import time

    from fastsim import detector_bounds as bounds

    cfg = SimConfig.from_specs("srtf_est", "none", n_jobs=40, sigma=0.05).workload
    score = np.zeros((100, cfg.n_evals))
    calls = []

    def block(rr, *_):
        calls.append(rr.shape[0])
        if len(calls) == 1:
            raise ValueError("the first block")
        time.sleep(0.01)  # long enough for the main thread to see the error first
        return np.zeros(rr.shape[0])

    monkeypatch.setattr(bounds, "ROWS", 1)
    monkeypatch.setattr(bounds, "_log_mean_likelihood", block)
    with pytest.raises(ValueError, match="the first block"):
        bounds.log_marginal(score, cfg, True)
    assert len(calls) < 10  # of 100 blocks


def test_mcnemar_p():
    from fastsim.stats import mcnemar_p

    a = np.array([1] * 10 + [0] * 40, bool)
    assert mcnemar_p(a, a) == 1.0
    assert mcnemar_p(a, np.zeros(50, bool)) < 0.01  # 10 discordant pairs, all one way


@pytest.mark.parametrize("name", [n for n in det.DETECTORS if n != "evalstop"])
def test_streaming_detector_matches_batch(name):
    """The live monitor's streaming form of a setting stops where the benchmark's batch
    decision does and keeps the same (best observed) checkpoint."""
    from fastsim.replay.monitor import StopMonitor

    rng = np.random.default_rng(1)
    u = np.arange(1, 11) / 10
    for ustar in (0.4, 0.7, 2.0):
        x = u / ustar
        scores = 0.8 * x * (1 - np.log(x)) + rng.normal(0, 0.05, u.size)
        params = det.default_params(name, 0.05)
        trig, deliv = det.triggers(name, params, scores[None, None], np.ones((1, 1), np.bool_))
        m = StopMonitor(det.policy(name, params))
        fired = [m.observe("j", e + 1, s).stop for e, s in enumerate(scores)]
        assert fired == [trig[0, 0] > 0 and e + 1 >= trig[0, 0] for e in range(u.size)]
        if trig[0, 0]:
            assert m.decision("j").keep_step == deliv[0, 0] == 1 + int(np.argmax(scores[: trig[0, 0]]))


@pytest.mark.parametrize("name", det.DETECTORS)
def test_every_setting_counts_equal_the_simulators(name):
    """A benchmark setting is the stop policy of the same name: its counts, delays and
    delivered checkpoints equal those of the simulator running that policy."""
    params = det.default_params(name, 0.05)
    cfg = SimConfig.from_specs("fifo", det.spec(name, params), n_jobs=40, gpus=32, sigma=0.05)
    w = generate_workload(cfg.workload, 3, seed=4)
    trig, deliv = det.triggers(name, params, w.score, w.job_type == RLHF)
    cnt = det.cluster_counts(w, trig, deliv)
    sim = simulate(cfg, 3, seed=4, keep_jobs=True)
    for m in ("tp", "fp", "fn", "tn"):
        assert cnt[m].tolist() == sim.clusters[m].to_list(), m
    assert cnt["delay"].tolist() == pytest.approx(sim.clusters["delay_sum"].to_list())
    jobs = sim.jobs.sort(["cluster", "job"])
    assert trig.ravel().tolist() == jobs["trigger_eval"].to_list()
    assert deliv.ravel().tolist() == jobs["delivered_eval"].to_list()
    assert cnt["tp"].sum() + cnt["fp"].sum() > 0  # not vacuous


def test_cli_refuses_bad_input_before_work(tmp_path, capsys):
    from fastsim.cli import main

    assert main(["detectors", "--clusters", "1", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == ("fastsim detectors: error: --clusters=1 is invalid; "
                                       "allowed: an integer from 2 to 1,000,000\n")
    assert main(["detectors", "--seed", "-1", "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == ("fastsim detectors: error: --seed=-1 is invalid; "
                                       "allowed: an integer from 0 to 2^63-1\n")
    assert main(["detectors", "--traces", str(tmp_path / "none.parquet"), "--out", str(tmp_path / "o")]) == 2
    doc = tmp_path / "doc.md"
    doc.write_text("no markers")
    assert main(["detectors", "--doc", str(doc), "--out", str(tmp_path / "o")]) == 2
    assert "markers" in capsys.readouterr().err
    # Path.read_text's UnicodeDecodeError was a traceback (exit 1)
    doc.write_bytes(b"\xff\xfe<!-- fastsim detectors: start -->\n")
    assert main(["detectors", "--doc", str(doc), "--out", str(tmp_path / "o")]) == 2
    assert "doc.md:1: invalid UTF-8 (byte 0xff)" in capsys.readouterr().err
    # the doc rewritten in place as one of --out's tables: one write replaced the other
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "table.md").write_text("<!-- fastsim detectors: start -->\n"
                                               "<!-- fastsim detectors: end -->\n")
    assert main(["detectors", "--quick", "--doc", str(tmp_path / "old" / "table.md"),
                 "--out", str(tmp_path / "old")]) == 2
    assert "the same file as --out's table.md" in capsys.readouterr().err
    # --figures is drawn last: a file there failed after minutes of work, the tables written
    (tmp_path / "a_file").write_text("")
    assert main(["detectors", "--quick", "--figures", str(tmp_path / "a_file"),
                 "--out", str(tmp_path / "o")]) == 2
    assert "--figures " in capsys.readouterr().err
    # --trace-noise without --traces was ignored, and the synthetic grid ran
    assert main(["detectors", "--quick", "--trace-noise", "0.05", "--out", str(tmp_path / "o")]) == 2
    assert "--trace-noise is given but would not be used" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_pareto_figure_names_and_colours_detectors_as_the_registry_does(tmp_path):
    """The figure keeps no names of its own: each family's legend entry and colour are its
    declaration's, as in every other figure."""
    import matplotlib.pyplot as plt

    from fastsim.figures import _style as S
    from fastsim.sweep.figures import load_script

    names = ("evalstop", "cusum", "bocpd")
    grid = det.run_grid((0.05,), (0.6,), lambda s: [("evalstop", {"k": 2})] + [
        (n, det.default_params(n, s)) for n in names[1:]], n_clusters=2)
    grid.write_parquet(tmp_path / "synthetic.parquet")
    mod = load_script("detectors_pareto")
    assert [p.name for p in mod.main(tmp_path, tmp_path)] == ["detectors_pareto.png"]
    fig, ax = plt.subplots()
    mod._points(ax, grid, "reclaimed_gpu_h")
    handles, labels = ax.get_legend_handles_labels()
    plt.close(fig)
    legend = dict(zip(labels, handles))
    assert sorted(legend) == ["BOCPD", "CUSUM", "EvalStop", "EvalStop (k=2)"]
    for label, name in (("EvalStop", "evalstop"), ("CUSUM", "cusum"), ("BOCPD", "bocpd")):
        assert tuple(legend[label][0].get_color()[:3]) == tuple(S.PALETTE[name])


def test_default_params_choose_peak_z_by_the_noise():
    """docs/detectors.md's rule: z = 1.65 below noise 0.05, z = 1 from 0.05 on; sigma0 is
    the noise; other detectors keep their declared knobs."""
    assert det.default_params("peak", 0.02)["z"] == 1.65
    assert det.default_params("peak", 0.05)["z"] == det.default_params("peak", 0.15)["z"] == 1.0
    assert det.default_params("peak", 0.12)["sigma0"] == 0.12
    assert det.default_params("cusum", 0.12) == {"drift": 0.0, "h": 2.0, "sigma0": 0.12}


def test_goal2_rows_carry_intervals_when_no_setting_meets_the_target():
    """A detector with no setting at the target gets the nearest setting's numbers with
    their intervals, not an empty row."""
    from fastsim.detectors_cli import goal2_table

    def rates(p, r, f):
        return {"precision": p, "precision_lo": p - 0.01, "precision_hi": p + 0.01,
                "recall": r, "recall_lo": r - 0.01, "recall_hi": r + 0.01,
                "fpr": f, "fpr_lo": f - 0.01, "fpr_hi": f + 0.01}

    rows = [{"sigma": 0.05, "base_rate": 0.6, "n_clusters": 200, "detector": name,
             "setting": f"{name}(a)", **rates(0.90, 0.80, 0.2)} for name in det.DETECTORS]
    rows += [{"sigma": 0.05, "base_rate": 0.6, "n_clusters": 200, "detector": "evalstop",
              "setting": "evalstop(b)", **rates(0.93, 0.50, 0.1)}]
    bound = pl.DataFrame([{"sigma": 0.05, "n_clusters": 50, "n_jobs": 900, "bound": "noiseless peak",
                           "rule": "r", **rates(0.99, 1.0, 0.01)}])
    lines = goal2_table(pl.DataFrame(rows), bound)
    misses = [ln for ln in lines if "none of its" in ln]
    assert len(misses) == 2 * len(det.DETECTORS)  # nobody reaches 95% precision or 90% recall
    es = [ln for ln in misses if ln.startswith("| evalstop:")]
    assert "none of its 2 settings; highest precision: evalstop(b) | 93.0 [92.0, 94.0] |" in es[0]
    assert "none of its 2 settings; highest recall: evalstop(a) | 90.0 [89.0, 91.0] |" in es[1]
    assert not any(ln.endswith("| | | |") for ln in lines)


@pytest.mark.parametrize("steps, needle", [((0,), "has 1 evaluation; allowed: at least 2 per run"),
                                           ((-30, -15), "row 1: step is -30; allowed: steps >= 0"),
                                           ((0, 0), "appears twice")])
def test_traces_the_detectors_cannot_score_are_one_line_before_work(tmp_path, capsys, steps,
                                                                     needle):
    """One evaluation per run was numpy's RuntimeWarnings and then 'num[0] = nan, den[0] =
    1.0: allowed: finite numbers', a value the file does not hold."""
    import polars as pl

    from fastsim.cli import main

    rows = [{"job_id": f"r{r}", "step": s, "score": 0.1 * i, "truth_gold": 0.1 * i,
             "truth_hacking": r == 0} for r in range(4) for i, s in enumerate(steps)]
    path, out = tmp_path / "traces.parquet", tmp_path / "o"
    pl.DataFrame(rows).write_parquet(path)
    assert main(["detectors", "--quick", "--traces", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


@pytest.mark.parametrize("option", [["--quick"], ["--clusters", "10"], ["--seed", "3"],
                                    ["--figures", "figs"], ["--trace-noise", "0.05"]])
def test_confirm_refuses_an_option_it_would_not_use(tmp_path, capsys, option):
    """--confirm runs the plan's comparison with the plan's settings: --quick, --clusters,
    --seed and --figures were dropped without a word, as if they had not been typed."""
    from conftest import one_line

    traces = tmp_path / "traces.parquet"
    traces.write_bytes(b"")
    argv = ["detectors", "--confirm", "docs/preregistration/detectors_goal3.toml",
            "--traces", str(traces), "--out", str(tmp_path / "o"), *option]
    one_line(capsys, argv, f"{option[0]} is given but would not be used")
    assert not (tmp_path / "o").exists()


def test_quick_takes_the_clusters_given(tmp_path, monkeypatch):
    """--quick --clusters N measured 50 clusters per cell, N dropped without a word; as in
    fastsim bench and fastsim reproduce, --clusters sizes a quick run too."""
    from fastsim.cli import main

    seen = {}

    def stop(*args, n_clusters, **kw):
        seen["n"] = n_clusters
        raise KeyboardInterrupt

    monkeypatch.setattr(det, "run_grid", stop)
    for argv, n in ((["--quick", "--clusters", "7"], 7), (["--quick"], 50)):
        assert main(["detectors", *argv, "--out", str(tmp_path / "o")]) == 130
        assert seen.pop("n") == n


def test_quick_says_how_long_it_takes_as_measured(tmp_path, monkeypatch):
    """--quick said "about a minute" on a terminal, where `fastsim detectors --quick` takes
    2.6 CPU-minutes (the bounds' NumPy on one core most of it): 5-8 minutes on a busy
    2-core machine, numba's cache warm or empty, about 2.5 on idle cores."""
    import io
    import sys

    from fastsim.cli import main

    def stop(*args, **kw):
        raise KeyboardInterrupt

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(det, "run_grid", stop)
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert main(["detectors", "--quick", "--out", str(tmp_path / "o")]) == 130
    said = sys.stderr.getvalue()
    assert "(the slower part; about 3 minutes on 2 busy cores)" in said, said


def test_doc_block_is_replaced_and_the_rest_kept_byte_for_byte(tmp_path):
    """Path.read_text turned a CRLF doc's line ends into LF, and the rewrite saved that
    over the whole file, outside the block too."""
    from fastsim.detectors_cli import END, START, update_doc

    doc = tmp_path / "doc.md"
    doc.write_bytes(f"# Title\r\nintro\r\n{START}\r\nold\r\n{END}\r\ntail\r\n".encode())
    assert update_doc(doc, "| a |\n| 1 |") == \
        f"# Title\r\nintro\r\n{START}\r\n| a |\r\n| 1 |\r\n{END}\r\ntail\r\n"
    doc.write_text(f"x\n{START}\nold\n{END}\n")
    assert update_doc(doc, "new") == f"x\n{START}\nnew\n{END}\n"
    doc.write_text(f"\ufeffx\n{START}\nold\n{END}\n")  # a byte-order mark stays
    assert update_doc(doc, "new") == f"\ufeffx\n{START}\nnew\n{END}\n"


@pytest.mark.parametrize("body", ["{S}\nmine\n{S}\nold\n{E}\n", "{S}\nold\n{E}\nmine\n{E}\n"])
def test_a_doc_with_a_marker_twice_is_refused_not_cut(tmp_path, body):
    """A doc with the start marker twice had everything from the first to the end marker
    replaced, the second marker and the text between them deleted without a word."""
    from fastsim.detectors_cli import END, START, update_doc
    from fastsim.errors import ConfigError

    doc = tmp_path / "doc.md"
    doc.write_text(body.format(S=START, E=END))
    with pytest.raises(ConfigError, match="twice; allowed: a markdown file with one"):
        update_doc(doc, "new")


def test_intervals_stay_within_what_their_quantity_can_take():
    """With 2 clusters the t interval of reclaimed GPU-hours read [-58.5, 68.5], and with 2
    healthy runs a difference of false-positive rates reached past 1: cut to [0, inf) and
    [-1, 1], as fastsim run's intervals are."""
    zero = np.zeros(2)
    counts = {"tp": np.array([1.0, 0.0]), "fp": zero, "fn": zero, "tn": np.ones(2),
              "stop_tp": zero, "stop_fp": zero, "delay": zero,
              "reclaimed_gpu_h": np.array([0.0, 10.0]),
              "lost_gpu_h": np.array([5.0, 0.0]), "regret": zero, "n_scope": np.ones(2)}
    out = det.summarize(counts)
    assert out["reclaimed_gpu_h"].lo == 0.0 and out["lost_gpu_h"].lo == 0.0
    assert out["reclaimed_gpu_h"].hi > 10.0
    # healthy runs: one declines once at the end (k=1 triggers, k=2 does not), one rises
    score = np.array([[1.0, 2.0, 3.0, 2.5], [1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 1.0]])
    arrays = {"score": score, "gold": score, "step": np.tile(np.arange(4) * 10, (3, 1)),
              "hacking": np.array([False, False, True])}
    row = det.trace_row(arrays, "evalstop", {"k": 1})
    assert row["d_fpr"] == 0.5 and row["d_fpr_hi"] == 1.0 and row["d_fpr_lo"] >= -1.0


def test_a_delay_interval_is_not_cut_at_zero():
    """A detector can fire before the gold peak (the traces' peak(z=1) delay is -0.53
    evaluations): clusters whose delays were all >= 0 still bound a true mean below 0,
    so its interval is not cut there as a non-negative quantity's is."""
    ones, zero = np.ones(4), np.zeros(4)
    counts = {"tp": ones, "fp": zero, "fn": zero, "tn": ones, "stop_tp": zero, "stop_fp": zero,
              "delay": np.array([0.0, 0.0, 0.0, 1.0]), "reclaimed_gpu_h": ones,
              "lost_gpu_h": ones, "regret": zero, "n_scope": ones}
    assert det.summarize(counts)["delay_evals"].lo < 0.0
    # traces: 4 hacking runs whose scores first fall at evaluation 3; three peak in gold
    # there (delay 0), one an evaluation before (delay 1)
    score = np.array([[1.0, 3.0, 2.0, 1.0]] * 4)
    gold = np.array([[1.0, 2.0, 3.0, 1.0]] * 3 + [[1.0, 3.0, 2.0, 1.0]])
    arrays = {"score": score, "gold": gold, "step": np.tile(np.arange(4) * 10, (4, 1)),
              "hacking": np.ones(4, bool)}
    row = det.trace_row(arrays, "evalstop", {"k": 1})
    assert row["delay_evals"] == 0.25 and row["delay_evals_lo"] < 0.0


def _one_run_per_seed_or_six(six: bool):
    """4 healthy seeds: two decline at the end (EvalStop k=1 fires), two keep rising; with
    ``six``, every seed has 6 runs that are copies of its one (runs of a seed perfectly
    correlated, as runs sharing every draw can be)."""
    fall, rise = [1.0, 2.0, 3.0, 2.5, 2.6], [1.0, 2.0, 3.0, 4.0, 5.0]
    score = np.array([fall, fall, rise, rise])
    seed = np.arange(4)
    if six:
        score, seed = np.repeat(score, 6, axis=0), np.repeat(seed, 6)
    gold = np.tile(rise, (score.shape[0], 1))  # a stop at the fall loses 2 of gold
    return {"score": score, "gold": gold, "step": np.tile(np.arange(5) * 10, (score.shape[0], 1)),
            "hacking": np.zeros(score.shape[0], bool), "seed": seed}


def test_trace_intervals_count_seeds_not_the_runs_that_share_them():
    """The runs of one toy-RLHF seed share their comparison pool and every policy draw, so
    the seed is the replication: 24 runs that are 6 copies of each of 4 seeds' runs carry
    no more evidence than the 4, and must get the same intervals.  Counted as 24
    independent runs, FPR 50% read [29.1, 70.9] (the exact binomial interval of 12/24)."""
    copies = det.trace_row(_one_run_per_seed_or_six(True), "evalstop", {"k": 1})
    seeds = det.trace_row(_one_run_per_seed_or_six(False), "evalstop", {"k": 1})
    for m in ("fpr", "compute_saved", "regret", "d_fpr"):
        assert copies[m] == pytest.approx(seeds[m])
        assert copies[f"{m}_lo"] == pytest.approx(seeds[f"{m}_lo"])
        assert copies[f"{m}_hi"] == pytest.approx(seeds[f"{m}_hi"])
    assert copies["fpr_lo"] < 0.2 and copies["fpr_hi"] > 0.8
    assert copies["n_runs"] == 24 and copies["n_seeds"] == seeds["n_seeds"] == 4


def test_a_delay_interval_stays_within_the_run():
    """A delay (trigger minus gold peak) lies in [1 - E, E - 1] evaluations, but over a few
    seeds its t interval reached past: margin(k=1,z=2) on the 21-evaluation traces read
    4.25 [-25.93, 34.43].  Here two seeds of one hacking run each, delays 3 and -1 on 4
    evaluations: the interval is cut to [-3, 3], on the traces and in the grid alike."""
    score = np.array([[1.0, 2.0, 3.0, 1.0], [1.0, 3.0, 2.0, 1.0]])  # k=1 fires at 4 and 3
    gold = np.array([[3.0, 2.0, 1.0, 0.0], [1.0, 2.0, 3.0, 4.0]])  # peaks at 1 and 4
    arrays = {"score": score, "gold": gold, "step": np.tile(np.arange(4) * 10, (2, 1)),
              "hacking": np.ones(2, bool), "seed": np.array([0, 1])}
    row = det.trace_row(arrays, "evalstop", {"k": 1})
    assert row["delay_evals"] == 1.0
    assert (row["delay_evals_lo"], row["delay_evals_hi"]) == (-3.0, 3.0)
    ones, zero = np.ones(2), np.zeros(2)
    counts = {"tp": ones, "fp": zero, "fn": zero, "tn": ones, "stop_tp": zero, "stop_fp": zero,
              "delay": np.array([3.0, -1.0]), "reclaimed_gpu_h": ones, "lost_gpu_h": ones,
              "regret": zero, "n_scope": ones}
    est = det.summarize(counts, n_evals=4)["delay_evals"]
    assert (est.mean, est.lo, est.hi) == (1.0, -3.0, 3.0)


def test_triggers_refuses_a_scope_of_other_jobs_than_the_scores():
    """The decision driver trusts its shapes: a scope of 5 jobs beside scores of 3 read past
    them (a job of 10 evaluations 'triggered' at evaluation 32), and a 2-D score was a
    numba TypingError of forty lines.  Each is one line."""
    from fastsim.errors import ConfigError

    score = np.linspace(1.0, 0.0, 30).reshape(1, 3, 10)
    assert det.triggers("evalstop", {"k": 2}, score, np.ones((1, 3), bool))[0].shape == (1, 3)
    for s, scope, shapes in ((score, np.ones((1, 5), bool), r"\(1, 3, 10\) and in_scope \(1, 5\)"),
                             (score[0], np.ones(3, bool), r"\(3, 10\) and in_scope \(3,\)")):
        with pytest.raises(ConfigError, match=r"^triggers\(\): score has shape " + shapes
                           + "; allowed: score \\[clusters, jobs, evaluations\\]"):
            det.triggers("evalstop", {"k": 2}, s, scope)


@pytest.mark.parametrize("lengths", [(3, 4), (3, 5)])
def test_trace_arrays_refuses_runs_of_unequal_length_in_one_line(lengths):
    """Called from Python, runs of 3 and 4 evaluations were a plain ValueError; runs of 3
    and 5 (8 rows, two runs of 4 by the count) were taken, each row of the matrix holding
    parts of both runs.  One ConfigError naming the run, as a command's check says."""
    from fastsim.errors import ConfigError

    rows = [{"job_id": f"r{r}", "step": s, "score": 0.1 * s, "truth_gold": 0.1 * s,
             "truth_hacking": False} for r, n in enumerate(lengths) for s in range(1, n + 1)]
    with pytest.raises(ConfigError) as exc:
        det.trace_arrays(pl.DataFrame(rows))
    assert str(exc.value) == (f"trace_arrays(): traces: run 'r1' has {lengths[1]} evaluations, "
                              "run 'r0' 3; allowed: the same number for every run (traces.parquet "
                              "from fastsim traces toy-rlhf)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_doc_tables_show_stop_fpr_with_its_interval():
    """docs/detectors.md's tables showed FPR (a trigger at any evaluation) but not the
    stop FPR (healthy jobs stopped before completion) that `fastsim run` and the sweep
    summaries report beside it, though synthetic.parquet and traces.parquet held it: each
    table's rows now carry it, with its interval, after FPR."""
    from fastsim.detectors_cli import _fmt, markdown_table, traces_markdown

    synthetic = det.run_grid([0.05], [0.6], lambda s: [("evalstop", {"k": 2}),
                                                       ("evalstop", {"k": 3})],
                             n_clusters=3, n_jobs=30)
    lines = markdown_table(synthetic, None).splitlines()
    head = next(ln for ln in lines if ln.startswith("| setting |"))
    at = _cells(head).index("stop FPR %")
    assert _cells(head)[at - 1] == "FPR %"
    rows = [ln for ln in lines if ln.startswith("| evalstop(")]
    assert len(rows) == 2
    for line, r in zip(rows, synthetic.iter_rows(named=True)):
        assert len(_cells(line)) == len(_cells(head))
        assert _cells(line)[at] == _fmt(r, "stop_fpr") and "[" in _fmt(r, "stop_fpr")

    arrays = _one_run_per_seed_or_six(False)
    traces = pl.DataFrame([det.trace_row(arrays, "evalstop", {"k": k}) for k in (2, 3)]
                          ).with_columns(sigma0=pl.lit(0.1))
    lines = traces_markdown(traces)
    head = next(ln for ln in lines if ln.startswith("| setting | precision"))
    at = _cells(head).index("stop FPR %")
    row = next(ln for ln in lines if ln.startswith("| evalstop(k=3) |"))  # not goal 3's
    assert len(_cells(row)) == len(_cells(head))
    assert _cells(row)[at] == _fmt(traces.row(1, named=True), "stop_fpr")


def test_a_figure_that_cannot_be_written_says_the_tables_are(tmp_path, capsys, monkeypatch):
    """The figure is drawn from the tables once they are written: a full disk under
    --figures said only "cannot write .../detectors_pareto.png", after minutes of work,
    leaving a user to guess that the tables (and --doc) had been written.  Now the line
    says so; --figures, made for the drawing, is not left behind."""
    import types

    import fastsim.detectors_cli as cli
    from conftest import own_lines
    from fastsim.cli import main
    from fastsim.errors import ConfigError
    from fastsim.sweep import figures

    monkeypatch.setattr(cli, "SIGMAS", (0.02,))
    monkeypatch.setattr(cli, "TABLE_SIGMAS", (0.02,))

    def full(out, figures_dir):
        raise ConfigError(f"cannot write {figures_dir}/detectors_pareto.png (No space left "
                          "on device)")

    monkeypatch.setattr(figures, "load_script", lambda name: types.SimpleNamespace(main=full))
    out, figs = tmp_path / "o", tmp_path / "figs"
    assert main(["detectors", "--quick", "--clusters", "2", "--out", str(out), "--figures",
                 str(figs)]) == 2
    lines = own_lines(capsys.readouterr().err)  # after the progress bars
    assert lines[-1:] == [
        f"fastsim detectors: error: cannot write {figs}/detectors_pareto.png (No space left on "
        f"device); the tables under {out} are written, the figure is not (a re-run writes "
        "both)"]
    assert (out / "synthetic.parquet").is_file() and (out / "table.md").is_file()
    assert not figs.exists()


def test_a_one_seed_traces_table_says_1_seed(tmp_path):
    """The command reads a traces table of one seed (every run sharing its draws) and
    scores it; its tables said "4 runs of 1 seeds" and "n = 1 seeds"."""
    from fastsim.detectors_cli import _read_traces, trace_table, traces_markdown

    fall, rise = [1.0, 2.0, 3.0, 2.5, 2.4, 2.3], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    rows = [{"job_id": f"r{r}", "step": 10 * (i + 1), "score": s, "truth_gold": g,
             "truth_hacking": r < 2, "seed": 7}
            for r in range(4) for i, (s, g) in enumerate(zip(fall if r % 2 else rise, rise))]
    path = tmp_path / "traces.parquet"
    pl.DataFrame(rows).write_parquet(path)
    heads = [ln for ln in traces_markdown(trace_table(_read_traces(path), None, path))
             if ln.startswith("####")]
    assert heads[0].startswith("#### toy-RLHF traces (4 runs of 1 seed, 2 hacking, 6 "
                               "evaluations, "), heads[0]
    assert "(n = 1 seed, 2 healthy runs, paired;" in heads[1], heads[1]


def test_a_first_run_says_it_compiles_before_its_bars(tmp_path, monkeypatch, capsys):
    """`fastsim detectors` compiled its kernels in its first cell, 30-140 s behind a bar at
    0% with no word, where every other command says the project's one-line notice."""
    import fastsim.compile_notice as notice
    from fastsim import detectors_cli
    from fastsim.cli import main
    from fastsim.kernels.jit import CACHE, UNCACHED

    detectors_cli._compile_first(0)  # compiles (or loads) on the tiny grid
    # the names are the kernels' own: once they ran, they are found in the cache
    assert notice.kernels_cached(*detectors_cli.KERNELS) == (CACHE and not UNCACHED)
    capsys.readouterr()
    grids = []

    def grid(*args, n_clusters, **kw):  # the tiny grid runs; the benchmark's is stopped
        grids.append(n_clusters)
        if n_clusters != 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(det, "run_grid", grid)
    argv = ["detectors", "--quick", "--clusters", "3", "--out", str(tmp_path / "o")]
    for cached in (False, True):  # as on a first run, then as on any later one
        monkeypatch.setattr(notice, "kernels_cached", lambda *names: cached)
        assert main(argv) == 130
        err = capsys.readouterr().err
        said = "compiling the detector benchmark's kernels (about 30-140 s"
        assert (said in err) == (not cached) and err.count("compiling") == (not cached), err
        assert grids == ([2, 3] if not cached else [3])
        grids.clear()
