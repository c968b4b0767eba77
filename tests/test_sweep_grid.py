"""Sweep files: grid expansion, baselines, canonical cells, hashes, and refusal of bad files."""
from __future__ import annotations

import re

import polars as pl
import pytest

from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.sweep.grid import axis_value, load_sweep, parse_sweep


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


def test_an_int_and_a_float_of_one_value_are_one_cell(tmp_path):
    # load = [1, 1.0] ran one simulation as two cells under one heading, and a file
    # writing 1 never shared a cell id with one writing 1.0
    g = load_sweep(write(tmp_path, 'clusters = 4\n[base]\npolicy = "stop_at"\n'
                         "[axes]\nload = [1, 1.0]\nf = [1, 1.0]\nmix = [[0, 0, 1], [0.0, 0.0, 1.0]]\n"))
    assert len(g.cells) == 2 and len({c.id for c in g.cells}) == 2
    ints, floats = (load_sweep(write(tmp_path, f'clusters = 4\n[base]\nscheduler = "tiresias"\n'
                                     f"load = {load}\nheight = {pair}\nthresholds_gpu_h = "
                                     f"{pair}\n", f"{name}.toml"))
                    for name, load, pair in (("ints", "1", "[1, 2]"),
                                             ("floats", "1.0", "[1.0, 2.0]")))
    assert [c.id for c in ints.cells] == [c.id for c in floats.cells]


def test_minus_zero_and_zero_are_one_cell(tmp_path):
    # sigma = [0.0, -0.0] and threshold=0 / threshold=-0 ran one simulation as two cells,
    # headed "sigma 0" and "sigma -0" (the canonical JSON writes -0.0 apart)
    g = load_sweep(write(tmp_path, 'clusters = 4\n[axes]\nsigma = [0.0, -0.0]\npolicy = '
                         '["patience:patience=2,threshold=0", "patience:patience=2,threshold=-0"]'
                         '\npreempt_overhead_h = [0.0, -0.0]\n'))
    assert len(g.cells) == 2 and len({c.id for c in g.cells}) == 2
    zero = load_sweep(write(tmp_path, 'clusters = 4\n[base]\nsigma = 0.0\npolicy = '
                            '"patience:patience=2,threshold=0"\n', "zero.toml"))
    assert [c.id for c in zero.cells] == [c.id for c in g.cells]
    assert "-0" not in " ".join(c.label for c in g.cells)


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
    ("clusters = 4\n[axes]\nsigmaa = [0.1]\n",
     ["field 'sigmaa' is unknown (did you mean sigma?); allowed: "]),
    # metrics is a [base] field only: an [axes] metrics is refused
    ("clusters = 4\n[axes]\nsigmaa = [0.1]\n", ["allowed: scheduler, policy, gpus, "]),
    ("clusters = 4\n[base]\nsigmaa = 0.1\n", ["allowed: scheduler, policy, metrics, gpus, "]),
    ("clusters = 4\n[base]\nn_job = 5\n",
     ["[base] field 'n_job' is unknown (did you mean n_jobs?)"]),
    ("cluster = 4\n", ["key 'cluster' is unknown (did you mean clusters?); allowed: "]),
    # a detector's parameter, though no policy of the file's: not 'did you mean sigma?'
    ("clusters = 4\n[axes]\nsigma0 = [0.01, 0.05]\n",
     ["axis 'sigma0' applies to no cell: no policy of the grid has the field 'sigma0'; "
      "allowed: a field of a policy of the grid (evalstop: k), or 'sigma0' beside a policy "
      "that declares it (margin, cusum, peak, bocpd)"]),
    ("clusters = 4\nbase_rate = 0.3\n",  # a field above [base], not a misspelt 'base'
     ["key 'base_rate' is unknown (a field: under [base], or under [axes] as a list); "]),
    # a list under [base] was refused as a bad value, without a word of [axes]
    ("clusters = 4\n[base]\nscheduler = [\"fifo\", \"sjf_est\"]\n",
     ["allowed: a spec such as 'fifo:backfill' ([base] gives every cell one scheduler; "
      "several, a cell each, go under [axes])"]),
    ("clusters = 4\n[base]\nsigma = [0.1, 0.2]\n[axes]\nk = [1, 2]\n",
     ["sigma=[0.1, 0.2] is invalid; allowed: an evaluation-noise standard deviation in [0, 1] "
      "([base] gives every cell one sigma; several, a cell each, go under [axes])"]),
    # metrics above [base]: it was sent under [axes], which refuses it
    ("clusters = 4\nmetrics = [\"m:f\"]\n",
     ["key 'metrics' is unknown (a field: under [base], as a list); "]),
    ("clusters = 4\n[axes]\nsigma = [0.01, 7.0]\n", ["sigma=7.0", "sigma=7.0 is invalid"]),
    ("clusters = 4\n[axes]\npolicy = [\"evalstop:q=1\"]\n", ["policy parameter 'q'"]),
    ("clusters = 4\n[axes]\nscheduler = [\"lifo\"]\n", ['scheduler="lifo"']),
    ("clusters = 0\n", ["clusters=0"]),
    ("clusters = 4\nbogus = 1\n", ["key 'bogus' is unknown"]),
    ("clusters = 4\n[axes]\nk = []\n", ["axes.k=[] is invalid"]),
    ("clusters = 4\n[axes]\nk = [1, 2\n", ["invalid TOML"]),
    # a word without quotes said only 'Invalid value (at line 3, column 11)'
    ("clusters = 4\n[axes]\npolicy = [evalstop:k=2]\n", ["invalid TOML: Invalid value (at line "
     "3, column 11); allowed: text in double quotes, as \"evalstop:k=2\""]),
    ("clusters = 4\n[base]\nscheduler = fifo # FIFO\n", ["allowed: text in double quotes, as "
     "\"fifo\""]),
    ("clusters = 4\n[base]\nbackfill = True\n", ["(at line 3, column 12); allowed: true or "
     "false, in lower case"]),
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


def test_a_name_too_long_for_its_figure_is_refused_on_loading_before_the_sweep_runs(
        tmp_path, capsys):
    """sweep_NAME.png, under its temporary name, fits 255 bytes up to a name of 224
    characters; a longer one was refused by fastsim figures after the whole sweep ran."""
    from fastsim.sweep.figures import check_figure_name

    body = 'clusters = 2\n[base]\nn_jobs = 10\n'
    assert load_sweep(write(tmp_path, f'name = "{"n" * 224}"\n{body}')).name == "n" * 224
    p = write(tmp_path, f'name = "{"n" * 225}"\n{body}', "long.toml")
    with pytest.raises(ConfigError) as exc:
        load_sweep(p)
    said = f"{p}: name is 225 characters long; allowed: at most 224 (its figure's file"
    assert str(exc.value).startswith(said)
    with pytest.raises(ConfigError) as figures_said:  # fastsim figures' own check
        check_figure_name("n" * 225, str(p))
    assert str(figures_said.value) == str(exc.value)
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize("value, words", [
    ("evalstop:k=-1", "baseline.k=-1 is invalid"),
    (3, "baseline=3 is invalid"),
    (True, "baseline=true is invalid"),
    ("nosuch", 'baseline="nosuch" is invalid'),
    ("evalstop:q=1", "baseline parameter 'q'"),
    ("", 'baseline="" is empty'),
    # "false" in quotes is a name; the error listed the policies and not how to say none
    ("false", 'baseline="false" is invalid; allowed: none, evalstop'),
])
def test_parse_sweep_rejects_bad_baseline(value, words):
    with pytest.raises(ConfigError) as exc:
        parse_sweep({"baseline": value}, "mem.toml")
    assert str(exc.value).startswith(f"mem.toml: {words}") and "\n" not in str(exc.value)
    if value in ("nosuch", "false"):
        assert str(exc.value).endswith(', or false (no quotes) or "off" for no baseline')


@pytest.mark.parametrize("text, said", [
    ("baseline = true\n", "exp.toml: baseline=true is invalid"),
    ("clusters = false\n", "exp.toml: clusters=false is invalid"),
    ("name = true\n", "exp.toml: name=true is invalid"),
    ("[base]\nsigma = true\n", "cell (base): sigma=true is invalid"),
    ("[base]\nmix = \"x\"\n", 'cell (base): mix="x" is invalid'),
    # the command line's --mix 1,0,0 copied into the file: text, not a list
    ("[base]\nmix = \"1,0,0\"\n", 'three fractions (lora, dpo, rlhf) (fractions go in a list, '
     'not text: [1, 0, 0])'),
    ("[base]\nmix = [0.5, 0.5, true]\n", "cell (base): mix=[0.5, 0.5, true] is invalid"),
    ("[base]\nsigma = 1979-05-27\n", "cell (base): sigma=1979-05-27 is invalid"),
    ("[axes]\nsigma = [0.1]\n[base]\nsigma = \"x\"\n", 'exp.toml: base.sigma="x" is invalid'),
    ("[axes]\nsigma = true\n", "exp.toml: axes.sigma=true is invalid; allowed: a non-empty "
     "list of values, as sigma = [true] (or sigma = true under [base]: every cell's)"),
    # a single value without brackets said only 'must be a non-empty list', not where one goes
    ("[axes]\nsigma = 0.1\n", "exp.toml: axes.sigma=0.1 is invalid; allowed: a non-empty "
     "list of values, as sigma = [0.1] (or sigma = 0.1 under [base]: every cell's)"),
    ("[axes]\nsigma = []\n", "exp.toml: axes.sigma=[] is invalid; allowed: a non-empty list "
     "of values"),
    ("[axes]\nscheduler = [true]\n", "cell (scheduler=true): scheduler=true is invalid"),
    ("[axes]\npolicy = [\"bogus\"]\n", 'cell (policy="bogus"): policy="bogus" is invalid'),
    ('baseline = "evalstop:k=9"\n[base]\nn_evals = 3\n', 'baseline="evalstop:k=9" in cell'),
    # the key the file uses, not the spec's (scheduler.thresholds=(1, True))
    ('[base]\nscheduler = "tiresias"\nthresholds_gpu_h = [1, true]\n',
     "cell (base): thresholds_gpu_h=[1, true] is invalid; allowed: increasing positive numbers"),
    ('[axes]\nthresholds_gpu_h = [[3, 1]]\n[base]\nscheduler = "tiresias"\n',
     "cell (thresholds_gpu_h=[3, 1]): thresholds_gpu_h=[3, 1] is invalid"),
    ('[axes]\nthresholds_gpu_h = [[16]]\n[base]\nscheduler = "tiresias"\nthresholds_gpu_h = "16/64"\n',
     'exp.toml: base.thresholds_gpu_h="16/64" is invalid'),
])
def test_a_bad_value_is_echoed_as_the_file_writes_it(tmp_path, text, said):
    """Values were echoed as Python's repr: baseline=True, mix='x', datetime.date(...)."""
    p = write(tmp_path, "clusters = 4\n" + text if "clusters" not in text else text)
    with pytest.raises(ConfigError) as exc:
        load_sweep(p)
    assert said in str(exc.value), str(exc.value)


def test_a_bad_override_is_not_blamed_on_the_file(tmp_path, capsys):
    """'fastsim sweep tiny.toml --clusters 0' said 'tiny.toml: clusters=0 is invalid', of a
    file that says clusters = 20."""
    from fastsim.cli import main

    p = write(tmp_path, "clusters = 20\n[base]\nn_jobs = 10\n")
    for option, value in (("--clusters", "0"), ("--chunk", "0"), ("--seed", "-1")):
        assert main(["sweep", str(p), "--out", str(tmp_path / "out"), option, value]) == 2
        err = capsys.readouterr().err.strip()
        # the option as typed: "chunk=0" named the file's field, not what was typed
        assert err.endswith(f"{option}={value} (given in place of {p}'s {option[2:]}) is "
                            "invalid; allowed: " + err.split("allowed: ")[1]) and "\n" not in err
        with pytest.raises(ConfigError, match=rf"^{option[2:]}={value} \(given in place of "):
            load_sweep(p, **{option[2:]: int(value)})  # the API's keyword, as it is given
    assert not (tmp_path / "out").exists()
    assert main(["reproduce", "--chunk", "0", "--out", str(tmp_path / "r"), "--no-figures"]) == 2
    assert "error: --chunk=0 (given in place of " in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_run_baseline_unknown_name_says_off_is_no_baseline(capsys):
    """'fastsim run --baseline false' listed every policy but not 'off'."""
    from fastsim.cli import main

    assert main(["run", "--baseline", "false", "--clusters", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("or off for no baseline") and "\n" not in err


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


def test_a_sweep_file_saved_with_a_byte_order_mark_is_read(tmp_path):
    # tomllib refused it as "Invalid statement (at line 1, column 1)"
    p = tmp_path / "bom.toml"
    p.write_bytes(b"\xef\xbb\xbfclusters = 2\n[base]\nn_jobs = 10\n")
    assert load_sweep(p).clusters == 2


def test_close_workload_values_keep_their_digits_in_cells_and_headings(tmp_path, capsys):
    # a 6-digit :g made (0.1, 0.5) and (0.1000001, 0.5) one ustar_hacking in cells.parquet
    # and summary.parquet, and sigma 0.05 and 0.0500001 one heading in summary.txt
    p = write(tmp_path, """
clusters = 2
[base]
n_jobs = 10
[axes]
ustar_hacking = [[0.1, 0.5], [0.1000001, 0.5]]
sigma = [0.05, 0.0500001]
policy = ["evalstop:k=2"]
""")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    cells = pl.read_parquet(out / "cells.parquet")
    assert sorted(set(cells["ustar_hacking"])) == ["0.1/0.5", "0.1000001/0.5"]
    headings = [ln.split("  [cell")[0] for ln in (out / "summary.txt").read_text().splitlines()
                if ln.startswith("== ")]
    assert len(headings) == 8 == len(set(headings))
    assert sum("sigma=0.0500001" in h for h in headings) == 4


# Grid hashes of these files as expanded before a sweep's baseline could be any policy
# (baseline "none", implied): a results directory holds its grid's hash in sweep.json and
# resumes only under the same one.  A changed default in fastsim/defaults.py changes them
# too, and is refused by such a directory for that reason; update them then, not otherwise.
PINNED_HASHES = {
    "headline": "69e0b8e03c69c8083c1fe932c069c867f96a8793ca655e2a9975a2c9738c13be",
    "k_sweep": "db6dcc5ae3493a1b91b6d9ad10577bbd09b96b14b0e70c97813591e222aa88a0",
    "composability": "bf5272b4ea1b21fc2e6a477a966f897b8fec7d90f96d29bc1d9cdc76ac84f28c",
}


@pytest.mark.parametrize("name", sorted(PINNED_HASHES))
def test_a_none_baseline_keeps_the_grid_hash_of_existing_results(name, tmp_path):
    from pathlib import Path

    shipped = Path(__file__).parent.parent / "sweeps" / f"{name}.toml"
    assert load_sweep(shipped).hash == PINNED_HASHES[name]
    explicit = write(tmp_path, 'baseline = "none"\n' + shipped.read_text(), shipped.name)
    assert load_sweep(explicit).hash == PINNED_HASHES[name]


def _cells_as_before(g):
    """The cells a sweep expanded to when its baseline could only be "none": every cell of a
    stop policy paired with its workload and scheduler under policy none."""
    from dataclasses import replace

    from fastsim.config import PolicyConfig
    from fastsim.sweep.grid import config_id

    out = set()
    for c in g.cells:
        if c.config.policy.name == "none":
            out.add((c.id, None))
        else:
            base = config_id(replace(c.config, policy=PolicyConfig(name="none")))
            out.add((c.id, base))
    return out


def test_every_committed_sweep_expands_as_before_under_a_none_baseline():
    import tomllib
    from pathlib import Path

    for p in sorted((Path(__file__).parent.parent / "sweeps").glob("*.toml")):
        doc = tomllib.loads(p.read_text())
        if "experiment" in doc:
            continue
        g = load_sweep(p)
        assert {(c.id, c.baseline) for c in g.cells} == _cells_as_before(g), p
        assert all(c.is_baseline == (c.config.policy.name == "none") for c in g.cells), p
        assert g.hash == parse_sweep({**doc, "baseline": "none"}, str(p)).hash, p


def test_a_policy_baseline_is_shared_and_never_paired_with_itself(tmp_path):
    p = write(tmp_path, """
clusters = 4
baseline = "evalstop:k=3"
[base]
n_jobs = 20
[axes]
sigma = [0.01, 0.05]
policy = ["evalstop:k=2", "loss_plateau", "evalstop:k=3", "none"]
""")
    g = load_sweep(p)
    assert g.baseline.label == "evalstop(k=3)"
    # 2 sigmas x 4 policies; the evalstop(k=3) cells are the baselines (not run twice)
    assert len(g.cells) == 8 and len({c.id for c in g.cells}) == 8
    bases = [c for c in g.cells if c.is_baseline]
    assert sorted(c.config.workload.sigma for c in bases) == [0.01, 0.05]
    for c in g.cells:
        if c.is_baseline:
            assert c.baseline is None and c.config.policy.label == "evalstop(k=3)"
        else:
            b = g.cell(c.baseline)
            assert b.is_baseline and b.id != c.id
            assert b.config.workload == c.config.workload
            assert b.config.scheduler == c.config.scheduler
    # the same configs as in a sweep with a none baseline: the same cell ids
    none = load_sweep(write(tmp_path, p.read_text().replace('"evalstop:k=3"\n[base]',
                                                             '"none"\n[base]'), "n.toml"))
    assert {c.id for c in none.cells} == {c.id for c in g.cells}
    assert none.hash != g.hash  # the pairs differ


def test_a_policy_baseline_not_on_an_axis_is_added_per_workload(tmp_path):
    g = load_sweep(write(tmp_path, 'clusters = 4\nbaseline = "loss_plateau:w=3"\n'
                                   '[axes]\nk = [1, 2]\n'))
    assert [c.label for c in g.cells] == ["srtf_est | loss_plateau(w=3,tol=0.01)",
                                          "srtf_est | evalstop(k=1)", "srtf_est | evalstop(k=2)"]
    assert [c.is_baseline for c in g.cells] == [True, False, False]
    # false: no baseline at all, no cell is one
    g = load_sweep(write(tmp_path, 'clusters = 4\nbaseline = false\n[axes]\npolicy = '
                                   '["none", "evalstop"]\n', "f.toml"))
    assert [(c.baseline, c.is_baseline) for c in g.cells] == [(None, False)] * 2


def test_a_baseline_that_a_cell_cannot_run_names_baseline_and_the_cell(tmp_path):
    p = write(tmp_path, 'clusters = 4\nbaseline = "evalstop:k=9"\n[base]\nn_evals = 8\n'
                        '[axes]\nsigma = [0.01]\n')
    with pytest.raises(ConfigError) as exc:
        load_sweep(p)
    assert str(exc.value) == (f"{p}: baseline=\"evalstop:k=9\" in cell (sigma=0.01): n_evals=8 "
                              "is invalid; allowed: at least k+1=10 evaluations for evalstop(k=9)")


@pytest.mark.parametrize("value", ['"evalstop:k=-1"', "3", '"nosuch"'])
def test_cli_refuses_a_bad_baseline_in_one_line_before_creating_out(tmp_path, capsys, value):
    p = write(tmp_path, f"clusters = 2\nbaseline = {value}\n[base]\nn_jobs = 10\n")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and str(p) in lines[0] and ": baseline" in lines[0], lines
    assert captured.out == "" and not out.exists()


def test_a_sweep_against_a_policy_baseline_pairs_as_compare_does(tmp_path, capsys):
    """End to end: every cell's changes are against the baseline policy on the same clusters,
    equal to ``fastsim.compare`` of that cell against the same spec; the baseline cell has
    none (it is not paired with itself)."""
    import polars as pl

    from fastsim.api import compare

    p = write(tmp_path, """
clusters = 6
chunk = 4
seed = 3
baseline = "evalstop:k=3"
[base]
n_jobs = 12
gpus = 16
[axes]
policy = ["evalstop:k=2", "loss_plateau", "evalstop:k=3"]
""")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    g = load_sweep(p)
    summary = pl.read_parquet(out / "summary.parquet")
    changes = summary.filter(pl.col("kind") == "paired")
    assert set(changes["policy"]) == {"evalstop(k=2)", "loss_plateau(w=2,tol=0.01)"}
    assert set(changes["baseline_policy"]) == {"evalstop(k=3)"}
    base = summary.filter(pl.col("policy") == "evalstop(k=3)")
    assert base["is_baseline"].all() and base["baseline_policy"].is_null().all()
    for c in g.cells:
        if c.is_baseline:
            continue
        want = compare(c.config, baseline="evalstop:k=3", n_clusters=6, seed=3)
        want = want.filter(pl.col("kind") == "paired").sort("metric")
        got = changes.filter(pl.col("cell") == c.id).sort("metric")
        assert got["metric"].to_list() == want["metric"].to_list() and want.height >= 6
        assert got["n"].to_list() == want["n"].to_list() == [6] * want.height
        for col in ("mean", "lo", "hi"):
            assert got[col].to_list() == pytest.approx(want[col].to_list(), rel=1e-9, abs=1e-12,
                                                         nan_ok=True)
        assert any(abs(m) > 1e-9 for m in got["mean"].to_list())  # a real difference
    text = (out / "summary.txt").read_text()
    assert "changes are paired against evalstop(k=3)" in text
    headings = [ln for ln in text.splitlines() if ln.startswith("== ")]
    assert sum(" vs evalstop(k=3)  [cell " in h for h in headings) == 2
    assert sum("| evalstop(k=3)  (the baseline)  [cell " in h for h in headings) == 1


def test_an_oracle_baseline_is_accepted_as_run_accepts_it_and_said_to_use_hidden_truth(
        tmp_path, capsys):
    p = write(tmp_path, 'clusters = 2\nbaseline = "oracle"\n[base]\nn_jobs = 10\ngpus = 16\n'
                        '[axes]\npolicy = ["evalstop:k=2"]\n')
    assert main(["sweep", str(p), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    capsys.readouterr()
    header = (tmp_path / "out" / "summary.txt").read_text().split("\n\n")[0]
    assert header.endswith("changes are paired against oracle (hidden truth), on the same "
                           "workload, scheduler and clusters; it reads the hacking labels and "
                           "gold peak: an upper bound, not a policy")


@pytest.mark.parametrize("key", ["title", "description", "name"])
def test_a_long_free_text_is_refused_before_it_reaches_the_manifest(tmp_path, capsys, key):
    """A title of 10^6 characters was stored in sweep.json: enough of them past its read
    cap, and a legitimate manifest is rebuilt on every open."""
    most = 224 if key == "name" else 10_000  # a name: its figure's file name's limit
    p = write(tmp_path, f'clusters = 4\n{key} = "{"x" * 10_001}"\n')
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{p}: {key} is 10001 characters long; allowed: at most {most}" in err
    assert err.count("\n") == 1 and len(err) < 400 and not out.exists()
    write(tmp_path, f'clusters = 4\n{key} = "{"x" * most}"\n')
    assert load_sweep(p).clusters == 4


@pytest.mark.parametrize("text, said", [
    ("title = true", "title=true is invalid; allowed: a string of at most 10000 printable"),
    ("description = [1]", "description=[1] is invalid; allowed: a string of at most 10000 "
     "printable"),
    # one field under two names: the description was dropped without a word
    ('title = "A"\ndescription = "B"', "has both title and description, which are one "
     "field (the tables' heading); allowed: one of them")])
def test_a_title_is_a_string(tmp_path, text, said):
    """A title of another type was stored as Python's str() of it ('True')."""
    with pytest.raises(ConfigError, match=re.escape(said)):
        load_sweep(write(tmp_path, f"clusters = 4\n{text}\n"))


@pytest.mark.parametrize("text", ['title = "Noise\\nsweep"', 'description = "a\\u0000b"',
                                  "title = \"\"\"Noise\nsweep\"\"\""])
def test_a_title_with_a_control_character_is_refused(tmp_path, capsys, text):
    """The title heads summary.txt: a line break split its first line in two, a NUL was
    written into it as it was; the name was held to printable characters, not the title."""
    p = write(tmp_path, f"clusters = 2\n{text}\n[base]\nn_jobs = 8\n")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    key = text.split(" ")[0]
    assert err.count("\n") == 1 and not out.exists(), err
    assert f"{p}: {key}=" in err and err.endswith(
        f"is invalid; allowed: a string of at most 10000 printable characters\n"), err


@pytest.mark.parametrize("argv,named", [
    (["sweep", "{toml}", "--out", "{out}"], "of clusters=10000000000000 in chunks of chunk=250"),
    (["sweep", "{toml}", "--out", "{out}", "--chunk", "300"],
     "of clusters=10000000000000 in chunks of --chunk=300"),
    (["reproduce", "--clusters", "10000000000000", "--out", "{out}"],
     "of --clusters=10000000000000 in chunks of chunk=250")])
def test_a_sweep_of_too_many_chunks_is_refused_before_any_work(tmp_path, capsys, argv, named):
    """10^13 clusters in chunks of 250 listed every chunk to check before the first ran:
    minutes and gigabytes, then years of work; now one line, nothing written, naming an
    option as typed (fastsim reproduce --clusters was named as the sweep file's field)."""
    from conftest import one_line

    toml = write(tmp_path, "clusters = 10000000000000\n[axes]\nk = [1, 2]\n")
    out = tmp_path / "out"
    argv = [a.format(toml=toml, out=out) for a in argv] + ["--no-progress"]
    one_line(capsys, argv, f"{named} make")
    one_line(capsys, argv, "chunks; allowed: at most 1,000,000 in a sweep")
    assert not out.exists()


def test_a_policy_field_that_applies_to_no_cell_is_refused(tmp_path):
    """`k = [1, 2]` beside a user's policy whose k is a spec parameter (or a policy with no
    k at all) was reset in every cell, without a word: the two values were one cell."""
    p = write(tmp_path, 'clusters = 4\n[base]\nn_jobs = 20\n[axes]\nk = [1, 2]\n'
                        'policy = ["stop_at:f=0.5", "none"]\n')
    with pytest.raises(ConfigError, match=r"axis 'k' applies to no cell: no policy of the grid "
                       r"has the field 'k'; allowed: a field of a policy of the grid \(none: no "
                       r"parameter; stop_at: f\), or 'k' beside a policy that declares it "
                       r"\(evalstop, deprioritize, margin\)$"):
        load_sweep(p)
    p = write(tmp_path, 'clusters = 4\n[base]\ntol = 0.1\n[axes]\npolicy = ["evalstop:k=2"]\n',
              "b.toml")
    with pytest.raises(ConfigError, match=r"\[base\] field 'tol' applies to no cell"):
        load_sweep(p)
    # where it applies to some cells it is reset in the others, as before
    p = write(tmp_path, 'clusters = 4\n[axes]\nk = [1, 2]\npolicy = ["evalstop", "stop_at"]\n',
              "c.toml")
    assert len(load_sweep(p).cells) == 4  # evalstop k=1, k=2, stop_at, none


def test_a_scheduler_field_that_applies_to_no_cell_is_refused(tmp_path, capsys):
    """thresholds_gpu_h beside no tiresias cell was reset in every cell without a word (a
    policy field was refused so): the sweep ran srtf_est as if it had not been given."""
    p = write(tmp_path, "clusters = 2\n[base]\nn_jobs = 8\n[axes]\nthresholds_gpu_h = [[1, 2]]\n"
                        'scheduler = ["srtf_est", "fifo"]\n')
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(f"{p}: axis 'thresholds_gpu_h' applies to no cell: no scheduler of the "
                        "grid has the field 'thresholds_gpu_h'; allowed: a field of a scheduler "
                        "of the grid (fifo: backfill; srtf_est: no parameter), or "
                        "'thresholds_gpu_h' beside a scheduler that declares it (tiresias)\n"), err
    assert err.count("\n") == 1 and not out.exists()
    p = write(tmp_path, '[base]\nbackfill = false\nscheduler = "sjf_est"\n', "b.toml")
    with pytest.raises(ConfigError, match=r"\[base\] field 'backfill' applies to no cell"):
        load_sweep(p)
    # where it applies to some cells it is reset in the others, as before
    p = write(tmp_path, '[axes]\nthresholds_gpu_h = [[1, 2], [4]]\n'
                        'scheduler = ["tiresias", "fifo"]\n', "c.toml")
    assert len(load_sweep(p).cells) == 6  # tiresias under each, fifo once; with baselines


def test_a_detectors_parameter_is_a_field_as_a_users_is(tmp_path):
    """`sigma0 = [0.01, 0.05]` beside `peak` was refused ("field 'sigma0' is unknown", go
    to the spec): every parameter a named policy declares is a field, a built-in's too.
    The axis runs the cells its specs run (the same ids); a name two detectors declare
    (z) sets it in each, and EvalStop's k is margin's k too."""
    head = 'clusters = 4\n[base]\nn_jobs = 20\n'
    by_axis = load_sweep(write(tmp_path, head + '[axes]\npolicy = ["peak", "evalstop"]\n'
                               'sigma0 = [0.01, 0.05]\n', "a.toml"))
    by_spec = load_sweep(write(tmp_path, head + '[axes]\npolicy = ["peak:sigma0=0.01", '
                               '"peak:sigma0=0.05", "evalstop"]\n', "s.toml"))
    assert {c.id for c in by_axis.cells} == {c.id for c in by_spec.cells}
    assert len(by_axis.cells) == 4  # evalstop once (sigma0 reset in its cells), none
    g = load_sweep(write(tmp_path, head + '[axes]\nz = [1, 2]\nk = [2, 3]\n'
                         'policy = ["peak", "bocpd", "margin", "evalstop"]\n', "z.toml"))
    got = {(c.config.policy.name, axis_value(c.config, "z"), axis_value(c.config, "k"))
           for c in g.cells if not c.is_baseline}
    assert got == {*((n, z, None) for n in ("peak", "bocpd") for z in (1.0, 2.0)),
                   *(("margin", z, k) for z in (1.0, 2.0) for k in (2, 3)),
                   *(("evalstop", None, k) for k in (2, 3))}
    with pytest.raises(ConfigError, match=r'cell \(z=-1, policy="peak"\): z=-1 is invalid; '
                       r"allowed: a number in \[0, 100\]"):
        load_sweep(write(tmp_path, head + '[axes]\nz = [-1]\npolicy = ["peak"]\n', "bad.toml"))


def test_a_detectors_parameter_above_base_is_told_to_go_under_it(tmp_path):
    p = write(tmp_path, 'clusters = 4\nz = 2\n[base]\npolicy = "peak"\n')
    with pytest.raises(ConfigError, match=r"key 'z' is unknown \(a field: under \[base\], or "
                       r"under \[axes\] as a list\); allowed: name, "):
        load_sweep(p)


def test_a_misspelt_shipped_sweep_name_gets_the_nearest_one(tmp_path):
    """fastsim.sweep("noize", out) listed 18 shipped sweeps without saying which was meant;
    a name near one of them (bare, as shipped names are given) gets it."""
    import fastsim

    with pytest.raises(ConfigError, match=r"^noize: no such file, nor a sweep shipped with "
                                          r"fastsim \(did you mean noise\?\); allowed: "):
        fastsim.sweep("noize", tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("values", ["[[], []]", '[["a:b"]]', '["a:b"]'])
def test_metrics_is_no_axis(tmp_path, capsys, values):
    """A metrics axis expanded, ran every cell, then failed with an AttributeError while
    tabulating (no cell column holds a metric list), leaving a half-written --out."""
    p = write(tmp_path, f"clusters = 1\n[base]\nn_jobs = 10\n[axes]\nmetrics = {values}\n")
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "axes.metrics=" in err and "is invalid; allowed: [base] metrics" in err
    assert not out.exists()


@pytest.mark.parametrize("name", ["a\\nb", "a\\u0000b", " ", "\\t"])
def test_a_sweep_name_that_prints_as_no_one_line_is_refused(tmp_path, name):
    """The name heads the sweep's line and fills the tables' experiment column: "a\\nb"
    printed that line as two, a NUL or a blank name as nothing readable (cost-aware sweeps
    already refused the first two)."""
    p = write(tmp_path, f'name = "{name}"\nclusters = 4\n')
    with pytest.raises(ConfigError) as exc:
        load_sweep(p)
    assert "is invalid; allowed: a non-blank string of printable characters" in str(exc.value)


def test_a_module_beside_the_sweep_file_but_off_the_import_path_is_named(tmp_path, monkeypatch):
    """`fastsim sweep exp/mine.toml` beside `exp/mine_beside.py` said only "No module named
    'mine_beside'"; the module in the current directory was the only one given a hint."""
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "toy_beside_sweep.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\n"
        "def mean_held(jobs):\n    return jobs['held_h'].mean(axis=1)\n")
    (exp / "s.toml").write_text('clusters = 4\n[base]\nmetrics = ["toy_beside_sweep:mean_held"]\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_sweep("exp/s.toml")
    assert str(err.value).endswith(
        "; toy_beside_sweep.py is beside exp/s.toml, in a directory not on the import path: "
        "put that directory on PYTHONPATH (PYTHONPATH=exp fastsim ...)")


def test_a_misspelt_sweep_file_gets_the_nearest_file_beside_it(tmp_path, monkeypatch):
    """`fastsim sweep mien.toml` beside mine.toml said "did you mean mixed?", a shipped sweep
    of other cells, and nothing of the file meant; a file near the one typed, in its
    directory, is offered first, and a shipped name only when none is near."""
    import fastsim

    monkeypatch.chdir(tmp_path)
    write(tmp_path, "clusters = 4\n").rename(tmp_path / "mine.toml")
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / "sigma_k.toml").write_text("clusters = 4\n")
    for typed, meant in (("mien.toml", "mine.toml"), ("exp/sigma_kk.toml", "exp/sigma_k.toml"),
                         ("noize", "noise")):
        with pytest.raises(ConfigError, match=rf"^{typed}: no such file, nor a sweep shipped "
                                              rf"with fastsim \(did you mean {meant}\?\)"):
            fastsim.sweep(typed, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_missing_sweep_file_at_a_long_path_is_offered_no_unrelated_file(tmp_path):
    """The nearest file beside a missing one was found by comparing whole paths, so under a
    long shared directory any file looked near: /long/dir/qqq.toml was offered
    /long/dir/mine.toml.  Names are compared."""
    import fastsim

    (tmp_path / "mine.toml").write_text("clusters = 4\n")
    with pytest.raises(ConfigError) as exc:
        fastsim.sweep(tmp_path / "qqq.toml", tmp_path / "out")
    assert "did you mean" not in str(exc.value), str(exc.value)
    with pytest.raises(ConfigError, match=rf"did you mean {tmp_path / 'mine.toml'}\?"):
        fastsim.sweep(tmp_path / "mien.toml", tmp_path / "out")
