"""The documentation's figures: one theme, readable labels, legends off the data, the n and
the intervals said, fonts embedded as TrueType; drawn here from small unusual inputs (one
data size, one problem, a strategy missing, NaN rates, parameters the docs never used)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from fastsim.cli import main
from fastsim.sweep.figures import load_script

ROOT = Path(__file__).resolve().parents[1]
RAW_NAME = re.compile(r"[A-Za-z]+_[A-Za-z_]+|\w\(\w+=|\[scope")  # least_squares, evalstop(k=


def test_no_committed_pdf_embeds_a_type3_font():
    pdfs = sorted((ROOT / "figures").glob("*.pdf")) + sorted((ROOT / "docs" / "figures").glob("*.pdf"))
    assert pdfs
    bad = [p.relative_to(ROOT).as_posix() for p in pdfs
           if re.search(rb"/Subtype\s*/Type3", p.read_bytes())]
    assert not bad, f"Type 3 fonts (bitmap-like glyphs) in {bad}; redraw under figures/_style.THEME"


def _traces(tmp: Path) -> Path:
    """One data size, one KL coefficient, three runs; a replay with a NaN precision."""
    d = tmp / "traces"
    d.mkdir()
    rows = []
    for j in range(3):
        for s in range(0, 60, 10):
            gold = 1 + s / 30 - (j == 0) * (s / 40) ** 2
            rows.append({"job_id": f"run{j}", "step": s, "score": gold + 0.1, "truth_gold": gold,
                         "truth_proxy": s / 20, "truth_kl_nats": s / 50.0, "n_comparisons": 150,
                         "kl_coef": 0.05, "truth_hacking": j == 0})
    pl.DataFrame(rows).write_parquet(d / "traces.parquet")
    pl.DataFrame({"n_comparisons": [150], "kl_coef": [0.05], "n_runs": [3], "gao_alpha": [2.0],
                  "gao_beta": [0.5], "gao_r2": [0.9]}).write_parquet(d / "gao_fits.parquet")
    rates = {m: [0.5, float("nan")] for m in ("precision", "recall", "fpr")}
    rates.update({f"{m}_{e}": [v, float("nan")] for m in ("precision", "recall", "fpr")
                  for e, v in (("lo", 0.3), ("hi", 0.7))})
    pl.DataFrame({"policy": ["evalstop(k=3)[scope=all]", "stop_at(f=0.3)[scope=all]"],
                  "n_jobs": [3, 3], **rates}).write_parquet(d / "replay_summary.parquet")
    pl.DataFrame({"policy": ["stop_at(f=0.3)", "evalstop(k=3)"], "n_clusters": [4, 4],
                  **{k: [0.4, 0.6] for k in rates}}).write_parquet(d / "simulator.parquet")
    return d


def _costaware(tmp: Path) -> Path:
    """One problem, one step rule, no correlation, two cost spreads, cost_only missing;
    GRPO with an ablation arm and a single lam."""
    d = tmp / "costaware"
    d.mkdir()
    rows = [{"strategy": s, "sgd_step": "strongly_convex", "problem_kind": "logistic",
             "problem_cost_corr": 0.0, "problem_cost_sigma": sig, "cost_units_mean": 100.0 * r,
             "cost_units_lo": 90.0 * r, "cost_units_hi": 110.0 * r, "predicted_ratio": r,
             "simulated_ratio": r, "simulated_ratio_lo": 0.9 * r, "simulated_ratio_hi": 1.1 * r,
             "n_pairs": 6, "sgd_replications": 6, "n": 6, "reached_frac": 1.0}
            for s, r in (("uniform", 2.0), ("gradient_norm", 1.5), ("optimal", 1.0))
            for sig in (0.0, 1.3)]
    pl.DataFrame(rows).write_parquet(d / "costaware_sgd.summary.parquet")
    curves = pl.DataFrame([{"arm": a, "eval": e, "tokens_mean": 1e5 * e * f,
                            "accuracy_mean": 0.4 + 0.03 * e, "accuracy_lo": 0.38 + 0.03 * e,
                            "accuracy_hi": 0.42 + 0.03 * e, "n_seeds": 5}
                           for a, f in (("uniform", 1.0), ("advantage_only", 0.8))
                           for e in range(6)])
    curves.write_parquet(d / "costaware_grpo.curves.parquet")
    curves.with_columns(grpo_lam=pl.lit(0.2), grpo_len_sigma=pl.lit(0.5)).write_parquet(
        d / "costaware_grpo_sweep.curves.parquet")
    return d


def _texts(fig) -> list[str]:
    """Titles, axis and tick labels, legends: what names things (the note under a figure
    names its source, a sweep or a command, by its file name)."""
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    for leg in fig.legends:
        out += [t.get_text() for t in leg.get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return [t for t in out if t]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """Every docs figure script on the unusual inputs: name -> the matplotlib figure."""
    from fastsim.figures import _style as S

    tmp = tmp_path_factory.mktemp("docsfig")
    traces, costaware = _traces(tmp), _costaware(tmp)
    figs = {}
    real_save = S.save

    def keep(fig, out, stem, *a, **k):
        figs[stem] = fig
        return real_save(fig, out, stem, *a, **k)

    mp = pytest.MonkeyPatch()
    mp.setattr(S, "save", keep)
    (tmp / "out").mkdir()  # made by the caller, as the commands make theirs (``save``)
    try:
        for name in ("real_traces_curves", "real_traces_gao", "real_traces_replay"):
            load_script(name).main(traces, tmp / "out")
        for name in ("costaware_cost_vs_heterogeneity", "costaware_ratios", "costaware_grpo"):
            load_script(name).main(costaware, tmp / "out")
    finally:
        mp.undo()
    for fig in figs.values():
        FigureCanvasAgg(fig).draw()
    return figs, tmp / "out"


EXPECTED = ("real_traces_curves", "real_traces_gao", "real_traces_replay",
            "costaware_cost_vs_heterogeneity", "costaware_ratios", "costaware_grpo",
            "costaware_grpo_sweep")


def test_every_docs_figure_is_drawn_with_readable_labels(drawn):
    figs, _ = drawn
    assert set(figs) == set(EXPECTED)
    for name, fig in figs.items():
        for text in _texts(fig):
            plain = re.sub(r"\$[^$]*\$", "", text)  # mathtext (c_i) is typeset, not shown raw
            assert not RAW_NAME.search(plain), f"{name}: raw identifier in {text!r}"


def test_replay_bars_are_labelled_with_the_parameters_that_ran(drawn):
    figs, _ = drawn
    ax = figs["real_traces_replay"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["EvalStop (k=3)", "StopAt-0.3"]


def test_docs_figures_keep_legends_off_the_data_and_say_n_and_intervals(drawn):
    figs, _ = drawn
    for name, fig in figs.items():
        renderer = fig.canvas.get_renderer()
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
        assert legends, name
        for leg in legends:
            box = leg.get_window_extent(renderer)
            for ax in fig.axes:
                if ax.axison:
                    assert not box.overlaps(ax.get_window_extent(renderer)), name
        notes = " ".join(t.get_text() for t in fig.texts)
        if name != "real_traces_curves":  # single runs: no estimate, no interval
            assert "n = " in notes or "n >= " in notes, name
        if name not in ("real_traces_curves", "real_traces_gao"):
            assert "95%" in notes, name


def test_docs_figures_write_truetype_pdfs(drawn):
    _, out = drawn
    pdfs = sorted(out.glob("*.pdf"))
    assert {p.stem for p in pdfs} == set(EXPECTED)
    for p in pdfs:
        data = p.read_bytes()
        assert b"/FontFile2" in data and not re.search(rb"/Subtype\s*/Type3", data), p.name


def test_docs_figures_command_draws_what_it_finds(tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    _traces(results)
    assert main(["docs-figures", "--results", str(results), "--out", str(tmp_path / "figs"),
                 "--draw-only"]) == 0
    assert sorted(p.name for p in (tmp_path / "figs").glob("*.png")) == [
        "real_traces_curves.png", "real_traces_gao.png", "real_traces_replay.png"]
    # said as it goes: the drawing (10-15 s) was silent until a list of every file at the end
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"[docs-figures] drawing the figures of {results} into {tmp_path / 'figs'}"
    assert said[1:4] == [f"[docs-figures] {name}: {name}.png, {name}.pdf" for name in
                         ("real_traces_curves", "real_traces_gao", "real_traces_replay")]
    assert said[-1] == f"docs-figures: 6 files written to {tmp_path / 'figs'}"
    assert main(["docs-figures", "--results", str(tmp_path / "missing"), "--draw-only",
                 "--out", str(tmp_path / "figs")]) == 2
    # a directory with nothing to draw: "0 files written", exit 0
    (tmp_path / "empty").mkdir()
    assert main(["docs-figures", "--results", str(tmp_path / "empty"), "--draw-only",
                 "--out", str(tmp_path / "none")]) == 2
    assert not (tmp_path / "none").exists()


def test_docs_figures_interrupted_before_a_figure_leave_no_empty_out(tmp_path, monkeypatch):
    """Ctrl-C (or a failure) while drawing, before the first figure was written, left
    --out made and empty."""
    from fastsim import docs_figures

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(docs_figures, "_draw_held", interrupted)
    (tmp_path / "results").mkdir()
    with pytest.raises(KeyboardInterrupt):
        docs_figures.draw(tmp_path / "results", tmp_path / "figs" / "docs", within=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.parametrize("table,column", [("traces/traces.parquet", "truth_gold"),
                                          ("traces/simulator.parquet", "fpr_hi"),
                                          ("costaware/costaware_sgd.summary.parquet",
                                           "problem_cost_corr")])
def test_docs_figures_refuse_a_table_without_a_column_it_draws(tmp_path, capsys, table,
                                                                column):
    # a polars ColumnNotFoundError traceback from inside a figure script; costaware
    # figures already refused it in one line, before any figure
    from conftest import one_line

    results = tmp_path / "results"
    results.mkdir()
    _traces(results), _costaware(results)
    pl.read_parquet(results / table).drop(column).write_parquet(results / table)
    one_line(capsys, ["docs-figures", "--results", str(results), "--out", str(tmp_path / "f"),
                      "--draw-only"], f"missing column(s) {column}")
    assert not (tmp_path / "f").exists()


def test_every_docs_figure_has_a_maker():
    """Each committed docs figure is one that ``fastsim docs-figures`` (or, for the
    detector benchmark, ``fastsim detectors``) draws."""
    made = set(EXPECTED) | {"frontier", "detectors_pareto", "detectors_traces"}
    committed = {p.stem for p in (ROOT / "docs" / "figures").iterdir()
                 if p.suffix in (".png", ".pdf")}
    assert committed <= made, committed - made


def test_docs_figures_refuse_to_reuse_a_trace_set_made_with_other_parameters(tmp_path,
                                                                            capsys,
                                                                            monkeypatch):
    """`fastsim traces toy-rlhf --seeds 0 --out RESULTS/traces` left a smaller trace set where
    docs-figures looks: it was reused, said to be the docs' 72 runs, and drawn."""
    from conftest import one_line

    from fastsim import docs_figures
    from fastsim.io import table_writer
    from fastsim.replay.traces import ToyRLHFConfig, config_metadata

    def ran(results, log=print):
        raise AssertionError("a step ran")

    monkeypatch.setattr(docs_figures, "run_steps", ran)
    results = tmp_path / "results"
    results.mkdir()
    d = _traces(results)
    # as many runs as the docs' (72), or fewer: the fields that differ are named
    for other, differ in ((ToyRLHFConfig(seeds=(0,)), "seeds=(0,), not (0, 1, 2, 3)"),
                          (ToyRLHFConfig(world_seed=3), "world_seed=3, not 0")):
        for name in ("traces", "runs", "gao_fits"):
            path = d / f"{name}.parquet"
            table_writer(pl.read_parquet(d / "traces.parquet"), path,
                         config_metadata(other))(path)
        one_line(capsys, ["docs-figures", "--results", str(results), "--out",
                          str(tmp_path / "f")],
                 f"{d / 'traces.parquet'}: made with other parameters than the docs' trace "
                 f"set ({differ})")
    assert not (tmp_path / "f").exists()


def _fake_steps(monkeypatch, results: Path, version: list[int]):
    """``fastsim.cli.main`` replaced by one that writes each step's outputs as
    ``version[0]`` says (other bytes for another version); returns the steps it ran."""
    from fastsim import cli, docs_figures

    ran = []

    def main(argv):
        ran.append(tuple(argv[:2]))
        for _, outputs, template in docs_figures.STEPS:
            if [a.format(r=results) for a in template] == list(argv):
                for o in outputs:
                    (results / o).parent.mkdir(parents=True, exist_ok=True)
                    (results / o).write_text(f"{o} {version[0]}")
        return 0

    monkeypatch.setattr(cli, "main", main)
    return ran


STEP_IDS = [("sweep", "frontier"), ("traces", "toy-rlhf"), ("replay", None),
            ("traces", "compare-sim"), ("costaware", "sweep"), ("costaware", "grpo"),
            ("costaware", "sweep")]


def _ran(ran):
    return [(a, None if a == "replay" else b) for a, b in ran]


def test_docs_figures_reuse_only_what_their_record_verifies(tmp_path, monkeypatch):
    """Outputs were reused because they existed: a truncated table was drawn, and the
    replay and simulator tables of a trace set regenerated by an earlier, interrupted run
    were reused beside it.  Now each step records its command, code and the SHA-256 of
    what it read and wrote, and runs again when any of it changed."""
    from fastsim import docs_figures

    results, version, said = tmp_path / "results", [0], []
    results.mkdir()
    ran = _fake_steps(monkeypatch, results, version)

    def steps():
        ran.clear(), said.clear()
        assert docs_figures.run_steps(results, log=said.append) == 0
        return _ran(ran)

    assert steps() == STEP_IDS  # nothing there: every step, saying only its command
    assert said[0] == (f"[docs-figures] fidelity frontier (125 points x 100 clusters): fastsim "
                       f"sweep frontier --out {results}/frontier --no-progress"), said
    assert steps() == [("sweep", "frontier")]  # all verified: reused (the sweep resumes itself)
    assert sum("reused" in line for line in said) == 6, said
    # an interrupted run: the trace set made again (other bytes) and recorded, then killed
    version[0] = 1
    (results / "traces" / "traces.parquet").write_text("traces/traces.parquet 1")
    record = json.loads((results / docs_figures.RECORD).read_text())
    entry = record["steps"]["toy-RLHF traces (72 runs)"]
    entry["outputs"]["traces/traces.parquet"] = docs_figures._sha256(
        results / "traces" / "traces.parquet")
    (results / docs_figures.RECORD).write_text(json.dumps(record))
    assert steps() == [("sweep", "frontier"), ("replay", None)]
    assert any("traces/traces.parquet, which it read, changed since" in line
               for line in said), said
    # a table damaged in place: its step runs again
    (results / "costaware" / "costaware_grpo.curves.parquet").write_text("cut")
    assert steps() == [("sweep", "frontier"), ("costaware", "grpo")]
    # a record that cannot be read: said, and every step runs again
    (results / docs_figures.RECORD).write_text("{")
    assert steps() == STEP_IDS
    assert any("docs-figures.json: unreadable" in line for line in said), said
    # other code: every step again, saying why
    monkeypatch.setattr(docs_figures, "_code", lambda: {"fastsim": "0.0", "user": {},
                                                        "fastsim_sha256": "x"})
    assert steps() == STEP_IDS
    assert any("of other code (they were computed by fastsim" in line for line in said), said


def test_draw_only_refuses_a_recorded_table_changed_since(tmp_path, capsys):
    from conftest import one_line

    from fastsim import docs_figures

    results = tmp_path / "results"
    results.mkdir()
    _traces(results), _costaware(results)
    steps = {what: docs_figures._entry(t, results, o) for what, o, t in docs_figures.STEPS if o}
    docs_figures._write_record(results, steps)
    (results / "traces" / "simulator.parquet").write_bytes(b"PAR1")
    one_line(capsys, ["docs-figures", "--draw-only", "--results", str(results), "--out",
                      str(tmp_path / "f")],
             f"{results / 'traces' / 'simulator.parquet'}: changed since fastsim docs-figures "
             "wrote it")
    assert not (tmp_path / "f").exists()


@pytest.mark.parametrize("record", ["{", "[]"])
def test_draw_only_says_an_unreadable_record_checks_nothing(tmp_path, monkeypatch, capsys,
                                                            record):
    """--draw-only runs no step, yet a record it could not read was said to mean "every
    step is run again"; the tables were drawn unchecked, and it now says so."""
    from fastsim import docs_figures

    results = tmp_path / "results"
    results.mkdir()
    (results / docs_figures.RECORD).write_text(record)
    monkeypatch.setattr(docs_figures, "draw", lambda results, out, **_: [out / "x.png"])
    assert main(["docs-figures", "--draw-only", "--results", str(results), "--out",
                 str(tmp_path / "f")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "docs-figures.json" in line]
    assert len(said) == 1 and "every step is run again" not in said[0], said
    assert said[0].endswith("its tables are drawn unchecked (run without --draw-only to "
                            "compute and record them again)"), said


def test_docs_figures_results_belong_to_one_process(tmp_path, monkeypatch):
    """Two docs-figures runs on one RESULTS both ran every step into it, and each one's
    record could name the other's tables; now the run holds RESULTS' lock while its steps
    run, as a sweep holds its --out."""
    import fcntl
    import os

    from fastsim import docs_figures
    from fastsim.sweep.store import LOCK

    results = tmp_path / "results"
    held = []

    def step(argv):
        fd = os.open(results / LOCK, os.O_RDONLY)
        try:  # another open file description: refused while the run holds the lock
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return 0

    monkeypatch.setattr("fastsim.cli.main", step)
    monkeypatch.setattr(docs_figures, "draw", lambda results, out, **_: [out / "x.png"])
    assert main(["docs-figures", "--results", str(results), "--out", str(tmp_path / "f")]) == 0
    assert held == [True] * len(docs_figures.STEPS)


def test_docs_figures_skip_a_frontier_directory_without_the_frontier_sweep(tmp_path, capsys):
    """RESULTS/frontier of a frontier sweep killed before its tables (or holding another
    sweep) was a KeyError traceback from inside the frontier script, under --draw-only."""
    results = tmp_path / "results"
    results.mkdir()
    _traces(results)
    (results / "frontier").mkdir()
    assert main(["docs-figures", "--results", str(results), "--out", str(tmp_path / "f"),
                 "--draw-only"]) == 0
    said = capsys.readouterr().out
    assert f"frontier: skipped, no results for frontier in {results}" in said, said
    assert not list((tmp_path / "f").glob("frontier.*"))


def test_a_step_that_refuses_its_input_is_its_one_line_and_exit_2(tmp_path, capsys):
    """A step's refusal (here the frontier sweep's: RESULTS/frontier is a file) was its line,
    then docs-figures' own 'step failed' and exit 1."""
    from conftest import one_line

    results = tmp_path / "results"
    results.mkdir()
    (results / "frontier").write_text("x")
    one_line(capsys, ["docs-figures", "--results", str(results), "--out", str(tmp_path / "f")],
             f"--out {results / 'frontier'}: exists and is not a directory")
    assert not (tmp_path / "f").exists()


def test_docs_figures_recompute_their_sweep_of_other_code(tmp_path, monkeypatch):
    """After any change of fastsim's source every docs-figures run stopped at the frontier
    sweep's refusal of a directory of other code ("use a new --out directory"), which
    docs-figures cannot do.  A sweep directory its record shows it ran into is removed and
    computed again, saying why; one it has no record of is refused, saying how to go on;
    one of this code is resumed, and one a process still holds is refused."""
    import fcntl
    import os

    from fastsim import docs_figures
    from fastsim.errors import ConfigError
    from fastsim.sweep.store import LOCK

    results, said = tmp_path / "results", []
    frontier = results / "frontier"
    ran = _fake_steps(monkeypatch, results, [0])

    def sweep_of(code):
        (frontier / "cells").mkdir(parents=True, exist_ok=True)
        (frontier / "cells" / "x").write_text("old")
        (frontier / "sweep.json").write_text(json.dumps({"grid_hash": "ab", "code": code}))

    other = {"fastsim": "0.0", "fastsim_sha256": "x", "user": {}}
    sweep_of(other)
    with pytest.raises(ConfigError, match="a sweep of other code .* that docs-figures.json "
                       "does not record as this command's; allowed: .*delete the directory"):
        docs_figures.run_steps(results, log=said.append)
    assert (frontier / "cells" / "x").exists() and not ran
    (frontier / "sweep.json").unlink()  # as if deleted by hand: the run records the sweep
    assert docs_figures.run_steps(results, log=said.append) == 0
    sweep_of(other)  # then the code changed
    fd = os.open(frontier / LOCK, os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a sweep still running there
    with pytest.raises(ConfigError, match="is in use by"):
        docs_figures.run_steps(results, log=said.append)
    os.close(fd)
    assert (frontier / "cells" / "x").exists()
    said.clear()
    assert docs_figures.run_steps(results, log=said.append) == 0
    assert said[0].startswith(f"[docs-figures] fidelity frontier (125 points x 100 clusters): "
                              f"{frontier} held the sweep this command ran with other code "
                              "(they were computed by fastsim 0.0"), said
    assert not frontier.exists() and sorted(os.listdir(results)) == sorted(
        ["docs-figures.json", "traces", "costaware"])  # the fake sweep writes nothing
    sweep_of(docs_figures._code())  # this code's: resumed as it is
    said.clear()
    assert docs_figures.run_steps(results, log=said.append) == 0
    assert (frontier / "cells" / "x").exists()
    assert said[0] == (f"[docs-figures] fidelity frontier (125 points x 100 clusters): fastsim "
                       f"sweep frontier --out {frontier} --no-progress"), said


def _stale_frontier(tmp_path, monkeypatch, frontier_at):
    """RESULTS whose record shows docs-figures ran the frontier sweep, now holding a sweep
    of other code at ``frontier_at`` (the directory RESULTS/frontier is or points to)."""
    from fastsim import docs_figures

    results = tmp_path / "results"
    _fake_steps(monkeypatch, results, [0])
    assert docs_figures.run_steps(results, log=lambda _: None) == 0  # recorded
    (frontier_at / "cells").mkdir(parents=True, exist_ok=True)
    (frontier_at / "cells" / "x").write_text("old")
    (frontier_at / "sweep.json").write_text(json.dumps(
        {"grid_hash": "ab", "code": {"fastsim": "0.0", "fastsim_sha256": "x", "user": {}}}))
    return results


def test_docs_figures_refuse_a_frontier_link_to_a_sweep_of_other_code(tmp_path, monkeypatch):
    """RESULTS/frontier a symbolic link to a sweep of other code: the link was renamed away
    and removing it was an OSError traceback ('Cannot call rmtree on a symbolic link'),
    the link lost; it is refused in one line, link and sweep left as they are."""
    from fastsim import docs_figures
    from fastsim.errors import ConfigError

    elsewhere = tmp_path / "elsewhere"
    results = _stale_frontier(tmp_path, monkeypatch, elsewhere)
    (results / "frontier").symlink_to(elsewhere)
    with pytest.raises(ConfigError, match=r"frontier: a symbolic link to a sweep of other "
                       r"code .*; allowed: a directory"):
        docs_figures.run_steps(results, log=lambda _: None)
    assert (results / "frontier").is_symlink() and (elsewhere / "cells" / "x").exists()
    assert [p.name for p in results.iterdir() if "stale" in p.name] == []


def test_docs_figures_remove_the_trash_of_a_killed_run(tmp_path, monkeypatch):
    """A run killed between renaming its stale sweep away and removing it left
    RESULTS/.frontier.stale-PID, a whole sweep, there for good; the next run removes it."""
    from fastsim import docs_figures

    results = _stale_frontier(tmp_path, monkeypatch, tmp_path / "results" / "frontier")
    trash = results / ".frontier.stale-12345"
    (trash / "cells").mkdir(parents=True)
    (trash / "cells" / "y").write_text("old")
    assert docs_figures.run_steps(results, log=lambda _: None) == 0
    assert not trash.exists() and not (results / "frontier").exists()


def test_docs_figures_do_not_take_a_damaged_record_as_owning_the_sweep(tmp_path, monkeypatch):
    """A record whose frontier entry was damaged to {} (or any dict) counted as proof that
    this command ran the sweep there, so a sweep of other code was removed; it is refused
    as one the record does not show, the sweep left as it is."""
    from fastsim import docs_figures
    from fastsim.errors import ConfigError

    results = _stale_frontier(tmp_path, monkeypatch, tmp_path / "results" / "frontier")
    record = json.loads((results / docs_figures.RECORD).read_text())
    record["steps"]["fidelity frontier (125 points x 100 clusters)"] = {"argv": 1}
    (results / docs_figures.RECORD).write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="does not record as this command's"):
        docs_figures.run_steps(results, log=lambda _: None)
    assert (results / "frontier" / "cells" / "x").exists()


def _detector_grid(results: Path) -> Path:
    """A two-row ``fastsim detectors`` grid, written where docs-figures looks for it."""
    point = {"fpr": 0.1, "fpr_lo": 0.0, "fpr_hi": 0.3, "reclaimed_gpu_h": 5.0,
             "reclaimed_gpu_h_lo": 2.0, "reclaimed_gpu_h_hi": 8.0}
    grid = pl.DataFrame([{"sigma": 0.05, "base_rate": 0.6, "detector": d, "setting": s,
                          "n_clusters": 2, **point}
                         for d, s in (("evalstop", "evalstop(k=2)"), ("cusum", "cusum(h=2)"))])
    (results / "detectors").mkdir(parents=True)
    grid.write_parquet(results / "detectors" / "synthetic.parquet")
    return results / "detectors" / "synthetic.parquet"


@pytest.mark.parametrize("edit,needle", [
    (lambda g: g.drop("sigma"), "missing column(s) sigma"),
    (lambda g: g.head(0), "synthetic.parquet: no rows"),
    (lambda g: g.with_columns(pl.lit(0.2).alias("base_rate")), "no row at base_rate 0.6"),
    (lambda g: g.with_columns(pl.lit(None, pl.Float64).alias("base_rate")), "no row at base_rate"),
    (lambda g: g.with_columns(pl.lit(float("nan")).alias("sigma")), "with a finite sigma"),
    (lambda g: g.with_columns(pl.col("sigma").cast(pl.String)), "column(s) sigma hold no numbers"),
    (lambda g: g.with_columns(pl.col("fpr_hi").cast(pl.String)), "column(s) fpr_hi hold no"),
])
def test_docs_figures_refuse_a_detector_grid_they_cannot_draw_in_one_line(tmp_path, capsys,
                                                                          edit, needle):
    """A hand-edited or partial RESULTS/detectors/synthetic.parquet was a polars,
    matplotlib or format traceback from inside the figure script (exit 1), after the
    figures before it were written; it is one line, exit 2, before any figure."""
    from conftest import one_line

    table = _detector_grid(tmp_path / "results")
    edit(pl.read_parquet(table)).write_parquet(table)
    one_line(capsys, ["docs-figures", "--results", str(tmp_path / "results"), "--out",
                      str(tmp_path / "f"), "--draw-only"], needle)
    assert not (tmp_path / "f").exists()


def test_docs_figures_draw_a_detector_grid(tmp_path):
    _detector_grid(tmp_path / "results")
    assert main(["docs-figures", "--results", str(tmp_path / "results"), "--out",
                 str(tmp_path / "f"), "--draw-only"]) == 0
    assert [p.name for p in (tmp_path / "f").glob("*.png")] == ["detectors_pareto.png"]


@pytest.mark.parametrize("edit,needle", [
    (lambda t: t.head(0), "traces.parquet: no rows"),
    (lambda t: t.with_columns(pl.col("kl_coef").cast(pl.String)), "column(s) kl_coef hold no"),
    (lambda t: t.with_columns(pl.col("step").cast(pl.String)), "column(s) step hold no numbers"),
    (lambda t: t.with_columns(pl.lit(float("nan")).alias("truth_gold")), "truth_gold is nan"),
    (lambda t: t.with_columns(pl.lit(None, pl.Int64).alias("n_comparisons")),
     "column(s) n_comparisons hold a NaN or null count"),
])
def test_docs_figures_refuse_a_trace_set_they_cannot_draw_in_one_line(tmp_path, capsys, edit,
                                                                     needle):
    """An empty or hand-edited RESULTS/traces/traces.parquet was an IndexError or format
    traceback from inside a trace figure, or (steps as text, NaN gold) a figure drawn
    wrong; it is refused as fastsim traces and detectors refuse it, before any figure."""
    from conftest import one_line

    (tmp_path / "results").mkdir()
    table = _traces(tmp_path / "results") / "traces.parquet"
    edit(pl.read_parquet(table)).write_parquet(table)
    one_line(capsys, ["docs-figures", "--results", str(tmp_path / "results"), "--out",
                      str(tmp_path / "f"), "--draw-only"], needle)
    assert not (tmp_path / "f").exists()


def test_ctrl_c_in_a_step_names_docs_figures_which_resumes(tmp_path, monkeypatch, capsys):
    """Ctrl-C during the traces step said "fastsim traces: interrupted; nothing half-written
    is left" (and during the sweep "fastsim sweep: ... the same command resumes it"): the
    command the user did not type, and not that the docs-figures run resumes."""
    from fastsim import docs_figures
    import fastsim.replay.traces

    def stop(*a, **k):
        raise KeyboardInterrupt
    step = [s for s in docs_figures.STEPS if s[2][:2] == ["traces", "toy-rlhf"]]
    monkeypatch.setattr(docs_figures, "STEPS", tuple(step))
    monkeypatch.setattr(fastsim.replay.traces, "generate_toy_rlhf", stop)
    assert main(["docs-figures", "--results", str(tmp_path / "r"),
                 "--out", str(tmp_path / "f")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["fastsim docs-figures: interrupted; finished work is kept: the same command "
                   "resumes it"], err
    assert main(["traces", "fit-curves", str(tmp_path / "none.parquet")]) == 2  # state reset
