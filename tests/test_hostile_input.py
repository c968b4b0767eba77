"""Hostile and damaged input: one line naming the field or line and what is allowed, exit 2
(``ConfigError`` in the API), before any work and before any output is written.  Each
test names the numbered defect of the hardening issue it guards against."""
from __future__ import annotations

import datetime
import errno
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from fastsim.api import simulate
from conftest import one_line, run_fenced
from fastsim.cli import main
from fastsim.config import PolicyConfig, SimConfig, WorkloadConfig
from fastsim.errors import ConfigError
from fastsim.kernels.codes import RLHF
from fastsim.replay.logs import read_logs

CSV_OK = "job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\n"


# -- 2. replay steps beyond exact float64 / int64 ------------------------------------------
def test_2_replay_refuses_steps_at_or_above_2_53(tmp_path, capsys):
    p = tmp_path / "big.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,1e20,0.4\na,2,0.3\n")
    out = tmp_path / "o.parquet"
    one_line(capsys, ["replay", str(p), "--out", str(out)], "big.csv:3: field 'step'")
    assert not out.exists()
    q = tmp_path / "big.parquet"
    pl.DataFrame({"job_id": ["a"] * 3, "step": pl.Series([1, 2, 2**63 + 5], dtype=pl.UInt64),
                  "score": [0.1, 0.2, 0.3]}).write_parquet(q)
    with pytest.raises(ConfigError, match=r"big.parquet:3: field 'step'.*below 2\^53"):
        read_logs([q])
    # two steps that differ only beyond 2^53 must not merge as duplicates
    r = tmp_path / "close.parquet"
    pl.DataFrame({"job_id": ["a"] * 2, "step": [2**53 + 1, 2**53 + 2],
                  "score": [0.1, 0.2]}).write_parquet(r)
    with pytest.raises(ConfigError, match="too large"):
        read_logs([r])


# -- 4. replay --gpus ------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["-8", "0", "nan", "inf", "-inf", "1e400", "abc"])
def test_4_replay_gpus_must_be_positive_and_finite(tmp_path, capsys, value):
    # echoed as typed, as README says every error line does: it was '--gpus=-8.0', and
    # 1e400 '--gpus=inf'; 'abc' was argparse's 'invalid float value'
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score,time\na,1,0.5,1\na,2,0.6,2\na,3,0.5,3\na,4,0.4,4\n")
    one_line(capsys, ["replay", str(p), "--gpus", value],
             f"fastsim replay: error: --gpus={value} is invalid; allowed: a positive finite GPU "
             "count")


def test_4_gpus_column_must_be_finite(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text("job_id,step,score,gpus\na,1,0.5,inf\na,2,0.6,8\n")
    with pytest.raises(ConfigError, match=r"g.csv:2: field 'gpus'"):
        read_logs([p])


# -- 5. Hugging Face runs whose directories share a name ------------------------------------
def _trainer_state(d, scores, max_steps=None):
    d.mkdir(parents=True)
    hist = [{"step": 10 * (i + 1), "eval_accuracy": s} for i, s in enumerate(scores)]
    (d / "trainer_state.json").write_text(json.dumps(
        {"global_step": 10 * len(scores), "max_steps": max_steps or 10 * len(scores),
         "log_history": hist}, indent=2))


def test_5_hf_runs_sharing_a_basename_stay_apart(tmp_path):
    _trainer_state(tmp_path / "exp1" / "output", [0.5, 0.6, 0.5, 0.4])
    _trainer_state(tmp_path / "exp2" / "output", [0.1, 0.2, 0.3, 0.4])
    log = read_logs([tmp_path / "exp1" / "output", tmp_path / "exp2" / "output"])
    assert sorted(log.job_ids) == ["exp1/output", "exp2/output"]
    assert log.table.height == 8 and not log.notes
    # one run's checkpoints are still one job
    ck = tmp_path / "run" / "checkpoint-20"
    _trainer_state(ck, [0.5, 0.6], max_steps=40)  # one run: one plan
    _trainer_state(tmp_path / "run" / "checkpoint-40", [0.5, 0.6, 0.7, 0.6])
    log = read_logs([ck / "trainer_state.json", tmp_path / "run"])
    assert log.job_ids == ["run"]


# -- 7. API and config: integer types, finite ranges ----------------------------------------
@pytest.mark.parametrize("kw,needle", [
    ({"seed": 1.5}, "seed=1.5"), ({"seed": -1}, "seed=-1"), ({"seed": 2**64}, "seed="),
    ({"cluster_start": -5}, "cluster_start=-5"), ({"n_clusters": True}, "n_clusters=True"),
    ({"n_clusters": 2.0}, "n_clusters=2.0"),
])
def test_7_simulate_checks_its_arguments(kw, needle):
    cfg = SimConfig.from_specs(n_jobs=4)
    args = {"n_clusters": 2, **kw}
    with pytest.raises(ConfigError, match=needle.replace("(", r"\(")):
        simulate(cfg, **args)


def test_7_simulate_takes_numpy_integers_of_any_width():
    """np.int32 arguments were an OverflowError from comparing them with 2^63-1."""
    cfg = SimConfig.from_specs(n_jobs=4)
    want = simulate(cfg, 3, seed=5, cluster_start=7).clusters
    for t in (np.int32, np.int64, np.uint32, np.uint64, np.int16):
        got = simulate(cfg, t(3), seed=t(5), cluster_start=t(7)).clusters
        assert got.equals(want)
    with pytest.raises(ConfigError, match="n_clusters=np.int32"):
        simulate(cfg, np.int32(0))
    with pytest.raises(ConfigError, match="seed=np.int8"):
        simulate(cfg, 2, seed=np.int8(-1))


@pytest.mark.parametrize("value", [np.timedelta64(2, "s"), np.timedelta64(2),
                                   np.timedelta64(2, "h")])
def test_7_a_numpy_duration_is_no_count(value):
    """numpy's timedelta64 is an np.integer: simulate(cfg, np.timedelta64(2, "s")) failed
    with a TypeError from int(), np.timedelta64(2) ran two clusters, and n_jobs and sigma
    took one as the number of its units.  A duration is refused as any non-number is."""
    cfg = SimConfig.from_specs(n_jobs=4)
    for name in ("n_clusters", "seed", "cluster_start"):
        with pytest.raises(ConfigError, match=f"^{name}="):
            simulate(cfg, **{"n_clusters": 2, name: value})
    for field in ("n_jobs", "sigma"):
        with pytest.raises(ConfigError, match=f"^{field}="):
            WorkloadConfig(**{field: value})


def test_7_configs_and_sweeps_take_numpy_scalars_as_the_numbers_they_are(tmp_path):
    """np.int64(20) was refused as "n_jobs=np.int64(20) is invalid; allowed: an integer"
    (the same in fastsim.sweep's clusters, chunk and seed); a numpy value now configures
    exactly what the Python number does, and a non-integer or a bool is still refused."""
    import fastsim

    a = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=np.int64(20), sigma=np.float32(0.25),
                             ustar_hacking=[np.float64(0.2), np.float32(0.5)])
    b = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=20, sigma=float(np.float32(0.25)),
                             ustar_hacking=(0.2, 0.5))
    assert a == b and a.to_dict() == b.to_dict() and type(a.workload.n_jobs) is int
    assert PolicyConfig(name="evalstop", k=np.int64(3)) == PolicyConfig(name="evalstop", k=3)
    for bad in (np.float64(2.5), np.bool_(True)):
        with pytest.raises(ConfigError, match="^n_jobs="):
            WorkloadConfig(n_jobs=bad)
    sweep = tmp_path / "s.toml"
    sweep.write_text('clusters = 4\nchunk = 2\n[base]\nn_jobs = 8\n[axes]\n'
                     'policy = ["evalstop:k=2"]\n')
    one = fastsim.sweep(sweep, tmp_path / "a", clusters=np.int64(4), chunk=np.int32(2),
                        seed=np.uint64(3), progress=False)
    two = fastsim.sweep(sweep, tmp_path / "b", clusters=4, chunk=2, seed=3, progress=False)
    assert one.equals(two)


@pytest.mark.parametrize("field,value", [
    ("gpus", True), ("n_jobs", True), ("n_evals", True), ("load", 1e-300),
    ("median_lora_h", 1e308), ("median_rlhf_h", 1e308), ("median_dpo_h", float("inf")),
])
def test_7_workload_refuses_bools_and_unsimulable_ranges(field, value):
    with pytest.raises(ConfigError, match=rf"^{field}="):
        WorkloadConfig(**{field: value})


@pytest.mark.parametrize("argv,needle", [
    (["--load", "1e-300"], "load=1e-300 is invalid"),
    (["--median-lora-h", "1e308"], "--median-lora-h=1e308 is invalid"),
    (["--median-rlhf-h", "1e308"], "--median-rlhf-h=1e308 is invalid"),  # defect 8, config side
])
def test_7_cli_refuses_unsimulable_ranges(capsys, argv, needle):
    assert one_line(capsys, ["run", *argv, "--clusters", "2"], needle) == ""


# -- 10. memory checked before allocating ---------------------------------------------------
def test_10_run_refuses_what_cannot_fit(tmp_path):
    p = tmp_path / "huge.toml"
    p.write_text("clusters = 1000\nchunk = 1000\n[base]\nn_jobs = 10000\nn_evals = 1000\n")
    out = tmp_path / "out"
    # A run's summary is streamed (flat in clusters); rows kept for --out are not.
    for argv in (["run", "--clusters", "100000000", "--out", str(tmp_path / "c.parquet")],
                 ["run", "--n-jobs", "10000", "--n-evals", "1000"],
                 ["sweep", str(p), "--out", str(out)]):
        r = run_fenced(argv)
        err = r.stderr.strip()
        assert r.returncode == 2 and "largest feasible: " in err, err
        assert len(err.splitlines()) == 1
    assert not (tmp_path / "c.parquet").exists()
    assert not out.exists()
    # one cluster past the limit (2.4 GB of workload and 7.2 GB of drawing scratch)
    r = run_fenced(["run", "--n-jobs", "100000", "--n-evals", "1000"])
    assert r.returncode == 2 and r.stderr.strip().endswith(
        "even one does not fit; reduce n_jobs x n_evals"), r.stderr
    with pytest.raises(ConfigError, match="largest feasible: n_clusters"):
        simulate(SimConfig.from_specs(n_jobs=100_000, n_evals=1000), 10_000)


# -- 11. output paths checked before any work; nothing written unless all can be -----------
def test_11_run_checks_outputs_before_simulating(tmp_path, capsys):
    base = ["run", "--clusters", "2", "--n-jobs", "5"]
    assert one_line(capsys, base + ["--out", str(tmp_path / "x.csv")], "--out") == ""
    ok = tmp_path / "ok.parquet"
    assert one_line(capsys, base + ["--out", str(ok), "--jobs-out", str(tmp_path / "j.txt")],
                    "--jobs-out") == ""
    assert not ok.exists()
    (tmp_path / "d.parquet").mkdir()
    one_line(capsys, base + ["--out", str(tmp_path / "d.parquet")], "is a directory")
    one_line(capsys, base + ["--out", "/proc/fastsim-x.parquet"], "cannot write in /proc")
    one_line(capsys, base + ["--out", str(ok), "--jobs-out", str(ok)], "the same file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.parquet"]


def test_11_replay_checks_outputs_before_work(tmp_path, capsys):
    log = tmp_path / "l.csv"
    log.write_text(CSV_OK)
    (tmp_path / "EXISTING_DIR.csv").mkdir()
    out = tmp_path / "o.parquet"
    assert one_line(capsys, ["replay", str(log), "--out", str(out), "--summary-out",
                             str(tmp_path / "EXISTING_DIR.csv")], "is a directory") == ""
    assert not out.exists()


def test_11_sweep_out_must_be_a_writable_directory(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 4\n")
    f = tmp_path / "file"
    f.write_text("x")
    one_line(capsys, ["sweep", str(p), "--out", str(f)], "is not a directory")
    one_line(capsys, ["sweep", str(p), "--out", "/proc/fastsim-sweep"], "cannot write in /proc")
    assert f.read_text() == "x"


# -- 12. disk full, read-only output --------------------------------------------------------
def test_12_disk_full_and_read_only_are_one_line(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.parquet"

    def full(table, where, *a, **k):  # every Parquet file is written by pyarrow's writer
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "5", "--out", str(out)],
             "No space left on device")
    assert not out.exists() and not list(tmp_path.iterdir())

    # read-only: the cleanup of the temporary file fails too, and must not mask the cause
    def read_only(table, where, *a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pq, "write_table", read_only)
    real_unlink = type(out).unlink

    def unlink(self, missing_ok=False):
        if self.name.endswith(".tmp"):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(type(out), "unlink", unlink)
    one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "5", "--out", str(out)],
             "Read-only file system")


@pytest.mark.parametrize("argv", [
    ["run", "--clusters", "2", "--n-jobs", "5", "--out", "{new}/r.parquet"],
    ["replay", "--example", "--out", "{new}/r.csv"],
    ["costaware", "ratios", "--n", "8", "--d", "2", "--no-progress", "--out", "{new}"],
], ids=["run", "replay", "costaware"])
def test_12_a_write_that_fails_leaves_no_directory_it_made(tmp_path, capsys, monkeypatch,
                                                            argv):
    """A full disk left the output's new directories behind, empty (`fastsim costaware sgd
    --out DIR` made DIR, then could not write in it): a write that fails removes the
    directories it made while they are empty, as a refused sweep does."""
    def full(table, where, *a, **k):  # every Parquet file is written by pyarrow's writer
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", full)
    monkeypatch.setattr(pl.DataFrame, "write_csv", full)
    new = tmp_path / "new" / "dir"
    one_line(capsys, [a.format(new=new) for a in argv], "No space left on device")
    assert list(tmp_path.iterdir()) == []


def test_12_directories_made_part_way_are_removed_when_the_next_cannot_be(tmp_path):
    """write_all(new/<300-character name>/f): make_directory made new, then failed on the
    name too long, and returned nothing, so new was left behind, empty."""
    from fastsim.io import bytes_writer, write_all

    with pytest.raises(ConfigError, match="cannot write"):
        write_all([(tmp_path / "new" / ("x" * 300) / "f.bin", bytes_writer(b"a"))])
    assert list(tmp_path.iterdir()) == []


# -- 13. numbers, bytes and types that used to raise tracebacks -----------------------------
def test_13_huge_seeds(tmp_path, capsys):
    one_line(capsys, ["run", "--clusters", "2", "--seed", str(2**64)], "--seed=")
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 4\n")
    out = tmp_path / "out"
    one_line(capsys, ["sweep", str(p), "--out", str(out), "--seed", str(2**64)], "seed=")
    assert not out.exists()  # no sweep.json written first


def test_13_invalid_utf8(tmp_path, capsys):
    j = tmp_path / "l.jsonl"
    j.write_bytes(b'{"job_id": "a", "step": 1, "score": 0.5}\n{"job_id": "\xff", "step": 2}\n')
    one_line(capsys, ["replay", str(j)], "l.jsonl:2: invalid UTF-8")
    d = tmp_path / "run"
    d.mkdir()
    (d / "trainer_state.json").write_bytes(b'{"log_history": [{"eval_acc": 1, "x": "\xc3"}]}')
    one_line(capsys, ["replay", str(d)], "trainer_state.json:1: invalid UTF-8")
    t = tmp_path / "s.toml"
    t.write_bytes(b'title = "caf\xe9"\nclusters = 2\n')
    one_line(capsys, ["sweep", str(t), "--out", str(tmp_path / "o")], "s.toml:1: invalid UTF-8")


@pytest.mark.parametrize("column,values,needle", [
    ("job_id", [["a"], ["a"]], "field 'job_id': a column of type List"),
    ("score", [[0.1], [0.2]], "field 'score': a column of type List"),
    ("time", [datetime.timedelta(hours=1), datetime.timedelta(hours=2)],
     "field 'time': a column of type Duration"),
    ("truth_gold", ["x", "y"], "field 'truth_gold': 'x' is not a number"),
    ("truth_hacking", ["maybe", "no"], "field 'truth_hacking': 'maybe'"),
])
def test_13_parquet_column_types(tmp_path, capsys, column, values, needle):
    cols = {"job_id": ["a", "a"], "step": [1, 2], "score": [0.1, 0.2], column: values}
    p = tmp_path / "t.parquet"
    pl.DataFrame(cols).write_parquet(p)
    one_line(capsys, ["replay", str(p)], needle)


def test_13_text_truth_hacking_is_read_as_a_boolean(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score,truth_hacking,truth_gold\n"
                 "a,1,0.5,false,0.5\na,2,0.4,false,0.6\nb,1,0.5,true,0.5\nb,2,0.4,true,0.4\n")
    t = read_logs([p]).table
    assert t["truth_hacking"].to_list() == [False, False, True, True]


def test_13_gpus_true_in_toml_names_gpus(tmp_path, capsys):
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\ngpus = true\n")
    one_line(capsys, ["sweep", str(p), "--out", str(tmp_path / "o")], "gpus=true is invalid")


def test_13_negative_infinity_is_a_value_not_an_option(capsys):
    one_line(capsys, ["run", "--load", "-inf"], "--load='-inf' is invalid")
    one_line(capsys, ["run", "--sigma", "-1e-3"], "--sigma=-1e-3 is invalid")


# -- 14. messages that pointed at the wrong place -------------------------------------------
def test_14_trainer_state_max_steps_and_runtime_point_at_their_lines(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    state = ('{\n  "global_step": 20,\n  "log_history": [\n    {"step": 10, "eval_acc": 0.5},\n'
             '    {"step": 20, "eval_acc": 0.6},\n    {"step": 20, "train_runtime": -5.0}\n  ],\n'
             '  "max_steps": "many"\n}\n')
    (d / "trainer_state.json").write_text(state)
    with pytest.raises(ConfigError, match=r"trainer_state.json:6: field 'train_runtime'"):
        read_logs([d])
    (d / "trainer_state.json").write_text(state.replace("-5.0", "5.0"))
    with pytest.raises(ConfigError, match=r"trainer_state.json:8: field 'max_steps'"):
        read_logs([d])


def test_14_csv_line_numbers_count_quoted_newlines(tmp_path):
    p = tmp_path / "q.csv"
    p.write_text('job_id,step,score,note\na,1,0.5,"two\nlines"\na,2,x,plain\n')
    with pytest.raises(ConfigError, match=r"q.csv:4: field 'score'"):
        read_logs([p])


def test_14_on_duplicate_error_names_the_repeated_row(tmp_path):
    p = tmp_path / "d.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,0.6\nb,1,0.1\na,2,0.7\n")
    with pytest.raises(ConfigError, match=r"d.csv:5: field 'step'"):
        read_logs([p], on_duplicate="error")
    assert np.isclose(read_logs([p]).table.filter(pl.col("job_id") == "a")["score"][1], 0.7)


# -- 15. a second hunt: numbers beyond the kernels' integers, ragged logs, deep JSON ---------
BIG = "99999999999999999999999"  # beyond int64


@pytest.mark.parametrize("argv,needle", [
    (["replay", "--example", "--policy", f"evalstop:k={BIG}"],
     f"--policy evalstop: k={BIG} is invalid"),
    (["replay", "--example", "--policy", f"loss_plateau:w={BIG}"],
     f"--policy loss_plateau: w={BIG} is invalid"),
    (["run", "--clusters", "2", "--policy", f"evalstop:k={BIG}"],
     f"--policy evalstop: k={BIG} is invalid"),
])
def test_15_integer_parameters_fit_the_kernels(capsys, argv, needle):
    assert one_line(capsys, argv, needle) == ""  # nothing printed before the refusal


def test_15_cluster_counts_fit_the_64_bit_counters(tmp_path):
    """Beyond 2^63 - 1 a cluster id no longer fits the counters: refused at once, where it
    used to start a run that could never end (hence the fence and its deadline)."""
    p = tmp_path / "s.toml"
    p.write_text(f"clusters = {2**63}\n[base]\nn_jobs = 4\n")
    out = tmp_path / "out"
    for argv, needle in ((["run", "--clusters", BIG], f"--clusters={BIG} is invalid"),
                         (["sweep", str(p), "--out", str(out)], f"clusters={2**63} is invalid")):
        r = run_fenced(argv, timeout=120)
        err = r.stderr.strip()
        assert r.returncode == 2 and needle in err and len(err.splitlines()) == 1, err
    assert not out.exists()
    with pytest.raises(ConfigError, match=f"n_clusters={2**63} is invalid"):
        simulate(SimConfig.from_specs(n_jobs=4), 2**63)


@pytest.mark.parametrize("option,value,needle", [
    ("--kl-coefs", "inf", "--kl-coefs='inf'"), ("--kl-coefs", "0.1,nan", "'nan' is invalid"),
    ("--n-comparisons", "99999999999999", "--n-comparisons=99999999999999 is invalid; allowed: "
     "a non-empty list"), ("--seeds", BIG, "--seeds"),
    ("--seeds", f"1,{BIG}", f"--seeds=1,{BIG} is invalid; allowed: a non-empty"),
    ("--steps", BIG, f"--steps={BIG} is invalid; allowed: an integer from 1 to"),
    ("--world-seed", str(2**64), f"--world-seed={2**64} is invalid; allowed: an integer from 0 "
     "to 2^64-1"),
    # a repeated value ran its (job_id, step) rows twice, skewing every later fit
    ("--seeds", "1,2,1", "--seeds=1,2,1 is invalid (1 appears twice)"),
    ("--n-comparisons", "100,100", "--n-comparisons=100,100 is invalid (100 appears twice)"),
    ("--kl-coefs", "0.1,0.10", "--kl-coefs=0.1,0.10 is invalid (0.1 appears twice)"),
    ("--kl-coefs", "0.1,0.1000001", "both name their runs kl0.1"),
    # beyond the KL step's stability bound the policy oscillates about the reference
    ("--kl-coefs", "0.1,20.2", "--kl-coefs=0.1,20.2 is invalid: 20.2 is beyond"),
    ("--kl-coefs", "1000", "allowed: numbers from 0 to 20.1 at this lr"),
    # an empty item was dropped: 1,,2 ran as 1,2 and "4," as seed 4 alone
    ("--n-comparisons", "100,,200", "--n-comparisons '100,,200' has an empty item; allowed: "
     "comma-separated integers"),
    ("--kl-coefs", "0.1,", "--kl-coefs '0.1,' has an empty item; allowed: comma-separated numbers"),
    ("--seeds", "4,", "--seeds '4,' has an empty item"),
])
def test_15_toy_rlhf_refuses_what_it_cannot_run(tmp_path, capsys, option, value, needle):
    out = tmp_path / "t"
    one_line(capsys, ["traces", "toy-rlhf", option, value, "--out", str(out)], needle)
    assert not out.exists()


@pytest.mark.parametrize("text,needle", [
    ("job_id,step,score\na,1,0.5\na,2\n", "r.csv:3: 2 fields"),              # truncated line
    ("job_id,step,score\na,1,0.5\n\"a\",2\n", "r.csv:3: 2 fields"),
    ("job_id,step,score\na,1,0.5\na,2,0.4,9\n", "r.csv:3: 4 fields"),     # as docs/replay.md says
    ("job_id,job_id,step,score\na,b,1,0.5\n", "r.csv:1: column 'job_id' appears twice"),
    ("job_id,step,score,max_steps\na,1,0.5,-3\n", "r.csv:2: field 'max_steps'"),
    ("job_id,step,score,max_steps\na,1,0.5,2.5\n", "r.csv:2: field 'max_steps'"),
])
def test_15_ragged_or_ambiguous_csv_is_refused(tmp_path, capsys, text, needle):
    p = tmp_path / "r.csv"
    p.write_text(text)
    out = tmp_path / "o.csv"
    one_line(capsys, ["replay", str(p), "--out", str(out)], needle)
    assert not out.exists()


def test_15_deeply_nested_json_is_one_line(tmp_path, capsys):
    p = tmp_path / "d.jsonl"
    p.write_text('{"job_id": "a", "step": 1, "score": 0.5}\n'
                 '{"job_id": "a", "step": 2, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    one_line(capsys, ["replay", str(p)], "d.jsonl:2: not valid JSON")
    d = tmp_path / "run"
    d.mkdir()
    (d / "trainer_state.json").write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    one_line(capsys, ["replay", str(d)], "trainer_state.json")


def test_15_an_empty_metric_name_is_refused(capsys):
    one_line(capsys, ["replay", "--example", "--metric", ""], "--metric")


def test_15_a_reader_that_stops_reading_is_no_traceback():
    """``fastsim replay --example | head -1``: the pipe closes while fastsim still prints."""
    p = subprocess.Popen([sys.executable, "-m", "fastsim.cli", "replay", "--example"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before fastsim has printed anything: its first write fails
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err


# -- 16. values a sweep file sets that no cell uses, and writers into a held directory ---------
@pytest.mark.parametrize("base,axes,needle", [
    ("sigma = -1", "sigma = [0.01, 0.02]", "base.sigma=-1 is invalid; allowed:"),
    ('mix = "rlhf_hevy"', 'mix = ["mixed"]', 'base.mix="rlhf_hevy" is invalid'),
    ('policy = "evalstp:k=2"', 'policy = ["evalstop:k=2"]', "base.policy='evalstp' is invalid"),
    ("k = 0", "k = [1, 2]", "base.k=0 is invalid"),
    ('policy = "evalstop:k=2"\nk = -1', "n_jobs = [4]", "base.k=-1 is invalid"),  # spec wins
    ("gpus = 32\ndemands_rlhf = [8, 64]", "gpus = [64]", "base.gpus=32: demands_rlhf="),
])
def test_16_an_overridden_base_value_is_still_checked(tmp_path, capsys, base, axes, needle):
    p = tmp_path / "s.toml"
    p.write_text(f"clusters = 2\n[base]\nn_jobs = 4\n{base}\n[axes]\n{axes}\n")
    out = tmp_path / "o"
    one_line(capsys, ["sweep", str(p), "--out", str(out)], f"s.toml: {needle}")
    assert not out.exists()


def _listing(d):
    return sorted((str(p.relative_to(d)), p.stat().st_mtime_ns, p.stat().st_size)
                  for p in d.rglob("*"))


@pytest.mark.parametrize("argv,held", [
    ("figures {d}", ""),                                    # default DIR/figures
    ("figures {tmp} --out {d}", ""),
    ("figures {tmp} --out {d}/figs", ""),                   # below a held directory
    ("reproduce --clusters 2 --no-progress --out {d}", ""),
    ("reproduce --clusters 2 --no-progress --out {d}", "noise"),  # one of its sweeps is held
    ("reproduce --clusters 2 --no-progress --out {tmp}/r --figures-dir {d}", ""),
    ("reproduce --clusters 2 --no-progress --out {tmp}/r --report {d}/R.md", ""),
    ("run --clusters 2 --n-jobs 5 --out {d}/run.parquet", ""),
    ("detectors --quick --clusters 2 --out {tmp}/det --figures {d}/figs", ""),
    ("replay --example --out {d}/replay.parquet", ""),
    ("costaware ratios --out {d}", ""),
    ("costaware figures {d}", ""),
])
def test_16_no_command_writes_into_a_directory_another_process_holds(tmp_path, argv, held):
    """The same refusal as a second ``fastsim sweep`` into a held directory gets."""
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.store import SweepStore

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 4\n")
    d = tmp_path / "d"
    store = SweepStore.open(d / held if held else d, load_sweep(p))  # this process holds it
    before = _listing(tmp_path)
    r = subprocess.run([sys.executable, "-m", "fastsim.cli",
                        *argv.format(d=d, tmp=tmp_path).split()], capture_output=True, text=True)
    err = r.stderr.strip()
    assert r.returncode == 2, err
    assert f"{store.root} is in use by pid {os.getpid()}" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err and r.stdout == ""
    assert _listing(tmp_path) == before  # nothing written, not even a probe file
    store.close()


# A workload built by hand (``run_workload``, ``run_engine``): the engine admits jobs in
# index order, divides by GPU demands and run times and orders by keys, so a value it
# cannot run is named before any kernel runs, never turned into a silent schedule.
@pytest.mark.parametrize("scheduler,name,value,needle", [
    ("srtf_est", "gpus", 0, "workload.gpus at cluster row 1, job 4 is 0; allowed: an integer "
     "from 1 to 64"),
    ("fifo", "gpus", 65, "workload.gpus at cluster row 1, job 4 is 65"),
    ("tiresias", "duration_h", 0.0, "workload.duration_h at cluster row 1, job 4 is 0.0; "
     "allowed: finite and > 0"),
    ("fifo", "duration_h", np.inf, "workload.duration_h at cluster row 1, job 4 is inf"),
    ("sjf_est", "t_est_h", np.nan, "workload.t_est_h at cluster row 1, job 4 is nan; allowed: "
     "finite and >= 0"),
    ("fifo", "arrival_h", np.nan, "workload.arrival_h at cluster row 1, job 4 is nan; allowed: "
     "finite"),
    ("fifo", "arrival_h", 1e6, "workload.arrival_h at cluster row 1, job 5 is "),
])
def test_a_hand_built_workload_the_engine_cannot_run_is_refused(scheduler, name, value, needle):
    from fastsim.api import decide_stops, run_engine, run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs(scheduler, "evalstop:k=2")
    w = generate_workload(cfg.workload, 3, seed=2)
    run_workload(cfg, w)  # as generated: runs
    bad = w.with_arrays(**{name: getattr(w, name).copy()})
    getattr(bad, name)[1, 4] = value
    for run in (lambda: run_workload(cfg, bad), lambda: run_engine(cfg, bad, decide_stops(cfg, w))):
        with pytest.raises(ConfigError) as e:
            run()
        assert needle in str(e.value)
        if name == "arrival_h" and value == 1e6:
            assert "non-decreasing along each cluster row" in str(e.value)


def test_a_hand_built_workload_needs_finite_losses_under_loss_aware_only():
    from fastsim.api import run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("loss_aware", "evalstop:k=2")
    w = generate_workload(cfg.workload, 2, seed=2)
    bad = w.with_arrays(loss=w.loss.copy())
    bad.loss[0, 3, 5] = np.nan
    with pytest.raises(ConfigError, match=r"workload.loss at cluster row 0, job 3 has readings"):
        run_workload(cfg, bad)
    run_workload(SimConfig.from_specs("srtf_est", "evalstop:k=2"), bad)  # no one reads them
    E = w.n_evals
    with pytest.raises(ConfigError, match=rf"workload.score has shape \(2, 300, {E - 1}\); "
                       rf"allowed: \(2, 300, {E}\)"):
        run_workload(cfg, w.with_arrays(score=w.score[:, :, :-1].copy()))


def test_a_hand_built_workload_needs_positive_losses_where_a_relative_drop_reads_them():
    # loss_aware and loss_plateau read (L_prev - L) / L_prev: readings 0 then 0 gave a NaN
    # key, which the engine and the reference placed differently in their orders (other
    # schedules, other JCTs), and a negative loss that falls read as rising: both silent.
    from fastsim.api import run_workload
    from fastsim.workload import generate_workload

    def config(scheduler, policy):
        return SimConfig.from_specs(scheduler, policy, n_jobs=8, gpus=8, n_evals=4,
                                    demands_lora=(8,), demands_dpo=(8,), demands_rlhf=(8,))
    cfg = config("loss_aware", "none")
    w = generate_workload(cfg.workload, 1, seed=1)
    rule = (r"; allowed: finite readings, each a positive loss for {} \(a relative drop; its "
            r"rule is undefined at 0 and reversed below\)$")
    for readings in ([1.0, 0.0, 0.0, 0.0], [1.0, 0.5, 0.25, 0.0], [-1.0, -2.0, -3.0, -4.0]):
        bad = w.with_arrays(loss=w.loss.copy())
        bad.loss[0, 1] = readings
        with pytest.raises(ConfigError, match=r"^workload.loss at cluster row 0, job 1 has "
                           r"readings \[.*\]" + rule.format("loss_aware")):
            run_workload(cfg, bad)
    run_workload(config("srtf_est", "none"), bad)  # nothing reads them
    # a policy reads the losses of the jobs in its scope only
    plateau = config("fifo", "loss_plateau:w=1,tol=0.01")
    jt = w.job_type[0]
    assert (jt == RLHF).any() and (jt != RLHF).any()
    other, rlhf = int(np.argmax(jt != RLHF)), int(np.argmax(jt == RLHF))
    bad = w.with_arrays(loss=w.loss.copy())
    bad.loss[0, other] = -1.0
    run_workload(plateau, bad)
    with pytest.raises(ConfigError, match=rf"^workload.loss at cluster row 0, job {other} "
                       r"has readings \[.*\]" + rule.format(r"loss_plateau\(w=1,tol=0.01\)"
                                                              + r"\[scope=all\]")):
        run_workload(plateau.with_policy("loss_plateau:w=1,tol=0.01,scope=all"), bad)
    bad.loss[0, rlhf] = 0.0
    with pytest.raises(ConfigError, match=rf"^workload.loss at cluster row 0, job {rlhf} "):
        run_workload(plateau, bad)


def test_a_hand_built_workload_needs_positive_estimates_under_stop_at():
    # stop_at reads progress as attained / T_est: T_est = 0 raised a bare ZeroDivisionError
    # from inside the engine's kernels.
    from fastsim.api import run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("fifo", "stop_at:f=0.5,scope=all", n_jobs=4)
    w = generate_workload(cfg.workload, 2, seed=1)
    bad = w.with_arrays(t_est_h=w.t_est_h.copy())
    bad.t_est_h[1, 2] = 0.0
    with pytest.raises(ConfigError, match=r"^workload.t_est_h at cluster row 1, job 2 is 0.0; "
                       r"allowed: > 0 under stop_at \(it divides by it\)$"):
        run_workload(cfg, bad)
    run_workload(SimConfig.from_specs("sjf_est", "evalstop:k=2", n_jobs=4), bad)  # 0 sorts


@pytest.mark.parametrize("source,said", [
    ("def f(:\n", "raised SyntaxError: invalid syntax ({path}, line 1)"),
    ("import os\nraise RuntimeError('at import\\nsecond line')\n",
     "raised RuntimeError: at import ({path}, line 2)")])
@pytest.mark.parametrize("flag,command", [("--policy", "run"), ("--metric", "run"),
                                          ("--policy", "replay")])
def test_a_user_module_that_raises_while_imported_is_one_line(tmp_path, capsys, monkeypatch,
                                                              source, said, flag, command):
    """Only ImportError and AttributeError were caught: a syntax error, or an exception at
    the module's top level, ended the command in the user's traceback, exit 1."""
    name = f"raising_{abs(hash((source, flag, command)))}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    log = tmp_path / "log.csv"
    log.write_text(CSV_OK)
    argv = ([command, "--clusters", "2", "--n-jobs", "4"] if command == "run"
            else [command, str(log)]) + [flag, f"{name}:f"]
    one_line(capsys, argv, f"{flag}={name}:f: importing {name} " + said.format(path=path)
             + "; allowed: a module that imports")


@pytest.mark.parametrize("flag,declare,said", [
    ("--metric", "from fastsim.metrics import cluster_metric\n\n@cluster_metric()\n"
     "def jct_mean_h(jobs):\n    return jobs['jct_h'].mean(axis=1)\n",
     "metric 'jct_mean_h' is a built-in column; allowed: a new name"),
    ("--policy", "from fastsim.registry import stop_policy\n\n@stop_policy()\n"
     "def f(scores, losses, attained_h, t_est_h):\n    return 0\n",
     "stop policy 'f' is not an @njit function; allowed: a numba.njit-decorated function, "
     "with @njit below @stop_policy(...), next to its def")])
def test_a_declaration_refused_while_imported_names_the_users_line(tmp_path, capsys,
                                                                    monkeypatch, flag,
                                                                    declare, said):
    """The line named fastsim's own file (metrics.py, where the refusal is raised), and
    said 'allowed' twice; it names the user's line that declared."""
    name = f"declaring_{flag[2:]}"
    path = tmp_path / f"{name}.py"
    path.write_text(declare)
    monkeypatch.syspath_prepend(str(tmp_path))
    one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "4", flag, f"{name}:f"],
             f"{flag}={name}:f: importing {name}, {path}, line 3: {said}")


@pytest.mark.parametrize("flag", ["--policy", "--scheduler", "--baseline"])
def test_a_module_refused_while_imported_is_named_by_its_option_with_parameters_too(
        tmp_path, capsys, monkeypatch, flag):
    """`--policy mine:f:k=2` whose module failed while imported said `policy='mine:f':
    importing mine, ...`, the API's word, where `--policy mine:f` said `--policy=mine:f:
    importing mine, ...`."""
    name = f"declaring_with_params_{flag[2:]}"
    path = tmp_path / f"{name}.py"
    path.write_text("import os\nraise RuntimeError('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    one_line(capsys, ["run", "--clusters", "2", "--n-jobs", "4", flag, f"{name}:f:k=2"],
             f"{flag}={name}:f: importing {name} raised RuntimeError: at import ({path}, "
             "line 2); allowed: a module that imports")


@pytest.mark.parametrize("extra,said", [
    (["--dask-timeout", "5"], "--dask-timeout applies to --backend dask only; allowed: "
     "--backend dask with it, or without it"),
    (["--workers", "2", "--dask-timeout", "5"],
     "--workers and --dask-timeout apply to --backend dask only; allowed: --backend dask "
     "with them, or without them")])
@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_a_dask_option_without_the_dask_backend_is_refused(tmp_path, capsys, extra, said,
                                                           command):
    """--dask-timeout was taken without a word and never used, where --address and
    --workers were refused."""
    from fastsim.resources import sweep_file

    argv = ([command, str(sweep_file("noise")), "--out", str(tmp_path / "o")]
            if command == "sweep" else [command, "--quick", "--out", str(tmp_path / "o")])
    one_line(capsys, argv + extra, said)
    assert not (tmp_path / "o").exists()


def test_reproduce_refuses_a_figures_dir_it_would_not_draw_in(tmp_path, capsys):
    """--no-figures --figures-dir DIR ran every sweep and drew nothing, DIR dropped
    without a word."""
    argv = ["reproduce", "--quick", "--no-figures", "--figures-dir", str(tmp_path / "f"),
            "--out", str(tmp_path / "o")]
    one_line(capsys, argv, "--figures-dir is given with --no-figures")
    assert not (tmp_path / "o").exists()


def test_reproduce_api_refuses_one_cluster_as_the_command_line_does(tmp_path):
    """``reproduce(clusters=1)`` ran every sweep and scored every row "not comparable"
    (no interval from one cluster); ``fastsim reproduce --clusters 1`` was refused."""
    from fastsim.sweep.reproduce import reproduce

    with pytest.raises(ConfigError, match=r"clusters=1 is invalid; allowed: at least 2 per "
                                          r"cell"):
        reproduce(tmp_path / "r", clusters=1, figures_dir=None, report=None, progress=False)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("kw, said", [
    ({"formats": "png"}, "formats='png' is invalid; allowed: a list of png, pdf, svg"),
    ({"formats": ("png", "jpg")}, "formats=('png', 'jpg') is invalid"),
    # a blank or padded item was dropped or stripped, as on a command line; a list item
    # with a comma was told "(comma-separated)", which the API does not read
    ({"formats": ["pdf", ""]}, "formats=['pdf', ''] is invalid; allowed: a list of png, "
                               "pdf, svg, as formats=(\"png\", \"pdf\")"),
    ({"formats": [" pdf "]}, "formats=[' pdf '] is invalid; allowed: a list of png"),
    ({"formats": ["png,pdf"]}, "formats=['png,pdf'] is invalid; allowed: a list of png"),
    # read once without a word, where fastsim figures --formats png,png is refused
    ({"formats": ["pdf", "pdf"]}, "formats=['pdf', 'pdf'] is invalid; allowed: each format "
                                  "named once (pdf is named twice)"),
    ({"progress": "no"}, "progress='no' is invalid; allowed: True or False"),
    ({"timeout": math.nan}, "timeout=nan is invalid; allowed: seconds > 0"),
])
def test_reproduce_api_checks_what_the_command_line_parses(tmp_path, kw, said):
    """reproduce(formats="png") read the formats letter by letter, and matplotlib refused
    'p' after every sweep had run; a str out was a TypeError before any check."""
    from fastsim.sweep.reproduce import reproduce

    out = tmp_path / "r"
    args = {"clusters": 2, "figures_dir": tmp_path / "f", "report": None, "progress": False,
            "base_overrides": {"n_jobs": 5}, **kw}
    with pytest.raises(ConfigError, match=re.escape(said)):
        reproduce(out, **args)
    assert not out.exists() and not (tmp_path / "f").exists()


def test_reproduce_api_takes_its_paths_as_text(tmp_path):
    """reproduce("results", ...) was a TypeError ('str' / 'str') before any work."""
    from fastsim.sweep.reproduce import reproduce

    info = reproduce(str(tmp_path / "r"), clusters=2, figures_dir=None,
                     report=str(tmp_path / "report.md"), progress=False,
                     base_overrides={"n_jobs": 5})
    assert info["rows"] and (tmp_path / "report.md").is_file()


@pytest.mark.parametrize("overrides", [[1], "n_jobs=5", 5])
def test_base_overrides_that_are_no_dict_are_refused(tmp_path, overrides):
    """reproduce(..., base_overrides=[1]) and load_sweep(..., base_overrides=[1]) were a
    TypeError traceback ('dict' and 'list' cannot be merged)."""
    from fastsim.sweep.grid import load_sweep
    from fastsim.sweep.reproduce import reproduce

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[axes]\nk = [1, 2]\n")
    said = f"base_overrides={overrides!r} is invalid; allowed: a dict"
    with pytest.raises(ConfigError, match=re.escape(said)):
        load_sweep(p, base_overrides=overrides)
    with pytest.raises(ConfigError, match=re.escape(said)):
        reproduce(tmp_path / "r", clusters=2, figures_dir=None, report=None, progress=False,
                  base_overrides=overrides)
    assert not (tmp_path / "r").exists()


# The engine indexes by job type and peak evaluation without bounds checks (an index out
# of range read other memory, or wrapped to the last evaluation), truncated a float GPU
# demand, and failed inside Polars or by AttributeError on a missing or ill-shaped array.
@pytest.mark.parametrize("name,value,needle", [
    ("job_type", np.full((3, 300), 7, np.int8), "workload.job_type at cluster row 0, job 0 is "
     "7; allowed: a job type code from 0 to 2 (lora, dpo, rlhf)"),
    ("peak_eval", np.full((3, 300), 99, np.int32), "workload.peak_eval at cluster row 0, job 0 "
     "is 99; allowed: an evaluation from 1 to "),
    ("peak_eval", np.zeros((3, 300), np.int32), "workload.peak_eval at cluster row 0, job 0 is 0"),
    ("gpus", np.full((3, 300), 1.5), "workload.gpus has dtype float64; allowed: integers"),
    ("hacking", np.ones((3, 300), np.int64), "workload.hacking has dtype int64; allowed: bool"),
    ("gpus", [[1] * 300] * 3, "workload.gpus is a list; allowed: a numpy array"),
    ("cluster_ids", np.arange(5), "workload.cluster_ids has shape (5,); allowed: (3,)"),
    ("score", np.zeros((3, 300, 2), "U1"), "workload.score has dtype <U1; allowed: real numbers"),
])
def test_a_hand_built_workload_of_wrong_kinds_or_indices_is_refused(name, value, needle):
    from fastsim.api import decide_stops, run_engine, run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2")
    w = generate_workload(cfg.workload, 3, seed=2)
    bad = w.with_arrays(**{name: value})
    for run in (lambda: run_workload(cfg, bad), lambda: run_engine(cfg, bad, decide_stops(cfg, w))):
        with pytest.raises(ConfigError) as e:
            run()
        assert needle in str(e.value)


def _swapped(a):
    """``a``'s values in the other byte order (a file written on a big-endian machine)."""
    return a.astype(a.dtype.newbyteorder("S"))


# numba reads an array's bytes in this machine's order: a big-endian peak_eval passed the
# range check (numpy reads it right) and indexed the kernel's memory out of bounds, a
# segmentation fault; big-endian arrival times or scores gave other results without a
# word, GPUs a SimulationError, estimates numba's TypingError; float16 (no numba type)
# was a NotImplementedError traceback
@pytest.mark.parametrize("name,make,needle", [
    ("peak_eval", _swapped, "workload.peak_eval has dtype >i4, not in this machine's byte "
     "order; allowed: integers in native byte order"),
    ("arrival_h", _swapped, "workload.arrival_h has dtype >f8, not in this machine's byte "
     "order; allowed: real numbers in native byte order"),
    ("score", _swapped, "workload.score has dtype >f8"),
    ("gpus", _swapped, "workload.gpus has dtype >i4"),
    ("hacking", lambda a: a.astype(np.float16), "workload.hacking has dtype float16; "
     "allowed: bool"),
    ("gold", lambda a: a.astype(np.float16), "workload.gold has dtype float16; allowed: real "
     "numbers of 32 or 64 bits"),
    ("tau", lambda a: a.astype(np.longdouble), "workload.tau has dtype float128; allowed: "
     "real numbers of 32 or 64 bits"),
])
def test_a_hand_built_workload_in_a_dtype_numba_cannot_read_is_refused(name, make, needle):
    from fastsim.api import decide_stops, run_engine, run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    w = generate_workload(cfg.workload, 2, seed=2)
    bad = w.with_arrays(**{name: make(getattr(w, name))})
    for run in (lambda: run_workload(cfg, bad), lambda: decide_stops(cfg, bad),
                lambda: run_engine(cfg, bad, decide_stops(cfg, w))):
        with pytest.raises(ConfigError, match="^" + re.escape(needle)):
            run()


def test_a_read_only_hand_built_workload_runs():
    """run_workload of a workload whose arrays are read-only (np.load's mmap_mode="r", say)
    was numba's TypingError traceback: the one-pass kernel is compiled for drawing the
    workload in place too, though it reads a given one only; run_stages ran it."""
    from dataclasses import fields

    from fastsim.api import run_stages, run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=10)
    w = generate_workload(cfg.workload, 2, seed=2)
    expected = run_workload(cfg, w).clusters
    frozen = w.with_arrays(**{f.name: getattr(w, f.name).copy() for f in fields(w)})
    for f in fields(frozen):
        getattr(frozen, f.name).flags.writeable = False
    assert run_workload(cfg, frozen).clusters.equals(expected)
    assert run_stages(cfg, frozen).clusters.equals(expected)


def test_a_run_time_below_the_clocks_resolution_is_refused():
    """A hand-built job of 1e-300 h arriving at 1e6 h ran with JCT 0.0, exit 0: its run
    time vanished in arrival + duration."""
    from fastsim.api import run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2")
    w = generate_workload(cfg.workload, 2, seed=2)
    arr, dur = w.arrival_h.copy(), w.duration_h.copy()
    arr[1] += 1e6
    dur[1, 3] = 1e-300
    with pytest.raises(ConfigError, match=r"^workload.duration_h at cluster row 1, job 3 is "
                       r"1e-300; allowed: at least 2\^-32 of the cluster row's time scale"):
        run_workload(cfg, w.with_arrays(arrival_h=arr, duration_h=dur))
    run_workload(cfg, w.with_arrays(arrival_h=arr))  # late arrivals alone are fine


@pytest.mark.parametrize("policy", ["none", "peak"])
def test_drawn_run_times_below_the_clocks_resolution_are_refused(policy):
    """WorkloadConfig bounds the arrival span alone: a shortest median of 0.001 h beside
    RLHF runs of 1e4 h that queue drew clusters whose run times sum to 5e5 h, and
    simulate ran them, the shortest jobs' held hours off by up to 1e-5 (run_workload, on
    the same draws, refused them)."""
    from fastsim.api import simulate
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("fifo", policy, n_jobs=30, gpus=16, mix=(0.25, 0.0, 0.75),
                               median_lora_h=0.001, median_rlhf_h=1e4, demands_rlhf=(1, 15),
                               demands_lora=(1, 8, 16))
    with pytest.raises(ConfigError, match=r"^workload: cluster 1 drew a run time of 9.17e-05 h, "
                       r"below 2\^-32 of its time scale \(521482 h: .*; allowed: settings"):
        simulate(cfg, 5, seed=4)
    with pytest.raises(ConfigError, match=r"^workload: cluster 1 drew a run time"):
        generate_workload(cfg.workload, 5, seed=4)  # fastsim run's path
    simulate(cfg, 1, seed=4)  # cluster 0 alone resolves


def test_run_workload_refuses_what_is_not_a_config_or_workload():
    from fastsim.api import run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2")
    w = generate_workload(cfg.workload, 1, seed=2)
    with pytest.raises(ConfigError, match=r"^cfg=None is invalid; allowed: a SimConfig$"):
        run_workload(None, w)
    with pytest.raises(ConfigError, match=r"^workload dict is invalid; allowed: a Workload"):
        run_workload(cfg, w.observed())


@pytest.mark.parametrize("flag", ["keep_jobs", "record_segments"])
def test_run_workload_and_run_stages_refuse_a_flag_that_is_not_a_bool(flag):
    from fastsim.api import run_stages, run_workload
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2")
    w = generate_workload(cfg.workload, 1, seed=2)
    for run in (run_workload, run_stages):  # "no" is truthy: it kept the jobs table
        with pytest.raises(ConfigError, match=rf"^{flag}='no' is invalid; allowed: True or False$"):
            run(cfg, w, **{flag: "no"})


@pytest.mark.parametrize("kw, said", [
    ({"seed": 1.5}, "seed=1.5 is invalid"),  # drew seed 1's clusters
    ({"cluster_start": -5}, "cluster_start=-5 is invalid"),  # clusters -5 and -4
    ({"n_clusters": True}, "n_clusters=True is invalid"),  # numpy's TypeError
    ({"seed": -1}, "seed=-1 is invalid"),  # an OverflowError
    ({"scheduler": "fifo"}, "scheduler='fifo' is invalid; allowed: None or a SchedulerConfig"),
    ({"out": "gpus_one_row"}, "out.gpus is int32 (1, 300); allowed: a writable C-contiguous "
     "int32 array of shape (2, 300)"),  # written past its end, into other memory
    ({"out": "gpus_float"}, "out.gpus is float64 (2, 300)"),
])
def test_generate_workload_checks_what_it_draws_and_writes_into(kw, said):
    from fastsim.config import WorkloadConfig
    from fastsim.workload import allocate, generate_workload

    wc = WorkloadConfig()
    args = {"n_clusters": 2, **kw}
    if "out" in kw:
        out = allocate(2, wc.n_jobs, wc.n_evals)
        out.gpus = (np.empty((1, wc.n_jobs), np.int32) if kw["out"] == "gpus_one_row"
                    else np.empty((2, wc.n_jobs)))
        args["out"] = out
    with pytest.raises(ConfigError, match=re.escape(said)):
        generate_workload(wc, **args)


def test_clusters_that_cannot_fit_are_refused_before_they_are_drawn(tmp_path, capsys,
                                                                    monkeypatch):
    """generate_workload allocated whatever it was asked (a million clusters: numpy's
    MemoryError traceback, or the process killed), and `fastsim detectors --clusters
    1000000`, in its allowed range, drew a cell's clusters so after its progress bar;
    both are refused first, naming the largest size that fits."""
    import fastsim.detectors
    import fastsim.memory
    from fastsim.workload import generate_workload

    monkeypatch.setattr(fastsim.memory, "available_bytes", lambda: 300 << 20)
    monkeypatch.setattr(fastsim.memory, "get_num_threads", lambda: 2)
    # 24 MB a cluster, and 72 MB of scratch drawing one, in each of the two threads
    wc = WorkloadConfig(n_jobs=1000, n_evals=1000)
    with pytest.raises(ConfigError, match=r"^n_clusters 20 with n_jobs=1000, n_evals=1000 "
                       r"needs about 0\.6 GiB of memory, 0\.3 GiB available; largest "
                       r"feasible: n_clusters 4$"):
        generate_workload(wc, 20)
    assert generate_workload(wc, 2).gold.shape == (2, 1000, 1000)
    monkeypatch.setattr(fastsim.detectors, "run_grid", lambda *a, **k: 1 / 0)
    one_line(capsys, ["detectors", "--clusters", "1000000", "--out", str(tmp_path / "d")],
             "--clusters 1000000 with n_jobs=300, n_evals=7 needs about 103.0 GiB of "
             "memory, 0.3 GiB available; largest feasible: --clusters 2271")
    assert not (tmp_path / "d").exists()


def test_the_stages_refuse_decisions_or_outcomes_of_another_workload():
    """run_engine(cfg, w, decide_stops(cfg, one_cluster)) read past the decisions' end into
    the schedule of the other clusters, and account() with them crashed the process."""
    from fastsim.api import account, decide_stops, run_engine
    from fastsim.config import SimConfig
    from fastsim.workload import generate_workload

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=20)
    w = generate_workload(cfg.workload, 4, seed=1)
    one = w.take([0])
    d_one, d = decide_stops(cfg, one), decide_stops(cfg, w)
    with pytest.raises(ConfigError, match=re.escape(
            "decisions.in_scope is bool (1, 20); allowed: bool (4, 20) for this workload")):
        run_engine(cfg, w, d_one)
    with pytest.raises(ConfigError, match=re.escape("outcome.start_h is float64 (1, 20)")):
        account(cfg, w, d, run_engine(cfg, one, d_one))
    with pytest.raises(ConfigError, match=r"decisions is dict; allowed: a Decisions"):
        run_engine(cfg, w, {})
    assert account(cfg, w, d, run_engine(cfg, w, d))[1].shape[1] == 4


def test_an_extract_cannot_make_the_per_job_arrays_writable_again():
    """A read-only view's flag could be set back (numpy allows it on a view of writable
    memory): an extract that did so and sorted jct_h in place reordered the per-job table
    returned beside it."""
    from fastsim.config import SimConfig

    def sort_in_place(jobs):
        x = jobs["jct_h"]
        x.flags.writeable = True
        x.sort(axis=1)
        return 0

    cfg = SimConfig.from_specs("fifo", "none", n_jobs=10)
    with pytest.raises(ConfigError, match="extract sort_in_place failed: ValueError: cannot "
                                          "set WRITEABLE flag"):
        simulate(cfg, 3, keep_jobs=True, extract=sort_in_place)


def test_a_progress_flag_may_be_numpys_bool():
    """run_sgd, run_grpo (and fastsim.sweep, reproduce, run_costaware_sweep, by the same
    check_flags) refused progress=np.False_ as 'allowed: True or False', where simulate's
    keep_jobs=np.False_ is a bool; text is still refused ("no" is truthy)."""
    from fastsim.costaware.experiment import GRPOConfig, run_grpo
    from fastsim.costaware.sgd import ProblemConfig, SGDConfig, make_problem, run_sgd

    pr = make_problem(ProblemConfig(n=32, d=2))
    sgd = SGDConfig(replications=2, strategies=("uniform",), max_steps=100)
    grpo = GRPOConfig(seeds=2, n_steps=10, n_train=16, n_test=16, eval_every=10)
    for run in (lambda progress: run_sgd(pr, sgd, progress=progress),
                lambda progress: run_grpo(grpo, progress=progress)):
        assert run(np.False_).equals(run(False))
        with pytest.raises(ConfigError, match=r"^progress='no' is invalid; allowed: True or False$"):
            run("no")


def test_workers_and_an_address_together_say_what_is_allowed(tmp_path, capsys):
    from fastsim.resources import sweep_file

    one_line(capsys, ["sweep", str(sweep_file("noise")), "--out", str(tmp_path / "o"),
                      "--backend", "dask", "--workers", "2", "--address", "tcp://127.0.0.1:8786"],
             "--workers sizes a local cluster; with --address the scheduler's own workers run "
             "the chunks; allowed: one of --workers and --address")
    assert not (tmp_path / "o").exists()


def test_a_sweeps_keep_jobs_may_be_numpys_bool(tmp_path):
    """fastsim.sweep(..., keep_jobs=np.True_) was refused as 'allowed: True or False',
    where its progress=np.True_ and simulate's keep_jobs=np.True_ are bools (check_flags);
    text is still refused ("no" is truthy)."""
    import fastsim

    toml = tmp_path / "s.toml"
    toml.write_text("clusters = 2\nchunk = 2\n[base]\nn_jobs = 10\n[axes]\nsigma = [0.0]\n")
    with pytest.raises(ConfigError, match=r"^keep_jobs='no' is invalid; allowed: True or False$"):
        fastsim.sweep(toml, tmp_path / "no", keep_jobs="no")
    assert not (tmp_path / "no").exists()
    table = fastsim.sweep(toml, tmp_path / "out", keep_jobs=np.True_)
    assert table.height > 0 and list((tmp_path / "out").rglob("jobs-*.parquet"))


def test_every_json_refusal_names_the_line_and_column_json_gives(tmp_path, capsys):
    """``JSONError`` kept json's words and its line but dropped the column: a log line of
    a hundred fields said only "Expecting ',' delimiter".  A reader that names the line
    itself (``FILE:3:``) adds the column; one that names none, both."""
    from fastsim.costaware.trl_toy import read_prompts
    from fastsim.io import JSONError, loads_json

    with pytest.raises(JSONError) as err:
        loads_json('{"a": 1,\n "b" 2}')
    assert (err.value.lineno, err.value.colno) == (2, 6)
    assert str(err.value) == "Expecting ':' delimiter at line 2, column 6"
    assert err.value.at(line=False) == " at column 6"
    with pytest.raises(JSONError) as err:  # json gives no place: none is made up
        loads_json('{"a": 1, "a": 2}')
    assert str(err.value) == "key 'a' appears twice in one object" and err.value.at() == ""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "say: ab"}\n{"prompt" "say: ab"}\n')
    with pytest.raises(ConfigError, match=r"prompts.jsonl:2: invalid JSON \(Expecting ':' "
                                          r"delimiter at column 11\); allowed: "):
        read_prompts(prompts)
    log = tmp_path / "x.jsonl"
    log.write_text('{"job_id": 1, "step": 2, "eval_loss": 0.5}\n{"job_id": 1, "step" 3}\n')
    one_line(capsys, ["replay", str(log)],
             "x.jsonl:2: not valid JSON (Expecting ':' delimiter at column 22); allowed: ")


def test_every_json_reader_refuses_a_key_twice_and_nesting_too_deep_alike(tmp_path, capsys):
    """Each JSON reader guarded its own RecursionError, or did not: docs-figures' record
    nested 5,000 deep was a RecursionError traceback; a prompt-set line, a sweep manifest
    or chunk record naming a key twice was read as its last value.  One parser
    (``fastsim.io.loads_json``) refuses both, as one ``JSONError``."""
    from fastsim import docs_figures
    from fastsim.costaware.trl_toy import read_prompts
    from fastsim.io import JSONError, loads_json
    from fastsim.sweep.store import _read_json

    deep = "[" * 5000 + "]" * 5000
    for text, why in (('{"a": 1, "a": 2}', "key 'a' appears twice in one object"),
                      (deep, "nested too deeply"), ("{", "Expecting property name")):
        with pytest.raises(JSONError, match=why):
            loads_json(text)
    said = []
    (tmp_path / docs_figures.RECORD).write_text(deep)
    assert docs_figures._read_record(tmp_path, said.append) == {}
    assert len(said) == 1 and "docs-figures.json: unreadable (nested too deeply)" in said[0]
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "say: abc ...", "prompt": "say: abc"}\n')
    with pytest.raises(ConfigError, match=r"prompts.jsonl:1: invalid JSON \(key 'prompt' "
                                          r"appears twice in one object\); allowed: each key once"):
        read_prompts(prompts)
    record = tmp_path / "chunk-0000.json"
    record.write_text('{"grid_hash": "0", "grid_hash": "1"}')
    with pytest.raises(ValueError, match="appears twice"):  # damage: its chunk is re-run
        _read_json(record)
    # an integer of 5,000 digits: json's own ValueError (Python's 4,300-digit limit) was a
    # traceback from fastsim replay and read_prompts, which take JSONError alone
    with pytest.raises(JSONError, match="a number too long to read"):
        loads_json("1" * 5000)
    prompts.write_text('{"prompt": "say: AB", "x": ' + "1" * 5000 + "}\n")
    with pytest.raises(ConfigError, match=r"prompts.jsonl:1: invalid JSON \(a number too long"):
        read_prompts(prompts)
    log = tmp_path / "big.jsonl"
    log.write_text('{"job_id": 1, "step": ' + "1" * 5000 + ', "eval_loss": 0.5}\n')
    one_line(capsys, ["replay", str(log)],
             "big.jsonl:1: not valid JSON (a number too long to read")
