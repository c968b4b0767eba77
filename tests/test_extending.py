"""docs/extending.md's three walkthroughs, run as written from outside the package.

Each ``# file: NAME.py`` code block of the document is written to a temporary directory
(not the package), imported by name, and run through ``simulate`` (engine == reference),
a sweep and ``fastsim replay``; the README's worked example is the same detector.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import polars as pl
import pytest

from fastsim.api import simulate
from fastsim.cli import main
from fastsim.config import SimConfig

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).parent))
from conftest import modules_on_path  # noqa: E402
from test_engine_vs_reference import compare  # noqa: E402

POLICY = "mydetectors:below_best"
KEY = "mykeys:gpu_h_first"
METRIC = "mymetrics:waste_per_hacking_job"


def _blocks(text: str) -> dict[str, str]:
    return {m.group(1): m.group(0).split("\n", 1)[1]
            for m in re.finditer(r"# file: (\w+\.py)\n.*?(?=\n```)", text, flags=re.S)}


@pytest.fixture(scope="module")
def walkthroughs(tmp_path_factory):
    blocks = _blocks((ROOT / "docs" / "extending.md").read_text())
    assert set(blocks) == {"mydetectors.py", "mykeys.py", "mymetrics.py"}
    yield from modules_on_path(tmp_path_factory, "outside", blocks)


def test_readme_example_is_the_walkthrough_detector():
    readme = _blocks((ROOT / "README.md").read_text())
    doc = _blocks((ROOT / "docs" / "extending.md").read_text())
    assert readme["mydetectors.py"] == doc["mydetectors.py"]
    assert len(doc["mydetectors.py"].split("def below_best")[1].strip().splitlines()) <= 12


def test_simulate_runs_all_three_and_matches_the_reference(walkthroughs):
    cfg = SimConfig.from_specs(f"{KEY}:per_gpu=0.5", f"{POLICY}:k=2", n_jobs=30, gpus=16,
                               demands_rlhf=(4, 8), sigma=0.03)
    cfg = SimConfig(cfg.workload, cfg.scheduler, cfg.policy, (METRIC,))
    res = simulate(cfg, 20, seed=4)
    assert res.clusters["waste_per_hacking_job"].dtype == pl.Float64
    assert res.clusters["n_stopped"].sum() > 0
    compare(cfg, seed=4, cluster_start=0, n_clusters=3)  # the metric too


def test_the_check_against_the_reference_covers_a_user_metric(walkthroughs, monkeypatch):
    """compare() checked the built-in metrics and skipped the config's own: an engine
    whose column of a user metric was off passed the check the doc offers."""
    from dataclasses import replace

    import fastsim.api

    cfg = SimConfig.from_specs(KEY, f"{POLICY}:k=2", n_jobs=20, gpus=16, metrics=[METRIC])
    compare(cfg, seed=0, cluster_start=0, n_clusters=2)
    run = fastsim.api.run_workload

    def off_by_a_bit(*args, **kwargs):
        res = run(*args, **kwargs)
        name = METRIC.split(":")[1]
        return replace(res, clusters=res.clusters.with_columns(pl.col(name) * (1 + 1e-6)))

    monkeypatch.setattr(fastsim.api, "run_workload", off_by_a_bit)
    with pytest.raises(AssertionError, match="metric waste_per_hacking_job"):
        compare(cfg, seed=0, cluster_start=0, n_clusters=2)


def test_a_sweep_and_replay_run_all_three(walkthroughs, tmp_path, capsys):
    sweep = tmp_path / "mine.toml"
    sweep.write_text(f'clusters = 40\nchunk = 20\n[base]\nn_jobs = 30\nscheduler = "{KEY}"\n'
                     f'metrics = ["{METRIC}"]\n[axes]\n'
                     f'policy = ["{POLICY}:k=2", "{POLICY}:k=3,drop=0.01", "evalstop:k=2"]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(sweep), "--out", str(out), "--no-progress"]) == 0
    s = pl.read_parquet(out / "summary.parquet")
    assert {"below_best(k=2,drop=0)", "below_best(k=3,drop=0.01)"} <= set(s["policy"])
    rows = s.filter(pl.col("metric") == "waste_per_hacking_job")
    assert rows.height == 4 and (rows["n"] == 40).all()  # 3 cells and their shared baseline
    # declared with paired=: each policy cell's change against the baseline, as documented
    changes = s.filter(pl.col("metric") == "waste_per_hacking_job_change")
    assert changes.height == 3 and (changes["kind"] == "paired").all()
    text = (out / "summary.txt").read_text()
    assert "wasted GPU-h per hacking job change" in text
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\nr1,100,0.50\nr1,200,0.62\nr1,300,0.55\nr1,400,0.54\n"
                   "r2,100,0.40\nr2,200,0.45\n")
    assert main(["replay", str(log), "--policy", f"{POLICY}:k=2", "--policy", "evalstop:k=2"]) == 0
    text = capsys.readouterr().out
    assert "below_best(k=2,drop=0)" in text
    capsys.readouterr()
    assert main(["run", "--scheduler", KEY, "--policy", f"{POLICY}:k=2", "--metric", METRIC,
                 "--clusters", "4", "--n-jobs", "20"]) == 0
    assert "wasted GPU-h per hacking job" in capsys.readouterr().out


@pytest.mark.parametrize("page", ["README.md", "docs/extending.md"])
def test_the_pages_parameter_axes_are_the_cells_of_their_specs(walkthroughs, tmp_path, page):
    """Each page's `[axes] NAME = [...]` beside `policy` (or `scheduler`) = ["MODULE:FUNCTION"]
    expands to the cells of the specs with those values."""
    from fastsim.sweep.grid import load_sweep

    text = " ".join((ROOT / page).read_text().split())
    found = re.findall(r"`\[axes\] (\w+) = (\[[^]]*\])` beside `(policy|scheduler) = "
                       r'\["([\w:]+)"(?:, "(\w+)")?\]`', text)
    assert len(found) == {"README.md": 1, "docs/extending.md": 2}[page], found
    for name, values, kind, ref, other in found:
        p = tmp_path / "axes.toml"
        p.write_text(f'clusters = 4\n[axes]\n{name} = {values}\n'
                     f'{kind} = ["{ref}"{f", {other!r}" if other else ""}]\n'.replace("'", '"'))
        specs = [f"{ref}:{name}={v.strip()}" for v in values.strip("[]").split(",")]
        q = tmp_path / "specs.toml"
        q.write_text(f'clusters = 4\n[axes]\n{kind} = {specs + ([other] if other else [])}\n'
                     .replace("'", '"'))
        assert {c.id for c in load_sweep(p).cells} == {c.id for c in load_sweep(q).cells}
        paired = [c for c in load_sweep(p).cells if not c.is_baseline]
        assert len(paired) == len(specs) + bool(other)


def test_the_check_against_the_reference_runs_as_written(walkthroughs, monkeypatch, capsys):
    """The walkthrough's engine-vs-reference check of a user's policy, run from the root
    of the checkout as it says (the doc gave no way to check one's own policy)."""
    text = (ROOT / "docs" / "extending.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
                if "test_engine_vs_reference" in b]
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    exec(compile(block, "extending.md:check", "exec"), {"__name__": "__doc_example__"})
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all("engine == reference on 100 jobs" in ln for ln in lines), lines


def test_the_metric_walkthrough_switches_it_on_in_from_specs(walkthroughs, capsys):
    """The walkthrough built a config, then a second one around it to add the metric
    (from_specs took no metrics); its block runs as written."""
    text = (ROOT / "docs" / "extending.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S)
                if "metrics=" in b]
    namespace = {"__name__": "__doc_example__", "SimConfig": SimConfig, "simulate": simulate}
    exec(compile(block, "extending.md:metric", "exec"), namespace)
    assert namespace["cfg"].metrics == ("mymetrics:waste_per_hacking_job",)
    assert float(capsys.readouterr().out) > 0


def test_the_job_type_codes_the_walkthroughs_name_are_what_a_key_and_a_metric_get():
    """`job_type` reaches a key and a metric as an integer code, where `SimResult.jobs`
    holds "lora", "dpo", "rlhf": the doc named no codes, and a metric written
    `jobs["job_type"] == "rlhf"` was 0 on every cluster without a word."""
    import numpy as np

    from fastsim.kernels import codes

    text = " ".join((ROOT / "docs" / "extending.md").read_text().split())
    shown = {"lora": "LoRA", "dpo": "DPO", "rlhf": "RLHF"}
    named = ", ".join(f"{getattr(codes, t.upper())} {shown[t]}" for t in codes.JOB_TYPE_LABELS)
    assert f"`job_type` is an integer code, {named} " in text
    tutorial = " ".join((ROOT / "docs" / "tutorial.md").read_text().split())
    assert (f"`job_type` as its integer code, {named}, whose `== \"rlhf\"` raises as a "
            "metric's does, valid during the call") in tutorial
    res = simulate(SimConfig.from_specs("fifo", "none", n_jobs=20), 2, keep_jobs=True,
                   extract=lambda jobs: jobs["job_type"].copy())
    assert res.extract.dtype.kind == "i"
    labels = np.array(codes.JOB_TYPE_LABELS)[res.extract.ravel()]
    assert labels.tolist() == res.jobs["job_type"].to_list()


def test_the_detectors_page_says_how_to_write_ones_own():
    """docs/detectors.md listed the built-in detectors and where their specs go, and said
    nothing of a detector of one's own: the way (a stop policy with ``keep="best"``) was
    one clause of extending.md."""
    text = " ".join((ROOT / "docs" / "detectors.md").read_text().split())
    assert ('A detector of your own is a stop policy of yours that keeps the best checkpoint: '
            'an `@njit` function over one job\'s observed series, declared with '
            '`@stop_policy(params=[...], keep="best")`') in text
    assert "`fastsim detectors` benchmarks the built-in detectors only" in text
