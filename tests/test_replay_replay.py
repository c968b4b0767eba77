"""Replay decisions on fixtures, computed by hand, and the CLI end to end."""
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.replay.logs import EvalLog, read_logs
from fastsim.replay.policies import parse_policy, replay, summarize_replay
from fastsim.resources import example_log

FIX = Path(__file__).parent / "fixtures"
EVALS = example_log()  # the messy CSV log shipped with the package (fastsim replay --example)


def _row(res, job, policy=None):
    r = res.filter(pl.col("job_id") == job)
    if policy:
        r = r.filter(pl.col("policy") == policy)
    assert r.height == 1
    return r.row(0, named=True)


def test_evalstop_on_the_fixture_by_hand():
    res = replay(read_logs([EVALS]), ["evalstop:k=2"])
    a = _row(res, "a")
    # a: 0.50 0.62 0.66 0.55 (NaN skipped) 0.51 -> 2nd decline at step 600, keep eval 3 = step 300
    assert a["status"] == "stopped" and a["trigger_step"] == 600 and a["delivered_step"] == 300
    assert a["delivered_metric"] == 0.66 and a["final_metric"] == 0.40
    assert a["delivered_gain"] == pytest.approx(0.26)
    assert a["steps_saved"] == 200 and a["compute_saved_share"] == pytest.approx(0.25)
    assert a["gpu_h_total"] == pytest.approx(8 * 7.0) and a["gpu_h_saved"] == pytest.approx(8 * 2.0)
    assert a["n_evals"] == 7
    b = _row(res, "b")  # 0.49 -> 0.47 declines, 0.47 is a tie (reset), 0.46, 0.50: never twice
    assert b["status"] == "continued" and b["trigger_step"] is None and b["delivered_step"] == 700
    assert b["delivered_gain"] == 0.0 and b["gpu_h_saved"] == 0.0
    c = _row(res, "c")
    assert c["status"] == "too_short" and c["n_evals"] == 2


def test_scope_rlhf_leaves_other_job_types_alone():
    res = replay(read_logs([EVALS]), ["evalstop:k=1,scope=rlhf"])
    assert _row(res, "c")["status"] == "out_of_scope"
    assert _row(res, "b")["status"] == "stopped" and _row(res, "b")["trigger_step"] == 400


def test_stop_at_and_loss_plateau_by_hand():
    res = replay(read_logs([EVALS]), ["stop_at:f=0.5", "loss_plateau:w=1,tol=0.02"])
    # stop_at: planned = last logged step 800; first evaluation with step/800 >= 0.5 is 400
    s = _row(res, "a", "stop_at(f=0.5)[scope=all]")
    assert s["trigger_step"] == 400 and s["delivered_step"] == 400
    # loss a: 2.0 1.8 1.6 1.5 1.45 1.40 1.38 1.37; relative gain < 2% first at 1.40 -> 1.38 (step 700)
    lp = _row(res, "a", "loss_plateau(w=1,tol=0.02)[scope=all]")
    assert lp["trigger_step"] == 700 and lp["delivered_step"] == 700


def test_lower_is_better_metric_never_declines_when_loss_falls():
    res = replay(read_logs([EVALS], metric="loss"), ["evalstop:k=2"])
    assert set(res["status"].to_list()) == {"continued", "too_short"}


def test_trainer_state_fixture_replays():
    res = replay(read_logs([FIX / "hf_run"]), ["evalstop:k=2"])
    r = res.row(0, named=True)
    # eval_loss 2.50, 2.61, 2.63: two rises of a loss are two declines
    assert r["trigger_step"] == 15 and r["delivered_step"] == 5
    assert r["delivered_gain"] > 0  # the kept checkpoint has the lower eval loss


def test_oracle_needs_truth_and_policy_errors():
    log = read_logs([EVALS])
    with pytest.raises(ConfigError, match="hidden truth"):
        replay(log, ["oracle"])
    with pytest.raises(ConfigError):
        parse_policy("evalstop:k=0")
    with pytest.raises(ConfigError, match="'q' is not a parameter of evalstop"):
        parse_policy("evalstop:q=1")
    nolos = EvalLog(log.table.drop("loss"), "score", True)
    with pytest.raises(ConfigError, match="no 'loss' column"):
        replay(nolos, ["loss_plateau"])


def test_summary_detection_counts_against_truth():
    t = pl.DataFrame({
        "job_id": ["h1"] * 4 + ["h2"] * 4 + ["ok"] * 4,
        "step": [1, 2, 3, 4] * 3,
        "metric": [1.0, 3, 2, 1] + [1.0, 2, 3, 4] + [1.0, 2, 1.5, 1.2],
        "truth_gold": [1.0, 3, 2, 1] + [1.0, 2, 3, 2.5] + [1.0, 2, 3, 4],
        "truth_hacking": [True] * 8 + [False] * 4,
        "truth_gold_peak_step": [2] * 4 + [3] * 4 + [4] * 4,
    }).with_columns(pl.col("metric").alias("score"))
    res = replay(EvalLog(t, "score", True), ["evalstop:k=2", "oracle"])
    s = summarize_replay(res).row(0, named=True)
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (1, 1, 1, 0)
    assert s["precision"] == 0.5 and s["recall"] == 0.5 and s["fpr"] == 1.0
    assert s["delay_steps"] == 2.0  # h1 triggers at step 4, peak at step 2
    # both triggers fire at the last evaluation: detections that free nothing
    assert s["stop_recall"] == 0.0 and s["completion_share"] == 1.0
    o = summarize_replay(res).row(1, named=True)
    assert (o["tp"], o["fp"], o["fn"], o["tn"]) == (2, 0, 0, 1)
    assert o["regret_truth_gold"] == 0.0
    assert o["stop_recall"] == 1.0 and o["completion_share"] == 0.0


def test_cli_replay_prints_and_writes(tmp_path, capsys):
    out = tmp_path / "r.parquet"
    summ = tmp_path / "s.csv"
    rc = main(["replay", str(EVALS), "--policy", "evalstop:k=2", "--out", str(out),
               "--summary-out", str(summ)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "rule applied: duplicates" in text and "stopped" in text and "GPU-h saved" in text
    r = pl.read_parquet(out)
    assert r.height == 3 and set(r["job_id"]) == {"a", "b", "c"}
    assert pl.read_csv(summ)["n_stopped"].to_list() == [1]


def test_cli_replays_the_example_log_shipped_with_the_package(tmp_path, capsys):
    assert main(["replay", "--example", "--summary-only"]) == 0
    text = capsys.readouterr().out
    assert f"example log: {example_log()}\n" in text and "replay: 3 jobs, 17 evaluations" in text
    assert main(["replay", str(example_log()), "--summary-only"]) == 0
    assert capsys.readouterr().out == text.split("\n", 1)[1]  # the same replay as by path
    # the example is package data, not a test fixture: it lives inside the package
    import fastsim
    assert example_log().parent == Path(fastsim.__file__).parent / "replay"
    for argv, why in ((["replay"], "no log given"),
                      (["replay", "--example", str(example_log())], "PATH and --example together")):
        assert main([*argv, "--out", str(tmp_path / "r.csv")]) == 2
        assert why in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_cli_malformed_input_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.csv"
    rc = main(["replay", str(EVALS), str(FIX / "malformed" / "non_numeric_score.csv"),
               "--out", str(out)])
    assert rc == 2 and not out.exists() and not list(tmp_path.iterdir())
    err = capsys.readouterr().err
    assert "non_numeric_score.csv:4: field 'score'" in err


def test_cli_rejects_unknown_output_suffix_before_reading(tmp_path):
    assert main(["replay", str(EVALS), "--out", str(tmp_path / "r.xlsx")]) == 2


def test_gpus_default_fills_missing_counts(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score,time\na,1,3,0\na,2,2,1\na,3,1,2\na,4,0,3\n")
    r = replay(read_logs([p]), ["evalstop:k=2"], gpus=4).row(0, named=True)
    assert r["trigger_step"] == 3 and r["gpu_h_total"] == 12.0 and r["gpu_h_saved"] == 4.0
    r = replay(read_logs([p]), ["evalstop:k=2"]).row(0, named=True)
    assert np.isnan(r["gpu_h_saved"])


def test_cli_says_why_gpus_give_no_gpu_hours_without_times(tmp_path, capsys):
    # a trainer_state.json of a run still training has no train_runtime, so no times
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score\na,1,3\na,2,2\na,3,1\na,4,0\n")
    assert main(["replay", str(p), "--gpus", "8"]) == 0
    assert "--gpus is given, but the log has no time per evaluation" in capsys.readouterr().out
    t = tmp_path / "timed.csv"
    t.write_text("job_id,step,score,time\na,1,3,0\na,2,2,1\na,3,1,2\na,4,0,3\n")
    assert main(["replay", str(t), "--gpus", "8"]) == 0
    assert "no time per evaluation" not in capsys.readouterr().out


def test_cli_job_table_stays_aligned_for_long_policy_labels_and_metric_names(tmp_path, capsys):
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,eval_accuracy,loss\njob_a,1,3,2\njob_a,2,2,1.5\njob_a,3,1,1.4\n")
    assert main(["replay", str(p), "--metric", "eval_accuracy",
                 "--policy", "loss_plateau:w=1,tol=0.01", "--policy", "evalstop:k=1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("policy "))
    col = lines[head].index("job_id")
    assert [ln.index("job_a") for ln in lines[head + 1:head + 3]] == [col, col]
    assert "kept eval_accuracy" in lines[head]  # the metric's name, not cut at 10 characters


def test_replay_api_arguments_of_the_wrong_type_are_one_line(tmp_path):
    import fastsim
    from fastsim.errors import ConfigError

    p = tmp_path / "l.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,0.4\n")
    for logs, policies, gpus in ((p, None, None), (p, 5, None), (None, "evalstop:k=1", None),
                                 (5, "evalstop:k=1", None), (p, "evalstop:k=1", 10**400)):
        with pytest.raises(ConfigError):
            fastsim.replay(logs, policies, gpus=gpus)


def test_oracle_on_a_real_log_lists_every_policy_that_runs_there():
    from fastsim import registry as R

    with pytest.raises(ConfigError, match="needs hidden truth") as exc:
        replay(read_logs([EVALS]), ["oracle"])
    for d in R.policies():  # it named five of the eleven built-ins, not the online detectors
        assert (d.name in str(exc.value)) != d.uses_hidden_truth or d.name == "oracle"
