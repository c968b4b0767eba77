"""Replay decisions on fixtures, computed by hand, and the CLI end to end."""
import json
import math
import re
import warnings
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.replay.logs import EvalLog, read_logs
from fastsim.replay.policies import parse_policy, replay, summarize_replay
from fastsim.resources import example_log
from conftest import one_line

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
    # 8 GPUs from the job's start (time 0) to step 800 (8 h), the last 2 h saved
    assert a["gpu_h_total"] == pytest.approx(8 * 8.0) and a["gpu_h_saved"] == pytest.approx(8 * 2.0)
    assert a["n_evals"] == 7
    b = _row(res, "b")  # 0.49 -> 0.47 declines, 0.47 is a tie (reset), 0.46, 0.50: never twice
    assert b["status"] == "continued" and b["trigger_step"] is None and b["delivered_step"] == 700
    assert b["delivered_gain"] == 0.0 and b["gpu_h_saved"] == 0.0
    c = _row(res, "c")
    assert c["status"] == "too_short" and c["n_evals"] == 2


# the tutorial's run_a: peaks at step 3, then declines to the end of its log (step 6)
RUN_A = [0.50, 0.58, 0.62, 0.60, 0.57, 0.55]


def _run_a_log(tmp_path, extra_rows=()):
    rows = ["job_id,step,score,loss,gpus,time"]
    rows += [f"run_a,{s},{v},1.0,8,{s}" for s, v in enumerate(RUN_A, 1)]
    rows += [f"run_a,{s},,1.0,8,{s}" for s in extra_rows]  # training logged, no evaluation
    p = tmp_path / "evals.csv"
    p.write_text("\n".join(rows) + "\n")
    return p


def test_a_trigger_at_completion_is_a_detection_but_not_a_stop(tmp_path, capsys):
    """EvalStop(k=3)'s third decline is run_a's last logged step: the run is over, so the
    stop frees no step and no GPU-hour; it is reported as such, not as a stop."""
    log = _run_a_log(tmp_path)
    res = replay(read_logs([log]), ["evalstop:k=2", "evalstop:k=3", "deprioritize:k=2",
                                    "deprioritize:k=3"])
    k2, k3 = _row(res, "run_a", "evalstop(k=2)[scope=all]"), _row(res, "run_a", "evalstop(k=3)[scope=all]")
    assert (k2["status"], k2["stopped"], k2["detected"]) == ("stopped", True, True)
    assert k2["trigger_step"] == 5 and k2["steps_saved"] == 1 and k2["gpu_h_saved"] == 8.0
    assert (k3["status"], k3["stopped"], k3["detected"]) == ("triggered_at_completion", False, True)
    assert k3["trigger_step"] == 6 and k3["delivered_step"] == 3  # still keeps the peak
    assert k3["steps_saved"] == 0 and k3["compute_saved_share"] == 0.0 and k3["gpu_h_saved"] == 0.0
    # a demotion at completion has nothing left to demote: the same status
    assert _row(res, "run_a", "deprioritize(k=2)[scope=all]")["status"] == "demoted"
    d3 = _row(res, "run_a", "deprioritize(k=3)[scope=all]")
    assert (d3["status"], d3["detected"], d3["trigger_step"]) == ("triggered_at_completion", True, 6)
    s = {r["policy"]: r for r in summarize_replay(res).iter_rows(named=True)}
    assert (s["evalstop(k=2)[scope=all]"]["n_stopped"],
            s["evalstop(k=2)[scope=all]"]["n_triggered_at_completion"]) == (1, 0)
    assert (s["evalstop(k=3)[scope=all]"]["n_stopped"],
            s["evalstop(k=3)[scope=all]"]["n_triggered_at_completion"]) == (0, 1)
    assert (s["deprioritize(k=3)[scope=all]"]["n_demoted"],
            s["deprioritize(k=3)[scope=all]"]["n_triggered_at_completion"]) == (0, 1)
    assert main(["replay", str(log), "--policy", "evalstop:k=3", "--policy", "deprioritize:k=2"]) == 0
    text = capsys.readouterr().out
    assert "run_a                  triggered_at_completion        6        3" in text
    assert "evalstop(k=3)[scope=all]     jobs    1  stopped    0  demoted   0  at completion   1" in text
    assert "deprioritize(k=2)[scope=all] jobs    1  stopped    0  demoted   1  at completion   0" in text


def test_a_trigger_at_the_last_evaluation_with_training_logged_after_it_is_a_stop(tmp_path):
    """Completion is the log's last step, not its last evaluation: loss-only rows after the
    trigger are steps the stop saves."""
    res = replay(read_logs([_run_a_log(tmp_path, extra_rows=(7, 8))]), ["evalstop:k=3"])
    r = _row(res, "run_a")
    assert (r["status"], r["stopped"], r["detected"]) == ("stopped", True, True)
    assert r["trigger_step"] == 6 and r["final_step"] == 8
    assert r["steps_saved"] == 2 and r["gpu_h_saved"] == 16.0
    s = summarize_replay(res).row(0, named=True)
    assert (s["n_stopped"], s["n_triggered_at_completion"]) == (1, 0)


def test_the_tutorials_replay_output_is_as_printed(tmp_path, capsys, monkeypatch):
    """docs/tutorial.md shows run_a's trigger at completion as printed; it must not drift."""
    text = (Path(__file__).parents[1] / "docs" / "tutorial.md").read_text()
    cmd = "$ fastsim replay evals.csv --policy evalstop:k=2 --policy evalstop:k=3\n"
    shown = text.split(cmd, 1)[1].split("```", 1)[0]
    rows = ["job_id,step,score"] + [f"run_a,{s},{v}" for s, v in enumerate(RUN_A, 1)]
    rows += [f"run_b,{s},{v}" for s, v in enumerate([0.40, 0.47, 0.52, 0.55, 0.57, 0.58], 1)]
    (tmp_path / "evals.csv").write_text("\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    assert main(cmd[2:].split()[1:]) == 0
    assert capsys.readouterr().out == shown


def test_each_job_prints_on_one_line_under_its_whole_id(tmp_path, capsys):
    """Job ids were cut to 22 characters, so two runs of one day printed as one job, and
    a newline in an id (a quoted CSV field) broke its row in two, an escape sequence
    reaching the terminal: each id is now printed whole, its control characters escaped,
    and its backslashes, so an id holding a backslash and n is not the newline's."""
    log = tmp_path / "ids.csv"
    ids = ['"a\nb"', "a\\nb", '"\x1b[31mred"', "experiment-2026-12-07-run-1",
           "experiment-2026-12-07-run-2"]
    log.write_text("job_id,step,score\n" + "".join(f"{j},{s},{x}\n" for j in ids
                                                   for s, x in ((1, 0.5), (2, 0.4))))
    assert main(["replay", str(log), "--policy", "evalstop:k=1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines()
            if line.startswith("evalstop(k=1)[scope=all]") and "jobs" not in line]
    assert [line.split()[1] for line in rows] == [r"\x1b[31mred", r"a\nb", r"a\\nb",
                                                  "experiment-2026-12-07-run-1",
                                                  "experiment-2026-12-07-run-2"]
    assert all("\x1b" not in line for line in rows)


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
    assert (s["n_stopped"], s["n_triggered_at_completion"]) == (0, 2)
    assert set(res.filter(pl.col("detected") & pl.col("policy").str.starts_with("evalstop"))
               ["status"]) == {"triggered_at_completion"}
    o = summarize_replay(res).row(1, named=True)
    assert (o["tp"], o["fp"], o["fn"], o["tn"]) == (2, 0, 0, 1)
    assert o["regret_truth_gold"] == 0.0
    assert o["stop_recall"] == 1.0 and o["completion_share"] == 0.0
    assert (o["n_stopped"], o["n_triggered_at_completion"]) == (2, 0)


def test_stop_fpr_counts_healthy_jobs_stopped_before_completion(capsys):
    """Of three healthy jobs, evalstop(k=2) stops one at step 3 of 5 (it frees steps 4-5),
    triggers on one at its last step (frees nothing) and spares one: FPR 2/3, stop FPR
    1/3, as the simulator's ``fp_freed / (fp + tn)``."""
    from fastsim.replay.cli import _print_summary

    t = pl.DataFrame({
        "job_id": ["early"] * 5 + ["last"] * 5 + ["ok"] * 5 + ["h"] * 5,
        "step": [1, 2, 3, 4, 5] * 4,
        "metric": [3.0, 2, 1, 4, 5] + [3.0, 2, 2, 1, 0.5] + [1.0, 2, 3, 4, 5]
                  + [1.0, 3, 2, 1, 0.5],
        "truth_gold": [1.0, 2, 3, 4, 5] * 3 + [1.0, 3, 2, 1, 0.5],
        "truth_hacking": [False] * 15 + [True] * 5,
        "truth_gold_peak_step": [5] * 15 + [2] * 5,
    }).with_columns(pl.col("metric").alias("score"))
    res = replay(EvalLog(t, "score", True), ["evalstop:k=2"])
    assert [_row(res, j)["status"] for j in ("early", "last", "ok", "h")] == \
        ["stopped", "triggered_at_completion", "continued", "stopped"]
    summ = summarize_replay(res)
    s = summ.row(0, named=True)
    assert (s["tp"], s["fp"], s["fn"], s["tn"]) == (1, 2, 0, 1)
    assert s["fpr"] == pytest.approx(2 / 3) and s["stop_fpr"] == pytest.approx(1 / 3)
    assert s["stop_fpr_lo"] < 1 / 3 < s["stop_fpr_hi"]
    _print_summary(summ)
    assert "stop FPR 33.3%" in capsys.readouterr().out


def test_the_regret_interval_stays_at_zero_and_above():
    """Regrets 0, 0.5 and 2 over three jobs gave a t interval reaching below 0: a kept
    checkpoint's gold is never above the best, and the interval is cut there."""
    t = pl.DataFrame({
        "job_id": ["h1"] * 4 + ["h2"] * 4 + ["ok"] * 4, "step": [1, 2, 3, 4] * 3,
        "metric": [1.0, 3, 2, 1] + [1.0, 2, 3, 4] + [1.0, 2, 1.5, 1.2],
        "truth_gold": [1.0, 3, 2, 1] + [1.0, 2, 3, 2.5] + [1.0, 2, 3, 4],
        "truth_hacking": [True] * 8 + [False] * 4,
        "truth_gold_peak_step": [2] * 4 + [3] * 4 + [4] * 4,
    }).with_columns(pl.col("metric").alias("score"))
    res = replay(EvalLog(t, "score", True), ["evalstop:k=2"])
    assert sorted(res["regret_truth_gold"].to_list()) == [0.0, 0.5, 2.0]
    s = summarize_replay(res).row(0, named=True)
    assert s["regret_truth_gold_lo"] == 0.0 < s["regret_truth_gold"] < s["regret_truth_gold_hi"]


def test_the_oracle_at_a_gold_peak_on_the_last_evaluation_frees_nothing():
    t = pl.DataFrame({"job_id": ["h"] * 3, "step": [1, 2, 3], "metric": [1.0, 2, 3],
                      "truth_gold": [1.0, 2, 3], "truth_hacking": [True] * 3,
                      "truth_gold_peak_step": [3] * 3}).with_columns(pl.col("metric").alias("score"))
    res = replay(EvalLog(t, "score", True), ["oracle"])
    r = _row(res, "h")
    assert (r["status"], r["stopped"], r["detected"], r["steps_saved"]) == \
        ("triggered_at_completion", False, True, 0)
    s = summarize_replay(res).row(0, named=True)
    assert s["recall"] == 1.0 and s["stop_recall"] == 0.0 and s["completion_share"] == 1.0


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
    assert f"example log: {example_log()}\n" in text and "replay: 3 jobs, 16 evaluations in 17 rows" in text
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


def test_cli_summary_says_when_its_gpu_hours_cover_some_jobs_only(tmp_path, capsys):
    """A finished run beside one still training (no train_runtime, so no times): the summary
    printed the finished run's GPU-hours as the total, saying nothing of the other job."""
    t = tmp_path / "mixed.csv"
    t.write_text("job_id,step,score,time\na,1,3,0\na,2,2,1\na,3,1,2\na,4,0,3\n"
                 "b,1,3,\nb,2,2,\nb,3,1,\nb,4,0,\n")
    assert main(["replay", str(t), "--gpus", "8", "--summary-only"]) == 0
    assert "GPU-h saved 8 of 24 (over 1 of 2 jobs; the others have no time per evaluation" \
        in capsys.readouterr().out


def test_gpu_hours_count_from_the_job_start_not_from_its_first_evaluation(tmp_path, capsys):
    """A trainer_state.json of 8 GPUs, 3600 s of training and evaluations at steps 100-600
    printed "GPU-h saved 1.333 of 6.667": the hour held 8 GPU-hours, but the total counted
    only from the first evaluation (step 100), so the saved share read 20% beside "compute
    saved 16.7%".  Step 0 is time 0: the first evaluation's interval starts there."""
    scores = [0.5, 0.6, 0.7, 0.65, 0.6, 0.55]  # evalstop:k=2 triggers at step 500
    hist = [{"eval_accuracy": v, "step": 100 * i} for i, v in enumerate(scores, 1)]
    state = {"max_steps": 600, "global_step": 600,
             "log_history": hist + [{"train_runtime": 3600.0, "step": 600}]}
    p = tmp_path / "run" / "trainer_state.json"
    p.parent.mkdir()
    p.write_text(json.dumps(state, indent=2))
    r = _row(replay(read_logs([p]), ["evalstop:k=2"], gpus=8), "run")
    assert r["trigger_step"] == 500 and r["compute_saved_share"] == pytest.approx(1 / 6)
    assert r["gpu_h_total"] == pytest.approx(8.0) and r["gpu_h_saved"] == pytest.approx(8 / 6)
    assert main(["replay", str(p), "--gpus", "8", "--summary-only"]) == 0
    assert "compute saved 16.7%" in (out := capsys.readouterr().out)
    assert "GPU-h saved 1.333 of 8" in out


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
                                 (5, "evalstop:k=1", None), (p, "evalstop:k=1", 10**400),
                                 (p, "evalstop:k=1", np.bool_(True)),
                                 (p, "evalstop:k=1", np.float64("nan"))):
        with pytest.raises(ConfigError):
            fastsim.replay(logs, policies, gpus=gpus)
    # numpy's counts are counts: np.int64(8) was refused as 'allowed: a positive finite GPU count'
    by_int = fastsim.replay(p, "evalstop:k=1", gpus=8)
    for gpus in (np.int64(8), np.float32(8.0)):
        assert fastsim.replay(p, "evalstop:k=1", gpus=gpus).equals(by_int)


def test_oracle_on_a_real_log_lists_every_policy_that_runs_there():
    from fastsim import registry as R

    with pytest.raises(ConfigError, match="needs hidden truth") as exc:
        replay(read_logs([EVALS]), ["oracle"])
    for d in R.policies():  # it named five of the eleven built-ins, not the online detectors
        assert (d.name in str(exc.value)) != d.uses_hidden_truth or d.name == "oracle"


def test_the_step_columns_are_integers_when_nothing_triggers(tmp_path, capsys):
    """trigger_step (and a trace set's truth_gold_peak_step) are integer columns, null
    where there is none.  When no job triggered ('--policy none', or a policy that never
    fires), the column was typed by its rows, Null, and --out wrote a Parquet column of
    type null: a results table that could not be stacked with another run's (polars:
    type Int64 incompatible with Null)."""
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.7\n")
    out = tmp_path / "none.parquet"
    assert main(["replay", str(log), "--policy", "none", "--summary-only", "--out", str(out)]) == 0
    capsys.readouterr()
    quiet = pl.read_parquet(out)
    assert quiet.schema["trigger_step"] == pl.Int64 and quiet["trigger_step"].null_count() == 1
    fired = replay(read_logs([example_log()]), ["evalstop:k=2"])
    assert pl.concat([quiet, fired]).schema["trigger_step"] == pl.Int64


def test_kept_vs_final_says_how_many_triggers_kept_an_unscored_step(tmp_path, capsys):
    """loss_plateau reads losses, so it can keep a loss-only step whose score is unknown:
    the mean kept-vs-final is over the scored ones and the summary says so (it printed a
    bare 'n/a', or a mean that silently left such jobs out)."""
    rows = ["job_id,step,score,loss"]
    for j, gap in (("a", True), ("b", True), ("c", False)):
        for i, step in enumerate(range(10, 80, 10)):
            score = "" if gap and i % 2 else f"{0.5 + 0.02 * i - 0.04 * max(0, i - 3):.2f}"
            rows.append(f"{j},{step},{score},{1.0 if i == 0 else 0.9}")
    p = tmp_path / "log.csv"
    p.write_text("\n".join(rows) + "\n")
    res = replay(read_logs([p]), ["loss_plateau"])
    unscored = int(res["delivered_metric"].is_nan().sum())
    assert unscored >= 1 and res["detected"].sum() > unscored
    s = summarize_replay(res).row(0, named=True)
    assert s["n_detected"] == int(res["detected"].sum())
    assert s["n_delivered_gain_known"] == s["n_detected"] - unscored
    known = res.filter(pl.col("detected") & pl.col("delivered_gain").is_not_nan())
    assert s["delivered_gain"] == pytest.approx(known["delivered_gain"].mean())
    assert main(["replay", str(p), "--policy", "loss_plateau", "--summary-only"]) == 0
    assert (f"over {s['n_delivered_gain_known']} of {s['n_detected']} triggers "
            f"({unscored} kept an unscored step)") in capsys.readouterr().out


def test_the_header_counts_evaluations_not_rows(tmp_path, capsys):
    """A row may hold a training loss only (loss_plateau reads it): the header counted
    every row as an evaluation; it counts the scored ones and says how many rows there are."""
    p = tmp_path / "log.csv"
    p.write_text("job_id,step,score,loss\na,10,0.5,1.0\na,20,,0.9\na,30,0.6,0.8\n"
                 "b,10,0.4,1.0\nb,20,0.5,0.9\n")
    assert main(["replay", str(p), "--summary-only"]) == 0
    assert "replay: 2 jobs, 4 evaluations in 5 rows, metric score" in capsys.readouterr().out
    p.write_text("job_id,step,score\na,10,0.5\na,20,0.6\n")
    assert main(["replay", str(p), "--summary-only"]) == 0
    assert "replay: 1 job, 2 evaluations, metric score" in capsys.readouterr().out


def test_a_policy_given_twice_is_replayed_once(capsys):
    """--policy evalstop:k=2 --policy evalstop:k=2 printed every job's row twice, and the
    summary said 'jobs 6' of the example's 3 jobs."""
    assert main(["replay", "--example", "--policy", "evalstop:k=2", "--policy", "evalstop",
                 "--policy", "evalstop:k=2,scope=all"]) == 0
    out = capsys.readouterr().out
    assert out.count("evalstop(k=2)[scope=all]     a ") == 1
    summary = [x for x in out.splitlines() if " jobs " in x]
    assert len(summary) == 1 and "jobs    3" in summary[0], summary
    res = replay(read_logs([example_log()]), ["evalstop:k=2", "evalstop:k=2"])
    assert res.height == 3


@pytest.mark.parametrize("gold,line", [(["", "", "", ""], 2), (["0.1", "0.5", "", "0.2"], 4),
                                       (["0.1", "0.5", "nan", "0.2"], 4)])
def test_a_missing_truth_gold_is_refused_by_line(tmp_path, capsys, gold, line):
    """The oracle's argmax over a missing truth_gold stopped at the NaN row (step 3 of
    0.1, 0.5, blank, 0.2; step 1 when all blank), exit 0: every comparison against it
    was wrong."""
    p = tmp_path / "og.csv"
    p.write_text("job_id,step,score,truth_hacking,truth_gold\n" + "".join(
        f"a,{s},0.5,true,{g}\n" for s, g in zip([1, 2, 3, 4], gold)))
    out = tmp_path / "r.csv"
    one_line(capsys, ["replay", str(p), "--policy", "oracle", "--out", str(out)],
             f"og.csv:{line}: field 'truth_gold': missing; allowed: a finite number")
    assert not out.exists()


def test_a_gold_peak_step_the_job_never_logged_is_refused_by_line(tmp_path, capsys):
    """truth_gold_peak_step 99999 in a job logging steps 1-4 was copied into --out and
    scored every detection delay against it, exit 0."""
    p = tmp_path / "pk.csv"
    p.write_text("job_id,step,score,truth_hacking,truth_gold,truth_gold_peak_step\n"
                 "a,1,0.5,true,0.1,99999\na,2,0.6,true,0.5,99999\na,3,0.7,true,0.3,99999\n")
    out = tmp_path / "r.csv"
    one_line(capsys, ["replay", str(p), "--policy", "oracle", "--out", str(out)],
             "pk.csv:2: field 'truth_gold_peak_step': 99999 is not a step job 'a' logs")
    assert not out.exists()


def test_a_job_type_given_on_a_later_row_is_the_jobs(tmp_path):
    """A job whose first row left job_type empty read as untyped, so scope=rlhf replayed a
    LoRA job."""
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score,job_type\na,1,0.5,\na,2,0.4,lora\na,3,0.3,\n")
    res = replay(read_logs([p]), ["evalstop:k=1,scope=rlhf"])
    assert _row(res, "a")["status"] == "out_of_scope"


@pytest.mark.parametrize("gpus,time", [("", "1"), ("8", "")])
def test_a_missing_gpu_count_or_time_leaves_both_gpu_hours_unknown(tmp_path, gpus, time):
    """A blank gpus (or time) cell made gpu_h_total NaN while gpu_h_saved was 8.0: the
    saved part of an unknown total."""
    p = tmp_path / "g.csv"
    p.write_text("job_id,step,score,time,gpus\na,1,0.5,0,8\n"
                 f"a,2,0.6,{time},{gpus}\na,3,0.5,2,8\na,4,0.4,3,8\na,5,0.3,4,8\n")
    r = _row(replay(read_logs([p]), ["evalstop:k=2"]), "a")
    assert r["status"] == "stopped" and r["steps_saved"] == 1
    assert np.isnan(r["gpu_h_total"]) and np.isnan(r["gpu_h_saved"])
    if not gpus:  # --gpus fills the blank: both known
        r = _row(replay(read_logs([p]), ["evalstop:k=2"], gpus=8), "a")
        assert (r["gpu_h_total"], r["gpu_h_saved"]) == (32.0, 8.0)


def test_an_infinite_kept_and_final_score_gains_nothing_without_a_warning(tmp_path):
    """inf kept against inf final printed 'RuntimeWarning: invalid value encountered in
    scalar subtract' and gave a NaN gain, counted as an unscored kept step."""
    p = tmp_path / "inf.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,inf\na,3,0.4\na,4,inf\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = replay(read_logs([p]), ["evalstop:k=1"])
    r = _row(res, "a")
    assert (r["delivered_metric"], r["final_metric"], r["delivered_gain"]) == (np.inf, np.inf, 0)


def test_one_trigger_is_counted_in_the_singular(tmp_path, capsys):
    """One job's one trigger, kept at an infinite score, read 'over 0 of 1 triggers'."""
    p = tmp_path / "inf.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,inf\na,3,0.4\na,4,0.3\n")
    assert main(["replay", str(p), "--policy", "evalstop:k=1", "--summary-only"]) == 0
    assert "over 0 of 1 trigger (1 had an infinite gain)" in capsys.readouterr().out


def test_an_infinite_gain_is_not_called_an_unscored_kept_step(tmp_path, capsys):
    """A trigger kept at an inf score against a finite final one has an infinite gain,
    which the mean leaves out; the summary said it 'kept an unscored step'."""
    p = tmp_path / "inf.csv"
    p.write_text("job_id,step,score,loss\na,1,0.5,1\na,2,inf,1\na,3,0.4,1\na,4,0.3,1\n"
                 "b,1,0.5,1\nb,2,0.6,1\nb,3,0.4,1\nb,4,0.3,1\n")
    assert main(["replay", str(p), "--policy", "evalstop:k=1", "--summary-only"]) == 0
    out = capsys.readouterr().out
    assert "kept-vs-final 0.3 (no interval) over 1 of 2 triggers (1 had an infinite gain)" in out
    s = summarize_replay(replay(read_logs([p]), ["evalstop:k=1"])).row(0, named=True)
    assert (s["n_detected"], s["n_delivered_gain_known"], s["n_delivered_gain_infinite"]) == \
        (2, 1, 1)


# times at most 1e5 h (a later one reads as a clock time, refused on its own)
@pytest.mark.parametrize("times,gpus", [(("1", "1e5", "1e5"), "1e304"),
                                        (("0", "1", "2"), "1e308"),
                                        (("0", "9e4", "9e4"), "1.9e303")])
def test_gpu_hours_beyond_a_float_are_refused_in_one_line(tmp_path, capsys, times, gpus):
    # finite times and GPU counts whose products overflow: inf GPU-hours were written to
    # --out and printed, after numpy's overflow warnings on stderr
    log = tmp_path / "log.csv"
    log.write_text("job_id,step,score,time\n" + "".join(
        f"{j},{s},{v},{t}\n" for j in "ab" for s, v, t in zip((1, 2, 3), (0.5, 0.6, 0.4), times)))
    out = tmp_path / "out.csv"
    one_line(capsys, ["replay", str(log), "--gpus", gpus, "--out", str(out)],
             "beyond a float's range")
    assert not out.exists()


def _seed_log(tmp_path, copies: int) -> Path:
    """A trace-shaped log of 4 healthy seeds, ``copies`` runs each that are copies of one
    (runs of a seed perfectly correlated): seeds 0 and 1 fall twice at the end (EvalStop
    k=2 fires, a false positive that keeps a worse checkpoint), 2 and 3 keep rising."""
    fall, rise = [1.0, 2.0, 3.0, 2.5, 2.4, 2.4], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    rows = []
    for seed, curve in enumerate([fall, [1.0, 2.0, 3.0, 2.8, 2.6, 2.6], rise, rise]):
        for c in range(copies):
            rows += [{"job_id": f"s{seed}_{c}", "step": 10 * (i + 1), "score": v, "seed": seed,
                      "truth_gold": rise[i], "truth_hacking": False, "truth_gold_peak_step": 60}
                     for i, v in enumerate(curve)]
    path = tmp_path / f"traces_{copies}.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return path


def test_a_trace_sets_summary_resamples_seeds_not_the_jobs_that_share_them(tmp_path, capsys):
    """The runs of one toy-RLHF seed share their draws: 24 jobs that are 6 copies of each of
    4 seeds' jobs carry no more evidence than the 4, and get their intervals.  Counted as
    24 independent jobs, FPR 50% read [29.1, 70.9]."""
    summ = {}
    for copies in (1, 6):
        res = replay(read_logs([_seed_log(tmp_path, copies)]), ["evalstop:k=2"])
        summ[copies] = summarize_replay(res).row(0, named=True)
    for m in ("fpr", "compute_saved_share", "regret_truth_gold", "delivered_gain"):
        for end in ("", "_lo", "_hi"):
            assert summ[6][m + end] == pytest.approx(summ[1][m + end]), m + end
    assert summ[6]["fpr_lo"] < 0.2 and summ[6]["fpr_hi"] > 0.8
    assert summ[6]["n_seeds"] == summ[1]["n_seeds"] == 4 and summ[6]["n_jobs"] == 24
    main(["replay", str(_seed_log(tmp_path, 6)), "--summary-only", "--policy", "evalstop:k=2"])
    assert "resample the 4 seeds" in capsys.readouterr().out


def test_the_summary_line_counts_seeds_and_jobs_without_one_apart(tmp_path, capsys):
    """A log of one seed's 6 jobs and 6 jobs without a seed said 'resample the 7 seeds'."""
    log = pl.read_parquet(_seed_log(tmp_path, 6)).filter(pl.col("seed") < 2)
    log = log.with_columns(pl.when(pl.col("seed") == 1).then(None).otherwise(pl.col("seed"))
                           .alias("seed"))
    log.write_parquet(tmp_path / "mixed.parquet")
    main(["replay", str(tmp_path / "mixed.parquet"), "--summary-only", "--policy",
          "evalstop:k=2"])
    assert ("rates and means resample the 1 seed (jobs of a seed share their draws) and the "
            "6 jobs without one, each its own):") in capsys.readouterr().out


def test_rates_from_one_seed_claim_no_interval(tmp_path):
    """Jobs that all share one seed are one replication: its rates had the Clopper-Pearson
    interval of its jobs' counts as if they were independent (6 copies of seed 0: FPR
    100% [54.1%, 100%]); every rate now has none, as its compute saved and means had."""
    log = pl.read_parquet(_seed_log(tmp_path, 6)).filter(pl.col("seed") == 0)
    log.write_parquet(tmp_path / "one.parquet")
    row = summarize_replay(replay(read_logs([tmp_path / "one.parquet"]), ["evalstop:k=2"])
                           ).row(0, named=True)
    assert row["n_seeds"] == 1 and row["fpr"] == 1.0
    for m in ("precision", "recall", "fpr", "stop_recall", "stop_fpr", "completion_share",
              "compute_saved_share", "delivered_gain", "regret_truth_gold"):
        assert math.isnan(row[m + "_lo"]) and math.isnan(row[m + "_hi"]), m


def test_seeds_written_as_whole_floats_are_the_integer_seeds(tmp_path):
    """pandas writes an integer column with a missing value as floats (1.0, NaN): such a
    trace set's seeds were refused as 'a column of type Float64'; they are the integers,
    and NaN is an empty seed."""
    path = _seed_log(tmp_path, 2)
    t = pl.read_parquet(path)
    floats = tmp_path / "floats.parquet"
    t.with_columns(seed=pl.when(pl.col("job_id") == "s3_1").then(None)
                   .otherwise(pl.col("seed")).cast(pl.Float64).fill_null(np.nan)
                   ).write_parquet(floats)
    ints = tmp_path / "ints.parquet"
    t.with_columns(seed=pl.when(pl.col("job_id") == "s3_1").then(None)
                   .otherwise(pl.col("seed"))).write_parquet(ints)
    got, want = (summarize_replay(replay(read_logs([p]), ["evalstop:k=2"]))
                 for p in (floats, ints))
    assert got.equals(want) and got["n_seeds"][0] == 5


def test_a_log_built_by_hand_may_say_higher_is_better_with_numpys_bool():
    """np.True_ was refused as 'log.higher_is_better=np.True_; allowed: True or False',
    where read_logs(higher_is_better=np.True_) takes it, as replay did before it checked."""
    t = pl.DataFrame({"job_id": ["a"] * 5, "step": [1, 2, 3, 4, 5],
                      "metric": [.5, .6, .5, .4, .3]}).with_columns(score=pl.col("metric"))
    got = replay(EvalLog(t, "metric", np.True_), ["evalstop:k=2"])
    assert got.equals(replay(EvalLog(t, "metric", True), ["evalstop:k=2"]))
    with pytest.raises(ConfigError, match=r"log.higher_is_better='no'; allowed: True or False"):
        replay(EvalLog(t, "metric", "no"), ["evalstop:k=2"])


def test_a_log_built_by_hand_with_numbered_jobs_and_seeds_is_summarised():
    """Job ids and seeds as integers, one job without a seed (its own replication): the
    summary was a Polars InvalidOperationError ('arithmetic on dtypes str and i64')."""
    t = pl.DataFrame({"job_id": [1, 1, 1, 2, 2, 2, 3, 3, 3], "step": [1, 2, 3] * 3,
                      "score": [1.0, 0.5, 0.2, 1.0, 2.0, 3.0, 1.0, 0.9, 0.8],
                      "seed": [0, 0, 0, 0, 0, 0, None, None, None]})
    res = replay(EvalLog(t.with_columns(metric=pl.col("score")), "score", True),
                 ["evalstop:k=2"])
    s = summarize_replay(res).row(0, named=True)
    assert (s["n_jobs"], s["n_seeds"], s["n_stopped"]) == (3, 2, 0)


@pytest.mark.parametrize("seeds, needle", [
    ([1.0] * 3 + [1.5] * 3, "log.parquet:4: field 'seed': '1.5' is a number that is not an "
     "integer (below 2^63 in size); allowed: an integer or a text label"),
    ([1e20] * 6, "log.parquet:1: field 'seed': '1e+20' is a number that is not an integer"),
    ([0, 0, 0, 1, 1, 1], "field 'seed': job 'a' has '1' here and '0' on an earlier row"),
])
def test_a_seed_that_is_no_label_or_not_one_per_job_is_one_line(tmp_path, capsys, seeds, needle):
    path = tmp_path / "log.parquet"
    pl.DataFrame({"job_id": ["a"] * 6, "step": list(range(1, 7)), "score": [1.0, 2, 3, 2, 1, 0],
                  "seed": seeds}).write_parquet(path)
    one_line(capsys, ["replay", str(path), "--policy", "evalstop:k=2"], needle)


@pytest.mark.parametrize("seed", ["true", "[1]", "{\"a\": 1}"])
def test_a_jsonl_seed_that_is_no_label_is_one_line(tmp_path, capsys, seed):
    """A JSONL seed of true or a list was read as its text ('true', '[1]'), where
    docs/replay.md refuses it and a Parquet column of them is refused."""
    path = tmp_path / "log.jsonl"
    path.write_text("".join(f'{{"job_id": "a", "step": {i}, "score": {v}, "seed": {seed}}}\n'
                            for i, v in enumerate([1.0, 2, 3, 2, 1, 0], 1)))
    one_line(capsys, ["replay", str(path), "--policy", "evalstop:k=2"],
             f"log.jsonl:1: field 'seed': {seed}; allowed: an integer or a text label")


def _two_seed_log(tmp_path, fmt: str, seeds: list) -> Path:
    """Jobs a and b over six steps, job a's seed ``seeds[0]``, b's ``seeds[1]``."""
    rows = [{"job_id": j, "step": i, "score": float(i % 4), "seed": s}
            for j, s in zip("ab", seeds) for i in range(1, 7)]
    path = tmp_path / f"log.{fmt}"
    if fmt == "parquet":
        pl.DataFrame(rows, schema_overrides={"seed": pl.Float64}).write_parquet(path)
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text("job_id,step,score,seed\n" + "".join(
            f"{r['job_id']},{r['step']},{r['score']},{r['seed']!r}\n" for r in rows))
    return path


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_an_integral_float_seed_is_that_integer_in_every_format(tmp_path, fmt):
    """pandas writes an integer column with a gap as floats: 1.0 in a Parquet column was
    the seed 1, but "1.0" in a CSV cell (and 1.0 in JSONL) was refused."""
    res = replay(read_logs([_two_seed_log(tmp_path, fmt, [1.0, 1])]), ["evalstop:k=2"])
    assert res["seed"].to_list() == ["1", "1"]


@pytest.mark.parametrize("fmt", ["csv", "parquet", "jsonl"])
def test_a_non_integral_seed_is_refused_in_every_format_naming_its_line(tmp_path, capsys, fmt):
    path = _two_seed_log(tmp_path, fmt, [1.0, 2.5])
    one_line(capsys, ["replay", str(path), "--policy", "evalstop:k=2"],
             f"log.{fmt}:{7 + (fmt == 'csv')}: field 'seed': '2.5' is a number that is not "
             "an integer")


@pytest.mark.parametrize("seed", ["inf", "1.5", "1e20"])
def test_a_csv_seed_written_as_a_non_integer_number_is_one_line(tmp_path, capsys, seed):
    path = tmp_path / "log.csv"
    path.write_text("job_id,step,score,seed\n" + "".join(
        f"a,{i},{v},{seed}\n" for i, v in enumerate([1.0, 2, 3, 2, 1, 0], 1)))
    one_line(capsys, ["replay", str(path), "--policy", "evalstop:k=2"],
             f"log.csv:2: field 'seed': '{seed}' is a number that is not an integer")


@pytest.mark.parametrize("gap", ["NA", "null", "NaN", "none", "n/a"])
def test_a_csv_seed_spelled_as_missing_is_no_seed(tmp_path, gap):
    """R writes a gap as NA: two jobs without a seed were one seed 'NA', one replication."""
    curve = [1.0, 2, 3, 2, 1, 0]
    (tmp_path / "a.csv").write_text("job_id,step,score,seed\n" + "".join(
        f"{j},{i},{v},{gap}\n" for j in "ab" for i, v in enumerate(curve, 1)))
    res = replay(read_logs([tmp_path / "a.csv"]), ["evalstop:k=2"])
    assert res["seed"].to_list() == [None, None]
    assert summarize_replay(res)["n_seeds"].to_list() == [2]


def test_a_seed_written_01_in_csv_is_the_seed_1_of_another_file(tmp_path):
    """'01' and '+1' in a CSV, where every cell is text, were seeds apart from a Parquet
    log's 1: one seed's jobs counted as three replications."""
    curve = [1.0, 2, 3, 2, 1, 0]
    (tmp_path / "a.csv").write_text("job_id,step,score,seed\n" + "".join(
        f"{j},{i},{v},{s}\n" for j, s in (("a", "01"), ("b", "+1"))
        for i, v in enumerate(curve, 1)))
    pl.DataFrame({"job_id": ["c"] * 6, "step": list(range(1, 7)), "score": curve,
                  "seed": [1] * 6}).write_parquet(tmp_path / "c.parquet")
    res = replay(read_logs([tmp_path / "a.csv", tmp_path / "c.parquet"]), ["evalstop:k=2"])
    assert res["seed"].to_list() == ["1", "1", "1"]
    assert summarize_replay(res)["n_seeds"].to_list() == [1]


@pytest.mark.parametrize("seeds, needle", [
    ([1.5] * 6, "log.table column 'seed' is of type Float64; allowed: text labels or integers"),
    ([True] * 6, "log.table column 'seed' is of type Boolean"),
    (["1"] * 3 + ["2"] * 3, "log.table column 'seed': job 'a' has 2 seeds; allowed: one"),
])
def test_a_hand_built_logs_seeds_are_checked(seeds, needle):
    """An EvalLog built by hand with seeds 1.5 or True was replayed under the labels '1.5'
    and 'true' (read_logs refuses both), and a job of two seeds took its first."""
    from fastsim.replay.logs import EvalLog

    table = pl.DataFrame({"job_id": ["a"] * 6, "step": list(range(1, 7)),
                          "metric": [1.0, 2, 3, 2, 1, 0], "score": [1.0, 2, 3, 2, 1, 0],
                          "seed": seeds})
    with pytest.raises(ConfigError, match=re.escape(needle)):
        replay(EvalLog(table, "score", True), ["evalstop:k=2"])
    ok = table.with_columns(pl.lit(3).alias("seed"))  # integers are labels, as in a file
    assert replay(EvalLog(ok, "score", True), ["evalstop:k=2"])["seed"].to_list() == ["3"]


def test_summarize_replay_refuses_what_is_not_replays_rows():
    """A frame without replay's columns, or a frame of rows with truth_hacking but not the
    truth columns scored with it, was a Polars ColumnNotFoundError traceback."""
    rows = replay(read_logs([example_log()]), ["evalstop:k=2"])
    with pytest.raises(ConfigError, match=r"^summarize_replay\(\): results has no column "
                                          r"'policy'; allowed: the rows of fastsim.replay"):
        summarize_replay(pl.DataFrame({"a": [1]}))
    with pytest.raises(ConfigError, match=r"results is a polars LazyFrame"):
        summarize_replay(rows.lazy())
    with pytest.raises(ConfigError, match=r"results has no column 'regret_truth_gold'"):
        summarize_replay(rows.with_columns(truth_hacking=pl.lit(True)).drop(
            "regret_truth_gold", strict=False))
    assert summarize_replay(rows).height == 1


@pytest.mark.parametrize("change, said", [
    (lambda t: t.reverse(), "log.table row 1: job 'a' step 4 is negative or not after"),
    (lambda t: t.with_columns(step=pl.lit(1)), "row 1: job 'a' step 1 is negative"),
    (lambda t: t.with_columns(step=pl.col("step") - 10), "row 0: job 'a' step -9"),
    (lambda t: t.with_columns(score=pl.col("score").cast(pl.String)),
     "log.table column 'score' is of type String; allowed: a column of numbers"),
    (lambda t: t.drop("score"), "log.table column 'score' is missing"),
    # each kept and final value is read from it: "'NoneType' object is not subscriptable"
    (lambda t: t.drop("metric"), "log.table column 'metric' is missing"),
    # replayed as an evaluation without a step, and as a job named null
    (lambda t: t.with_columns(step=pl.when(pl.col("step") == 3).then(None)
                              .otherwise(pl.col("step"))),
     "log.table row 2: step is empty; allowed: a step on every row"),
    (lambda t: t.with_columns(job_id=pl.when(pl.col("step") == 2).then(None)
                              .otherwise(pl.col("job_id"))),
     "log.table row 1: job_id is empty; allowed: a job_id on every row"),
])
def test_replay_checks_a_log_built_by_hand(change, said):
    """An EvalLog built by hand was replayed as given: rows in reverse order decided on the
    series reversed ('continued' for a job that declines), a repeated step on two
    evaluations at once, text scores as numbers; no score column was a numpy TypeError."""
    t = pl.DataFrame({"job_id": ["a"] * 5, "step": [1, 2, 3, 4, 5],
                      "metric": [.5, .6, .5, .4, .3]}).with_columns(score=pl.col("metric"))
    assert replay(EvalLog(t, "metric", True), ["evalstop:k=2"])["status"].to_list() == ["stopped"]
    with pytest.raises(ConfigError, match=re.escape(said)):
        replay(EvalLog(change(t), "metric", True), ["evalstop:k=2"])


def test_a_first_replay_announces_its_compile_in_one_line(
        tmp_path, capsys, monkeypatch, forget_compiled):
    """The first replay on a machine compiled the stop-policy kernels for 5-15 s in
    silence (fastsim.replay in a notebook, fastsim replay); it says so once, after the
    log and the policies are checked, and not once they are cached."""
    import fastsim
    import fastsim.compile_notice

    p = tmp_path / "log.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\n")
    monkeypatch.setattr(fastsim.compile_notice, "kernels_cached", lambda *names: False)
    forget_compiled()
    with pytest.raises(ConfigError):
        fastsim.replay(p, "evalstp:k=2")
    assert capsys.readouterr().err == ""
    fastsim.replay(p, "evalstop:k=2")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiling the stop-policy kernels"), err
    fastsim.replay(p, "evalstop:k=2")  # compiled: in memory, with or without the cache
    assert capsys.readouterr().err == ""
    forget_compiled()
    monkeypatch.setattr(fastsim.compile_notice, "kernels_cached", lambda *names: True)
    fastsim.replay(p, "evalstop:k=2")
    assert capsys.readouterr().err == ""


def test_a_frame_in_memory_is_replayed_as_the_same_log_in_a_file(tmp_path):
    """fastsim.replay(df, ...) and read_logs(df) refused a frame in memory, asking the user
    to write it to a file first.  A Polars or pandas frame is read as a Parquet log is, by
    the same rules: the same rows as the file's replay; an error names the frame by its
    place and the row; a column no table holds is one line."""
    import fastsim

    df = pl.DataFrame({"job_id": ["a"] * 5 + ["b"] * 3, "step": [1, 2, 3, 4, 5, 1, 2, 3],
                       "score": [0.5, 0.6, 0.5, 0.4, 0.3, 0.2, 0.3, 0.4]})
    p = tmp_path / "log.csv"
    df.write_csv(p)
    want = fastsim.replay(p, ["evalstop:k=2", "patience:patience=2"])
    for given in (df, df.to_pandas(), [df]):
        assert fastsim.replay(given, ["evalstop:k=2", "patience:patience=2"]).equals(want)
    both = fastsim.read_logs([p, df.with_columns(pl.col("job_id") + "2")])
    assert both.table["job_id"].unique().sort().to_list() == ["a", "a2", "b", "b2"]
    bad = df.with_columns(pl.Series("step", [1, 2, -3, 4, 5, 1, 2, 3]))
    with pytest.raises(ConfigError, match=r"^DataFrame #2:3: field 'step'"):
        fastsim.read_logs([p, bad])
    odd = df.with_columns(pl.Series("score", [object()] * 8, dtype=pl.Object))
    with pytest.raises(ConfigError, match=r"^DataFrame #1: cannot be read as a table \("):
        fastsim.replay(odd, "evalstop:k=2")


def test_replay_without_a_policy_names_the_argument(tmp_path):
    """fastsim.replay("evals.csv") was Python's TypeError 'replay_logs() missing 1 required
    positional argument', naming a function the user never called."""
    import fastsim

    p = tmp_path / "log.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,0.4\n")
    with pytest.raises(ConfigError, match=r"^fastsim.replay\(\): policies is missing; allowed: "
                                          r"a policy spec \(\"evalstop:k=2\"\) or a list of them$"):
        fastsim.replay(p)
