"""Log readers: every format from committed fixtures, every mess rule, every error."""
import json
import os
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fastsim.errors import ConfigError
from fastsim.replay.logs import detect_format, read_logs
from fastsim.resources import example_log
from conftest import one_line

FIX = Path(__file__).parent / "fixtures"
EVALS = example_log()  # the messy CSV log shipped with the package (fastsim replay --example)
BAD = FIX / "malformed"


def _core(log):
    return log.table.select("job_id", "step", "metric", "score", "loss", "gpus", "time_h", "job_type")


@pytest.mark.parametrize("path,fmt", [(EVALS, "csv"), (FIX / "evals.jsonl", "jsonl"),
                                      (FIX / "evals.parquet", "parquet"),
                                      (FIX / "hf_run/trainer_state.json", "trainer_state")])
def test_format_detection(path, fmt):
    assert detect_format(path) == fmt


def test_csv_jsonl_parquet_give_the_same_table():
    logs = [read_logs([p]) for p in (EVALS, FIX / "evals.jsonl", FIX / "evals.parquet")]
    ref = _core(logs[0])
    for other in logs[1:]:
        assert _core(other).equals(ref, null_equal=True)
    assert ref.height == 17  # 18 rows, one duplicate dropped
    assert logs[0].metric == "score" and logs[0].higher_is_better


def test_mess_rules_unsorted_duplicate_missing():
    log = read_logs([EVALS])
    a = log.table.filter(pl.col("job_id") == "a")
    assert a["step"].to_list() == [100, 200, 300, 400, 500, 600, 700, 800]  # sorted by step
    assert np.isnan(a.filter(pl.col("step") == 500)["score"][0])            # missing kept as NaN
    b = log.table.filter((pl.col("job_id") == "b") & (pl.col("step") == 300))
    assert b.height == 1 and b["score"][0] == 0.49 and b["line"][0] == 13   # the last row wins
    notes = " ".join(log.notes)
    assert "duplicates: 1" in notes and "unsorted" in notes and "missing: 1" in notes
    # "1 evaluations without a eval_loss value": not every such row is an evaluation
    assert "missing: 1 row(s) with no score value skipped" in notes
    assert "1 repeated (job_id, step) row(s) dropped" in notes


def test_duplicate_as_error_names_file_line_field():
    with pytest.raises(ConfigError, match=r"duplicate_step\.csv:4: field 'step'.*step 2 more than once"):
        read_logs([BAD / "duplicate_step.csv"], on_duplicate="error")
    assert read_logs([BAD / "duplicate_step.csv"]).table["metric"].to_list() == [0.5, 0.7]


def test_same_job_across_files_is_merged_last_file_wins(tmp_path):
    p = tmp_path / "later.csv"
    p.write_text("job_id,step,score\na,800,0.99\n")
    t = read_logs([EVALS, p]).table.filter(pl.col("job_id") == "a")
    assert t.filter(pl.col("step") == 800)["score"][0] == 0.99


def test_trainer_state_real_shape():
    log = read_logs([FIX / "hf_run" / "trainer_state.json"])
    t = log.table
    assert log.metric == "eval_loss" and not log.higher_is_better  # loss: lower is better
    assert t["job_id"].unique().to_list() == ["hf_run"]             # the run directory's name
    assert t["step"].to_list() == list(range(5, 45, 5))
    assert np.allclose(t["score"].to_numpy(), -t["metric"].to_numpy())
    assert t["loss"].null_count() == 0 and t["loss"][0] == pytest.approx(2.442975616455078)
    assert t["max_steps"].to_list() == [40.0] * 8
    assert t["time_h"][-1] == pytest.approx(9.18 * 40 / 40 / 3600, rel=0.01)  # train_runtime estimate
    assert t["line"][0] == 19  # the line where the first eval entry starts


def test_trainer_state_directory_and_metric_choice():
    log = read_logs([FIX / "hf_run"])  # a run directory stands for its trainer_state.json
    assert log.table.height == 8
    with pytest.raises(ConfigError, match=r"field 'accuracy'.*allowed: \['eval_loss'\]"):
        read_logs([FIX / "hf_run"], metric="accuracy")
    assert read_logs([FIX / "hf_run"], metric="eval_loss", higher_is_better=True).higher_is_better


def test_trainer_state_bad_value_names_line_and_field():
    with pytest.raises(ConfigError, match=r"bad_eval_value\.json:10: field 'eval_accuracy': 'oops'"):
        read_logs([BAD / "bad_eval_value.json"])
    # the single non-loss metric is the default, higher is better
    with pytest.raises(ConfigError, match="cannot pick|oops"):
        read_logs([BAD / "bad_eval_value.json"], metric="eval_accuracy")
    log = read_logs([BAD / "bad_eval_value.json"], metric="eval_loss")
    assert log.table["metric"].to_list() == [1.2, 1.1]


def test_a_long_trainer_state_is_read_in_time_linear_in_its_length(tmp_path):
    """Each log_history entry's line was counted from the start of the file: a run's log
    of 40,000 entries (6 MB, a long run logging every step) took 45 s to read.  Counted
    here by the characters the line count scans (a time bound would flake), and the lines
    named stay the same."""
    from fastsim.replay.logs import _hf_entries

    class Scanned(str):
        chars = 0

        def count(self, sub, start=0, end=None):
            Scanned.chars += (len(self) if end is None else end) - start
            return str.count(self, sub, start, end)

    history = [{"loss": 1.0, "step": s, "learning_rate": 1e-4} for s in range(1, 3001)]
    history += [{"eval_loss": 0.5, "step": 3000}, {"eval_loss": "oops", "step": 3001}]
    text = json.dumps({"log_history": history}, indent=2)
    _, lines = _hf_entries(tmp_path / "trainer_state.json", Scanned(text))
    assert Scanned.chars <= len(text)  # once over the file, not once per entry
    assert lines[-1] == 3 + 5 * 3000 + 4 == text.count("\n", 0, text.rindex('"oops"'))
    p = tmp_path / "trainer_state.json"
    p.write_text(text)
    with pytest.raises(ConfigError, match=rf"trainer_state\.json:{3 + 5 * 3000 + 4}: field "
                                          r"'eval_loss': 'oops'"):
        read_logs([p])


def test_metric_column_and_sense_of_long_tables():
    log = read_logs([EVALS], metric="loss")
    assert not log.higher_is_better
    assert np.allclose(log.table["score"].to_numpy(), -log.table["loss"].to_numpy())
    log = read_logs([EVALS], metric="proxy_reward", higher_is_better=False)
    assert not log.higher_is_better
    with pytest.raises(ConfigError, match=r"evals\.csv:1: field 'accuracy': missing column"):
        read_logs([EVALS], metric="accuracy")


@pytest.mark.parametrize("name,pattern", [
    ("non_numeric_score.csv", r"non_numeric_score\.csv:4: field 'score': 'abc' is not a number"),
    ("missing_step_column.csv", r"missing_step_column\.csv:1: field 'step': missing column"),
    ("fractional_step.jsonl", r"fractional_step\.jsonl:2: field 'step': .*non-negative integer"),
    ("broken_json.jsonl", r"broken_json\.jsonl:3: not valid JSON"),
    ("time_backwards.csv", r"time_backwards\.csv:4: field 'time': 1.5 h is earlier"),
    ("no_log_history.json", r"no_log_history\.json:1: field 'log_history': missing"),
    ("missing_job_id.csv", r"missing_job_id\.csv:2: field 'job_id': missing"),
])
def test_malformed_files_raise_one_clear_error(name, pattern):
    with pytest.raises(ConfigError, match=pattern):
        read_logs([BAD / name])


def test_a_malformed_file_among_good_ones_fails_the_whole_read():
    with pytest.raises(ConfigError, match="non_numeric_score"):
        read_logs([EVALS, BAD / "non_numeric_score.csv"])


def test_missing_spellings_and_infinity(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("job_id,step,score\na,1,NaN\na,2,\na,3,null\na,4,NA\na,5,-inf\na,6,1\n")
    s = read_logs([p]).table["score"].to_numpy()
    assert np.isnan(s[:4]).all() and s[4] == -np.inf and s[5] == 1.0


def test_empty_and_unknown_inputs(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ConfigError, match="empty"):
        read_logs([empty])
    header_only = tmp_path / "h.csv"
    header_only.write_text("job_id,step,score\n")
    with pytest.raises(ConfigError, match="no rows"):
        read_logs([header_only])
    with pytest.raises(ConfigError, match="no such file"):
        read_logs([tmp_path / "nope.csv"])
    with pytest.raises(ConfigError, match=r"^fmt='xml' is invalid; allowed: csv, "):
        read_logs([EVALS], fmt="xml")
    with pytest.raises(ConfigError, match="one metric per replay"):
        read_logs([EVALS, FIX / "hf_run"])


def test_a_pattern_that_matches_no_file_is_named_as_one(tmp_path, capsys, monkeypatch):
    # `fastsim replay logs/*.csv` with no logs there: the shell passes the pattern as
    # written, and "no such file" alone sent the user looking for a file with a star
    monkeypatch.chdir(tmp_path)
    one_line(capsys, ["replay", "logs/*.csv"],
             "logs/*.csv: no such file or directory; it is a pattern that matches no file")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ConfigError, match=r"nope\.csv: no such file or directory$"):
        read_logs([tmp_path / "nope.csv"])


def test_a_key_given_twice_in_one_json_object_is_an_error(tmp_path):
    # json.loads keeps the last of two equal keys: a score logged twice in one record
    # would be read as whichever came second, silently.
    jsonl = tmp_path / "dup.jsonl"
    jsonl.write_text('{"job_id": "a", "step": 1, "score": 0.5}\n'
                     '{"job_id": "a", "step": 2, "score": 0.6, "score": 0.1}\n')
    with pytest.raises(ConfigError, match=r"dup\.jsonl:2: key 'score' appears twice"):
        read_logs([jsonl])
    state = tmp_path / "trainer_state.json"
    state.write_text('{"log_history": [{"step": 1, "eval_loss": 0.5, "eval_loss": 0.4}]}')
    with pytest.raises(ConfigError, match=r"trainer_state\.json: key 'eval_loss' appears twice"):
        read_logs([state])


def test_half_a_surrogate_pair_in_json_text_is_an_error(tmp_path):
    # json.loads takes "\ud800" alone, which no UTF-8 text holds: polars' UnicodeEncodeError
    # was a traceback, for a job id and for an eval_* key alike
    jsonl = tmp_path / "half.jsonl"
    jsonl.write_text('{"job_id": "a", "step": 1, "score": 0.5}\n'
                     '{"job_id": "\\ud800", "step": 2, "score": 0.6}\n')
    with pytest.raises(ConfigError, match=r"half\.jsonl:2: key 'job_id' or its value holds a "
                                          r"\\u escape of half a UTF-16 surrogate pair"):
        read_logs([jsonl])
    state = tmp_path / "trainer_state.json"
    state.write_text('{"global_step": 1, "log_history": [{"step": 1, "eval_\\udfff": 0.5}]}')
    with pytest.raises(ConfigError, match=r"trainer_state\.json: key 'eval_\\udfff' or its"):
        read_logs([state])
    jsonl.write_text('{"job_id": "\\ud83d\\ude00", "step": 1, "score": 0.5}\n')  # a whole pair
    assert read_logs([jsonl]).table["job_id"].to_list() == ["\U0001f600"]


def test_time_going_back_across_a_missing_time_is_an_error(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("job_id,step,score,time\na,1,0.5,5\na,2,0.4,\na,3,0.3,1\n")
    with pytest.raises(ConfigError, match=r"t.csv:4: field 'time': 1 h is earlier"):
        read_logs([p])


@pytest.mark.parametrize("labels,needle", [([None, True, True], "'truth_hacking': None"),
                                           ([True, False, True],
                                            "'truth_hacking': job 'a' has False here and True")])
def test_a_hidden_label_is_one_per_job(tmp_path, labels, needle):
    p = tmp_path / "t.parquet"
    pl.DataFrame({"job_id": ["a"] * 3, "step": [1, 2, 3], "score": [0.5, 0.6, 0.4],
                  "truth_hacking": labels, "truth_gold": [0.1, 0.2, 0.3]}).write_parquet(p)
    with pytest.raises(ConfigError, match=needle):
        read_logs([p])


@pytest.mark.parametrize("value", ["1e308", "-2e150", "1.7e308"])
def test_a_score_beyond_the_detectors_range_names_its_line(tmp_path, value):
    """A score of 1e308 was read, and margin, cusum, peak and bocpd never fired again in
    that job: their sums of squares overflowed to inf, their noise estimate to NaN."""
    p = tmp_path / "log.csv"
    p.write_text(f"job_id,step,score\na,1,0.1\na,2,{value}\na,3,0.2\n")
    with pytest.raises(ConfigError, match=re.escape(
            f"{p}:3: field 'score': '{value}' is too large; allowed: a number from -1e150 to "
            "1e150, inf or -inf, or empty for missing")):
        read_logs([p])
    p.write_text("job_id,step,score\na,1,0.1\na,2,1e150\na,3,-1e150\na,4,inf\n")
    assert read_logs([p]).table["metric"].to_list() == [0.1, 1e150, -1e150, np.inf]


@pytest.mark.parametrize("name,text,field", [
    ("log.csv", "job_id,step,score\na,1,0.1\na,2,-1e400\n", "score"),
    ("log.jsonl", '{"job_id": "a", "step": 1, "score": 0.1}\n'
                  '{"job_id": "a", "step": 2, "score": 1e400}\n', "score"),
    ("log.jsonl", '{"job_id": "a", "step": 1, "score": 0.1, "loss": 1}\n'
                  '{"job_id": "a", "step": 2, "score": 0.2, "loss": 1' + "0" * 400 + '}\n', "loss"),
    ("trainer_state.json", json.dumps({"log_history": [{"step": 1, "eval_acc": 0.1}]})
     .replace("0.1", "1e400"), "eval_acc")])
def test_a_number_beyond_a_floats_range_is_refused_not_read_as_inf(tmp_path, name, text, field):
    """1e400 was read as inf (an ordinary value: a JSON parser and a CSV cast both round it
    so) where 1e200 is refused as too large; an infinite score is the best of all, and it
    moved every decision after it."""
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(p))}:\d+: field '{field}': "
                                          r"'[-0-9e]+(\.\.\.\(\d+ characters\)\.\.\.0+)?' "
                                          r"is beyond a float's range; allowed: "):
        read_logs([p])


@pytest.mark.parametrize("header", ["job_id,step,line", "job_id,step,score"])
def test_a_metric_named_line_is_refused_not_read_as_line_numbers(tmp_path, header):
    """The readers keep each row's line in a column ``line``, which replaced a log's own
    column of that name: ``--metric line`` decided on the line numbers 2, 3, 4, 5 (never a
    decline) instead of the log's 0.9, 0.8, 0.7, 0.95, and on a log without such a column
    it found one all the same."""
    p = tmp_path / "log.csv"
    p.write_text(header + "\na,1,0.9\na,2,0.8\na,3,0.7\na,4,0.95\n")
    with pytest.raises(ConfigError, match=re.escape(
            f"{p}:1: field 'line': the name replay gives each row's line number; allowed: a "
            "metric column of another name (rename it)")):
        read_logs([p], metric="line")


def test_a_numpy_bool_is_the_metrics_sense():
    """np.bool_(False) was refused as 'higher_is_better=False is invalid'."""
    for hib in (np.bool_(False), np.bool_(True)):
        log = read_logs([EVALS], higher_is_better=hib)
        assert log.higher_is_better is bool(hib)


def test_api_arguments_of_the_wrong_type_are_refused():
    with pytest.raises(ConfigError, match="higher_is_better='no' is invalid"):
        read_logs([EVALS], higher_is_better="no")
    for paths in (None, 5, b"x.csv"):
        with pytest.raises(ConfigError, match="is invalid; allowed: a path, a DataFrame, or a list of them"):
            read_logs(paths)


def test_a_tsv_log_without_its_name_reads_with_format_tsv(tmp_path):
    # a pipe has no name: its TSV was read as CSV and failed on a missing column
    from fastsim.replay.logs import detect_format, read_one

    text = "job_id\tstep\tscore\na\t1\t0.5\na\t2\t0.6\n"
    named, nameless = tmp_path / "log.tsv", tmp_path / "63"
    named.write_text(text)
    nameless.write_text(text)
    assert detect_format(named) == "tsv"
    table, _ = read_one(nameless, fmt="tsv")
    assert table["metric"].to_list() == [0.5, 0.6]
    # without it, the refusal says how to read it (it showed the header with its tabs only)
    with pytest.raises(ConfigError, match=r"\(tab-separated\? --format tsv, or "):
        read_one(nameless)


def test_a_row_without_a_score_never_displaces_a_scored_row_of_its_step(tmp_path):
    """A loop that logs the evaluation and the training loss on separate rows of one step
    (score, then loss): the loss row came last, so 'the last row wins' dropped every
    evaluation, and the job was 'no_evaluations' (a note said only that duplicates were
    dropped).  Now the scored row is kept and the note says what was dropped; a trigger at
    the last evaluation is at completion, as for the same log on one row per step."""
    from fastsim.replay.policies import replay

    rows = ["job_id,step,score,loss"]
    for step, score in enumerate([0.5, 0.6, 0.5, 0.4], start=1):
        rows += [f"a,{step},{score},", f"a,{step},,{2.0 - step / 10}"]
    rows.append("a,4,0.3,")  # a re-logged step with a score still replaces the earlier one
    p = tmp_path / "long.csv"
    p.write_text("\n".join(rows) + "\n")
    log = read_logs([p])
    assert log.table["score"].to_list() == [0.5, 0.6, 0.5, 0.3]
    assert log.table["line"].to_list() == [2, 4, 6, 10]
    assert ("duplicates: 4 row(s) with no score value dropped beside a row of the same "
            "(job_id, step) that has one") in log.notes
    assert "duplicates: 1 repeated (job_id, step) row(s) dropped, the last kept" in log.notes
    r = replay(log, ["evalstop:k=2"])
    assert r.select("status", "trigger_step", "steps_saved").row(0) == (
        "triggered_at_completion", 4, 0)


def test_a_steps_loss_and_time_on_its_row_without_a_score_reach_its_scored_row(tmp_path):
    """The rows without a score dropped beside a scored row of their step took their
    readings with them: a loop logging the loss (and the time) on one row and the
    evaluation on another lost every loss, and loss_plateau read the job as too short
    where the same log on one row per step stopped it at step 3.  The scored row now takes
    what it lacks from them (keeping what it has: its own time at step 4), so both logs
    replay to the same table, GPU-hours included."""
    from fastsim.replay.policies import replay

    split, whole = tmp_path / "split.csv", tmp_path / "whole.csv"
    split.write_text("job_id,step,score,loss,time,gpus\na,1,,1.0,1.0,8\na,1,0.5,,,\n"
                     "a,2,,0.9,2.0,8\na,2,0.6,,,\na,3,0.7,0.89,3.0,8\na,4,,0.889,4.0,8\n"
                     "a,4,0.8,,4.5,\n")
    whole.write_text("job_id,step,score,loss,time,gpus\na,1,0.5,1.0,1.0,8\na,2,0.6,0.9,2.0,8\n"
                     "a,3,0.7,0.89,3.0,8\na,4,0.8,0.889,4.5,8\n")
    log = read_logs([split])
    assert ("duplicates: 8 missing value(s) of those steps' scored rows (loss, time, ...) "
            "taken from the rows dropped") in log.notes
    policies = ["loss_plateau:w=1,tol=0.05", "evalstop:k=1"]
    got, want = replay(log, policies), replay(read_logs([whole]), policies)
    assert got["status"].to_list() == ["stopped", "continued"]
    assert got.drop("line", strict=False).equals(want.drop("line", strict=False))


def test_the_fill_note_counts_only_the_values_kept(tmp_path):
    """Of the loss and max_steps the two scored rows of step 1 took from line 2, one
    loss is used: the first scored row is dropped ('the last kept') and max_steps is read
    per job anyway.  The note counted 4."""
    p = tmp_path / "f.csv"
    p.write_text("job_id,step,score,loss,max_steps\na,1,,1.0,10\na,1,0.5,,\na,1,0.6,,\n"
                 "a,2,0.7,0.9,10\n")
    log = read_logs([p])
    assert ("duplicates: 1 missing value(s) of those steps' scored rows (loss, time, ...) "
            "taken from the rows dropped") in log.notes, log.notes
    assert log.table["loss"].to_list() == [1.0, 0.9] and "_filled" not in log.table.columns


def test_two_rows_of_a_step_without_a_score_keep_the_last_row_whole(tmp_path):
    """Only a scored row takes readings from the other rows of its step: of two rows
    without a score, the last wins as it is, its empty loss included (step 2's loss is
    missing, not the 0.9 of the row before it), as docs/replay.md says."""
    p = tmp_path / "two.csv"
    p.write_text("job_id,step,score,loss\na,1,,1.0\na,1,0.5,\na,2,,0.9\na,2,,\na,3,0.7,0.8\n")
    table = read_logs([p]).table
    assert table["step"].to_list() == [1, 2, 3]
    assert table["loss"].to_list()[0] == 1.0 and table["loss"].to_list()[2] == 0.8
    assert np.isnan(table["loss"][1]) and table["line"][1] == 5


def test_a_value_taken_from_a_row_without_a_score_is_refused_naming_its_own_line(tmp_path):
    """A loss or time the scored row took from the dropped row of its step is refused under
    the line that holds it: the scored row's line (5) has no such value, and was named."""
    from fastsim.replay.policies import replay

    n, t = tmp_path / "n.csv", tmp_path / "t.csv"
    n.write_text("job_id,step,score,loss\na,1,,1.0\na,1,0.5,\na,2,,-0.5\na,2,0.6,\n"
                 "a,3,0.7,0.8\n")
    t.write_text("job_id,step,score,loss,time_s\na,1,,1.0,7200\na,1,0.5,,\na,2,,0.9,3600\n"
                 "a,2,0.6,,\n")
    with pytest.raises(ConfigError, match=r"n\.csv:4: field 'loss': -0\.5;"):
        replay(read_logs([n]), ["loss_plateau:w=1,tol=0.05"])
    with pytest.raises(ConfigError, match=r"t\.csv:4: field 'time_s': 3600 s is earlier"):
        read_logs([t])


def test_trainer_state_training_logged_after_the_last_evaluation_is_in_the_log(tmp_path):
    """A run evaluated every 5 steps up to step 35 that trained (and logged its loss and
    closing summary) to step 40: its last logged step is 40, so a trigger at the step-35
    evaluation is a stop saving 5 steps, as for the same run in a long CSV with a
    loss-only row at 40.  It was read as ending at 35: 'triggered_at_completion', 0 steps
    and 0 GPU-hours saved."""
    import json

    from fastsim.replay.policies import replay

    state = json.loads((FIX / "hf_run" / "trainer_state.json").read_text())
    state["log_history"] = [e for e in state["log_history"]
                            if not ("eval_loss" in e and e["step"] == 40)]
    evals = [e for e in state["log_history"] if "eval_loss" in e]
    for e, value in zip(evals, [3.0, 2.9, 2.8, 2.7, 2.6, 2.65, 2.7]):
        e["eval_loss"] = value  # lower is better: worse at 30 and 35
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps(state, indent=2))
    log = read_logs([run])
    assert log.table["step"].to_list()[-2:] == [35, 40]
    assert np.isnan(log.table["metric"][-1]) and log.table["loss"][-1] == pytest.approx(1.4620805)
    r = replay(log, ["evalstop:k=2"], gpus=1).row(0, named=True)
    assert (r["status"], r["trigger_step"], r["final_step"], r["steps_saved"]) == (
        "stopped", 35, 40, 5)
    assert r["gpu_h_saved"] > 0
    # a run whose last evaluation is at its last logged step has no such row
    assert read_logs([FIX / "hf_run"]).table["step"].to_list()[-1] == 40
    assert not read_logs([FIX / "hf_run"]).table["metric"].is_nan().any()


@pytest.mark.parametrize("column,values,needle", [
    ("job_type", ["lora", "", "rlhf"],
     "t.csv:4: field 'job_type': job 'a' has 'rlhf' here and 'lora'"),
    ("max_steps", ["10", "", "4"], "t.csv:4: field 'max_steps': job 'a' has 4 here and 10"),
    ("truth_gold_peak_step", ["2", "2", "3"],
     "t.csv:4: field 'truth_gold_peak_step': job 'a' has 3"),
])
def test_a_per_job_field_is_one_value_per_job(tmp_path, column, values, needle):
    """Replay read a per-job field from the job's first row: job_type lora then rlhf put an
    RLHF job out of scope=rlhf, max_steps 10 then 4 kept stop_at:f=0.5 from firing, exit 0.
    Only truth_hacking refused a conflict."""
    p = tmp_path / "t.csv"
    truth = ",truth_hacking,truth_gold" if column.startswith("truth_") else ""
    p.write_text(f"job_id,step,score,{column}{truth}\n" + "".join(
        f"a,{s},0.5,{v}{',true,0.5' if truth else ''}\n" for s, v in zip([1, 2, 3], values)))
    with pytest.raises(ConfigError, match=re.escape(needle)):
        read_logs([p])


def test_a_per_job_field_agrees_across_files(tmp_path):
    """A job merged from two files took the first file's max_steps (10) over the second's (4)."""
    (tmp_path / "a.csv").write_text("job_id,step,score,max_steps\na,1,0.5,10\n")
    (tmp_path / "b.csv").write_text("job_id,step,score,max_steps\na,2,0.6,4\n")
    with pytest.raises(ConfigError, match=r"b.csv:2: field 'max_steps': job 'a' has 4 here"):
        read_logs([tmp_path / "a.csv", tmp_path / "b.csv"])
    (tmp_path / "b.csv").write_text("job_id,step,score,max_steps\na,2,0.6,\nb,1,0.5,4\n")
    assert read_logs([tmp_path / "a.csv", tmp_path / "b.csv"]).table.height == 3


def test_two_time_columns_are_refused(tmp_path, capsys):
    """A log with time and time_s used time and ignored time_s, even running backwards, exit 0."""
    p = tmp_path / "tt.csv"
    p.write_text("job_id,step,score,time,time_s\na,1,0.5,1,7200\na,2,0.6,2,3600\n")
    one_line(capsys, ["replay", str(p), "--gpus", "1"],
             "tt.csv:1: fields 'time' and 'time_s': two time columns; allowed: one of time")


def test_a_time_before_the_job_start_is_refused(tmp_path, capsys):
    """GPU-hours count from the job's start, time 0: a negative time would charge negative
    GPU-hours before the first row (a clock time, such as Unix time, was never its meaning)."""
    p = tmp_path / "neg.csv"
    p.write_text("job_id,step,score,time_s\na,1,0.5,-60\na,2,0.6,60\n")
    one_line(capsys, ["replay", str(p), "--gpus", "1"],
             "neg.csv:2: field 'time_s': '-60' is before the job started; allowed: the time "
             "since the job started")


def test_a_clock_time_is_refused(tmp_path, capsys):
    """Unix seconds were read as the time since the job's start: the first row charged 8
    GPUs for 472,222 h before it (GPU-h total 3.8e6 for a job of 1 h), exit 0."""
    p = tmp_path / "clock.csv"
    p.write_text("job_id,step,score,time_s,gpus\na,1,0.5,1700000000,8\na,2,0.4,1700003600,8\n")
    one_line(capsys, ["replay", str(p)],
             "clock.csv:2: field 'time_s': '1700000000' is 4.72e+05 h after the job started, "
             "a clock time, not the time since the start; allowed: at most 100000 h")


@pytest.mark.parametrize("global_step,shown", [(10, "10"), (0, "0"), (None, "missing"),
                                               (True, "True"), (40.5, "40.5")])
def test_trainer_state_global_step_covers_the_logged_steps(tmp_path, capsys, global_step, shown):
    """global_step was not checked: 10 while evaluations reach step 40 made GPU-hours 4x
    (time_h = step * train_runtime / global_step), exit 0; 0 gave NaN GPU-hours and a note
    saying the log had no train_runtime."""
    hist = [{"eval_loss": 1.0 - 0.01 * i, "step": 10 * i} for i in range(1, 5)]
    state = {"max_steps": 40, "log_history": hist + [{"train_runtime": 3600.0, "step": 40}]}
    if global_step is not None:
        state["global_step"] = global_step
    p = tmp_path / "run" / "trainer_state.json"
    p.parent.mkdir()
    p.write_text(json.dumps(state, indent=2))
    one_line(capsys, ["replay", str(p), "--gpus", "1"],
             f"field 'global_step': {shown}; allowed: an integer >= 40, the largest step")
    state["global_step"] = 40
    p.write_text(json.dumps(state, indent=2))
    assert read_logs([p]).table["time_h"].to_list()[-1] == pytest.approx(1.0)
    del state["global_step"], state["log_history"][-1]  # a run still training: no runtime
    p.write_text(json.dumps(state, indent=2))
    assert "time_h" not in read_logs([p]).table.columns


@pytest.mark.parametrize("job_id", ["1.0", "1e0", "true", "[1]"])
def test_a_jsonl_job_id_is_a_string_or_an_integer(tmp_path, capsys, job_id):
    """JSONL job ids 1 and "1" merged into one job, but 1.0 read as another job, "1.0",
    exit 0."""
    p = tmp_path / "j.jsonl"
    same = '{"job_id": 1, "step": 1, "score": 0.5}\n{"job_id": "1", "step": 2, "score": 0.6}\n'
    p.write_text(same + f'{{"job_id": {job_id}, "step": 3, "score": 0.4}}\n')
    one_line(capsys, ["replay", str(p)], "j.jsonl:3: field 'job_id': ")
    p.write_text(same)
    assert read_logs([p]).job_ids == ["1"]


def test_a_byte_order_mark_is_skipped_in_every_text_format(tmp_path):
    # a CSV log with a BOM was read; JSONL and trainer_state.json were refused
    # ("Unexpected UTF-8 BOM"), the same log written by another editor
    bom = b"\xef\xbb\xbf"
    csv = "job_id,step,score\na,1,0.5\na,2,0.6\na,3,0.4\n"
    jsonl = "".join(json.dumps({"job_id": "a", "step": s, "score": v}) + "\n"
                    for s, v in ((1, 0.5), (2, 0.6), (3, 0.4)))
    state = json.dumps({"log_history": [{"step": s, "eval_score": v}
                                        for s, v in ((1, 0.5), (2, 0.6), (3, 0.4))]})
    tables = []
    for name, text in (("a.csv", csv), ("a.jsonl", jsonl), ("trainer_state.json", state)):
        (tmp_path / name).write_bytes(bom + text.encode())
        metric = "eval_score" if name.endswith(".json") else "score"
        tables.append(read_logs([tmp_path / name], metric=metric).table["metric"].to_list())
    assert tables == [[0.5, 0.6, 0.4]] * 3


def test_a_byte_order_mark_does_not_hide_json_from_the_format_detection(tmp_path):
    # a JSONL log or trainer state named neither .jsonl nor .json, with a BOM, was taken
    # for a CSV ("missing column ... found ['{\"job_id\": \"a\"', ...]")
    bom = b"\xef\xbb\xbf"
    jsonl = "".join(json.dumps({"job_id": "a", "step": s, "score": v}) + "\n"
                    for s, v in ((1, 0.5), (2, 0.6), (3, 0.4)))
    state = json.dumps({"log_history": [{"step": 1, "eval_score": 0.5}]})
    (tmp_path / "log.txt").write_bytes(bom + jsonl.encode())
    (tmp_path / "state.log").write_bytes(bom + state.encode())
    assert detect_format(tmp_path / "log.txt") == "jsonl"
    assert detect_format(tmp_path / "state.log") == "trainer_state"
    assert read_logs([tmp_path / "log.txt"], metric="score").table["metric"].to_list() == \
        [0.5, 0.6, 0.4]


def test_a_table_in_place_of_paths_or_policies_is_refused_in_one_line(tmp_path):
    """A DataFrame given as the policies (or a lazy frame as the logs) was refused with its
    repr, a dozen lines of table inside the message."""
    import fastsim
    from fastsim.errors import ConfigError

    table = pl.DataFrame({"job_id": ["a"] * 3, "step": [1, 2, 3], "score": [0.5, 0.6, 0.4]})
    with pytest.raises(ConfigError) as e:
        fastsim.read_logs(table.lazy())
    assert str(e.value).startswith("paths=a polars LazyFrame is invalid; allowed: a path, a "
                                   "DataFrame, or a list of them"), str(e.value)
    assert "\n" not in str(e.value)
    p = tmp_path / "log.csv"
    table.write_csv(p)
    with pytest.raises(ConfigError) as e:
        fastsim.replay(p, table)
    assert str(e.value).startswith("policies=a polars DataFrame is invalid;")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("column, field", [("Seed", "seed"), ("Job_Type", "job_type"),
                                           ("truth hacking", "truth_hacking"), ("GPUS", "gpus"),
                                           ("Time-S", "time_s")])
def test_a_field_spelt_in_another_case_is_refused_not_ignored(tmp_path, column, field):
    """An unknown column is ignored, so ``Seed`` lost every job's seed without a word."""
    p, v = tmp_path / "log.csv", "rlhf" if field == "job_type" else "1"
    p.write_text(f"job_id,step,score,{column}\na,1,0.5,{v}\na,2,0.4,{v}\n")
    with pytest.raises(ConfigError) as err:
        read_logs([p])
    assert "\n" not in str(err.value)
    assert f"field {column!r}" in str(err.value) and f"allowed: {field!r}" in str(err.value)
    p.write_text(f"job_id,step,score,{field}\na,1,0.5,{v}\na,2,0.4,{v}\n")
    read_logs([p])


def test_a_metric_named_like_a_field_is_read_as_the_metric(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("job_id,step,Loss\na,1,0.5\na,2,0.4\n")
    assert read_logs([p], metric="Loss").table["metric"].to_list() == [0.5, 0.4]


def test_read_logs_names_its_own_arguments_and_the_nearest_value(tmp_path):
    """read_logs(p, fmt="cvs") said "--format 'cvs': unknown", a flag the API has not, and
    read_logs(p, metric="scor") "... via --metric"; each names the argument read_logs
    takes, with the nearest allowed value, in one line."""
    p = tmp_path / "log.csv"
    p.write_text("job_id,step,score\na,1,0.5\na,2,0.4\n")
    with pytest.raises(ConfigError, match=r"^fmt='cvs' is invalid \(did you mean csv\?\); "
                                          r"allowed: csv, tsv, jsonl, parquet, trainer_state$"):
        read_logs(p, fmt="cvs")
    with pytest.raises(ConfigError) as e:
        read_logs(p, metric="scor")
    text = str(e.value)
    assert "(did you mean score?)" in text and "read_logs(metric=...)" in text, text
    assert "; allowed: one of 'score' (--metric" in text, text  # not "one of ['score']"
    with pytest.raises(ConfigError, match=r"^on_duplicate='frist' is invalid; allowed: last, "
                                          r"error$"):
        read_logs(p, on_duplicate="frist")


@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t")])
def test_a_last_row_without_a_line_break_may_be_cut_short_and_is_refused(tmp_path, suffix,
                                                                            sep):
    # a log read while its writer appends: 0.68 cut to 0.6 read as a second decline, and
    # replay reported an EvalStop trigger that the whole row does not make
    rows = ["job_id,step,score", "a,1,0.70", "a,2,0.65", "a,3,0.6"]
    cut = tmp_path / f"log.{suffix}"
    cut.write_text("\n".join(r.replace(",", sep) for r in rows))
    with pytest.raises(ConfigError, match=rf"log\.{suffix}:4: the last row has no line "
                       "break after it, so it may be cut short"):
        read_logs([cut])
    cut.write_text("\n".join(r.replace(",", sep) for r in rows) + "\r\n")
    assert read_logs([cut]).table["metric"].to_list() == [0.70, 0.65, 0.6]


@pytest.mark.parametrize("module,kind,tool", [("gzip", "gzip", "zcat"), ("bz2", "bzip2", "bzcat"),
                                              ("lzma", "xz", "xzcat")])
def test_a_compressed_log_is_refused_saying_how_to_replay_it(tmp_path, capsys, module, kind,
                                                             tool):
    # `fastsim replay evals.csv.gz` was refused for a last row "without a line break" (polars
    # decompressed the rows, the check read the gzip trailer), and a .bz2 log's header was
    # named as its binary first line: one line, the compression, and the pipe that reads it
    import importlib

    text = "job_id,step,score\na,1,0.5\na,2,0.4\na,3,0.3\n"
    p = tmp_path / f"evals.csv.{kind}"
    p.write_bytes(importlib.import_module(module).compress(text.encode()))
    one_line(capsys, ["replay", str(p)], f"{p}: a log compressed with {kind}; allowed: an "
             f"uncompressed log (decompress it first, or replay it through a pipe: {tool} {p} "
             "| fastsim replay /dev/stdin)")
    with pytest.raises(ConfigError, match=f"compressed with {kind}"):
        read_logs(p, fmt="csv")
    plain = tmp_path / "BZh.csv"  # a log whose first bytes only look like a magic number
    plain.write_text("BZh9," + text.replace("\na,", "\nx,a,"))
    assert read_logs(plain).table.height == 3


@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t")])
def test_a_blank_line_holds_no_row(tmp_path, suffix, sep):
    # polars reads a blank line as a row of nulls: a log ending in an empty line (an editor's,
    # or two logs pasted together) was refused as "log.csv:4: field 'job_id': missing"
    rows = ["job_id,step,score", "a,1,0.5", "", "a,2,0.4", "a,3,0.3", "", ""]
    p = tmp_path / f"log.{suffix}"
    p.write_text("\n".join(r.replace(",", sep) for r in rows) + "\n")
    log = read_logs(p)
    assert log.table["metric"].to_list() == [0.5, 0.4, 0.3]
    assert log.table["line"].to_list() == [2, 4, 5]
    p.write_text(p.read_text().replace(f"a{sep}3{sep}0.3", f"a{sep}3{sep}abc"))
    with pytest.raises(ConfigError, match=rf"log\.{suffix}:5: field 'score': 'abc'"):
        read_logs(p)
    p.write_text(p.read_text().replace(f"a{sep}3{sep}abc", sep * 2))  # empty fields: a row
    with pytest.raises(ConfigError, match=rf"log\.{suffix}:5: field 'job_id': missing"):
        read_logs(p)


def test_a_semicolon_separated_log_is_named_as_one(tmp_path):
    # a spreadsheet saves a CSV with ';' where the decimal mark is ',': it was refused for a
    # missing job_id column, 'found ['job_id;step;score']', without saying why
    hint = (r" \(semicolon-separated\? the values of a row are separated by commas, or by "
            r"tabs with --format tsv: save it so, with '\.' as the decimal mark\)$")
    p = tmp_path / "log.csv"
    p.write_text("job_id;step;score\na;1;0.5\na;2;0.4\n")
    with pytest.raises(ConfigError, match=r"log\.csv:1: field 'job_id': missing column; .*"
                       r"\(found 'job_id;step;score'\)" + hint):
        read_logs(p)
    p.write_text("job_id;step;score\na;1;0,5\na;2;0,4\n")  # a decimal comma splits the row
    with pytest.raises(ConfigError, match=r"log\.csv:2: 2 fields, the header has 1; .*" + hint):
        read_logs(p)


def test_a_json_array_of_rows_is_told_to_be_one_object_per_line(tmp_path):
    # pandas' to_json(orient="records") writes a table as one array: a .json log was read as
    # a trainer_state.json and refused for its log_history, with no word of JSONL
    p = tmp_path / "log.json"
    p.write_text('[{"job_id": "a", "step": 1, "score": 0.5}, {"job_id": "a", "step": 2, '
                 '"score": 0.4}]\n')
    with pytest.raises(ConfigError, match=r"log\.json:1: field 'log_history': missing; .*"
                       r"\(a JSON array of rows\? a long table in JSON is one object per line, "
                       r"a \.jsonl file\)$"):
        read_logs(p)
    p.write_text('{"a": 1}\n')  # not rows: no such hint
    with pytest.raises(ConfigError, match=r"\(a list of log entries\)$"):
        read_logs(p)


def test_a_directory_of_logs_is_told_the_pattern_that_passes_them(tmp_path, capsys):
    # 'fastsim replay logs/' said only 'pass log files instead'; it names the pattern now
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("a.csv", "b.csv", "c.jsonl"):
        (logs / name).write_text("job_id,step,score\na,1,0.5\n")
    one_line(capsys, ["replay", str(logs)], f"{logs}: a directory without trainer_state.json "
             "(nor in a checkpoint-N/ subdirectory); allowed: a run directory, or log files "
             f"({logs}/*.csv, {logs}/*.jsonl)")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"allowed: a run directory, or log files$"):
        read_logs(tmp_path / "empty")


@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t")])
def test_invalid_utf8_in_a_table_names_its_line(tmp_path, capsys, suffix, sep):
    # a CSV byte no UTF-8 holds was "not a readable CSV table (invalid utf-8 sequence)":
    # no line, and nothing said what is allowed, where a JSONL log's names both
    p = tmp_path / f"log.{suffix}"
    p.write_bytes(sep.join(["job_id", "step", "score"]).encode() + b"\na" + sep.encode()
                  + b"1" + sep.encode() + b"0.5\na" + sep.encode() + b"2" + sep.encode()
                  + b"0.\xff6\n")
    one_line(capsys, ["replay", str(p)], f"log.{suffix}:3: invalid UTF-8 (byte 0xff); "
             "allowed: a UTF-8")



@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t"), ("jsonl", None)])
def test_lines_ending_in_a_carriage_return_alone_are_lines(tmp_path, suffix, sep):
    # a CSV saved as "CSV (Macintosh)" ends its lines in CR alone: polars read it as one
    # header line and refused it as "missing column (did you mean score\ra?)", and a JSONL
    # log so written was "not valid JSON (Extra data)" at line 1; mixed with LF ends, a
    # lone CR was "not a readable CSV table (found more fields ...)" without a line
    rows = [("a", 1, 0.7), ("a", 2, 0.65), ("a", 3, 0.6), ("b", 1, 0.5)]
    if sep is None:
        lines = [json.dumps({"job_id": j, "step": s, "score": x}) for j, s, x in rows]
    else:
        lines = [sep.join(("job_id", "step", "score"))] + [sep.join(map(str, r)) for r in rows]
    p = tmp_path / f"log.{suffix}"
    for text in ("\r".join(lines) + "\r", "\n".join(lines[:2]) + "\r" + "\n".join(lines[2:])
                 + "\n"):
        p.write_bytes(text.encode())
        t = read_logs([p]).table
        assert t["job_id"].to_list() == ["a", "a", "a", "b"]
        assert t["metric"].to_list() == [0.7, 0.65, 0.6, 0.5]
        assert t["line"].to_list() == ([2, 3, 4, 5] if sep else [1, 2, 3, 4])
    p.write_bytes(("\r".join(lines[:-1] + [lines[-1].replace("0.5", "0.\u00e9")]) + "\r")
                  .encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"log\.{suffix}:{4 if sep is None else 5}: "
                       "invalid UTF-8"):
        read_logs([p])


def test_a_trainer_state_cut_short_says_so_and_what_is_allowed(tmp_path, capsys):
    # Trainer rewrites trainer_state.json whole at each save; replayed meanwhile, the file
    # ends mid-way and was "not valid JSON (Expecting ',' delimiter)", nothing more
    whole = (FIX / "hf_run/trainer_state.json").read_text()
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(whole[:len(whole) // 2])
    one_line(capsys, ["replay", str(run)], "(the file ends mid-way: read while it was "
             "written? read it again once written); allowed: a trainer_state.json as "
             "written by transformers.Trainer")
    (run / "trainer_state.json").write_text('{"log_history": [}')  # whole, and broken
    with pytest.raises(ConfigError, match=r"trainer_state\.json:1: not valid JSON "
                       r"\(Expecting value at column 18\); allowed: a trainer_state\.json "
                       "as written"):
        read_logs(run)


def test_a_jsonl_log_whose_last_line_is_cut_says_so(tmp_path, capsys):
    # a JSONL log read while its writer appends ends mid-line: "not valid JSON", nothing
    # more, where a cut trainer_state.json says it may have been read while written
    p = tmp_path / "x.jsonl"
    p.write_text('{"job_id": "a", "step": 2, "eval_score": 0.5}\n'
                 '{"job_id": "a", "step": 3, "eval_score": 0.6')
    one_line(capsys, ["replay", str(p)], "x.jsonl:2: not valid JSON (Expecting ',' delimiter "
             "at column 45) (the file ends mid-way: read while it was written? read it again once written); "
             "allowed: one JSON object per line")
    # a broken line the file goes on after, or one ended by a line break, is broken JSON
    for text in ('{"job_id": "a", "step": 3, "eval_score": 0.6\n',
                 '{"job_id": "a", "step": 3, "eval_score": 0.6\n{"job_id": "a"}'):
        p.write_text(text)
        with pytest.raises(ConfigError, match=r"x\.jsonl:1: not valid JSON \(Expecting ',' "
                           r"delimiter at column 45\); allowed: one JSON object per line$"):
            read_logs(p)


def test_a_step_beyond_the_jobs_max_steps_is_refused(tmp_path):
    # max_steps 20 with steps logged to 40: stop_at:f=0.65 took 20 as T_est and reported a
    # stop at step 20 saving 50%, of a run whose own log says its plan was another
    rows = "job_id,step,score,max_steps\na,10,0.5,20\na,20,0.6,\na,30,0.55,20\na,40,0.56,20\n"
    p = tmp_path / "log.csv"
    p.write_text(rows)
    with pytest.raises(ConfigError, match=r"log\.csv:4: field 'step': job 'a' logs step 30, "
                       r"beyond its max_steps 20; allowed: steps up to the planned length"):
        read_logs(p)
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").write_text(json.dumps({
        "global_step": 40, "max_steps": 20,
        "log_history": [{"eval_accuracy": 0.5, "step": 10}, {"eval_accuracy": 0.6, "step": 40}]},
        indent=1))
    with pytest.raises(ConfigError, match=r"field 'step': job 'run' logs step 40, beyond its "
                       "max_steps 20"):
        read_logs(run)
    p.write_text(rows.replace(",20\n", ",40\n"))  # up to the plan; 0 is no plan at all
    assert read_logs(p).table["step"].to_list() == [10, 20, 30, 40]
    p.write_text(rows.replace(",20\n", ",0\n"))
    assert read_logs(p).table["step"].to_list() == [10, 20, 30, 40]


@pytest.mark.parametrize("field,unit", [("time_s", "s"), ("time_h", "h"), ("time", "h")])
def test_time_running_backwards_is_named_as_the_log_names_it(tmp_path, field, unit):
    # a time_s log running backwards was told "field 'time': 0.00138889 h": a column it
    # does not have, in a unit it does not use
    p = tmp_path / "log.csv"
    p.write_text(f"job_id,step,score,{field}\na,1,0.5,10\na,2,0.4,\na,3,0.3,5\n")
    with pytest.raises(ConfigError, match=rf"log\.csv:4: field '{field}': 5 {unit} is earlier "
                       "than job 'a''s previous evaluation; allowed: wall-clock time"):
        read_logs(p)
    p.write_text(f"job_id,step,score,{field}\na,1,0.5,5\na,3,0.3,10\n")
    assert "_time_field" not in read_logs(p).table.columns


def test_a_run_directory_whose_trainer_state_is_a_broken_link_names_it(tmp_path, capsys):
    # refused as "a directory without trainer_state.json", beside the file ls lists there
    run = tmp_path / "run"
    run.mkdir()
    (run / "trainer_state.json").symlink_to(tmp_path / "gone" / "trainer_state.json")
    one_line(capsys, ["replay", str(run)], f"{run / 'trainer_state.json'}: no such file; "
             "allowed: a log file")


@pytest.mark.parametrize("where", ["trainer_state.json", "checkpoint-5/trainer_state.json"])
def test_a_run_directory_whose_trainer_state_is_a_pipe_is_refused_not_waited_on(
        tmp_path, capsys, where):
    # a pipe named on the command line is read as one; a pipe found inside a run directory
    # was read the same way, and replay waited for a writer forever
    run = tmp_path / "run"
    (run / where).parent.mkdir(parents=True)
    os.mkfifo(run / where)
    one_line(capsys, ["replay", str(run)], f"{run / where}: not a regular file (a pipe); "
             "allowed: a run directory's trainer_state.json is a regular file")


@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t")])
def test_a_quote_never_closed_before_a_long_rest_is_one_line_naming_its_row(tmp_path, capsys,
                                                                            suffix, sep):
    # a stray quote in a job id of a long log made the rest of it one value of more than
    # the csv module's 131,072 characters: a _csv.Error traceback, exit 1
    rows = ["job_id,step,score", "a,1,0.5", '"b,1,0.5'] + ["c,%d,0.5" % i for i in range(20000)]
    p = tmp_path / f"log.{suffix}"
    p.write_text("\n".join(r.replace(",", sep) for r in rows) + "\n")
    one_line(capsys, ["replay", str(p)], f"log.{suffix}:3: a value of more than 131,072 "
             "characters (a quote opened and never closed")
    p.write_text("\n".join(r.replace(",", sep) for r in rows[:2] + ["b" * 200_000 + ",1,0.5"])
                 + "\n")
    one_line(capsys, ["replay", str(p)], f"log.{suffix}:3: a value of more than 131,072")


@pytest.mark.parametrize("suffix,sep", [("csv", ","), ("tsv", "\t")])
def test_a_nul_byte_in_a_table_is_refused_naming_its_line(tmp_path, capsys, suffix, sep):
    # a NUL left in a job id by a zero-filled block read as a character of the id: job
    # "a\x00" was a job of its own, each half of job a too short to decide on, unsaid
    rows = ["job_id,step,score", "a,1,0.7", "a\x00,2,0.65", "a,3,0.6", "a,4,0.55"]
    p = tmp_path / f"log.{suffix}"
    p.write_text("\n".join(r.replace(",", sep) for r in rows) + "\n")
    one_line(capsys, ["replay", str(p)], f"log.{suffix}:3: a NUL byte (0x00), which no text "
             "log holds")
    p.write_text("\n".join(r.replace(",", sep) for r in rows).replace("\x00", "") + "\n")
    assert read_logs([p]).table["job_id"].unique().to_list() == ["a"]


# a log whose columns are named by its own training loop, not by replay
OWN_NAMES = "run,global_step,eval_accuracy\na,1,0.5\na,2,0.6\na,3,0.5\na,4,0.4\na,5,0.3\n"
MAPPED = "job_id=run,step=global_step,score=eval_accuracy"


def test_columns_map_a_logs_own_names(tmp_path, capsys):
    """A log of run, global_step, eval_accuracy was refused ("field 'job_id': missing
    column", exit 2): its columns had to be renamed in the file."""
    from fastsim.cli import main
    import fastsim

    p = tmp_path / "my.csv"
    p.write_text(OWN_NAMES)
    one_line(capsys, ["replay", str(p)], "field 'job_id': missing column; allowed: a table "
             "with columns job_id, step, score (found 'run', 'global_step', 'eval_accuracy'), "
             "or --columns job_id=COLUMN naming yours")
    assert main(["replay", str(p), "--columns", MAPPED]) == 0
    out = capsys.readouterr().out
    assert "metric eval_accuracy (higher is better)" in out and "stopped" in out
    as_dict = {"job_id": "run", "step": "global_step", "score": "eval_accuracy"}
    for columns in (MAPPED, as_dict):
        log = read_logs(p, columns=columns)
        assert log.metric == "eval_accuracy" and log.job_ids == ["a"]
        assert log.table["step"].to_list() == [1, 2, 3, 4, 5]
    # the column may also be the metric by --metric; a loss column keeps its sense
    t = tmp_path / "loss.csv"
    t.write_text("run,global_step,val_loss\na,1,1.0\na,2,0.9\n")
    assert read_logs(t, columns="job_id=run,step=global_step,score=val_loss").higher_is_better is False
    with pytest.raises(ConfigError, match=r"columns is fastsim.read_logs\(\)'s"):
        fastsim.replay(p, "evalstop:k=2", columns=MAPPED)


@pytest.mark.parametrize("columns,needle", [
    ("job=run,step=global_step", "columns job=run: 'job' is not a field replay reads (did "
     "you mean job_id?); allowed: job_id, step, score,"),
    ("job_id=runn,step=global_step", "my.csv:1: columns job_id=runn: the log has no column "
     "'runn' (did you mean run?); allowed: one of 'run', 'global_step', 'eval_accuracy'"),
    ("job_id=run,job_id=global_step", "columns: field 'job_id' is mapped twice (job_id=run "
     "and job_id=global_step); allowed: each field once"),
    ("job_id=run,step=run", "columns: column 'run' is mapped twice (job_id=run and "
     "step=run); allowed: each column to one field"),
    ("job_id", "columns 'job_id': 'job_id' is not FIELD=COLUMN; allowed: FIELD=COLUMN pairs"),
    ("job_id=run,step=global_step", "my.csv:1: columns job_id=run: the log has a column "
     "'job_id' too; allowed: a field the log does not name itself"),
])
def test_columns_refused_in_one_line_before_anything_is_written(tmp_path, capsys, columns,
                                                                 needle):
    p = tmp_path / "my.csv"
    # the last case's log names job_id itself beside run
    p.write_text(OWN_NAMES if "too;" not in needle else "job_id," + OWN_NAMES.replace("\na", "\nx,a"))
    out = tmp_path / "r.csv"
    one_line(capsys, ["replay", str(p), "--columns", columns, "--metric", "eval_accuracy",
                      "--out", str(out)], needle)
    assert not out.exists()


def test_columns_score_beside_metric_and_on_trainer_state_are_refused(tmp_path, capsys):
    p = tmp_path / "my.csv"
    p.write_text(OWN_NAMES)
    one_line(capsys, ["replay", str(p), "--columns", MAPPED, "--metric", "eval_accuracy"],
             "columns score=eval_accuracy and metric 'eval_accuracy' both name the metric "
             "column; allowed: one of them")
    one_line(capsys, ["replay", str(FIX / "hf_run" / "trainer_state.json"), "--columns",
                      "job_id=run"], "trainer_state.json: columns job_id=run: a "
             "trainer_state.json has no columns to map")


def test_columns_keep_jsonl_ids_checked_as_json(tmp_path):
    """A JSONL id of 1.0 is a job apart from 1: refused under the key --columns names too."""
    p = tmp_path / "my.jsonl"
    p.write_text('{"run": 1.0, "global_step": 1, "score": 0.5}\n')
    with pytest.raises(ConfigError, match=r"my.jsonl:1: field 'job_id': 1.0; allowed"):
        read_logs(p, columns="job_id=run,step=global_step")
