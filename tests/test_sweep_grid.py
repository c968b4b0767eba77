"""Sweep files: grid expansion, baselines, canonical cells, hashes, and refusal of bad files."""
from __future__ import annotations

import pytest

from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.sweep.grid import load_sweep, parse_sweep


def write(tmp_path, text, name="exp.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_axes_cross_and_baselines_are_shared(tmp_path):
    p = write(tmp_path, """
clusters = 10
chunk = 4
[base]
scheduler = "fifo"
n_jobs = 20
[axes]
sigma = [0.01, 0.05]
policy = ["evalstop:k=2", "stop_at:f=0.65", "none"]
""")
    g = load_sweep(p)
    assert g.name == "exp" and g.n_chunks == 3 and g.chunk_range(2) == (8, 2)
    # 2 sigmas x 3 policies; the "none" cells are the baselines, shared by both policies.
    assert len(g.cells) == 6
    for c in g.cells:
        assert c.config.workload.n_jobs == 20 and c.config.scheduler.name == "fifo"
        if c.is_baseline:
            assert c.baseline is None
        else:
            b = g.cell(c.baseline)
            assert b.is_baseline
            assert b.config.workload == c.config.workload
            assert b.config.scheduler == c.config.scheduler
    sigmas = sorted(c.config.workload.sigma for c in g.cells)
    assert sigmas == [0.01] * 3 + [0.05] * 3


def test_baseline_added_when_not_an_axis_value_and_ids_are_stable(tmp_path):
    p = write(tmp_path, "clusters = 4\n[axes]\nk = [1, 2, 3]\n")
    g = load_sweep(p)
    labels = [c.label for c in g.cells]
    assert labels == ["srtf_est | none", "srtf_est | evalstop(k=1)", "srtf_est | evalstop(k=2)",
                      "srtf_est | evalstop(k=3)"]
    assert len({c.baseline for c in g.cells if not c.is_baseline}) == 1
    # The same config has the same id in another sweep file.
    q = write(tmp_path, "clusters = 4\n[base]\npolicy = \"evalstop:k=2\"\n", "other.toml")
    (cell,) = [c for c in load_sweep(q).cells if not c.is_baseline]
    assert cell.id == [c.id for c in g.cells if c.label.endswith("(k=2)")][0]


def test_irrelevant_parameters_collapse_and_precedence(tmp_path):
    p = write(tmp_path, """
clusters = 4
[base]
k = 3
[axes]
policy = ["stop_at:f=0.5", "evalstop", "evalstop:k=4"]
f = [0.5, 0.7]
""")
    g = load_sweep(p)
    labels = sorted(c.label for c in g.cells)
    # k is irrelevant to stop_at and f to evalstop: one evalstop(k=3) cell (base k), one
    # evalstop(k=4) (the spec beats the base), two stop_at cells (axis f beats the spec).
    assert labels == sorted(["srtf_est | none", "srtf_est | stop_at(f=0.5)",
                             "srtf_est | stop_at(f=0.7)", "srtf_est | evalstop(k=3)",
                             "srtf_est | evalstop(k=4)"])


def test_hash_tracks_what_results_depend_on(tmp_path):
    text = "clusters = 8\nchunk = 4\n[axes]\npolicy = [\"none\", \"evalstop:k=2\"]\n"
    g = load_sweep(write(tmp_path, text))
    reordered = load_sweep(write(tmp_path, text.replace('"none", "evalstop:k=2"',
                                                        '"evalstop:k=2", "none"'), "b.toml"))
    assert g.hash == reordered.hash  # the grid is a set of cells
    assert load_sweep(write(tmp_path, text), clusters=9).hash != g.hash
    assert load_sweep(write(tmp_path, text), chunk=2).hash != g.hash
    assert load_sweep(write(tmp_path, text), seed=1).hash != g.hash
    assert load_sweep(write(tmp_path, text), base_overrides={"sigma": 0.03}).hash != g.hash


@pytest.mark.parametrize("text, words", [
    ("clusters = 4\n[axes]\nsigmaa = [0.1]\n", ["field 'sigmaa' is unknown"]),
    ("clusters = 4\n[base]\nn_job = 5\n", ["[base] field 'n_job' is unknown"]),
    ("clusters = 4\n[axes]\nsigma = [0.01, 7.0]\n", ["sigma=7.0", "sigma=7.0 is invalid"]),
    ("clusters = 4\n[axes]\npolicy = [\"evalstop:q=1\"]\n", ["policy parameter 'q'"]),
    ("clusters = 4\n[axes]\nscheduler = [\"lifo\"]\n", ["scheduler='lifo'"]),
    ("clusters = 0\n", ["clusters=0"]),
    ("clusters = 4\nbogus = 1\n", ["key 'bogus' is unknown"]),
    ("clusters = 4\n[axes]\nk = []\n", ["axis 'k'"]),
    ("clusters = 4\n[axes]\nk = [1, 2\n", ["invalid TOML"]),
    ("clusters = 4\n[base]\nn_evals = 3\n[axes]\nk = [3]\n", ["n_evals=3"]),
])
def test_bad_sweep_files_name_file_and_field(tmp_path, text, words):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_sweep(p)
    msg = str(exc.value)
    assert str(p) in msg
    for w in words:
        assert w in msg


def test_cli_refuses_bad_file_before_writing_anything(tmp_path, capsys):
    p = write(tmp_path, "clusters = 4\n[axes]\nload = [0.5, 9.0]\n")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "load=9.0" in err and str(p) in err
    assert not out.exists()


def test_parse_sweep_rejects_bad_baseline():
    with pytest.raises(ConfigError, match="baseline"):
        parse_sweep({"baseline": "evalstop"}, "mem.toml")


def test_online_detectors_are_sweep_policies(tmp_path):
    """Detector specs in a sweep: validated, canonical (defaults filled, equal values one
    cell), and a built-in field such as k that is not theirs is reset."""
    p = write(tmp_path, """
clusters = 4
[base]
n_jobs = 20
k = 3
[axes]
policy = ["peak:sigma0=0.05", "peak:z=1.65,sigma0=0.050", "cusum:h=1.5", "evalstop"]
""")
    g = load_sweep(p)
    pols = sorted({c.config.policy.label for c in g.cells if not c.is_baseline})
    assert pols == ["cusum(drift=0,h=1.5,sigma0=0.015)", "evalstop(k=3)",
                    "peak(z=1.65,sigma0=0.05,min_evals=4,origin=0,window=0,gamma=0.5)"]
    assert all(c.config.policy.k == 2 for c in g.cells if c.config.policy.name == "peak")
    bad = write(tmp_path, '[axes]\npolicy = ["cusum:h=-1"]\n', "bad.toml")
    with pytest.raises(ConfigError, match="h=-1.0 is invalid"):
        load_sweep(bad)


def test_every_committed_simulator_sweep_expands_under_the_current_defaults():
    """A default that moves (e.g. ustar_healthy's start) must not leave a committed sweep
    file with cells that exit 2."""
    import tomllib
    from pathlib import Path

    files = sorted((Path(__file__).parent.parent / "sweeps").glob("*.toml"))
    checked = 0
    for p in files:
        if "experiment" in tomllib.loads(p.read_text()):  # cost-aware sweeps: another runner
            continue
        assert load_sweep(p).cells, p
        checked += 1
    assert checked >= 10


def test_summary_txt_headings_name_the_workload_axes(tmp_path, capsys):
    # cells that differ only in a workload axis (a noise sweep's sigma) must not share a
    # heading in summary.txt; the scheduler and policy axes are already in the label
    p = write(tmp_path, """
clusters = 2
[base]
n_jobs = 10
gpus = 16
[axes]
sigma = [0.01, 0.1]
policy = ["evalstop:k=2"]
""")
    assert main(["sweep", str(p), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    headings = [ln for ln in (tmp_path / "out" / "summary.txt").read_text().splitlines()
                if ln.startswith("== ")]
    assert len(headings) == 4 and len({h.split("  [cell")[0] for h in headings}) == 4
    assert sum("| evalstop(k=2) | sigma=0.1  [cell " in h for h in headings) == 1
