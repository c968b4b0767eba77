"""Every figure script runs on a tiny reproduction and writes PNG and PDF; the report
has every MODEL.md section 9 row."""
from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from fastsim.sweep.figures import FIGURE_SCRIPTS, draw_all, load_script
from fastsim.sweep.reproduce import PAPER_SWEEPS, reproduce
from fastsim.sweep.scoring import PAPER_ROWS


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


def test_figure_scripts_draw_png_and_pdf(tiny_reproduction, tmp_path):
    out, _ = tiny_reproduction
    written = draw_all(out / "results", tmp_path, formats=("png", "pdf"))
    paper = [n for n in FIGURE_SCRIPTS if n != "frontier"]  # frontier: its own sweep, below
    expected = {f"{name}.{fmt}" for name in paper for fmt in ("png", "pdf")}
    assert {p.name for p in written} == expected
    for p in written:
        assert p.stat().st_size > 1000
        head = p.read_bytes()[:8]
        assert head.startswith(b"%PDF") if p.suffix == ".pdf" else head.startswith(b"\x89PNG")


def test_figure_scripts_read_parquet_only():
    """The layering rule: figures never import the engine."""
    for name in FIGURE_SCRIPTS + ("_style",):
        src = (Path(load_script.__code__.co_filename).parents[2] / "figures" / f"{name}.py")
        text = src.read_text()
        for banned in ("import kernels", "from kernels", "fastsim.api", "simulate("):
            assert banned not in text, f"figures/{name}.py uses {banned}"


def test_missing_inputs_are_skipped_not_fatal(tmp_path):
    logs = []
    assert draw_all(tmp_path, tmp_path / "figs", log=logs.append) == []
    assert len(logs) == len(FIGURE_SCRIPTS)


def test_frontier_sweep_table_and_figure(tmp_path):
    from fastsim.sweep.aggregate import read_summary
    from fastsim.sweep.frontier import frontier_table
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.runner import run_sweep
    from fastsim.sweep.store import SweepStore
    from fastsim.sweep.aggregate import aggregate
    from fastsim.sweep.reproduce import repo_root

    g = load_sweep(repo_root() / "sweeps" / "frontier.toml", clusters=2, chunk=2, seed=0,
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
