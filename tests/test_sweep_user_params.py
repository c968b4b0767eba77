"""A user's stop policy or scheduler key declares parameters, and each is a sweep field of
its own name, as a built-in's ``k`` is: ``[axes] delta = [...]`` runs the cells that the
policy axis of its specs (``"toy_axis_policies:drawdown:delta=..."``) runs."""
from __future__ import annotations

import os
import sys

import polars as pl
import pytest

import fastsim
from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.sweep.grid import axis_value, load_sweep

from conftest import modules_on_path

SRC = '''
from numba import njit
from fastsim.registry import Param, scheduler_key, stop_policy


@stop_policy(params=[Param("delta", "float", 0.01, lo=0, hi=1, help="drop below the best"),
                     Param("patience", "int", 1, lo=1, unit="evaluations",
                           help="evaluations in a row below it")],
             label="drawdown(delta={delta},patience={patience})")
@njit
def drawdown(scores, losses, attained_h, t_est_h, delta, patience):
    best = -1e300
    run = 0
    for e in range(scores.shape[0]):
        best = max(best, scores[e])
        run = run + 1 if scores[e] < best - delta else 0
        if run >= patience:
            return e + 1
    return 0


@stop_policy(params=[Param("sigma", "float", 0.1, lo=0), Param("k", "float", 0.5, lo=0, hi=8)],
             label="clash(sigma={sigma},k={k})")
@njit
def clash(scores, losses, attained_h, t_est_h, sigma, k):
    return 0


@stop_policy(params=[Param("delta", "float", 0.01, lo=0, hi=1),
                     Param("patience", "int", 1, lo=1, unit="evaluations")],
             label="terse(delta={delta})")
@njit
def terse(scores, losses, attained_h, t_est_h, delta, patience):
    return 0


@stop_policy(params=[Param("drop", "float", 0.1, lo=0, hi=1)], name="toy_drop",
             label="toy_drop(drop={drop})")
@njit
def toy_drop(scores, losses, attained_h, t_est_h, drop):
    return 0


@scheduler_key(params=[Param("weight", "float", 1.0, lo=0)], label="weighted(weight={weight})")
@njit
def weighted(t_est_h, gpus, job_type, arrival_h, weight):
    return t_est_h + weight * gpus


@scheduler_key(params=[Param("k", "float", 1.0, lo=0)], label="keyed(k={k})")
@njit
def keyed(t_est_h, gpus, job_type, arrival_h, k):
    return k * t_est_h
'''
POL = "toy_axis_policies:drawdown"
HEAD = 'name = "mine"\nclusters = 8\nchunk = 4\n[base]\nn_jobs = 20\n'


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    yield from modules_on_path(tmp_path_factory, "axiscode", {"toy_axis_policies.py": SRC})


def write(tmp_path, text, name="exp.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def cells(path):
    """``{label: cell}`` of the grid's cells, baselines left out."""
    return {c.label: c for c in load_sweep(path).cells if not c.is_baseline}


def test_a_parameter_axis_runs_what_the_axis_of_its_specs_runs(user_dir, tmp_path):
    """Crossed delta and patience beside EvalStop: the same cells, ids and per-cell
    results, bit for bit, as the policy axis of the four specs; the axes are the table's
    columns (null where the policy has no such parameter)."""
    axes = write(tmp_path, HEAD + f'[axes]\ndelta = [0.005, 0.02]\npatience = [1, 2]\n'
                                  f'policy = ["{POL}", "evalstop"]\n', "axes.toml")
    specs = write(tmp_path, HEAD + "[axes]\npolicy = [" + ", ".join(
        f'"{POL}:delta={d},patience={p}"' for d in (0.005, 0.02) for p in (1, 2))
        + ', "evalstop"]\n', "specs.toml")
    assert len(cells(axes)) == 5  # EvalStop once: delta and patience are reset in its cells
    by_axis = fastsim.sweep(str(axes), tmp_path / "a")
    assert main(["sweep", str(specs), "--out", str(tmp_path / "s"), "--no-progress"]) == 0
    by_spec = pl.read_parquet(tmp_path / "s" / "summary.parquet")
    order = ["cell", "metric", "kind"]
    assert by_axis.drop("delta", "patience").sort(order).equals(by_spec.sort(order))
    table = pl.read_parquet(tmp_path / "a" / "cells.parquet")
    assert set(table.select("policy", "delta", "patience").rows()) == {
        ("evalstop(k=2)", None, None), ("none", None, None),
        *((f"drawdown(delta={d},patience={p})", d, p) for d in (0.005, 0.02) for p in (1, 2))}
    # resumed: every chunk verified and kept, nothing run again
    chunks = {p: p.stat().st_mtime_ns for p in (tmp_path / "a").glob("cells/*/chunk-*")}
    assert fastsim.sweep(str(axes), tmp_path / "a").equals(by_axis)
    assert chunks == {p: p.stat().st_mtime_ns for p in (tmp_path / "a").glob("cells/*/chunk-*")}


def test_precedence_is_the_axis_then_the_spec_then_base(user_dir, tmp_path):
    p = write(tmp_path, f'[base]\ndelta = 0.02\n[axes]\npolicy = ["{POL}", "{POL}:delta=0.005"]\n')
    assert sorted(c.config.policy.values["delta"] for c in cells(p).values()) == [0.005, 0.02]
    p = write(tmp_path, f'[base]\ndelta = 0.02\n[axes]\ndelta = [0.3]\n'
                        f'policy = ["{POL}", "{POL}:delta=0.005"]\n')
    [cell] = cells(p).values()  # the axis over both specs: one simulation, one cell
    assert cell.config.policy.values["delta"] == 0.3 and axis_value(cell.config, "delta") == 0.3


def test_a_scheduler_keys_parameter_is_a_field_too(user_dir, tmp_path):
    p = write(tmp_path, '[axes]\nweight = [0, 2]\n'
                        'scheduler = ["toy_axis_policies:weighted", "fifo"]\n')
    got = {label: axis_value(c.config, "weight") for label, c in cells(p).items()}
    assert got == {"weighted(weight=0.0) | evalstop(k=2)": 0.0,
                   "weighted(weight=2.0) | evalstop(k=2)": 2.0, "fifo | evalstop(k=2)": None}


@pytest.mark.parametrize("text,said", [
    ("[axes]\ndelta = [-1, 0.5]\n", 'cell (policy="toy_axis_policies:drawdown", delta=-1): '
                                     "delta=-1 is invalid; allowed: a number in [0, 1]"),
    ('[base]\npatience = "2"\n[axes]\npatience = [1]\n',
     'base.patience="2" is invalid; allowed: an integer in [1, 2147483647] (evaluations)'),
    ("[axes]\npatience = [1.5]\n", "patience=1.5 is invalid; allowed: an integer in"),
    ("[base]\npatience = [1, 2]\n", "([base] gives every cell one patience; several, a cell "
                                     "each, go under [axes])"),
    # no cell's policy declares delta: what is allowed names the scheduler key's weight,
    # and where a user's parameter is a field (it said nothing of delta's own policy)
    ('[axes]\ndelta = [0.1]\npolicy = ["evalstop"]\nscheduler = ["toy_axis_policies:weighted"]\n',
     ("[axes] field 'delta' is unknown; allowed: scheduler, policy, gpus, ",
      ", k, f, w, tol, scope, weight, or a parameter of a user's policy or scheduler key "
      "that the file names (MODULE:FUNCTION)\n")),
    ("[base]\ndeltas = 0.1\n", "[base] field 'deltas' is unknown (did you mean delta?); "
                               "allowed: scheduler, policy, metrics,"),
])
def test_a_bad_value_is_one_line_naming_the_field_before_anything_is_written(
        user_dir, tmp_path, capsys, text, said):
    p = write(tmp_path, text.replace("[axes]\n", f'[axes]\npolicy = ["{POL}"]\n', 1)
              if "policy" not in text and "[axes]" in text
              else f'[base]\npolicy = "{POL}"\n' + text.replace("[base]\n", "", 1))
    out = tmp_path / "out"
    assert main(["sweep", str(p), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{p}: " in err, err
    assert all(needle in err for needle in ([said] if isinstance(said, str) else said)), err
    assert not out.exists()


def test_a_parameter_of_no_policy_of_the_file_says_whose_it_is(user_dir, tmp_path):
    """``drop`` beside EvalStop alone, where a registered policy declares it: refused as
    applying to no cell, naming that policy, not as "unknown" with a list without it."""
    import toy_axis_policies  # noqa: F401  (registers toy_drop, as a run that named it had)

    p = write(tmp_path, '[axes]\ndrop = [0.1, 0.2]\npolicy = ["evalstop"]\n')
    with pytest.raises(ConfigError, match=r"exp.toml: axis 'drop' applies to no cell: no "
                       r"policy of the grid has the field 'drop'; allowed: a field of a "
                       r"policy of the grid \(evalstop: k\), or 'drop' beside a policy that "
                       r"declares it \(toy_axis_policies:toy_drop\)$"):
        load_sweep(p)


def test_a_parameter_of_a_module_not_on_the_path_says_the_module_cannot_be_imported(
        tmp_path):
    """The walkthrough's sweep run without ``PYTHONPATH=.`` was refused as "[axes] field
    'per_gpu' is unknown", listing the workload's fields: never that ``mykeys`` could
    not be imported, which was the whole trouble."""
    p = write(tmp_path, '[base]\npolicy = "toy_not_on_path:drawdown"\n[axes]\n'
                        'delta = [0.01, 0.02]\n')
    with pytest.raises(ConfigError, match=r"exp.toml: \[axes\] field 'delta' is unknown, "
                       r"and may be a parameter of a spec that cannot be loaded: "
                       r"policy=\"toy_not_on_path:drawdown\" cannot be imported "
                       r"\(No module named 'toy_not_on_path'\)"):
        load_sweep(p)


def test_a_misspelt_field_beside_a_spec_that_cannot_be_loaded_keeps_its_hint(tmp_path):
    """``laod`` beside an unimportable policy lost "(did you mean load?)", and its allowed
    list named the policies, not the fields."""
    p = write(tmp_path, '[base]\npolicy = "toy_not_on_path:drawdown"\nlaod = 0.9\n')
    with pytest.raises(ConfigError, match=r"exp.toml: \[base\] field 'laod' is unknown \(did "
                       r"you mean load\?\), and may be a parameter of a spec that cannot be "
                       r"loaded: policy=\"toy_not_on_path:drawdown\" cannot be imported "
                       r"\(No module named 'toy_not_on_path'\); allowed: .*\bload\b.*, or a "
                       r"parameter of a user's policy or scheduler key that the file names "
                       r"\(MODULE:FUNCTION\)$"):
        load_sweep(p)


def test_a_parameter_above_base_is_told_to_go_under_it(user_dir, tmp_path):
    """``delta = 0.02`` above ``[base]`` got "did you mean" of the top keys: it is a field."""
    p = write(tmp_path, f'clusters = 4\ndelta = 0.02\n[base]\npolicy = "{POL}"\n')
    with pytest.raises(ConfigError, match=r"key 'delta' is unknown \(a field: under \[base\], "
                       r"or under \[axes\] as a list\); allowed: name, title"):
        load_sweep(p)


def test_summary_headings_name_a_swept_field_the_label_leaves_out(user_dir, tmp_path):
    """``terse(delta={delta})`` beside ``patience = [1, 2]``: two cells, one heading in
    summary.txt (only workload axes were added); the field is added where the label leaves
    it out, and headings whose labels name every swept field read as they did."""
    head = HEAD.replace("clusters = 8", "clusters = 2").replace("chunk = 4", "chunk = 2")
    p = write(tmp_path, head + '[axes]\npatience = [1, 2]\n'
              'policy = ["toy_axis_policies:terse", "evalstop"]\nsigma = [0.05]\n')
    assert main(["sweep", str(p), "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    headings = [ln.split("  [cell")[0] for ln in
                (tmp_path / "out" / "summary.txt").read_text().splitlines() if ln.startswith("== ")]
    assert sorted(headings) == ["== srtf_est | evalstop(k=2) | sigma=0.05",
                                "== srtf_est | none | sigma=0.05",
                                "== srtf_est | terse(delta=0.01) | patience=1 | sigma=0.05",
                                "== srtf_est | terse(delta=0.01) | patience=2 | sigma=0.05"]


def test_a_name_of_two_meanings_is_refused_or_set_in_every_cell_that_declares_it(
        user_dir, tmp_path):
    """A workload field is the workload's: a user's parameter of that name (sigma) would
    make the file's sigma mean two things, and a parameter of both a policy and a
    scheduler two others; refused.  A name a built-in and a user's policy both declare
    (k) is each cell's policy's own parameter, every value checked by each declaration."""
    clash = "toy_axis_policies:clash"
    p = write(tmp_path, f'[axes]\nsigma = [0.0, 0.1]\npolicy = ["{clash}"]\n')
    with pytest.raises(ConfigError, match=r"exp.toml: \[axes\] field 'sigma' is the workload's "
                       r"sigma and also a parameter of policy toy_axis_policies:clash; allowed: "
                       r"a parameter named like no workload field \(rename it in its "
                       r"declaration\), or sigma left out of the file$"):
        load_sweep(p)
    p = write(tmp_path, f'[base]\nk = 2\npolicy = "{clash}"\nscheduler = "toy_axis_policies:keyed"\n')
    with pytest.raises(ConfigError, match=r"\[base\] field 'k' is a parameter of policy "
                       r"toy_axis_policies:clash and of scheduler toy_axis_policies:keyed; "
                       r"allowed: a field of policies or of schedulers, not both"):
        load_sweep(p)
    # a key's k beside no policy with one: the key's (it was checked as EvalStop's k)
    p = write(tmp_path, '[axes]\nk = [0.5, 2]\nscheduler = ["toy_axis_policies:keyed"]\n'
                        'policy = ["stop_at"]\n')
    assert sorted(axis_value(c.config, "k") for c in cells(p).values()) == [0.5, 2.0]
    p = write(tmp_path, f'[axes]\nk = [1, 3]\npolicy = ["{clash}", "evalstop"]\n')
    got = sorted((c.config.policy.name, axis_value(c.config, "k")) for c in cells(p).values())
    assert got == [("evalstop", 1), ("evalstop", 3), (clash, 1.0), (clash, 3.0)]
    # a built-in's spec parameter (patience's) beside a user's of that name: both set; the
    # built-in's kept its default in both of its cells, the user's took the axis
    p = write(tmp_path, f'[axes]\npatience = [1, 3]\npolicy = ["patience", "{POL}"]\n')
    got = sorted((c.config.policy.name, axis_value(c.config, "patience"))
                 for c in cells(p).values())
    assert got == [("patience", 1), ("patience", 3), (POL, 1), (POL, 3)], got
    p = write(tmp_path, f'[axes]\nk = [0.5]\npolicy = ["{clash}", "evalstop"]\n')
    with pytest.raises(ConfigError, match=r'cell \(k=0.5, policy="evalstop"\): k=0.5 is '
                       r"invalid; allowed: an integer"):
        load_sweep(p)


def test_the_own_sweep_figure_draws_the_parameter_as_x_with_each_policy_a_line(
        user_dir, tmp_path, capsys):
    """x = delta, held at patience=1: the user's policy is a line over delta, EvalStop
    (no delta) a reference line, as over k; it had no place and was counted not drawn."""
    from fastsim.figures import own_sweep

    p = write(tmp_path, HEAD.replace("clusters = 8", "clusters = 4") + '[axes]\n'
              f'delta = [0.005, 0.02]\npatience = [1, 2]\npolicy = ["{POL}", "evalstop"]\n')
    assert main(["sweep", str(p), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    plan = own_sweep.plan(tmp_path / "a", where=["patience=1"])
    assert (plan["x"], plan["hue"], plan["col"]) == ("delta", "policy_name", None)
    df = pl.read_parquet(tmp_path / "a" / "summary.parquet")
    assert own_sweep.not_drawn(df, plan) == ""
    capsys.readouterr()
    assert main(["figures", str(tmp_path / "a"), "--where", "patience=1", "--formats", "png",
                 "--out", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert ("against delta, policy as colour (toy_axis_policies:drawdown over delta; none, "
            "evalstop(k=2) as reference lines), at patience=1" in out), out
    assert (tmp_path / "f" / "sweep_mine.png").exists()


def test_the_axis_value_reaches_a_dask_worker(user_dir, tmp_path, monkeypatch):
    """Cells go to a worker as their configs (``SimConfig.to_dict``), a user's parameter
    values among them: one worker's results are the in-process ones, which differ by delta."""
    distributed = pytest.importorskip("dask.distributed")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(user_dir),
                                                      os.environ.get("PYTHONPATH", "")]))
    p = write(tmp_path, 'clusters = 4\nchunk = 2\n[base]\nn_jobs = 20\nsigma = 0.05\n'
                        f'policy = "{POL}"\n[axes]\ndelta = [0.0, 0.5]\n')
    local = fastsim.sweep(str(p), tmp_path / "local")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        remote = fastsim.sweep(str(p), tmp_path / "dask", backend="dask",
                               address=cluster.scheduler_address)
    assert remote.equals(local)
    stops = local.filter(pl.col("metric") == "stop_recall").sort("delta")["mean"].to_list()
    assert stops[0] != stops[1], stops


def test_a_sweep_from_python_says_it_compiles_only_what_is_left_after_the_checks(
        user_dir, tmp_path, capsys, monkeypatch, forget_compiled):
    """``fastsim.sweep`` (no bar by default) said "compiling ..." of every cell's user code
    before ``out`` was checked: of a complete directory, which compiles nothing, and of a
    file or another grid's directory, refused right after.  It is said where ``fastsim
    sweep``'s is."""
    import fastsim.compile_notice as notice

    monkeypatch.setattr(notice, "engine_is_cached", lambda *code: True)
    sweep = write(tmp_path, 'clusters = 2\nchunk = 1\n[base]\nn_jobs = 10\n'
                  '[axes]\ndelta = [0.1, 0.2]\n')
    sweep.write_text(sweep.read_text().replace("[axes]", f'policy = "{POL}"\n[axes]'))
    other = write(tmp_path, HEAD + f'policy = "{POL}"\n', "other.toml")
    (tmp_path / "afile").write_text("")

    def said():
        return [line for line in capsys.readouterr().err.splitlines() if "compiling" in line]

    fastsim.sweep(other, tmp_path / "other")
    said()

    for bad in ("afile", "other"):
        forget_compiled()
        with pytest.raises(ConfigError):
            fastsim.sweep(sweep, tmp_path / bad)
        assert said() == [], bad
    forget_compiled()
    fastsim.sweep(sweep, tmp_path / "out")
    assert len(said()) == 1
    forget_compiled()
    fastsim.sweep(sweep, tmp_path / "out")  # complete: nothing compiles
    assert said() == []


def test_the_notice_names_user_code_in_one_order_whatever_the_hash_seed(user_dir, tmp_path):
    """A resumed sweep's notice named the cells' user functions in the order of a set of
    cell ids, which PYTHONHASHSEED changes from one process to the next."""
    import subprocess

    sweep = write(tmp_path, f'clusters = 2\nchunk = 1\n[base]\nn_jobs = 10\n'
                  f'scheduler = "toy_axis_policies:weighted"\n'
                  f'[axes]\ndelta = [0.1, 0.2]\npolicy = ["{POL}", "evalstop"]\n')
    script = f'''
import sys
sys.path.insert(0, {str(user_dir)!r})
import fastsim.compile_notice as notice
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.runner import run_sweep

class Said(Exception):
    pass

def sweep_notice(schedulers, stream=None, users=()):
    print([name for _, _, name in users])
    raise Said

class Store:  # every chunk still to run
    def pending_with_reasons(self, keep_jobs):
        return [((c.id, 0), "missing") for c in grid.cells]

notice.sweep_notice = sweep_notice
grid = load_sweep({str(sweep)!r})
try:
    run_sweep(grid, Store(), progress=False, announce=True)
except Said:
    pass
'''
    outs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}, check=True).stdout
            for seed in range(1, 9)}
    from fastsim.api import user_drivers_of

    configs = (c.config for c in load_sweep(sweep).cells)
    in_order = [name for _, _, name in user_drivers_of(configs)]  # the cells' order
    assert len(in_order) == 2 and outs == {f"{in_order}\n"}, outs
