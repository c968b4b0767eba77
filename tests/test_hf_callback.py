"""EvalStopCallback drives a real transformers.Trainer (tiny random GPT-2, CPU, no downloads).

Run with ``pytest -m hf``: needs the optional extra ``fastsim[hf]``.
"""
import json

import numpy as np
import pytest

pytestmark = pytest.mark.hf

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from fastsim.replay.logs import read_logs  # noqa: E402
from fastsim.replay.policies import replay  # noqa: E402

VOCAB = 16
SEQ = 12


class _Shift(torch.utils.data.Dataset):
    """Sequences whose next token is ``t + shift (mod VOCAB)``: the model learns ``shift``."""

    def __init__(self, shift, n, seed):
        g = np.random.default_rng(seed)
        start = g.integers(0, VOCAB, size=n)
        self.ids = torch.tensor((start[:, None] + shift * np.arange(SEQ)[None]) % VOCAB)

    def __len__(self):
        return self.ids.shape[0]

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _trainer(tmp_path, eval_shift, callback, max_steps=60):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=16, n_layer=1, n_head=2)
    model = transformers.GPT2LMHeadModel(cfg)  # randomly initialised: nothing is downloaded
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=max_steps, per_device_train_batch_size=16,
        learning_rate=5e-3, eval_strategy="steps", eval_steps=5, save_strategy="steps",
        save_steps=5, save_total_limit=3, logging_steps=5, report_to=[], use_cpu=True,
        seed=0, disable_tqdm=True, dataloader_num_workers=0)
    return transformers.Trainer(model=model, args=args, train_dataset=_Shift(1, 256, 0),
                                eval_dataset=_Shift(eval_shift, 64, 1), callbacks=[callback])


def test_callback_stops_when_eval_loss_rises_and_keeps_the_earlier_checkpoint(tmp_path):
    from fastsim.replay.hf import EvalStopCallback

    cb = EvalStopCallback(k=2, metric="eval_loss")
    trainer = _trainer(tmp_path, eval_shift=-1, callback=cb)  # training hurts the eval task
    trainer.train()
    state = trainer.state
    assert cb.decision is not None and cb.decision.stop
    assert state.global_step < 60, "training should have been stopped early"
    evals = [e for e in state.log_history if "eval_loss" in e]
    steps = [e["step"] for e in evals]
    trig = steps.index(state.global_step)
    assert evals[trig]["eval_loss"] > evals[trig - 1]["eval_loss"] > evals[trig - 2]["eval_loss"]
    assert cb.keep_step == steps[trig - 2]
    assert cb.keep_checkpoint is not None and (tmp_path / "run" / f"checkpoint-{cb.keep_step}").is_dir()
    record = json.loads((tmp_path / "run" / "evalstop.json").read_text())
    assert record["keep_step"] == cb.keep_step and record["stopped"]
    # replaying the trainer_state.json the Trainer wrote gives the same decision
    log = read_logs([tmp_path / "run" / f"checkpoint-{state.global_step}" / "trainer_state.json"])
    assert log.metric == "eval_loss" and not log.higher_is_better
    r = replay(log, ["evalstop:k=2"]).row(0, named=True)
    assert r["trigger_step"] == state.global_step and r["delivered_step"] == cb.keep_step


def test_callback_lets_an_improving_run_finish(tmp_path):
    from fastsim.replay.hf import EvalStopCallback

    cb = EvalStopCallback(k=3, metric="loss")  # the eval_ prefix is optional
    trainer = _trainer(tmp_path, eval_shift=1, callback=cb, max_steps=30)
    trainer.train()
    assert trainer.state.global_step == 30
    assert cb.decision is not None and not cb.decision.stop
    assert cb.keep_step is None


def _args(tmp_path, **kw):
    return transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=60, eval_strategy="steps", eval_steps=5,
        save_strategy="steps", save_steps=5, report_to=[], use_cpu=True, **kw)


def test_evaluate_after_training_at_the_last_evaluated_step_is_not_a_new_evaluation(tmp_path):
    # trainer.train() then trainer.evaluate(): the final step was evaluated during training,
    # and evaluating it again is neither an error nor a second observation of it
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=3", metric_for_best_model="eval_loss")
    trainer = _trainer(tmp_path, eval_shift=1, callback=cb, max_steps=30)
    trainer.train()
    before = cb.decision
    assert before is not None and not before.stop and trainer.state.global_step == 30
    trainer.evaluate()
    assert cb.decision == before


def test_a_second_eval_dataset_at_the_same_step_is_skipped(tmp_path):
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_a_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    cb.on_train_begin(args, state, control)
    with pytest.warns(UserWarning, match="eval_a_loss"):
        for step, loss in [(5, 1.0), (10, 1.1), (15, 1.2)]:
            state.global_step = step
            cb.on_evaluate(args, state, control, metrics={"eval_a_loss": loss})
            cb.on_evaluate(args, state, control, metrics={"eval_b_loss": 0.5})
    assert cb.decision.stop and cb.keep_step == 5 and control.should_training_stop

def test_loss_reading_policy_decides_on_the_training_loss_as_replay_does(tmp_path):
    # the training loss plateaus while the evaluation loss keeps falling: loss_plateau reads
    # the training loss (replay's `loss` of a trainer_state.json), not eval_loss
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("loss_plateau:w=2,tol=0.01")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    cb.on_train_begin(args, state, control)
    for i, step in enumerate(range(5, 45, 5)):
        state.global_step = step
        state.log_history.append({"loss": 2.0 if i else 3.0, "step": step})
        metrics = {"eval_loss": 1.0 - 0.1 * i}
        state.log_history.append({**metrics, "step": step})
        cb.on_evaluate(args, state, control, metrics=metrics)
        if cb.decision.stop:
            break
    assert cb.decision.stop and state.global_step == 20
    path = tmp_path / "trainer_state.json"
    state.save_to_json(str(path))
    r = replay(read_logs([path], metric="eval_loss"), ["loss_plateau:w=2,tol=0.01"]).row(0, named=True)
    assert r["trigger_step"] == 20 and r["delivered_step"] == cb.keep_step

def test_resumed_training_carries_on_from_the_checkpoint_log(tmp_path):
    # resume_from_checkpoint restores trainer_state.json's log_history: the two declines
    # the run had logged still count, so one more triggers evalstop:k=3
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=3", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 15
    state.log_history = [{"loss": 2.0, "step": 5}, {"eval_loss": 1.0, "step": 5},
                         {"loss": 1.9, "step": 10}, {"eval_loss": 1.1, "step": 10},
                         {"loss": 1.8, "step": 15}, {"eval_loss": 1.2, "step": 15}]
    cb.on_train_begin(args, state, control)
    assert not control.should_training_stop and cb.decision.decline_run == 2
    state.global_step = 20
    cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.3})
    assert cb.decision.stop and cb.keep_step == 5


@pytest.mark.parametrize("step", [True, -5, 2.5])
def test_a_resumed_log_entry_at_no_step_is_skipped_with_a_warning(tmp_path, step):
    """A resumed run's log_history entry whose step is a bool or negative raised a
    ConfigError inside the Trainer and ended training, where every other reading the
    monitor cannot use is warned about and skipped."""
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=3", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 15
    state.log_history = [{"eval_loss": 1.0, "step": 5}, {"eval_loss": 9.0, "step": step},
                         {"eval_loss": 1.1, "step": 10}, {"eval_loss": 1.2, "step": 15}]
    with pytest.warns(UserWarning, match=f"entry at step {step!r} is skipped; allowed: "
                      "steps that are integers >= 0"):
        cb.on_train_begin(args, state, control)
    assert not control.should_training_stop and cb.decision.decline_run == 2


def test_a_resumed_log_of_numpy_steps_is_read(tmp_path):
    """A log_history kept in memory may hold numpy integers: they are the steps they are,
    not readings to skip."""
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 15
    state.log_history = [{"eval_loss": v, "step": np.int64(s)}
                         for s, v in ((5, 1.0), (10, 1.1), (15, 1.2))]
    cb.on_train_begin(args, state, control)
    assert control.should_training_stop and cb.keep_step == 5


def test_resuming_a_run_whose_log_holds_the_stop_stops_again(tmp_path):
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 15
    state.log_history = [{"eval_loss": 1.0, "step": 5}, {"eval_loss": 1.1, "step": 10},
                         {"eval_loss": 1.2, "step": 15}]
    cb.on_train_begin(args, state, control)
    assert control.should_training_stop and cb.decision.stop and cb.keep_step == 5


def test_evalstop_json_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    import pathlib

    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    cb.on_train_begin(args, state, control)
    for step, loss in [(5, 1.0), (10, 1.1), (15, 1.2)]:
        state.global_step = step
        cb.on_evaluate(args, state, control, metrics={"eval_loss": loss})
    record = tmp_path / "run" / "evalstop.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"stopped": false}\n')

    def disk_full(self, data, *a, **kw):  # half the bytes reach the disk, then it is full
        with open(self, "wb" if isinstance(data, bytes) else "w") as fh:
            fh.write(data[:len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", disk_full)
    monkeypatch.setattr(pathlib.Path, "write_bytes", disk_full)
    with pytest.raises(Exception, match="No space left"), pytest.warns(UserWarning, match="not saved"):
        cb.on_train_end(args, state, control)  # (no checkpoint directories here)
    monkeypatch.undo()
    assert record.read_text() == '{"stopped": false}\n'
    assert sorted(p.name for p in record.parent.iterdir()) == ["evalstop.json"]


@pytest.mark.parametrize("trainer_best, limit, warns", [
    (None, 2, False),          # the callback's mark spares the kept checkpoint: k is enough
    (None, 1, True),
    ("eval_loss", 3, True),    # the Trainer resets the mark to its own best at every save
    ("eval_loss", 4, False),
])
def test_rotation_warning_counts_the_trainers_own_best_checkpoint(tmp_path, trainer_best, limit,
                                                                  warns):
    # evalstop:k=2 keeps step t-10 of a trigger at t; with metric_for_best_model set, the
    # Trainer keeps checkpoint-<its best> and the newest, and rotation with
    # save_total_limit=3 deletes checkpoint-<t-10> (a real run: best 5, trigger 25, kept 15,
    # left on disk 5, 20, 25)
    import warnings

    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args = _args(tmp_path, save_total_limit=limit, metric_for_best_model=trainer_best)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        cb.on_train_begin(args, transformers.TrainerState(), transformers.TrainerControl())
    hits = [str(x.message) for x in w if "save_total_limit" in str(x.message)]
    assert bool(hits) == warns, hits
    if warns:
        assert f"save_total_limit={limit}" in hits[0] and "allowed: None or >=" in hits[0]


@pytest.mark.parametrize("kwargs, message", [
    # a string's truth value is True: "False" read as higher-is-better
    (dict(greater_is_better="False"), "greater_is_better = 'False': allowed: True or False"),
    (dict(higher_is_better=0), "higher_is_better = 0: allowed: True or False"),
    (dict(protect_checkpoint="no"), "protect_checkpoint = 'no': allowed: True or False"),
    # the earlier name beside the new one: one of the two was dropped silently
    (dict(policy="patience:patience=3", k=3), "policy='patience:patience=3' and k=3"),
    (dict(metric_for_best_model="eval_acc", metric="eval_loss"), "metric='eval_loss'"),
    (dict(greater_is_better=True, higher_is_better=False), "higher_is_better=False"),
])
def test_bad_callback_arguments_are_refused_at_construction(kwargs, message):
    from fastsim.errors import ConfigError
    from fastsim.replay.hf import StopPolicyCallback

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StopPolicyCallback(**kwargs)


def test_progress_policy_plans_an_epoch_based_run_by_the_trainers_step_count(tmp_path):
    # TrainingArguments(num_train_epochs=3) leaves max_steps at -1; the Trainer has computed
    # state.max_steps before on_train_begin, and stop_at reads progress against it
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("stop_at:f=0.5")
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), num_train_epochs=3, eval_strategy="steps",
        eval_steps=10, save_steps=10, report_to=[], use_cpu=True)
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    state.max_steps = 120
    cb.on_train_begin(args, state, control)
    for step in (50, 60):
        state.global_step = step
        cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
        assert cb.decision.stop == (step == 60)


def test_a_null_metric_or_loss_is_a_missing_reading_as_in_replay(tmp_path):
    # trainer_state.json may hold null; replay skips it, and so does the callback (live and
    # when a resumed run reads its log) instead of raising 'score = None' inside the Trainer
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 10
    state.log_history = [{"loss": None, "step": 5}, {"eval_loss": 1.0, "step": 5},
                         {"eval_loss": None, "step": 10}]
    cb.on_train_begin(args, state, control)
    for step, value in [(15, None), (20, 1.1), (25, 1.2)]:
        state.global_step = step
        cb.on_evaluate(args, state, control, metrics={"eval_loss": value})
    assert cb.decision.stop and cb.keep_step == 5 and cb.decision.eval_index == 3
    lp = StopPolicyCallback("loss_plateau:w=2,tol=0.01")
    lp.on_train_begin(args, transformers.TrainerState(), control)
    state.global_step, state.log_history = 30, [{"loss": None, "step": 30}]
    lp.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
    assert not lp.decision.stop


def test_a_metric_beyond_the_monitors_range_is_a_missing_reading_with_a_warning(tmp_path):
    # StopMonitor refuses a finite score beyond +-1e150 (the detectors' noise fits
    # overflow); the callback must not end a live run over it, live or read from a log
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 10
    state.log_history = [{"eval_loss": 1.0, "step": 5}, {"eval_loss": 1e300, "step": 10}]
    with pytest.warns(UserWarning, match=r"eval_loss = 1e\+300 at step 10 is beyond \+-1e\+150"):
        cb.on_train_begin(args, state, control)
    for step, value in [(15, np.float32(3e38) * np.float64(1e150)), (20, 1.1), (25, 1.2)]:
        state.global_step = step
        if step == 15:
            with pytest.warns(UserWarning, match="at step 15 is beyond"):
                cb.on_evaluate(args, state, control, metrics={"eval_loss": value})
        else:
            cb.on_evaluate(args, state, control, metrics={"eval_loss": value})
    assert cb.decision.stop and cb.keep_step == 5 and cb.decision.eval_index == 3


def test_numpy_bools_are_bools_and_strings_are_not():
    # np.bool_ was refused ('allowed: True or False'), as read_logs and StopMonitor take it
    from fastsim.errors import ConfigError
    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", greater_is_better=np.bool_(False),
                            protect_checkpoint=np.bool_(True))
    assert cb._sense_arg is False and cb.protect_checkpoint is True
    with pytest.raises(ConfigError, match="greater_is_better = 'no': allowed: True or False"):
        StopPolicyCallback("evalstop:k=2", greater_is_better="no")


def test_a_run_that_never_saw_its_metric_replaces_an_earlier_runs_record(tmp_path):
    from fastsim.replay.hf import StopPolicyCallback

    record = tmp_path / "run" / "evalstop.json"
    record.parent.mkdir(parents=True)
    record.write_text('{"stopped": true, "keep_step": 5}\n')  # an earlier run's stop
    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_accuracy")
    args, state, control = _args(tmp_path), transformers.TrainerState(), transformers.TrainerControl()
    cb.on_train_begin(args, state, control)
    state.global_step = 10
    with pytest.warns(UserWarning, match="eval_accuracy"):
        cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
    cb.on_train_end(args, state, control)
    got = json.loads(record.read_text())
    assert got["stopped"] is False and got["keep_step"] is None and got["global_step"] == 10
    assert "no evaluation reported eval_accuracy" in got["reason"]


@pytest.mark.parametrize("field, value, message", [
    # TrainingArguments keeps text it is given (parse_dict, a YAML/JSON config, a field set
    # after construction): "False" was read as True, and the callback stopped on the wrong
    # direction of eval_accuracy
    ("greater_is_better", "False", "greater_is_better = 'False' (str); allowed: True, False or None"),
    ("greater_is_better", 0, "greater_is_better = 0 (int); allowed: True, False or None"),
    ("load_best_model_at_end", "no", "load_best_model_at_end = 'no' (str); allowed: True or False"),
    ("metric_for_best_model", 5, "metric_for_best_model = 5 (int); allowed: a metric name"),
    ("save_total_limit", "2", "save_total_limit = '2' (str); allowed: None or an integer"),
])
def test_trainer_settings_the_callback_would_misread_are_refused_in_one_line(tmp_path, field,
                                                                             value, message):
    from fastsim.errors import ConfigError
    from fastsim.replay.hf import StopPolicyCallback

    args = _args(tmp_path, metric_for_best_model="accuracy", greater_is_better=False)
    setattr(args, field, value)
    cb = StopPolicyCallback("evalstop:k=2")
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cb.on_train_begin(args, transformers.TrainerState(), transformers.TrainerControl())
    assert cb.monitor is None


def test_trainer_settings_as_numpy_scalars_are_read_as_the_values_they_are(tmp_path):
    from fastsim.replay.hf import StopPolicyCallback

    args = _args(tmp_path, metric_for_best_model="accuracy")
    args.greater_is_better, args.save_total_limit = np.bool_(False), np.int64(5)
    cb = StopPolicyCallback("evalstop:k=2")
    cb.on_train_begin(args, transformers.TrainerState(), transformers.TrainerControl())
    assert cb.metric == "eval_accuracy" and cb.monitor.higher_is_better is False


def test_a_second_callback_in_one_trainer_is_refused(tmp_path):
    """Two StopPolicyCallbacks in one Trainer both wrote <output_dir>/evalstop.json, the
    last one's record silently standing for both: the second is refused in one line when
    training begins, before any step.  One callback trained again is not a second."""
    from fastsim.errors import ConfigError
    from fastsim.replay.hf import StopPolicyCallback

    first, second = StopPolicyCallback("evalstop:k=2"), StopPolicyCallback("patience:patience=3")
    trainer = _trainer(tmp_path, eval_shift=1, callback=first, max_steps=5)
    trainer.add_callback(second)
    with pytest.raises(ConfigError, match=r"a second one in this Trainer \(policy patience"):
        trainer.train()
    assert trainer.state.global_step == 0
    assert not (tmp_path / "run" / "evalstop.json").exists()
    trainer.remove_callback(second)
    trainer.train()
    trainer.train()
    assert json.loads((tmp_path / "run" / "evalstop.json").read_text())["policy"] == first.policy.label


def test_each_warning_at_train_begin_names_the_line_that_began_training(tmp_path):
    """on_train_begin's warnings (a resumed log entry skipped, checkpoints not saved at every
    evaluation, rotation that deletes the kept checkpoint) point at its caller, as a
    library's warnings do, from whichever of its steps they come; not at fastsim's code."""
    import warnings

    from fastsim.replay.hf import StopPolicyCallback

    cb = StopPolicyCallback("evalstop:k=2", metric_for_best_model="eval_loss")
    args = _args(tmp_path, save_total_limit=1)
    args.save_steps = 10  # evaluations every 5 steps
    state, control = transformers.TrainerState(), transformers.TrainerControl()
    state.global_step = 10
    state.log_history = [{"eval_loss": 1.0, "step": -5}, {"eval_loss": 1.0, "step": 5}]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb.on_train_begin(args, state, control)
    said = [(w.filename, str(w.message)) for w in caught]
    for phrase in ("is skipped", "not saved at every evaluation", "save_total_limit=1"):
        assert any(phrase in message for _, message in said), said
    assert {filename for filename, _ in said} == {__file__}, said
