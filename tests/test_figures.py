"""Every figure script runs on a tiny reproduction and writes PNG and PDF; the report
has every MODEL.md section 9 row."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fastsim.errors import ConfigError
from fastsim.sweep.figures import FIGURE_SCRIPTS, draw_all, load_script
from fastsim.sweep.reproduce import PAPER_SWEEPS, headline_count, reproduce, uncounted_note
from conftest import held_elsewhere, one_line
from fastsim.sweep.scoring import (FITTED, MATCH, MISS, NOT_COMPARABLE, PAPER_ROWS, ROWS_BY_KEY,
                                   TIED, in_headline)


@pytest.fixture(scope="module")
def tiny_reproduction(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    info = reproduce(out / "results", clusters=3, chunk=3, figures_dir=None,
                     report=out / "REPRODUCTION.md", progress=False,
                     base_overrides={"n_jobs": 40}, command="fastsim reproduce (test)")
    return out, info


def test_reproduce_writes_every_sweep_and_the_report(tiny_reproduction):
    out, info = tiny_reproduction
    for name in PAPER_SWEEPS:
        s = pl.read_parquet(out / "results" / name / "summary.parquet")
        assert s["n"].max() == 3
    text = (out / "REPRODUCTION.md").read_text()
    for t in PAPER_ROWS:
        assert f"| {t.result} |" in text
    assert "EvalStop JCT gain over LossAware" in text and "k sweep" in text
    assert [r["key"] for r in info["rows"]] == [t.key for t in PAPER_ROWS]
    assert "held-out rows match" in text and "stop recall" in text
    assert "all GPU-hours of hacking jobs" in text


def test_the_report_names_the_command_that_draws_its_figures_again(tiny_reproduction,
                                                                    tmp_path):
    """With --figures-dir elsewhere the report said its figures were drawn 'by fastsim
    figures OUT', which draws them into OUT/figures."""
    from fastsim.sweep.aggregate import read_summary
    from fastsim.sweep.reproduce import render_report

    out, info = tiny_reproduction
    summaries = {name: read_summary(out / "results" / name) for name in PAPER_SWEEPS}
    text = render_report(info, summaries, "fastsim reproduce (test)", out / "results",
                         tmp_path / "figs")
    assert (f"`fastsim figures {out / 'results'} --out {tmp_path / 'figs'}` draws them "
            "again") in text


def test_the_report_says_when_the_commit_it_names_is_not_the_code_that_ran(tmp_path,
                                                                          monkeypatch):
    """A reproduction run from a checkout with an edited source named its commit alone,
    whose code gives other numbers; the figures and the report it writes into the
    checkout (figures/*.png) are no edit of the code."""
    import subprocess

    import fastsim
    from fastsim.sweep import reproduce as R

    top = tmp_path / "checkout"
    for name in ("fastsim/__init__.py", "figures/headline.py", "sweeps/headline.toml"):
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text("")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(top)]
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "c"]):
        subprocess.run(git + args, check=True, capture_output=True)
    monkeypatch.setattr(fastsim, "__file__", str(top / "fastsim" / "__init__.py"))
    monkeypatch.setattr(R, "package_folders", lambda: {
        "": [top / "fastsim"], "figures": [top / "figures"], "sweeps": [top / "sweeps"]},
        raising=False)
    (top / "figures" / "headline.png").write_bytes(b"drawn")
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    assert R._git_commit().strip("`") == commit
    for name in ("sweeps/headline.toml", "fastsim/__init__.py"):
        subprocess.run(git + ["stash", "-q", "--include-untracked"], capture_output=True)
        (top / name).write_text("edited = 1\n")
        assert R._git_commit().endswith(" (edited since: uncommitted changes to fastsim's "
                                        "source or sweep files)"), name


def test_the_report_names_the_seed_the_sweeps_ran_with(tiny_reproduction):
    """The report said "seed 0" whatever seed ``reproduce`` was given."""
    from fastsim.sweep.aggregate import read_summary
    from fastsim.sweep.reproduce import render_report

    out, info = tiny_reproduction
    assert info["seed"] == 0
    summaries = {name: read_summary(out / "results" / name) for name in PAPER_SWEEPS}
    text = render_report({**info, "seed": 7}, summaries, "fastsim reproduce (test)",
                         out / "results", None)
    assert "identical clusters), seed 7." in text


def test_report_never_counts_a_fitted_row(tiny_reproduction):
    """Each row keeps its pre-registered fitted mark and verdict, and the headline counts
    only the held-out rows (the scoring's own tests do not see the report's rows)."""
    out, info = tiny_reproduction
    for row, paper in zip(info["rows"], PAPER_ROWS):
        assert row["fitted_by"] == paper.fitted_by, row["key"]
        assert (row["verdict"] == FITTED) == bool(paper.fitted_by), row["key"]
        assert (row["verdict"] == TIED) == bool(paper.derived_from), row["key"]
    matched, held = headline_count(info["rows"])
    assert held == sum(not (r.fitted_by or r.derived_from) and r.kind != "within"
                       for r in PAPER_ROWS) == 9
    text = (out / "REPRODUCTION.md").read_text()
    assert f"**{matched} of {held} held-out rows match**" in text
    # rows that could not be scored are said, not left to read as misses
    unscored = sum(r["verdict"] == NOT_COMPARABLE for r in info["rows"]
                   if in_headline(ROWS_BY_KEY[r["key"]], r["verdict"]))
    assert unscored  # three clusters of 40 jobs leave some rows without a verdict
    assert (f"**{matched} of {held} held-out rows match** ({unscored} of them not comparable: "
            "no estimate or too few clusters) the paper") in text


def test_the_headline_says_which_rows_it_leaves_out_and_why():
    """Three of the six matches of "6 of 14" were single schedulers' gains inside the
    paper's one range 8.9% to 25.2%, and two were tied to the fit: the headline counts
    neither, and says how many of each it left out."""
    def row(key, verdict, fitted_by=""):
        return {"key": key, "verdict": verdict, "fitted_by": fitted_by,
                "paper": ROWS_BY_KEY[key].paper_text}
    rows = [row("fpr", TIED), row("gain_fifo", MATCH), row("gain_sjf_est", MATCH),
            row("gain_loss_aware", MISS), row("gain_srtf_est", FITTED, "n_evals")]
    assert uncounted_note(rows) == (
        "; not counted: 1 fitted (a parameter was fitted to them), 1 tied to the fit "
        "(functions of the fitted cell's numbers), 3 single gains inside the paper's one "
        "range, which its range row scores once")
    assert uncounted_note([row("recall", MISS)]) == ""


def test_report_says_when_the_scoring_was_declared(tiny_reproduction):
    """The report said its scoring was "declared ... before any parameter was fitted", but
    est_sigma (1.15, still the default) and a first n_evals, sigma and u* were fitted, and
    a full reproduction with them seen, before scoring.py's tolerances were declared: the
    report says which commit declared them and what was fitted before."""
    from fastsim.sweep.scoring import DECLARED

    out, _ = tiny_reproduction
    text = (out / "REPRODUCTION.md").read_text()
    assert "before any parameter was fitted" not in text
    assert DECLARED in text and "`0aa2a5c`" in DECLARED and "est_sigma" in DECLARED


def test_figure_scripts_draw_png_and_pdf(tiny_reproduction, tmp_path):
    out, _ = tiny_reproduction
    written = draw_all(out / "results", tmp_path, formats=("png", "pdf"))
    paper = [n for n in FIGURE_SCRIPTS if n != "frontier"]  # frontier: its own sweep, below
    # and the mixed workload's sweep, which no paper figure reads, a figure of its own
    expected = {f"{name}.{fmt}" for name in paper + ["sweep_mixed"] for fmt in ("png", "pdf")}
    assert {p.name for p in written} == expected
    for p in written:
        assert p.stat().st_size > 1000
        head = p.read_bytes()[:8]
        assert head.startswith(b"%PDF") if p.suffix == ".pdf" else head.startswith(b"\x89PNG")


def test_a_figures_directory_moved_while_drawing_is_not_made_again(tiny_reproduction,
                                                                  tmp_path):
    """Each figure's write made every missing directory of its file: the --out directory
    moved by another process while `fastsim figures` drew was made anew at its old path,
    with the figures drawn after the move.  Now the drawing stops at the next figure, in
    one line, and nothing is made there."""
    out, _ = tiny_reproduction
    figs, moved = tmp_path / "figs", tmp_path / "moved"

    def move_once(line):  # once the first figure is written
        if line.startswith("[figures] headline:") and not moved.exists():
            figs.rename(moved)
    with pytest.raises(ConfigError, match=re.escape(
            f"cannot write {figs / 'k_tradeoff.png'} ({figs} was moved or deleted while the "
            "command ran; it is not made again at its old path)")):
        draw_all(out / "results", figs, formats=("png",), scripts=("headline", "k_tradeoff"),
                 log=move_once)
    assert not figs.exists() and [p.name for p in moved.iterdir()] == ["headline.png"]


def test_figure_scripts_read_parquet_only():
    """The layering rule: figures never import the engine."""
    for name in FIGURE_SCRIPTS + ("_style",):
        src = (Path(load_script.__code__.co_filename).parents[2] / "figures" / f"{name}.py")
        text = src.read_text()
        for banned in ("fastsim.kernels", "import kernels", "from kernels", "fastsim.api",
                       "simulate("):
            assert banned not in text, f"figures/{name}.py uses {banned}"


def test_a_directory_with_nothing_to_draw_is_refused_before_anything_is_made(tmp_path, capsys):
    """`fastsim figures DIR` on a directory with no sweep results (a mistyped --out, or
    the sweep's parent) exited 0 with "0 files written" and an empty DIR/figures made; the
    figure scripts run alone already refused it.  One line, exit 2, nothing made."""
    from fastsim.cli import main

    logs = []
    with pytest.raises(ConfigError, match=f"^{tmp_path} holds no sweep results"):
        draw_all(tmp_path, tmp_path / "figs", log=logs.append)
    assert logs == [] and not (tmp_path / "figs").exists()
    assert main(["figures", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured
    assert "nothing to draw; allowed: a sweep's --out, or a directory of them" in captured.err
    assert list(tmp_path.iterdir()) == []


def test_figures_choose_and_refuse_before_the_plotting_libraries_are_imported(own_sweeps,
                                                                             tmp_path):
    """Loading the figure scripts to check a call imported seaborn, and with it pandas and
    scipy.stats (about 3.6 CPU s): a refusal came seconds late, and a valid call said
    nothing for 7-8 s on a busy machine.  Now the choice is made and said first, and the
    first drawing imports them."""
    import subprocess

    code = f"""if True:
        import sys
        from fastsim.cli import main
        from fastsim.sweep.figures import draw_all
        heavy = lambda: [m for m in ("seaborn", "scipy.stats", "pandas") if m in sys.modules]
        assert main(["figures", {str(own_sweeps / "two")!r}, "--metrics", "nosuch"]) == 2
        print("refused", heavy())
        said = []
        draw_all({str(own_sweeps / "two")!r}, {str(tmp_path / "f")!r}, formats="png",
                 log=lambda line: said.append(heavy()))
        print("first line", said[0])
        """
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["refused []", "first line []"], run.stdout
    assert (tmp_path / "f" / "sweep_two.png").is_file()


def test_a_refused_drawing_leaves_the_sweep_directory_free_for_the_run_it_asks_for(tmp_path):
    """draw_all holds the sweep directory it draws into; refused (here: a sweep not yet
    aggregated, "run `fastsim sweep FILE --out DIR` again"), its lock stayed held for as
    long as the caller kept the exception (a notebook keeps the last one), and that run was
    refused as "in use" by the caller's process."""
    import fcntl
    import os

    (tmp_path / "sw" / "cells").mkdir(parents=True)
    (tmp_path / "sw" / "sweep.json").write_text('{"grid_hash": "0"}')
    (tmp_path / "sw" / "notes").write_text("")
    for figures, refusal in (("figures", "fastsim sweep FILE --out .* again"),
                             ("notes", "exists and is not a directory")):
        with pytest.raises(ConfigError, match=refusal) as kept:
            draw_all(tmp_path / "sw", tmp_path / "sw" / figures, log=print)
        assert kept.traceback  # still held here
        fd = os.open(tmp_path / "sw" / "sweep.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while held
        finally:
            os.close(fd)


def test_figures_are_never_drawn_among_a_sweeps_cells(tmp_path):
    """`fastsim figures DIR --out DIR/cells` is refused; draw_all and a figure script run
    alone (``python figures/k_tradeoff.py DIR DIR/cells``) drew there."""
    _tiny_sweep(tmp_path, "k_sweep", 'policy = ["evalstop:k=1", "evalstop:k=2"]')
    sw = tmp_path / "results" / "k_sweep"
    with pytest.raises(ConfigError, match=f"^--out {sw / 'cells'}: among the files of the "):
        draw_all(sw, sw / "cells", formats="png", log=print)
    assert [p.name for p in (sw / "cells").iterdir() if not p.name.startswith("cell=")] == []


@pytest.fixture(scope="module")
def own_sweeps(tmp_path_factory):
    """Sweeps under names of their own, run by `fastsim sweep`: one axis (no baseline), two
    (sigma, policy; the baseline's cells add none), three and four; and k, a policy
    parameter that stop_at and the baseline do not have."""
    from fastsim.cli import main

    tmp = tmp_path_factory.mktemp("own")
    axes = {"one": ('baseline = false\n', 'sigma = [0.01, 0.1]'),
            "two": ('', 'sigma = [0.01, 0.1]\npolicy = ["evalstop:k=2", "stop_at:f=0.65"]'),
            "three": ('', 'sigma = [0.01, 0.1]\nbase_rate = [0.3, 0.6]\n'
                      'policy = ["evalstop:k=2"]'),
            "four": ('', 'sigma = [0.01, 0.1]\nbase_rate = [0.3, 0.6]\nload = [0.8, 1.0]\n'
                     'policy = ["evalstop:k=2"]'),
            "kp": ('', 'k = [1, 2]\npolicy = ["evalstop", "stop_at:f=0.65"]'),
            "scoped": ('', 'k = [1, 2]\npolicy = ["evalstop", "evalstop:scope=all"]'),
            "scopecol": ('', 'k = [1, 2]\nscope = ["all", "rlhf"]\n'
                         'policy = ["evalstop", "stop_at:f=0.65"]')}
    where = {"one": "mixed/one", "four": "mixed/four"}  # one drawn, one skipped, side by side
    for name, (top, ax) in axes.items():
        path = tmp / f"{name}.toml"
        path.write_text(f'name = "{name}"\nclusters = 3\nchunk = 3\nseed = 0\n{top}'
                        f'[base]\nscheduler = "srtf_est"\nn_jobs = 30\n[axes]\n{ax}\n')
        out = tmp / where.get(name, name)
        assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    return tmp


def _kept_figures(monkeypatch):
    """The figures ``_style.save`` is given, kept (their axes hold the data plotted)."""
    from fastsim.figures import _style as S

    figs, save = [], S.save
    monkeypatch.setattr(S, "save", lambda fig, *a, **k: (figs.append(fig), save(fig, *a, **k))[1])
    return figs


def _plotted(ax):
    """Each error-bar line of a panel: its label, x, means, interval ends."""
    out = []
    for c in ax.containers:  # one per errorbar call: its line, caps and bars
        line, _, (bars,) = c
        seg = bars.get_segments()
        out.append((c.get_label(), list(line.get_xdata()), list(line.get_ydata()),
                    [s[0][1] if len(s) else np.nan for s in seg],  # no interval: NaN
                    [s[1][1] if len(s) else np.nan for s in seg]))
    return out


def test_figures_refuse_a_sweep_name_by_the_rule_its_file_was_loaded_by(own_sweeps,
                                                                          tmp_path,
                                                                          monkeypatch, capsys):
    """fastsim figures checks a sweep's name by the rule a sweep file is loaded by
    (check_figure_name), at --out's own file system limit: one line naming the name."""
    import fastsim.io
    from fastsim.cli import main
    from fastsim.io import TMP_EXTRA

    # a file system of names of at most 33 bytes: sweep_two.png is 13, and 21 more
    monkeypatch.setattr(fastsim.io, "name_max", lambda directory: 33)
    out = tmp_path / "a"
    assert main(["figures", str(own_sweeps / "two"), "--out", str(out), "--formats",
                 "png"]) == 2
    err = capsys.readouterr().err
    assert (f"{own_sweeps / 'two' / 'sweep.json'}: name is 3 characters long; allowed: at "
            f"most {33 - TMP_EXTRA - len('sweep_.png')} (its figure's file") in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_a_sweep_of_ones_own_gets_a_figure_of_its_summary(own_sweeps, tmp_path, monkeypatch,
                                                           capsys):
    """`fastsim figures results/mine` refused a sweep under a name of the user's own ("which
    no figure reads"); now it draws precision, stop recall, FPR and mean JCT against the
    sweep's first axis, a line per value of its second, each point the summary's mean and
    95% interval (in percent where the metric is a share), n under the figure."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    d = own_sweeps / "two"
    assert main(["figures", str(d), "--out", str(tmp_path / "a"), "--formats", "png,pdf"]) == 0
    out = capsys.readouterr().out
    assert "sweep_two.pdf (precision, stop_recall, fpr, jct_mean_h against sigma, policy as " \
           "colour)" in out and "headline" not in out, out
    assert (tmp_path / "a" / "sweep_two.png").is_file()
    summary = pl.read_parquet(d / "summary.parquet")
    axes = figs[0].axes
    assert [ax.get_ylabel() for ax in axes] == [
        "precision (%)", "stop recall (stopped before\ncompletion) (%)", "fpr (%)",
        "mean JCT (h)"]
    for ax, metric in zip(axes, ("precision", "stop_recall", "fpr", "jct_mean_h")):
        scale = 1.0 if metric == "jct_mean_h" else 100.0
        drawn = _plotted(ax)
        # the baseline has no precision (it stops nothing): no line, rather than an empty one
        assert [label for label, *_ in drawn] == (["none"] if metric != "precision" else []) + [
            "evalstop(k=2)", "stop_at(f=0.65)"]
        for label, x, mean, lo, hi in drawn:
            rows = summary.filter((pl.col("metric") == metric) & (pl.col("policy") == label)
                                  & pl.col("mean").is_finite()).sort("sigma")
            assert x == rows["sigma"].to_list()
            np.testing.assert_array_equal(mean, (rows["mean"] * scale).to_numpy())
            np.testing.assert_allclose(lo, (rows["lo"] * scale).to_numpy(), rtol=1e-12)
            np.testing.assert_allclose(hi, (rows["hi"] * scale).to_numpy(), rtol=1e-12)
    assert "n = 3 clusters per cell" in " ".join(t.get_text() for t in figs[0].texts)
    # the same summary draws the same bytes
    assert main(["figures", str(d), "--out", str(tmp_path / "b"), "--formats", "png,pdf"]) == 0
    for name in ("sweep_two.png", "sweep_two.pdf"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_the_metrics_of_ones_own_sweeps_figure_are_chosen_by_name(own_sweeps, tmp_path,
                                                                  monkeypatch, capsys):
    """--metrics picks the panels; a name the summary lacks is one line naming those it
    has, before anything is written, as is --metrics where no sweep of one's own is."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    d = own_sweeps / "two"
    assert main(["figures", str(d), "--out", str(tmp_path / "a"), "--formats", "png",
                 "--metrics", "jct_mean_h_change,recall"]) == 0
    assert [ax.get_ylabel() for ax in figs[0].axes] == ["mean JCT change (%)",
                                                        "recall (any trigger) (%)"]
    # the baseline has no change against itself: two lines, not three
    assert [label for label, *_ in _plotted(figs[0].axes[0])] == ["evalstop(k=2)",
                                                                  "stop_at(f=0.65)"]
    capsys.readouterr()
    one_line(capsys, ["figures", str(d), "--out", str(tmp_path / "b"), "--metrics",
                      "precision,precison"],
             "--metrics=precision,precison is invalid (unknown: precison, in "
             f"{d}); allowed: metrics of the sweep's summary, comma-separated: jct_mean_h, ")
    assert not (tmp_path / "b").exists()


def test_a_metric_named_twice_in_metrics_is_refused_as_by_run(own_sweeps, tmp_path, capsys):
    """`--metrics recall,recall` drew one panel and said nothing, where `fastsim run
    --metric A --metric A` and a sweep file's metrics refuse it: the second was likely
    meant as another.  One line, the same words, before anything is written."""
    d = own_sweeps / "two"
    one_line(capsys, ["figures", str(d), "--out", str(tmp_path / "b"), "--metrics",
                      "recall, fpr,recall"],
             f"--metrics=recall,fpr,recall is invalid (in {d}); allowed: each metric named "
             "once (recall is named twice)")
    assert not (tmp_path / "b").exists()


def test_metrics_and_formats_are_one_comma_list(own_sweeps, tmp_path):
    """--metrics and --formats were parsed by two functions: metrics took any iterable, so
    a set of them drew its panels in the hash seed's order, another each run, where
    formats refused it.  Both read text comma-separated or a list of text, alike."""
    from fastsim.sweep.figures import comma_items

    assert comma_items(" precision, fpr,,precision ") == ["precision", "fpr", "precision"]
    assert comma_items(("png", " pdf")) == ["png", "pdf"]
    assert comma_items({"precision", "fpr"}) is None and comma_items(["png", 1]) is None
    d = own_sweeps / "two"
    with pytest.raises(ConfigError, match=r"--metrics=\{.*\} is invalid \(neither text nor a "
                                          r"list of text, in "):
        draw_all(d, tmp_path / "a", metrics={"precision", "fpr"}, log=lambda line: None)
    assert not (tmp_path / "a").exists()


def test_the_columns_of_a_paper_figure_and_of_ones_own_sweeps_are_checked_alike(
        own_sweeps, monkeypatch):
    """The columns a figure reads were checked by two loops, the paper figures' and the
    own-sweep figure's, written out twice; both go through check_sweep_reads."""
    import fastsim.sweep.figures as F

    checked, check = [], F.check_sweep_reads
    monkeypatch.setattr(F, "check_sweep_reads", lambda sweeps, reads: (
        checked.append(([Path(d).name for d in sweeps], sorted(reads))), check(sweeps, reads)))
    sources = {"two": own_sweeps / "two", "noise": own_sweeps / "kp"}
    F.check_sweep_columns(sources, {"noise_sweep": load_script("noise_sweep")})
    F.own_plans(sources)
    assert checked == [(["kp"], ["summary.parquet"]), (["two"], ["summary.parquet"])], checked


def test_the_own_sweep_figures_refusals_are_one_line_each(own_sweeps, tmp_path,
                                                          monkeypatch, capsys):
    """A figure script run alone printed its refusal as given: a RESULTS_DIR with a line
    break was two lines on stderr; `fastsim figures`' lines of what it skips too.  Its
    refusals were not all in the form "what is wrong; allowed: what is" (too many axes,
    one cell, too many metrics)."""
    from fastsim.figures import own_sweep

    monkeypatch.setattr(sys, "argv", ["own_sweep.py", str(tmp_path / "no\nsuch")])
    with pytest.raises(SystemExit) as exc:
        own_sweep.main()
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and len(err.splitlines()) == 1, err
    assert "no\\nsuch is not a results directory" in err, err
    with pytest.raises(ConfigError, match=r"^--metrics=(\w+,){8}\w+ is invalid \(9 metrics, "
                                          r"in .*\); allowed: at most 8, one panel each$"):
        own_sweep.plan(own_sweeps / "two", metrics=own_sweep.summary_metrics(
            pl.read_parquet(own_sweeps / "two" / "summary.parquet"))[:9])
    said = own_sweep.plan(own_sweeps / "three", where=["sigma=0.01", "base_rate=0.3",
                                                       "policy=none"])
    assert said.endswith("; allowed: a sweep with an axis of several values"), said
    import shutil

    mixed = tmp_path / "mi\nxed"
    shutil.copytree(own_sweeps / "mixed", mixed, ignore=shutil.ignore_patterns("figures"))
    lines = []
    draw_all(mixed, tmp_path / "a", formats=("png",), log=lines.append)
    assert any("mi\\nxed/four varies 4 axes (sigma, base_rate, load, policy); allowed: at "
               "most 3 (x, colour" in line for line in lines), lines
    assert not any("\n" in line for line in lines), lines


def test_ones_own_sweeps_of_one_and_three_axes_are_drawn_and_of_four_refused(
        own_sweeps, tmp_path, monkeypatch, capsys):
    """One axis: a line per metric; three: the third as columns of panels, a metric's
    panels on one row; four: skipped, saying how to pick, and alone it is refused."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    # beside a sweep it skips (saying how to pick), one of one axis: a line per metric
    assert main(["figures", str(own_sweeps / "mixed"), "--out", str(tmp_path / "mixed"),
                 "--formats", "png"]) == 0
    said = capsys.readouterr().out
    assert "[figures] sweep_four: skipped, sweep in" in said and "fewer axes" in said, said
    assert [p.name for p in (tmp_path / "mixed").iterdir()] == ["sweep_one.png"]
    assert len(figs[0].axes) == 4 and all(len(_plotted(ax)) == 1 for ax in figs[0].axes)
    assert main(["figures", str(own_sweeps / "three"), "--out", str(tmp_path / "three"),
                 "--formats", "png"]) == 0
    axes = figs[1].axes  # a metric per row, a policy per column
    assert len(axes) == 4 * 2
    assert [ax.get_title() for ax in axes[:2]] == ["none", "evalstop(k=2)"]
    summary = pl.read_parquet(own_sweeps / "three" / "summary.parquet")
    label, x, mean, _, _ = _plotted(axes[1])[1]  # precision, EvalStop, base_rate 0.6
    assert label == "base_rate=0.6"
    rows = summary.filter((pl.col("metric") == "precision") & (pl.col("base_rate") == 0.6)
                          & (pl.col("policy_name") == "evalstop")).sort("sigma")
    np.testing.assert_array_equal(mean, (100 * rows["mean"]).to_numpy())
    capsys.readouterr()
    four = own_sweeps / "mixed" / "four"  # alone: refused
    one_line(capsys, ["figures", str(four), "--out", str(tmp_path / "four")],
             f"no figure can be drawn from {four}: sweep in {four} varies 4 axes (sigma, "
             "base_rate, load, policy); allowed: at most 3 (x, colour, columns of "
             "panels): hold an axis at one value (--where AXIS=VALUE), or a sweep file with "
             "fewer axes")
    assert not (tmp_path / "four").exists()


def test_ones_own_sweep_over_a_policy_parameter_draws_each_policy_over_the_values_it_has(
        own_sweeps, tmp_path, monkeypatch, capsys):
    """k = [1, 2] with policy = ["evalstop", "stop_at:f=0.65"]: stop_at and the baseline
    have no k, and their rows were dropped without a word, while EvalStop at k=1 and k=2
    were two colours of one point each.  Now EvalStop is one line over k, the others a
    reference line each, named in the legend; a row that cannot be placed is counted."""
    from fastsim.cli import main
    from fastsim.figures import own_sweep

    figs = _kept_figures(monkeypatch)
    d = own_sweeps / "kp"
    assert main(["figures", str(d), "--out", str(tmp_path / "a"), "--formats", "png"]) == 0
    assert "not drawn" not in capsys.readouterr().out
    summary = pl.read_parquet(d / "summary.parquet").filter(pl.col("metric") == "jct_mean_h")
    ax = figs[0].axes[3]
    assert ax.get_ylabel() == "mean JCT (h)"
    [(label, x, mean, lo, hi)] = _plotted(ax)
    rows = summary.filter(pl.col("policy_name") == "evalstop").sort("k")
    assert (label, x) == ("evalstop", [1, 2])
    np.testing.assert_array_equal(mean, rows["mean"].to_numpy())
    refs = {line.get_label(): line.get_ydata()[0] for line in ax.get_lines()
            if line.get_linestyle() == "--"}
    assert refs == {p: summary.filter(pl.col("policy") == p)["mean"][0]
                    for p in ("stop_at(f=0.65)", "none")}
    legend = [t.get_text() for t in figs[0].axes[-1].get_legend().get_texts()]
    assert sorted(legend) == ["evalstop", "none", "stop_at(f=0.65)"], legend
    # k is an integer: its ticks are too (they were 1.0, 1.2, ..., 2.0)
    for ax in figs[0].axes:
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks == [1, 2], ticks
        assert [t.get_text() for t in ax.get_xticklabels()
                if lo <= t.get_position()[0] <= hi] == ["1", "2"]
    # k as the columns of panels: the policies without k have no column, counted
    p = {"x": "policy", "hue": None, "col": "k", "metrics": ["jct_mean_h"]}
    assert own_sweep.not_drawn(pl.read_parquet(d / "summary.parquet"), p) == (
        "2 rows not drawn (no place on policy, k: none, stop_at(f=0.65))")


def test_ones_own_sweep_along_policies_joins_its_points_in_the_order_of_the_ticks(
        tmp_path, monkeypatch):
    """A sweep whose x is the policy ticks its policies in the sweep's cell order, but its
    line joined the points in the order of their labels' text (evalstop, none, stop_at):
    it ran back across the panel from the last tick to the first.  Now the line runs
    along the ticks, each point at its own policy's tick."""
    from fastsim.cli import main

    _tiny_sweep(tmp_path, "along", 'policy = ["stop_at:f=0.65", "evalstop:k=2"]')
    d = tmp_path / "results" / "along"
    figs = _kept_figures(monkeypatch)
    assert main(["figures", str(d), "--out", str(tmp_path / "f"), "--formats", "png",
                 "--metrics", "jct_mean_h"]) == 0
    ax = figs[0].axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["none", "stop_at(f=0.65)", "evalstop(k=2)"], ticks
    [(_, x, mean, _, _)] = _plotted(ax)
    assert x == [0, 1, 2], x
    summary = pl.read_parquet(d / "summary.parquet").filter(pl.col("metric") == "jct_mean_h")
    assert mean == [summary.filter(pl.col("policy") == p)["mean"][0] for p in ticks]


def test_ones_own_sweep_joins_its_points_by_a_line_along_numbers_only(own_sweeps, tmp_path,
                                                                      monkeypatch):
    """Along a policy axis (README's below_best(k=2,drop=0.02) beside evalstop(k=2)) a
    line joined the policies' points, drawing a trend between categories that is not
    there.  Along text each point stands alone with its interval; along a number (sigma)
    the line stays."""
    from fastsim.cli import main

    _tiny_sweep(tmp_path, "along", 'policy = ["stop_at:f=0.65", "evalstop:k=2"]')
    figs = _kept_figures(monkeypatch)
    for d, out in ((tmp_path / "results" / "along", "a"), (own_sweeps / "two", "b")):
        assert main(["figures", str(d), "--out", str(tmp_path / out), "--formats", "png",
                     "--metrics", "jct_mean_h"]) == 0
    (policies,), (sigmas,) = figs[0].axes, figs[1].axes
    assert [c[0].get_linestyle() for c in policies.containers] == ["None"]
    assert [c[0].get_marker() for c in policies.containers] == ["o"]
    assert [c[0].get_linestyle() for c in sigmas.containers] == ["-"] * 3


def test_two_policies_of_one_name_over_a_policy_parameter_are_two_lines(
        own_sweeps, tmp_path, monkeypatch, capsys):
    """k = [1, 2] with policy = ["evalstop", "evalstop:scope=all"]: the colour was the
    policy's name, both EvalStops one colour, each of their points held two rows, and
    none of them was drawn ("16 rows not drawn (no place on k, policy_name ...)").  Now
    the colour names what tells them apart, each its own line over k."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    d = own_sweeps / "scoped"
    assert main(["figures", str(d), "--out", str(tmp_path / "a"), "--formats", "png"]) == 0
    out = capsys.readouterr().out
    assert "not drawn" not in out, out
    assert "(evalstop(scope=rlhf), evalstop(scope=all) over k; none as reference line)" in out
    summary = pl.read_parquet(d / "summary.parquet")
    for ax, metric in zip(figs[0].axes, ("precision", "stop_recall", "fpr", "jct_mean_h")):
        scale = 1.0 if metric == "jct_mean_h" else 100.0
        drawn = _plotted(ax)
        assert [label for label, *_ in drawn] == ["evalstop(scope=rlhf)", "evalstop(scope=all)"]
        for label, x, mean, lo, hi in drawn:
            scoped = pl.col("policy").str.ends_with("[scope=all]")
            rows = summary.filter((pl.col("metric") == metric) & pl.col("k").is_not_null()
                                  & (scoped if label.endswith("=all)") else ~scoped)
                                  & pl.col("mean").is_finite()).sort("k")
            assert x == rows["k"].to_list() == [1, 2]
            np.testing.assert_array_equal(mean, (rows["mean"] * scale).to_numpy())
            np.testing.assert_allclose(lo, (rows["lo"] * scale).to_numpy(), rtol=1e-12)
            np.testing.assert_allclose(hi, (rows["hi"] * scale).to_numpy(), rtol=1e-12)


@pytest.mark.parametrize("which", ["evalstop", "stop_at"])
def test_rows_on_one_point_are_told_apart_by_a_key_only_some_cells_have(own_sweeps, which):
    """The keys compared were the first cell's: a parameter only another cell's config has
    (a user policy's optional one) was never named, the rows said to differ in "their
    cell" with nothing to hold."""
    import copy

    from fastsim.figures import own_sweep
    from fastsim.sweep.figures import read_manifest, read_table

    d = own_sweeps / "two"
    p = {"x": "sigma", "hue": None, "col": None, "metrics": ["jct_mean_h"], "where": {}}
    df, manifest = read_table(d / "summary.parquet"), copy.deepcopy(read_manifest(d))
    for cell in manifest["grid"]["cells"]:  # every policy one name; one of them has drop
        had = cell["config"]["policy"]["name"]
        cell["config"]["policy"] = {"name": "mine", **({"drop": 0.1} if had == which else {})}
    said = own_sweep._one_row_per_point(d, manifest, df, p)
    assert "(they differ in drop, which this figure draws on no axis)" in said, said


def test_a_policy_parameter_drawn_as_columns_keeps_one_colour_across_them(
        own_sweeps, tmp_path, monkeypatch, capsys):
    """k along x, scope as columns: telling two EvalStops apart by scope split the policy's
    colour by column too (blue under scope=all, orange under rlhf), and the legend, drawn
    from one panel, named only one of them.  The columns tell them apart already."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    d = own_sweeps / "scopecol"
    assert main(["figures", str(d), "--out", str(tmp_path / "a"), "--formats", "png"]) == 0
    out = capsys.readouterr().out
    assert "policy as colour (evalstop over k; " in out and "scope as columns" in out, out
    colours = set()
    for ax in figs[0].axes:
        for c in ax.containers:
            if c.get_label() == "evalstop":
                colours.add(c[0].get_color())
        assert [c.get_label() for c in ax.containers] == ["evalstop"], ax.get_title()
    assert len(colours) == 1, colours


def test_a_manifest_without_its_cells_configs_is_refused_naming_it(own_sweeps, tmp_path,
                                                                     capsys):
    """grid.cells without their config (an edited or damaged sweep.json) was a KeyError
    traceback from the policies' colours; now one line naming the file (its grid is not
    the one its hash is of: ``fastsim.sweep.finished``)."""
    import json
    import shutil

    d = tmp_path / "kp"
    shutil.copytree(own_sweeps / "kp", d)
    m = json.loads((d / "sweep.json").read_text())
    for cell in m["grid"]["cells"]:
        del cell["config"]
    (d / "sweep.json").write_text(json.dumps(m))
    one_line(capsys, ["figures", str(d), "--out", str(tmp_path / "f"), "--formats", "png"],
             f"{d / 'sweep.json'}: damaged (its grid field is not clusters, chunk, seed "
             "and a list of cells with their configs)")


def test_a_sweep_of_a_newer_format_is_not_drawn(own_sweeps, tmp_path, capsys):
    """A manifest of a format newer than this fastsim reads (a newer fastsim's sweep) was
    drawn as if this one had written it; fastsim sweep refused to resume it."""
    import json
    import shutil

    from fastsim.sweep.store import FORMAT_VERSION

    d = tmp_path / "kp"
    shutil.copytree(own_sweeps / "kp", d)
    m = json.loads((d / "sweep.json").read_text())
    m["format"] = FORMAT_VERSION + 1
    (d / "sweep.json").write_text(json.dumps(m))
    one_line(capsys, ["figures", str(d), "--out", str(tmp_path / "f"), "--formats", "png"],
             f"{d / 'sweep.json'}: a sweep manifest of format {FORMAT_VERSION + 1}, written by "
             f"a newer fastsim; this fastsim reads formats 1 to {FORMAT_VERSION}: run that "
             "fastsim, or run the sweep again with this one")
    assert not (tmp_path / "f").exists()
    # a table read on its own too (read_summary and the figures check the manifest
    # first, through finished_manifest; read_sweep_table alone did not)
    from fastsim.sweep.store import read_sweep_table

    with pytest.raises(ConfigError, match="a sweep manifest of format .*, written by a newer"):
        read_sweep_table(d / "summary.parquet", "a sweep's --out directory")


def test_rows_a_figure_would_draw_on_one_point_refuse_it_naming_what_tells_them_apart(
        own_sweeps):
    """Two rows on one point (a user policy whose label leaves out a parameter it ran at
    two values of) were left out, counted as having no place; a plan that would draw
    them so is refused, naming what they differ in and how to hold it."""
    from fastsim.figures import own_sweep
    from fastsim.sweep.figures import read_manifest, read_table

    d = own_sweeps / "two"  # as if the policy had no colour: its three on one point each
    p = {"x": "sigma", "hue": None, "col": None, "metrics": ["jct_mean_h"], "where": {}}
    df, manifest = read_table(d / "summary.parquet"), read_manifest(d)
    said = own_sweep._one_row_per_point(d, manifest, df, p)
    assert said == (f"sweep in {d} has 6 rows that would be drawn on a point another is "
                    "drawn on (they differ in policy, which this figure draws on no axis); "
                    "allowed: one row per point: hold policy at one value (--where "
                    "policy=VALUE)"), said
    assert own_sweep._one_row_per_point(d, manifest, df, {**p, "hue": "policy"}) is None


def test_ones_own_sweeps_figure_reads_the_manifest_through_the_stores_reader(
        own_sweeps, tmp_path, monkeypatch):
    """The figure read sweep.json by hand (json.loads of read_text) in three places, past
    the store's reader and its guards (a regular file, a size limit, nesting); now
    ``plan`` reads it once, as ``fastsim.sweep.figures.read_manifest`` does."""
    import pathlib

    import fastsim.sweep.store as store
    from fastsim.figures import own_sweep

    read_text = pathlib.Path.read_text

    def no_hand_reading(self, *args, **kwargs):
        assert self.name != "sweep.json", f"{self} read by hand"
        return read_text(self, *args, **kwargs)
    monkeypatch.setattr(pathlib.Path, "read_text", no_hand_reading)
    import fastsim.sweep.finished as finished

    reads, read_json = [], store._read_json
    for module in (store, finished):  # finished: the verification of a finished sweep's
        monkeypatch.setattr(module, "_read_json", lambda path, *a: (
            reads.append(Path(path).name), read_json(path, *a))[1])
    d = own_sweeps / "kp"
    p = own_sweep.plan(d, where=["k=2"])
    assert isinstance(p, dict), p
    # by the plan: its manifest, and the checksum of its cells.parquet (the axes and cells
    # are checked against it) and its summary's
    assert reads.count("sweep.json") == 3, reads
    assert draw_all(d, tmp_path / "a", formats=("png",), log=lambda line: None)


def test_ones_own_sweeps_figure_is_said_as_drawn(own_sweeps, tmp_path, monkeypatch, capsys):
    """The baseline has no precision and no change against itself: with --metrics
    precision,jct_mean_h_change its column of panels is empty and left out, and the output
    said "policy as columns" over the one column drawn."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    assert main(["figures", str(own_sweeps / "three"), "--out", str(tmp_path / "a"),
                 "--formats", "png", "--metrics", "precision,jct_mean_h_change"]) == 0
    out = capsys.readouterr().out
    assert len(figs[0].axes) == 2, out  # one row: a panel per metric
    assert ("sweep_three.png (precision, jct_mean_h_change against sigma, base_rate as "
            "colour, policy evalstop(k=2) only (none: no estimate))") in out, out
    assert main(["figures", str(own_sweeps / "kp"), "--out", str(tmp_path / "b"),
                 "--formats", "png"]) == 0
    assert ("against k, policy as colour (evalstop over k; none, stop_at(f=0.65) as "
            "reference lines))") in capsys.readouterr().out


def test_ones_own_sweep_of_four_axes_is_drawn_at_one_value_of_one_along_the_x_asked(
        own_sweeps, tmp_path, monkeypatch, capsys):
    """--where AXIS=VALUE holds an axis at one value (a sweep of four axes, refused, is
    drawn), --x picks the axis along x; an axis or a value the sweep lacks is one line
    naming those it has, exit 2, before anything is written."""
    from fastsim.cli import main

    figs = _kept_figures(monkeypatch)
    four = own_sweeps / "mixed" / "four"
    assert main(["figures", str(four), "--out", str(tmp_path / "a"), "--formats", "png",
                 "--where", "load=1", "--x", "base_rate", "--metrics", "jct_mean_h"]) == 0
    out = capsys.readouterr().out
    assert ("sweep_four.png (jct_mean_h against base_rate, sigma as colour, policy as "
            "columns, at load=1.0)") in out, out
    summary = pl.read_parquet(four / "summary.parquet")
    label, x, mean, _, _ = _plotted(figs[0].axes[1])[0]  # EvalStop's column, sigma 0.01
    assert (label, x) == ("sigma=0.01", [0.3, 0.6])
    rows = summary.filter((pl.col("metric") == "jct_mean_h") & (pl.col("load") == 1.0)
                          & (pl.col("sigma") == 0.01)
                          & (pl.col("policy_name") == "evalstop")).sort("base_rate")
    np.testing.assert_array_equal(mean, rows["mean"].to_numpy())
    assert "at load=1.0" in " ".join(t.get_text() for t in figs[0].texts)
    capsys.readouterr()
    for args, said in (
            (["--x", "seed"], f"--x=seed is invalid (in {four}); allowed: an axis the sweep "
                              "varies: sigma, base_rate, load, policy"),
            (["--where", "load=0.9"], f"--where=load=0.9 is invalid (load takes no '0.9' in "
                                      f"{four}); allowed: load=0.8, load=1.0"),
            (["--where", "lod=1"], f"--where=lod=1 is invalid (in {four}); allowed: "
                                   "AXIS=VALUE, AXIS one of the sweep's axes: sigma, "
                                   "base_rate, load, policy"),
            (["--where", "load=1", "--x", "load"], "--x=load is invalid (in "
             f"{four}); allowed: an axis the sweep varies (not held by --where): sigma, "
             "base_rate, policy")):
        one_line(capsys, ["figures", str(four), "--out", str(tmp_path / "b"), *args], said)
        assert not (tmp_path / "b").exists()
    # the policies along x, k as colour: one without k is a point of its own colour
    assert main(["figures", str(own_sweeps / "kp"), "--out", str(tmp_path / "c"),
                 "--formats", "png", "--x", "policy"]) == 0
    assert "not drawn" not in capsys.readouterr().out
    drawn = _plotted(figs[-1].axes[3])
    assert [(label, [round(v) for v in x]) for label, x, *_ in drawn] == [
        ("none", [0]), ("k=1", [1]), ("stop_at(f=0.65)", [2]), ("k=2", [3])], drawn


def test_a_user_metric_of_ones_own_sweep_keeps_its_label_in_another_process(
        tmp_path, monkeypatch, capsys):
    """A user metric's module, imported by `fastsim sweep`, is not by `fastsim figures` (a
    new process): its panel was labelled "held mean", the column's name, and nothing said
    so.  Now the module the manifest names is imported for its label and unit; one that
    cannot be is said, under the figure and in the output."""
    import importlib

    import fastsim.metrics
    from fastsim.cli import main

    builtins = dict(fastsim.metrics._METRICS)
    code = tmp_path / "code"
    code.mkdir()
    (code / "ownfig_metric.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n"
        "@cluster_metric(label=\"mean time held\", unit=\"h\")\n"
        "def held_mean(jobs):\n    return jobs[\"held_h\"].mean(axis=1)\n")
    monkeypatch.syspath_prepend(str(code))
    monkeypatch.setattr(fastsim.metrics, "_METRICS", dict(builtins))
    (tmp_path / "um.toml").write_text(
        'name = "um"\nclusters = 3\nchunk = 3\nseed = 0\nbaseline = false\n[base]\n'
        'n_jobs = 30\nmetrics = ["ownfig_metric:held_mean"]\n[axes]\nsigma = [0.01, 0.1]\n')
    assert main(["sweep", str(tmp_path / "um.toml"), "--out", str(tmp_path / "um"),
                 "--no-progress"]) == 0
    figs = _kept_figures(monkeypatch)

    def figures_in_a_new_process(out):
        sys.modules.pop("ownfig_metric", None)
        importlib.invalidate_caches()
        monkeypatch.setattr(fastsim.metrics, "_METRICS", dict(builtins))
        capsys.readouterr()
        assert main(["figures", str(tmp_path / "um"), "--out", str(tmp_path / out),
                     "--formats", "png", "--metrics", "held_mean"]) == 0
        return capsys.readouterr().out, " ".join(t.get_text() for t in figs[-1].texts)

    out, note = figures_in_a_new_process("a")
    assert figs[-1].axes[0].get_ylabel() == "mean time held (h)"
    assert "label is the column name" not in out + note
    (code / "ownfig_metric.py").rename(code / "elsewhere.py")  # not on the path any more
    out, note = figures_in_a_new_process("b")
    assert figs[-1].axes[0].get_ylabel() == "held mean"
    said = ("held_mean: label is the column name (the module declaring it cannot be "
            "imported here: put it on PYTHONPATH)")
    assert said in out and said in note, (out, note)
    sys.modules.pop("ownfig_metric", None)


def test_figures_of_a_sweep_with_another_baseline_only_say_why_none_is_drawn(tmp_path):
    """Every figure that reads the sweep skips it (changes against another baseline): the
    refusal gives the reason once."""
    path = tmp_path / "k_sweep.toml"
    path.write_text('clusters = 3\nchunk = 3\nbaseline = "evalstop:k=3"\n[base]\nn_jobs = 30\n'
                    '[axes]\npolicy = ["evalstop:k=2", "none"]\n')
    import fastsim

    fastsim.sweep(path, tmp_path / "results" / "k_sweep")
    with pytest.raises(ConfigError) as refused:
        draw_all(tmp_path / "results", tmp_path / "figs", log=print)
    said = str(refused.value)
    assert said.startswith(f"no figure can be drawn from {tmp_path / 'results'}: sweep "
                           "k_sweep in "), said
    assert said.count("holds changes against evalstop(k=3)") == 1, said
    # what would be drawn, as every refusal says it (it ended at the reason)
    assert said.endswith('(baseline = "none" in the sweep file); allowed: sweep k_sweep run '
                         'with baseline = "none"'), said
    assert not (tmp_path / "figs").exists()
    script = Path(__file__).parents[1] / "figures" / "k_tradeoff.py"
    alone = subprocess.run([sys.executable, str(script), str(tmp_path / "results"),
                            str(tmp_path / "figs")], capture_output=True, text=True)
    assert alone.returncode == 2 and alone.stderr.strip().endswith(
        '; allowed: sweep k_sweep run with baseline = "none"'), alone.stderr
    assert not (tmp_path / "figs").exists()


@pytest.mark.parametrize("axes,varies", [
    # the headline figure drew the first cell of each policy without a word
    ('policy = ["none", "evalstop:k=2"]\nsigma = [0.01, 0.1]', "it varies sigma"),
    # the figures pick rows by policy name: the headline drew k=2's bars alone and the JCT
    # CDF pooled both cells' histograms into one curve, each labelled plain "EvalStop"
    ('policy = ["none", "evalstop:k=2", "evalstop:k=3"]',
     "it runs one policy at several settings")])
def test_a_sweep_with_several_cells_where_a_figure_draws_one_is_skipped(tmp_path, axes,
                                                                        varies):
    """A sweep named ``headline`` that also varies sigma, or runs EvalStop at k=2 and k=3."""
    _tiny_sweep(tmp_path, "headline", axes)
    with pytest.raises(ConfigError) as refused:
        draw_all(tmp_path / "results", tmp_path / "figs", log=print)
    assert str(refused.value) == (
        f"no figure can be drawn from {tmp_path / 'results'}: sweep headline in "
        f"{tmp_path / 'results' / 'headline'} has several cells per policy ({varies}), where "
        "this figure draws one (a sweep of its own under another name keeps them apart); "
        "allowed: sweep headline with one cell per policy, or its cells as a sweep under "
        "another name (drawn by a figure of its own)")
    assert not (tmp_path / "figs").exists()


def _tiny_sweep(tmp_path, name, axes_toml):
    import fastsim

    path = tmp_path / f"{name}.toml"
    path.write_text(f'name = "{name}"\nclusters = 3\nchunk = 3\nseed = 0\n'
                    f'[base]\nscheduler = "srtf_est"\nn_jobs = 30\n[axes]\n{axes_toml}\n')
    fastsim.sweep(path, tmp_path / "results" / name)


def test_own_sweep_panels_keep_their_height_beside_long_policy_labels(tmp_path, monkeypatch):
    """A sweep along policies such as below_best(k=2,drop=0.02) (README's worked example)
    drew each panel a third of the figure's height: the labels, at 45 degrees, and the
    stop recall's label, longer than a panel, took the rest."""
    from fastsim.sweep.figures import draw_all

    _tiny_sweep(tmp_path, "longlabels", 'policy = ["patience:patience=2,threshold=0", '
                '"loss_plateau:w=2,tol=0.01", "evalstop:k=2"]')
    figs = _kept_figures(monkeypatch)
    draw_all(tmp_path / "results" / "longlabels", tmp_path / "figs", formats="png",
             log=lambda line: None)
    for ax in figs[0].axes:
        assert ax.get_position().height > 0.45, (ax.get_ylabel(), ax.get_position())


@pytest.fixture(scope="module")
def unusual_results(tmp_path_factory):
    """Sweeps under the figures' names with parameters the paper never used, and policies
    and schedulers missing."""
    tmp = tmp_path_factory.mktemp("unusual")
    _tiny_sweep(tmp, "headline", 'policy = ["evalstop:k=3", "stop_at:f=0.3", "oracle"]')
    _tiny_sweep(tmp, "composability",
                'scheduler = ["fifo", "tiresias"]\npolicy = ["none", "evalstop:k=3"]')
    _tiny_sweep(tmp, "k_sweep", 'policy = ["evalstop:k=1", "evalstop:k=4"]')
    return tmp / "results"


def _drawn(monkeypatch, name, results):
    """Run one figure script and return its figure instead of saving it."""
    from fastsim.figures import _style as S
    from fastsim.sweep.figures import find_sources

    figs = []
    monkeypatch.setattr(S, "save", lambda fig, *a, **k: figs.append(fig) or [])
    load_script(name).draw(find_sources(results), results, ("png",))
    (fig,) = figs
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()  # positions are final only once drawn
    return fig


def test_headline_bars_sit_on_their_ticks_when_policies_are_missing(monkeypatch, unusual_results):
    fig = _drawn(monkeypatch, "headline", unusual_results)
    for ax in fig.axes:
        bars = ax.patches
        ticks = ax.get_xticks()
        n_policies = len(ax.get_legend_handles_labels()[1]) or len(fig.axes[0].get_legend_handles_labels()[1])
        assert n_policies == 3 and len(bars) == 3 * len(ticks)
        centres = np.array([b.get_x() + b.get_width() / 2 for b in bars]).reshape(3, len(ticks))
        assert np.allclose(centres.mean(axis=0), ticks)  # each group is centred on its tick


def test_legends_name_the_parameters_the_sweep_used(monkeypatch, unusual_results):
    fig = _drawn(monkeypatch, "headline", unusual_results)
    labels = fig.axes[0].get_legend_handles_labels()[1] or fig.axes[1].get_legend_handles_labels()[1]
    assert labels == ["EvalStop (k=3)", "StopAt-0.3", "Oracle (hidden truth)"]


def test_the_headline_figures_name_the_scheduler_the_sweep_ran(monkeypatch, tmp_path):
    """A sweep under the headline's name run with FIFO was drawn as 'vs SRTF-Est alone'
    and 'All jobs, SRTF-Est'."""
    _tiny_sweep(tmp_path, "headline", 'scheduler = ["fifo"]\npolicy = ["evalstop:k=2"]')
    fig = _drawn(monkeypatch, "headline", tmp_path / "results")
    assert fig.axes[1].get_ylabel() == "% change vs FIFO alone"
    fig = _drawn(monkeypatch, "jct_cdf", tmp_path / "results")
    assert [ax.get_title() for ax in fig.axes] == ["All jobs, FIFO", "RLHF jobs, FIFO"]


def test_a_label_never_claims_default_parameters_it_cannot_see():
    import polars as pl

    from fastsim.figures import _style as S

    two = pl.DataFrame({"policy": ["evalstop(k=2)", "evalstop(k=4)"]})
    assert S.policy_label("evalstop", two) == "EvalStop"
    assert S.policy_label("evalstop", None) == "EvalStop"
    assert S.policy_label("stop_at", pl.DataFrame({"policy": ["stop_at(f=0.3)"]})) == "StopAt-0.3"
    assert S.policy_label("mymod:mine") == "mymod:mine"


def test_composability_keeps_a_scheduler_without_a_display_name(monkeypatch, unusual_results):
    from fastsim.figures import _style as S

    monkeypatch.setitem(S.SCHEDULER_NAMES, "fifo", S.SCHEDULER_NAMES["fifo"])
    monkeypatch.delitem(S.SCHEDULER_NAMES, "tiresias")
    fig = _drawn(monkeypatch, "composability", unusual_results)
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == ["FIFO", "tiresias"]


def test_k_tradeoff_rate_axes_are_not_magnified(monkeypatch, unusual_results):
    fig = _drawn(monkeypatch, "k_tradeoff", unusual_results)
    for ax in fig.axes[:2]:  # precision and recall
        lo, hi = ax.get_ylim()
        assert hi - lo >= 10 and lo >= -1 and hi <= 101
        assert [t for t in ax.get_xticks()] == [1, 4]


def test_legends_sit_outside_the_data_and_the_footnote_below_it(monkeypatch, unusual_results):
    for name in ("headline", "composability", "jct_cdf"):
        fig = _drawn(monkeypatch, name, unusual_results)
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        assert legends, name
        for leg in legends:
            box = leg.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), name
        (note,) = fig.texts
        assert "95%" in note.get_text(), name
        assert name != "jct_cdf" or all(ax.collections for ax in fig.axes)  # the bands
        for ax in fig.axes:
            assert note.get_window_extent(renderer).y1 <= ax.get_tightbbox(renderer).y0 + 1


def test_a_band_figure_says_its_bands_are_drawn_and_how_wide(monkeypatch, unusual_results):
    """At 2,000 clusters the noise, base-rate and k figures' bands are narrower than their
    lines, and the footnote said only "95% CIs": whether an interval was drawn at all could
    not be read off the figure.  A paper bound over part of the x axis is drawn there only."""
    from fastsim.figures import _style as S
    from fastsim.sweep.figures import find_sources

    fig = _drawn(monkeypatch, "k_tradeoff", unusual_results)
    (note,) = fig.texts
    # the rates' widths alone: a change's (relative %) pooled with them was given in pp
    rates = [m for m, _ in load_script("k_tradeoff").PANELS if not m.endswith("_change")]
    rows = S.summary(find_sources(unusual_results), "k_sweep").filter(
        (pl.col("policy_name") == "evalstop") & pl.col("metric").is_in(rates))
    width = 100 * (rows["hi"] - rows["lo"]).drop_nans().drop_nulls()
    assert note.get_text().startswith("k_sweep: shaded 95% CIs (median width ")
    assert (f"widest {width.max():.2g} pp of the rates; a band narrower than its line is "
            "hidden") in note.get_text()
    assert S.shaded([]) == "95% CIs over"
    fig, ax = S.subplots()
    ax.set_xlim(0, 0.15)
    S.paper_line(ax, 91, 0.0, "paper: >= 91% for sigma <= 0.05", until=0.05)
    (line,) = ax.lines
    assert list(line.get_xdata()) == [0.0, 0.05]


def test_the_footnote_gives_the_clusters_per_cell_and_the_fewest_an_estimate_rests_on(
        monkeypatch):
    """The footnote's n was the smallest n of any row: a sweep of 2,000 clusters per cell
    with one change over 1,998 pairs (a baseline of 0 dropped) read "n = 1998 clusters per
    cell"."""
    from fastsim.figures import _style as S

    notes = []
    monkeypatch.setattr(S, "note", lambda fig, text: notes.append(text))
    # a row with no estimate (a baseline cell's precision: n 0) draws nothing: not counted
    for ns in ([2000, 2000, 0], [2000, 1998, 3, 0]):
        means = [0.5] * (len(ns) - 1) + [np.nan]
        monkeypatch.setattr(S, "summary", lambda sources, sweep, ns=ns, means=means:
                            pl.DataFrame({"n": ns, "mean": means}))
        S.footnote(None, {}, "k_sweep")
    assert notes == ["k_sweep: 95% CIs over n = 2000 clusters per cell",
                     "k_sweep: 95% CIs over n = 2000 clusters per cell; some estimates rest "
                     "on fewer (n >= 3)"]


def test_headline_draws_no_bar_for_an_estimate_that_does_not_exist():
    """A policy that never fired has no precision (NaN): its bar was drawn at 0, which
    reads as a precision of 0%, with no error bar to say otherwise."""
    import matplotlib.pyplot as plt

    rows = [{"policy_name": "evalstop", "policy": "evalstop(k=2)", "metric": m, "mean": x,
             "lo": x - 0.01, "hi": x + 0.01} for m, x in (("precision", np.nan), ("fpr", 0.2))]
    fig, ax = plt.subplots()
    load_script("headline")._bars(ax, pl.DataFrame(rows), ("precision", "fpr"), ("p", "f"))
    heights = [b.get_height() for b in ax.patches]
    assert np.isnan(heights[0]) and heights[1] == pytest.approx(20.0)
    assert [t.get_text() for t in ax.texts] == ["n/a"]
    plt.close(fig)


def test_composability_labels_a_gain_with_no_estimate_n_a(monkeypatch):
    """A scheduler whose change has no estimate (NaN) was labelled "nan%" above no bar."""
    from fastsim.figures import _style as S

    rows = [{"policy_name": "evalstop", "scheduler": sc, "metric": m, "mean": x,
             "lo": x - 0.01, "hi": x + 0.01, "n": 5}
            for sc, x in (("fifo", -0.15), ("sjf_est", np.nan))
            for m in ("jct_mean_h_change", "wasted_gpu_h_change")]
    figs = []
    monkeypatch.setattr(S, "summary", lambda sources, sweep: pl.DataFrame(rows))
    monkeypatch.setattr(S, "footnote", lambda *a, **k: None)
    monkeypatch.setattr(S, "save", lambda fig, *a, **k: figs.append(fig) or [])
    load_script("composability").draw({}, None, ("png",))
    texts = [t.get_text() for t in figs[0].axes[0].texts]
    assert texts == ["15.0%", "n/a"]


def test_figures_leave_the_backend_and_style_alone(unusual_results, tmp_path):
    import matplotlib

    backend, rc = matplotlib.get_backend(), dict(matplotlib.rcParams)
    draw_all(unusual_results, tmp_path, formats=("pdf",), log=lambda _: None)
    assert matplotlib.get_backend() == backend
    assert dict(matplotlib.rcParams) == rc
    pdf = next(tmp_path.glob("*.pdf")).read_bytes()
    assert b"/FontFile2" in pdf and b"/Type3" not in pdf  # TrueType (Type 42), not Type 3


def test_two_threads_drawing_at_once_each_draw_under_the_theme():
    """The theme is matplotlib's process-wide settings, set and restored around each
    figure: a figure drawn in a second thread while the first's ended was saved without
    it (base_rate.png at another resolution, its footnote cut off), and the first's
    settings were left set after both."""
    import threading

    import matplotlib

    from fastsim.figures import _style as S

    before = dict(matplotlib.rcParams)
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen = []

    @S.themed
    def first():
        first_in.set()
        second_in.wait(0.3)  # the second drawing, if it may start meanwhile

    @S.themed
    def second():
        second_in.set()
        first_out.wait(1.0)
        seen.append(matplotlib.rcParams["savefig.dpi"])

    def run_first():
        first()
        first_out.set()

    threads = [threading.Thread(target=run_first), threading.Thread(target=second)]
    threads[0].start()
    first_in.wait(1.0)
    threads[1].start()
    for t in threads:
        t.join()
    assert seen == [S.THEME["savefig.dpi"]]
    assert dict(matplotlib.rcParams) == before


def test_two_threads_holding_one_directory_take_turns(tmp_path):
    """A drawing holds its directory (``holding_directory``) so that it holds all of one
    drawing's figures; a second thread of the process went in beside the first."""
    import threading

    from fastsim.io import holding_directory

    order, inside = [], threading.Event()

    def hold(name: str, stay: float) -> None:
        with holding_directory(tmp_path):
            order.append(f"{name} in")
            inside.set()
            threading.Event().wait(stay)
            order.append(f"{name} out")

    first = threading.Thread(target=hold, args=("first", 0.3))
    first.start()
    inside.wait(1.0)
    hold("second", 0.0)
    first.join()
    assert order == ["first in", "first out", "second in", "second out"]


def test_frontier_sweep_table_and_figure(tmp_path):
    from fastsim.sweep.aggregate import read_summary
    from fastsim.sweep.frontier import frontier_table
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import run_sweep
    from fastsim.sweep.store import SweepStore
    from fastsim.sweep.aggregate import aggregate
    from fastsim.resources import sweep_file

    g = load_sweep(sweep_file("frontier"), clusters=2, chunk=2, seed=0,
                   base_overrides={"n_jobs": 30})
    store = SweepStore.open(tmp_path / "frontier", g)
    run_sweep(g, store, progress=False)
    aggregate(store)
    table = frontier_table(read_summary(tmp_path / "frontier"))
    assert table.height == 5 * 5 * 5
    assert table["pareto"].any()
    assert (table["detection_distance"] >= table["recall_distance"]).all()
    written = draw_all(tmp_path, tmp_path / "figs", formats=("png",))
    assert [p.name for p in written] == ["frontier.png"]


def test_the_frontier_scores_a_row_as_the_reproduction_does():
    """A point whose FPR sat within the tolerance with an interval wider than it was
    counted as a match, where the pre-registered scoring says 'not comparable: run more
    clusters'; its rows now carry their intervals and n."""
    import polars as pl

    from fastsim.sweep.frontier import frontier_table
    from fastsim.sweep.scoring import ROWS_BY_KEY

    metrics = {"precision": "precision", "recall": "recall", "fpr": "fpr",
               "jct": "jct_mean_h_change", "waste": "wasted_gpu_h_change"}
    rows = []
    for i, half in enumerate((0.001, 0.02)):  # FPR's tolerance is 0.0075
        for key, metric in metrics.items():
            paper = ROWS_BY_KEY[key].paper
            h = half if key == "fpr" else 0.001
            rows.append({"policy_name": "evalstop", "n_evals": 7 + i, "ustar_hacking": "0.5/0.8",
                         "sigma": 0.015, "metric": metric, "mean": paper, "lo": paper - h,
                         "hi": paper + h, "n": 100})
    table = frontier_table(pl.DataFrame(rows)).sort("n_evals")
    assert table["rows_matched"].to_list() == [5, 4]
    assert table["rows_not_comparable"].to_list() == [0, 1]
    assert table["fpr_hi"][1] == pytest.approx(ROWS_BY_KEY["fpr"].paper + 0.02)
    assert table["fpr_n"].to_list() == [100, 100]


def test_the_frontier_refuses_a_sweep_without_one_evalstop_cell_per_point(tiny_reproduction,
                                                                         capsys):
    """`python -m fastsim.sweep.frontier DIR` of a sweep varying k took each point's first
    EvalStop cell (k=1's) without a word; of one without EvalStop it was a polars
    traceback.  The frontier figure reads the same table."""
    from fastsim.sweep.aggregate import read_summary
    from fastsim.sweep.frontier import frontier_table, main

    out, _ = tiny_reproduction
    assert main([str(out / "results" / "k_sweep")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("reads one EvalStop cell per point (n_evals, sigma), and this sweep "
                        "has several (it varies k); allowed: a sweep varying n_evals, "
                        "ustar_hacking and sigma only"), err
    assert len(err.splitlines()) == 1
    with pytest.raises(ConfigError, match="it varies scheduler"):
        frontier_table(read_summary(out / "results" / "composability"))
    summary = read_summary(out / "results" / "headline")
    with pytest.raises(ConfigError, match="reads EvalStop's cells, and this sweep has none"):
        frontier_table(summary.filter(pl.col("policy_name") != "evalstop"))


@pytest.mark.parametrize("axes,per", [
    ('n_evals = [7]\nustar_hacking = [[0.5, 0.8]]\nsigma = [0.015]\n',
     "n_evals and ustar_hacking and sigma"),
    # an axis of the family not varied has no column: the other figures were drawn, then
    # the frontier's own check refused mid-drawing
    ('n_evals = [5, 6]\n', "n_evals and sigma (it runs")])
def test_a_frontier_sweep_varying_k_is_skipped_before_any_figure(tmp_path, axes, per):
    """`fastsim figures` of a sweep named frontier that also varies k drew each family
    point's first EvalStop cell (k=2's), labelled as the frontier."""
    _tiny_sweep(tmp_path, "frontier", axes + 'policy = ["evalstop:k=2", "evalstop:k=3"]')
    with pytest.raises(ConfigError, match=f"several cells per policy and {re.escape(per)}"):
        draw_all(tmp_path / "results", tmp_path / "figs", log=print)
    assert not (tmp_path / "figs").exists()


def test_a_frontier_sweep_not_varying_every_family_axis_is_drawn(tmp_path):
    """frontier_table takes the family's axes a sweep varies (one it does not vary has no
    column), but the figure's intervals selected all three: a frontier sweep over n_evals
    alone ended fastsim figures in polars' ColumnNotFoundError (ustar_hacking)."""
    _tiny_sweep(tmp_path, "frontier", 'n_evals = [5, 6]\npolicy = ["none", "evalstop:k=2"]')
    written = draw_all(tmp_path / "results", tmp_path / "figs", formats="png", log=print)
    assert [p.name for p in written] == ["frontier.png"]


def test_trajectories_title_names_the_policy_readably(monkeypatch, tiny_reproduction):
    out, _ = tiny_reproduction
    fig = _drawn(monkeypatch, "trajectories", out / "results")
    title = fig._suptitle.get_text()
    assert title.startswith("EvalStop (k=2) under") and "evalstop(" not in title


def test_trajectories_say_they_are_single_jobs_without_an_interval(monkeypatch,
                                                                   tiny_reproduction):
    """Every other paper figure states its 95% intervals and n; this one showed four single
    jobs and said neither, so a panel could be read as a typical run."""
    out, _ = tiny_reproduction
    title = _drawn(monkeypatch, "trajectories", out / "results")._suptitle.get_text()
    assert "one simulated job per panel" in title and "no interval" in title


def test_figures_of_changes_against_no_policy_skip_a_sweep_with_another_baseline(tmp_path):
    """A sweep under a figure's name whose changes are against the loss plateau: the figures
    that plot changes against no stop policy say why they skip it; the others draw it.  (A
    baseline of a policy the sweep also runs, evalstop(k=3) beside evalstop(k=2), is one
    policy at two settings, which no figure draws.)"""
    import fastsim

    path = tmp_path / "headline.toml"
    path.write_text('clusters = 3\nchunk = 3\nbaseline = "loss_plateau:w=3"\n[base]\n'
                    'n_jobs = 30\n[axes]\npolicy = ["evalstop:k=2", "stop_at:f=0.65", "none"]\n')
    fastsim.sweep(path, tmp_path / "results" / "headline")
    logs = []
    written = draw_all(tmp_path / "results", tmp_path / "figs", formats=("png",),
                       log=logs.append)
    assert [p.name for p in written] == ["jct_cdf.png"]
    (line,) = [ln for ln in logs if ln.startswith("[figures] headline:")]
    assert line == (f"[figures] headline: skipped, sweep headline in {tmp_path / 'results' / 'headline'}"
                    " holds changes against loss_plateau(w=3,tol=0.01); this figure plots "
                    "changes against none (baseline = \"none\" in the sweep file)")


def test_the_frontier_and_reproduce_refuse_a_baseline_other_than_none(tmp_path):
    from fastsim.errors import ConfigError
    from fastsim.resources import shipped
    from fastsim.sweep.frontier import frontier_table

    with pytest.raises(ConfigError, match=r"^the fidelity frontier reads changes against no "
                       r"stop policy, but this sweep's are against oracle \(hidden truth\)"):
        frontier_table(pl.DataFrame({"baseline_policy": [None, "oracle (hidden truth)"]}))
    sweeps = tmp_path / "sweeps"
    sweeps.mkdir()
    for name in PAPER_SWEEPS:
        text = (shipped("sweeps") / f"{name}.toml").read_text()
        (sweeps / f"{name}.toml").write_text(('baseline = "evalstop:k=3"\n' if name == "noise"
                                              else "") + text)
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as exc:
        reproduce(out, clusters=3, figures_dir=None, report=None, sweeps_dir=sweeps,
                  progress=False)
    assert str(exc.value) == (f"{sweeps / 'noise.toml'}: baseline='evalstop(k=3)' cannot be "
                              "scored against the paper's changes, which are against no stop "
                              "policy; allowed: \"none\" (the default)")
    assert not out.exists()


def test_a_format_named_twice_is_refused_as_a_metric_is(unusual_results, tmp_path, capsys):
    """--formats png,png wrote each figure twice over one file and said so: '6 files written'
    of 3 files; then it drew each once without a word, where --metrics recall,recall is
    refused.  One line, the same words, before anything is written; and in draw_all."""
    out = tmp_path / "figs"
    one_line(capsys, ["figures", str(unusual_results), "--out", str(out), "--formats", "png, pdf,png"],
             "--formats=png, pdf,png is invalid; allowed: each format named once (png is named twice)")
    assert not out.exists()
    with pytest.raises(ConfigError, match=r"^formats=\('svg', 'svg'\) is invalid; allowed: each "
                                          r"format named once \(svg is named twice\)$"):
        draw_all(unusual_results, out, formats=("svg", "svg"))
    assert not out.exists()


def test_a_killed_writers_temporaries_are_removed_where_the_run_holds_the_directory(
        tiny_reproduction, tmp_path):
    """kill -9 while drawing a figure or writing the extracts or report left their
    temporaries (``NAME.<pid>-<random>.tmp``) in OUT, OUT/extracts and OUT/figures for
    good; every later run left them there (the sweeps removed only their own).  Now a run
    that holds the directory removes them; a user's ``draft.tmp`` stays, and so does a
    temporary in a directory no lock covers (another process may be writing it)."""
    from fastsim.io import _tmp_path

    out, _ = tiny_reproduction
    results = out / "results"
    (results / "figures").mkdir(exist_ok=True)
    ours = [_tmp_path(results / "REPRODUCTION.md"),
            _tmp_path(results / "extracts" / "trajectory_jobs.parquet"),
            _tmp_path(results / "figures" / "headline.png")]
    mine = [results / "figures" / "draft.tmp"]  # (OUT itself holds only reproduce's names)
    for p in ours + mine:
        p.write_text("half written")
    reproduce(results, clusters=3, chunk=3, figures_dir=None, report=None, progress=False,
              base_overrides={"n_jobs": 40}, command="fastsim reproduce (test)")
    assert [p.exists() for p in ours] == [False, False, True]  # figures: not drawn
    draw_all(results, results / "figures", formats=("png",), log=lambda *a: None,
             scripts=("k_tradeoff",))
    assert not ours[2].exists() and all(p.exists() for p in mine)
    elsewhere = _tmp_path(tmp_path / "figs" / "headline.png")
    elsewhere.parent.mkdir()
    elsewhere.write_text("another process's")
    draw_all(results, tmp_path / "figs", formats=("png",), log=lambda *a: None,
             scripts=("k_tradeoff",))
    assert elsewhere.exists()
    for p in mine:
        p.unlink()


def test_one_extract_without_the_other_is_one_line(tiny_reproduction, tmp_path, capsys):
    """reproduce wrote the two extracts one after the other, so a kill between them left
    trajectory_jobs.parquet without trajectory_points.parquet, and ``fastsim figures``
    ended in a FileNotFoundError traceback.  Now written both or none (points first), and
    one without the other is refused in one line; an empty extracts/ is no results."""
    import shutil

    from fastsim.cli import main

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results" / "extracts", results / "extracts")
    (results / "extracts" / "trajectory_points.parquet").unlink()
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert "trajectory_points.parquet: missing beside trajectory_jobs.parquet" in err, err
    assert len(err.splitlines()) == 1 and not (results / "figures").exists()
    (results / "extracts" / "trajectory_jobs.parquet").unlink()
    assert main(["figures", str(results), "--formats", "png"]) == 2  # nothing left to draw
    assert "holds no sweep results" in capsys.readouterr().err


def test_a_damaged_extract_names_the_command_that_rewrites_it(tiny_reproduction, tmp_path,
                                                              capsys):
    """A truncated extract was refused telling the user to run `fastsim sweep` again,
    which never writes the extracts; reproduce does."""
    import shutil

    from fastsim.cli import main

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results" / "extracts", results / "extracts")
    (results / "extracts" / "trajectory_points.parquet").write_bytes(b"")
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "fastsim sweep" not in err, err
    assert "trajectory_points.parquet: damaged" in err and "`fastsim reproduce`" in err, err


def test_a_table_of_the_users_among_the_extracts_is_not_read(tiny_reproduction, tmp_path,
                                                             capsys):
    """Every Parquet file in OUT/extracts was checked as an extract: a table of the user's
    there without page checksums (written by pyarrow) was refused, by `fastsim reproduce`
    after all its sweeps, as "a sweep's table ... run the sweep again (same command)",
    which refused it again.  Only the extracts the figures read are checked, and an
    older fastsim's extract names the command that rewrites it."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    from fastsim.cli import main

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results" / "extracts", results / "extracts")
    pq.write_table(pa.table({"a": [1, 2]}), results / "extracts" / "notes.parquet")
    assert main(["figures", str(results), "--formats", "png"]) == 0, capsys.readouterr().err
    assert (results / "figures" / "trajectories.png").is_file()
    points = results / "extracts" / "trajectory_points.parquet"
    pq.write_table(pq.read_table(points).replace_schema_metadata(None), points)  # older
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert "trajectory_points.parquet: has no page checksums" in err, err
    assert "`fastsim reproduce`" in err and "sweep" not in err, err


def test_a_sweep_table_of_an_older_fastsim_without_a_column_a_figure_draws_is_one_line(
        tiny_reproduction, tmp_path, capsys):
    """A results directory aggregated before jct_hist.parquet held the CDF's interval (its
    tables verified by the SHA-256 its manifest records): fastsim figures drew five figures,
    then jct_cdf ended in polars' ColumnNotFoundError traceback, exit 1."""
    import hashlib
    import json
    import shutil

    from fastsim.cli import main
    from fastsim.io import parquet_bytes, parquet_metadata
    from fastsim.sweep.store import GRID_KEY, TABLES

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results" / "headline", results / "headline",
                    ignore=shutil.ignore_patterns("sweep.lock"))
    table = results / "headline" / "jct_hist.parquet"
    older = parquet_bytes(pl.read_parquet(table).drop("clusters", "cdf", "cdf_lo", "cdf_hi"),
                          table, {GRID_KEY: parquet_metadata(table)[GRID_KEY]})
    table.write_bytes(older)
    manifest = results / "headline" / "sweep.json"
    m = json.loads(manifest.read_text())
    m[TABLES]["jct_hist.parquet"] = {"sha256": hashlib.sha256(older).hexdigest(),
                                     "bytes": len(older)}
    manifest.write_text(json.dumps(m))
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert "jct_hist.parquet: missing column(s) cdf, cdf_hi, cdf_lo" in err, err
    assert len(err.splitlines()) == 1 and not (results / "figures").exists()


@pytest.mark.parametrize("sweep,column", [("headline", "mean"), ("noise", "lo"),
                                          ("base_rate", "base_rate"),
                                          ("composability", "scheduler"), ("k_sweep", "k")])
def test_a_summary_without_a_column_a_figure_reads_is_one_line_before_any_figure(
        tiny_reproduction, tmp_path, capsys, sweep, column):
    """Only jct_cdf declared the columns it reads (``READS``): a summary.parquet without
    one another figure reads (an older fastsim's) drew the figures before it and ended in
    a polars or KeyError traceback (mean, lo), or drew every other figure and skipped its
    own, saying it had several cells per policy (scheduler), or plotted nothing (k), exit 0."""
    import hashlib
    import json
    import shutil

    from fastsim.cli import main
    from fastsim.io import parquet_bytes, parquet_metadata
    from fastsim.sweep.store import GRID_KEY, TABLES

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results", results, ignore=shutil.ignore_patterns("sweep.lock",
                                                                            "figures"))
    table = results / sweep / "summary.parquet"
    older = parquet_bytes(pl.read_parquet(table).drop(column), table,
                          {GRID_KEY: parquet_metadata(table)[GRID_KEY]})
    table.write_bytes(older)
    manifest = results / sweep / "sweep.json"
    m = json.loads(manifest.read_text())
    m[TABLES]["summary.parquet"] = {"sha256": hashlib.sha256(older).hexdigest(),
                                    "bytes": len(older)}
    manifest.write_text(json.dumps(m))
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{sweep}/summary.parquet: missing column(s) {column}" in err, err
    assert len(err.splitlines()) == 1 and not (results / "figures").exists()


def test_an_extract_without_a_column_the_figure_draws_is_one_line(tiny_reproduction, tmp_path,
                                                                  capsys):
    """Reproduce's OUT keeps its names free for other commands, so `fastsim run --out
    OUT/extracts/trajectory_jobs.parquet` wrote a table of its own there; `fastsim figures
    OUT` then ended in a KeyError traceback from inside the trajectories script."""
    import shutil

    from fastsim.cli import main
    from fastsim.io import write_parquet

    out, _ = tiny_reproduction
    results = tmp_path / "r"
    shutil.copytree(out / "results" / "extracts", results / "extracts")
    write_parquet(pl.DataFrame({"cluster": [0], "policy": ["evalstop(k=2)"]}),
                  results / "extracts" / "trajectory_jobs.parquet")
    assert main(["figures", str(results), "--formats", "png"]) == 2
    err = capsys.readouterr().err.strip()
    assert "trajectory_jobs.parquet: missing column(s) delivered_eval" in err, err
    assert len(err.splitlines()) == 1 and not (results / "figures").exists()


def test_a_results_path_that_is_no_directory_is_named_as_what_it_is(tmp_path, capsys):
    # a named pipe (or /dev/zero) was "no such directory", as a mistyped path is
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    (tmp_path / "file").write_text("x")
    for path, what in ((pipe, "not a directory"), (tmp_path / "file", "a file"),
                       (tmp_path / "typo", "no such directory")):
        one_line(capsys, ["figures", str(path)], f"{path} is not a results directory ({what})")


def test_a_script_run_alone_makes_nothing_without_results(tmp_path, monkeypatch, capsys):
    """`python figures/noise_sweep.py DIR` (docs/sweeps.md): without DIR it ended in an
    IndexError traceback, and on a mistyped DIR, or one without its sweep, it made
    DIR/figures before finding nothing to draw."""
    from fastsim.figures import _style as S

    script = load_script("noise_sweep")
    monkeypatch.setattr(sys, "argv", ["noise_sweep.py"])
    with pytest.raises(SystemExit) as exc:
        S.main(script.draw, script.NEEDS)
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("usage: ")
    (tmp_path / "other").mkdir()
    other = tmp_path / "other"
    for results, why in (("typo", f"noise_sweep.py: error: {tmp_path / 'typo'} is not a results "
                                  "directory (no such directory); allowed: "),
                         # said without the command line's form, nor what is allowed
                         ("other", f"noise_sweep.py: error: no results for noise in {other}; "
                                   "allowed: a directory holding the sweep noise (fastsim "
                                   "reproduce's --out, or a sweep's --out whose file says "
                                   "name = \"noise\")\n")):
        monkeypatch.setattr(sys, "argv", ["noise_sweep.py", str(tmp_path / results)])
        with pytest.raises(SystemExit) as exc:
            S.main(script.draw, script.NEEDS)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith(why) and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["other"]


def test_a_script_run_alone_says_what_writes_each_missing_source(tmp_path, monkeypatch,
                                                                 capsys):
    """`python figures/trajectories.py EMPTY` said to hold "the sweep extracts" (a sweep
    named so would not do: reproduce's extracts are read), and a script needing several
    sweeps named only the first."""
    from fastsim.figures import _style as S
    from fastsim.sweep.figures import what_writes

    script = load_script("trajectories")
    monkeypatch.setattr(sys, "argv", ["trajectories.py", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        S.main(script.draw, script.NEEDS)
    assert exc.value.code == 2 and capsys.readouterr().err == (
        f"trajectories.py: error: no results for extracts in {tmp_path}; allowed: a directory "
        "holding the extracts extracts/trajectory_jobs.parquet and "
        "extracts/trajectory_points.parquet (fastsim reproduce's --out)\n")
    assert what_writes(["noise", "k_sweep", "extracts"]) == (
        "a directory holding the sweeps noise, k_sweep (fastsim reproduce's --out, or the "
        "--out of sweeps whose files say name = \"noise\" and name = \"k_sweep\") and the "
        "extracts extracts/trajectory_jobs.parquet and extracts/trajectory_points.parquet "
        "(fastsim reproduce's --out)")


def test_a_sweep_begun_but_not_aggregated_is_said_to_be_so(tmp_path):
    """`fastsim figures` on a reproduce directory whose noise sweep had chunks but no
    tables yet (stopped, or still running) said only "no results for noise"."""
    from fastsim.sweep.figures import skip_reason

    (tmp_path / "noise").mkdir()
    assert skip_reason(("noise",), None, {}, tmp_path, None) == (
        f"no results for noise in {tmp_path}")
    (tmp_path / "noise" / "sweep.json").write_text("{}")
    assert skip_reason(("noise",), None, {}, tmp_path, None) == (
        f"no results for noise in {tmp_path} ({tmp_path / 'noise'}: begun, not aggregated "
        "yet; the command that runs it finishes it)")


def test_a_script_run_alone_refuses_an_empty_argument(tiny_reproduction, tmp_path,
                                                      monkeypatch, capsys):
    """`python figures/noise_sweep.py "$DIR"` with DIR unset drew the figures of the
    results in the current directory (Path('') is '.'), and `... DIR ""` wrote them into
    it; now refused in one line, as `fastsim figures ""` is."""
    from fastsim.figures import _style as S

    results = tiny_reproduction[0] / "results"
    before = sorted(results.rglob("*"))
    script = load_script("noise_sweep")
    for cwd, argv, name in ((results, [""], "RESULTS_DIR"),
                            (tmp_path, [str(results), " "], "OUT_DIR")):
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", ["noise_sweep.py", *argv])
        with pytest.raises(SystemExit) as exc:
            S.main(script.draw, script.NEEDS)
        assert exc.value.code == 2
        assert capsys.readouterr().err == f"noise_sweep.py: error: {name} is empty; allowed: a path\n"
    assert sorted(results.rglob("*")) == before and not list(tmp_path.iterdir())


def test_a_script_run_alone_refuses_damaged_or_missing_results_in_one_line(
        tmp_path, monkeypatch, capsys):
    """A damaged manifest ended a script run alone in a ConfigError traceback, exit 1; a
    script of the cost-aware or trace figures (``_style.cli``) exited 0 on a mistyped DIR,
    drawing nothing, and ended in a polars traceback on a damaged table; an OUT_DIR that is
    a file was named '--out', an option no script has."""
    from fastsim.figures import _style as S

    damaged = tmp_path / "damaged"
    (damaged / "noise").mkdir(parents=True)
    (damaged / "noise" / "sweep.json").write_text("{")
    (damaged / "noise" / "summary.parquet").write_text("")
    (damaged / "traces.parquet").write_text("garbage")
    nested = tmp_path / "nested"  # deeper than json parses: it was a RecursionError traceback
    (nested / "noise").mkdir(parents=True)
    (nested / "noise" / "sweep.json").write_text("[" * 5000 + "]" * 5000)
    (nested / "noise" / "summary.parquet").write_text("")
    (tmp_path / "afile").write_text("")
    noise, curves = load_script("noise_sweep"), load_script("real_traces_curves")
    for script, argv, why in (
            (noise, [damaged], f"{damaged}/noise/sweep.json: damaged (not valid JSON: "
             "Expecting property name enclosed in double quotes at line 1, column 2)"),
            (noise, [nested], f"{nested}/noise/sweep.json: damaged (not valid JSON: nested "
             "too deeply)"),
            (curves, [tmp_path / "typo"], f"{tmp_path}/typo is not a results directory (no "
             "such directory); allowed: a sweep's --out"),
            (curves, [tmp_path / "afile"], "afile is not a results directory (a file); allowed:"),
            (curves, [tmp_path], f"real_traces_curves.py: error: no results for real_traces_curves "
             f"in {tmp_path}; allowed: a directory holding the tables it reads (traces.parquet)"),
            # the reader names the table itself (pages verified, fastsim.io.read_parquet_table)
            (curves, [damaged], f"{damaged}/traces.parquet: not a readable Parquet table"),
            (curves, [damaged, tmp_path / "afile"],
             f"OUT_DIR {tmp_path}/afile: exists and is not a directory")):
        monkeypatch.setattr(sys, "argv", [f"{script.__name__.rpartition('.')[2]}.py",
                                          *map(str, argv)])
        with pytest.raises(SystemExit) as exc:
            if script is noise:
                S.main(script.draw, script.NEEDS)
            else:
                S.cli(script.main)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and why in err and len(err.splitlines()) == 1, err
    assert not list(tmp_path.rglob("figures"))


def test_a_script_run_alone_names_itself_once_on_a_full_disk(tmp_path, monkeypatch, capsys):
    """A file a ``_style.cli`` script could not write (a full disk) was said as
    `real_traces_curves.py: error: real_traces_curves: PATH: ...`, the script named twice."""
    import errno

    from fastsim.figures import _style as S

    def full(results, out):
        raise OSError(errno.ENOSPC, "No space left on device", str(out / "a.png"))

    monkeypatch.setattr(sys, "argv", ["real_traces_curves.py", str(tmp_path)])
    with pytest.raises(SystemExit) as exc:
        S.cli(full)
    assert exc.value.code == 2 and capsys.readouterr().err == (
        f"real_traces_curves.py: error: {tmp_path / 'figures' / 'a.png'}: No space left on "
        "device\n")


def test_a_script_run_alone_writes_no_sweep_directory_another_process_holds(
        unusual_results, tmp_path, monkeypatch, capsys):
    """`fastsim figures` is refused in a sweep directory another process holds; a script
    run alone wrote its figures there while a sweep was writing it."""
    from fastsim.figures import _style as S

    script = load_script("headline")
    out = unusual_results / "headline" / "alone"
    monkeypatch.setattr(sys, "argv", ["headline.py", str(unusual_results), str(out)])
    with held_elsewhere(unusual_results / "headline") as holder:
        with pytest.raises(SystemExit) as exc:
            S.main(script.draw, script.NEEDS, getattr(script, "BASELINE", None))
        err = capsys.readouterr().err
        assert exc.value.code == 2 and f"is in use by pid {holder.pid}" in err, err
        assert not out.exists()
    S.main(script.draw, script.NEEDS, getattr(script, "BASELINE", None))  # released: it draws
    assert list(out.glob("*.png"))


def test_figures_says_each_figure_as_it_is_drawn(tmp_path, capsys):
    """`fastsim figures` drew for seconds in silence, then said "1 files written"; each
    figure drawn is now a line naming its files, and one file is "1 file"."""
    from fastsim.cli import main

    _tiny_sweep(tmp_path, "noise", 'sigma = [0.01, 0.1]\npolicy = ["evalstop:k=2"]')
    out = tmp_path / "figs"
    assert main(["figures", str(tmp_path / "results" / "noise"), "--out", str(out),
                 "--formats", "png"]) == 0
    lines = capsys.readouterr().out.splitlines()
    # and what it will draw first, once chosen: the first figure's line came 6-10 s in
    assert lines[0] == f"[figures] drawing noise_sweep into {out}", lines
    assert "[figures] noise_sweep: noise_sweep.png" in lines, lines
    assert lines[-1] == f"1 file written to {out}", lines


def test_reproduce_says_when_its_time_includes_compiling(tiny_reproduction, monkeypatch,
                                                         tmp_path, capsys):
    """A newcomer's first `fastsim reproduce --quick` printed 'in 43 s' against README's
    'about 16 s once numba has compiled', without saying the 43 s included compiling."""
    import fastsim.sweep.reproduce as rep
    from fastsim.cli import main

    _, info = tiny_reproduction
    for compiled, said in ((True, True), (False, False)):
        monkeypatch.setattr(rep, "reproduce", lambda *a, **k: {**info, "compiled": compiled})
        assert main(["reproduce", "--out", str(tmp_path / "r"), "--no-figures",
                     "--no-progress"]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert ("numba's one-time compilation included" in last) is said, last


def test_reproduce_without_figures_gives_no_figures_time(tiny_reproduction, monkeypatch,
                                                         tmp_path, capsys):
    """`reproduce --no-figures` printed '(+ figures 0 s)' and its report 'figures 0 s', for
    figures it never drew."""
    import fastsim.sweep.reproduce as rep
    from fastsim.cli import main

    out, info = tiny_reproduction
    text = (out / "REPRODUCTION.md").read_text()
    assert "no figures drawn (--no-figures), from one run" in text
    assert "figures\n0 s" not in text
    for figures_dir, said in ((None, False), (tmp_path / "f", True)):
        monkeypatch.setattr(rep, "reproduce",
                            lambda *a, **k: {**info, "figures_dir": figures_dir})
        assert main(["reproduce", "--out", str(tmp_path / "r"), "--no-figures",
                     "--no-progress"]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert ("(+ figures 0 s);" in last) is said and ("figures 0" in last) is said, last


def test_reproduce_compiles_here_only_for_a_local_cell_whose_kernel_is_not_cached(monkeypatch):
    import fastsim.compile_notice as notice
    from fastsim.sweep.reproduce import compiles_here
    from fastsim.sweep.grid import load_sweep
    from fastsim.resources import shipped

    grid = load_sweep(shipped("sweeps") / "composability.toml", clusters=2, chunk=2, seed=0)
    codes = {c.config.scheduler.code for c in grid.cells}
    assert len(codes) > 1
    uncached = min(codes)
    monkeypatch.setattr(notice, "engine_is_cached", lambda code=None: code != uncached)
    assert compiles_here([grid], "local")
    assert not compiles_here([grid], "dask")
    monkeypatch.setattr(notice, "engine_is_cached", lambda code=None: True)
    assert not compiles_here([grid], "local")


@pytest.mark.parametrize("policy, k", [("evalstop", 6), ("stop_at", None)])
def test_k_tradeoff_draws_a_k_sweep_whose_evalstop_never_triggers_or_is_absent(
        tmp_path, policy, k):
    """k = 6 of 7 evaluations never triggers on tiny clusters, so every rate's interval is
    NaN: matplotlib refused the NaN axis limit (a ValueError traceback).  A k_sweep without
    an EvalStop cell was a TypeError (100 * None)."""
    from fastsim.cli import main

    sweep = tmp_path / "k_sweep.toml"
    axes = f"[axes]\nk = [{k}]\n" if k else "[axes]\nf = [0.5]\n"
    sweep.write_text(f'clusters = 2\nchunk = 2\n[base]\nn_jobs = 12\ngpus = 16\n'
                     f'policy = "{policy}"\n{axes}')
    results = tmp_path / "r"
    assert main(["sweep", str(sweep), "--out", str(results), "--no-progress"]) == 0
    written = draw_all(results, tmp_path / "figs", formats=("png",), log=lambda *a: None,
                       scripts=("k_tradeoff",))
    assert [p.name for p in written] == ["k_tradeoff.png"]


def test_the_footnote_names_the_clusters_per_cell_not_a_metrics_least_n(monkeypatch,
                                                                        tmp_path):
    """Without any hacking job, a hacking metric has n = 0, and the footnote said 'n = 0
    clusters per cell' of cells of 3 clusters."""
    _tiny_sweep(tmp_path, "headline", 'base_rate = [0.0]\npolicy = ["evalstop:k=2"]')
    fig = _drawn(monkeypatch, "headline", tmp_path / "results")
    (note,) = fig.texts
    # the hacking metrics' rows have no estimate (n 0): they draw nothing and count for none
    assert note.get_text() == "headline: 95% CIs over n = 3 clusters per cell"


def test_the_headline_draws_no_bar_for_an_undefined_estimate(monkeypatch, tmp_path):
    """Without any hacking job, recall and stop recall are undefined (NaN), and their bars
    were drawn at 0%, a value never measured."""
    _tiny_sweep(tmp_path, "headline", 'base_rate = [0.0]\npolicy = ["evalstop:k=2"]')
    summary = pl.read_parquet(tmp_path / "results" / "headline" / "summary.parquet")
    recall = summary.filter((pl.col("metric") == "recall") & (pl.col("policy_name") == "evalstop"))
    assert np.isnan(recall["mean"][0])
    fig = _drawn(monkeypatch, "headline", tmp_path / "results")
    heights = [b.get_height() for b in fig.axes[0].patches]  # precision, recall, stop recall, ...
    assert np.isnan(heights[1]) and np.isnan(heights[2])


def test_a_dir_that_is_no_directory_is_refused_saying_what_to_give(tmp_path, capsys):
    """`fastsim figures results/nope` said only "is not a results directory": neither that
    nothing is there nor what to give instead."""
    (tmp_path / "afile").write_text("")
    for name, what in (("nope", "no such directory"), ("afile", "a file")):
        one_line(capsys, ["figures", str(tmp_path / name)],
                 f"{tmp_path / name} is not a results directory ({what}); allowed: a sweep's "
                 "--out, or a directory of them (fastsim reproduce's --out)")
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


@pytest.mark.parametrize("formats,needle", [(("pgn",), "formats=('pgn',) is invalid"),
                                            ("png,svgg", "formats='png,svgg' is invalid"),
                                            ((), "formats=() is invalid")])
def test_draw_all_checks_its_formats_before_anything(tmp_path, formats, needle):
    """draw_all(results, out, formats="png") drew in formats 'p', 'n', 'g' and failed with
    matplotlib's ValueError on the first figure, after making out/ (formats=("pgn",) too);
    the formats are checked first, as fastsim figures --formats checks them."""
    from fastsim.sweep.figures import draw_all

    with pytest.raises(ConfigError, match=re.escape(needle) + r"; allowed: png, pdf, svg"):
        draw_all(tmp_path / "results", tmp_path / "out", formats=formats)
    assert not (tmp_path / "out").exists()


def test_a_policy_a_figure_does_not_draw_is_said(tmp_path):
    """A sweep named ``noise`` with a policy beside the paper's (a user's, a detector) drew
    the paper's lines alone: the other policy had no line and nothing said so."""
    _tiny_sweep(tmp_path, "noise", 'policy = ["evalstop:k=2", "patience"]')
    said = []
    draw_all(tmp_path / "results", tmp_path / "figs", formats="png", log=said.append)
    assert "[figures] noise_sweep: patience not drawn; it draws evalstop, stop_at, " \
           "loss_plateau only" in said, said


def test_a_policy_the_paper_sweep_runs_and_its_figure_leaves_out_is_not_said(tiny_reproduction,
                                                                              tmp_path):
    """jct_cdf draws no deprioritize, which the headline sweep runs: by design, no news;
    a policy the shipped sweep does not run is."""
    from fastsim.sweep.figures import not_drawn

    headline = tiny_reproduction[0] / "results" / "headline"
    jct_cdf = load_script("jct_cdf")
    assert "deprioritize" not in jct_cdf.POLICIES
    assert not_drawn(jct_cdf.POLICIES, "headline", headline) == []
    assert not_drawn(jct_cdf.POLICIES, "mine", headline) == ["deprioritize"]


def test_a_missing_dir_near_an_existing_one_is_offered_it(tmp_path, capsys):
    """README's `fastsim figures results/reproduce`, after the quick start's `fastsim
    reproduce --quick` (which writes results/reproduce-quick), said only "no such
    directory"; the directory beside it nearest the name typed is offered."""
    (tmp_path / "reproduce-quick").mkdir()
    typed = tmp_path / "reproduce"
    one_line(capsys, ["figures", str(typed)],
             f"{typed} is not a results directory (no such directory) (did you mean "
             f"{tmp_path / 'reproduce-quick'}?); allowed: a sweep's --out, or a directory of "
             "them (fastsim reproduce's --out)")
    assert [p.name for p in tmp_path.iterdir()] == ["reproduce-quick"]


def test_ones_own_sweeps_figure_says_its_points_without_an_interval_and_the_n_it_draws(
        own_sweeps, monkeypatch):
    """A point with a mean but no interval (NaN lo/hi) was drawn as a bare marker, read as
    exact, and the footnote's n was the whole summary's, whatever --where or --metrics
    left out."""
    from fastsim.figures import _style as S
    from fastsim.figures import own_sweep

    data = pl.DataFrame({"mean": [0.5, 0.6, 0.7], "lo": [0.4, float("nan"), 0.6],
                         "hi": [0.6, float("nan"), float("nan")], "n": [3, 2, 3]})
    assert own_sweep.bare(data).startswith("2 points without an interval")
    assert own_sweep.bare(data.head(1)) == ""
    said = []
    monkeypatch.setattr(S, "note", lambda fig, text: said.append(text))
    S.footnote(None, {"two": own_sweeps / "two"}, "two", rows=data.slice(1, 1))
    assert said[-1] == "two: 95% CIs over n = 2 clusters per cell", said


def test_the_frontier_figure_says_within_tolerance_not_matches():
    """At its best point, the defaults, three of the four rows within tolerance are the
    rows the defaults were fitted to, which the reproduction shows as `fitted`, never as
    matches; the figure's title read "Best point matches 4 of 5 rows"."""
    from fastsim.figures import frontier

    title = frontier.best_title(pl.DataFrame({"rows_matched": [4, 2]}))
    assert title == "Best point: 4 of 5 rows within tolerance"
    assert "match" not in title


def test_every_figure_script_run_alone_without_arguments_says_its_usage(monkeypatch, capsys):
    """``python figures/detectors_pareto.py`` with no argument read ``sys.argv[1]`` itself
    and ended in an IndexError traceback; every script now says its usage, exit 2."""
    import runpy

    scripts = sorted(p for p in (Path(__file__).parent.parent / "figures").glob("*.py")
                     if not p.name.startswith("_"))
    assert any(p.name == "detectors_pareto.py" for p in scripts)
    for path in scripts:
        monkeypatch.setattr(sys, "argv", [str(path)])
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(path), run_name="__main__")
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.startswith("usage: python "), (path.name, err)
