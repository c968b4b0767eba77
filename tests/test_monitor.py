"""EvalStopMonitor: unit behaviour, and monitor == replay == engine on random sequences."""
import math
import re

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fastsim import registry as R
from fastsim.errors import ConfigError
from fastsim.replay.logs import EvalLog
from fastsim.replay.monitor import EvalStopMonitor
from fastsim.replay.policies import replay
from fastsim.kernels.codes import ACT_STOP, EVALSTOP
from fastsim.kernels.detectors import evalstop_trigger_nb, stop_decision_1j_nb


def test_stop_keeps_the_checkpoint_k_evaluations_back_and_stays_stopped():
    m = EvalStopMonitor(k=2)
    decisions = [m.observe("j", s, x) for s, x in [(10, 0.1), (20, 0.3), (30, 0.2), (40, 0.1)]]
    assert [d.stop for d in decisions] == [False, False, False, True]
    assert decisions[2].keep_step == 30 and decisions[2].decline_run == 1
    assert decisions[3].keep_step == 20 and decisions[3].eval_index == 4
    again = m.observe("j", 50, 0.9)
    assert again.stop and again.keep_step == 20 and m.decision("j") is again
    assert m.decision("other") is None


def test_the_monitor_and_its_decision_are_exported_from_fastsim():
    import fastsim
    import fastsim.replay

    for name in ("StopMonitor", "EvalStopMonitor", "Decision"):
        assert getattr(fastsim, name) is getattr(fastsim.replay, name)
        assert name in fastsim.__all__ and name in dir(fastsim)
    d = fastsim.StopMonitor("evalstop:k=1").observe("j", 1, 0.5)
    assert isinstance(d, fastsim.Decision) and not d.stop


def test_nan_is_skipped_ties_reset_jobs_are_independent():
    m = EvalStopMonitor(k=2)
    for s, x in [(1, 0.5), (2, 0.4), (3, math.nan), (4, 0.3)]:
        d = m.observe("a", s, x)
    assert d.stop and d.keep_step == 1  # NaN neither declined nor reset
    for s, x in [(1, 0.5), (2, 0.4), (3, 0.4), (4, 0.3)]:
        d = m.observe("b", s, x)
    assert not d.stop and d.decline_run == 1  # the tie reset the run
    d = m.observe("c", 1, math.nan)
    assert not d.stop and d.keep_step is None and d.eval_index == 0


def test_lower_is_better():
    m = EvalStopMonitor(k=1, higher_is_better=False)
    assert not m.observe("j", 1, 2.0).stop
    assert not m.observe("j", 2, 1.5).stop
    d = m.observe("j", 3, 1.7)
    assert d.stop and d.keep_step == 2


def test_a_numpy_bool_is_a_sense_and_a_string_is_not():
    """np.bool_(False) was refused as 'higher_is_better = False: allowed: True or False'."""
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor("evalstop:k=1", higher_is_better=np.bool_(False))
    assert m.higher_is_better is False
    assert not m.observe("j", 1, 2.0).stop and not m.observe("j", 2, 1.5).stop
    assert m.observe("j", 3, 1.7).stop  # a loss rising: a decline
    assert EvalStopMonitor(k=1, higher_is_better=np.bool_(True)).higher_is_better is True
    for bad in ("no", 0, None):
        with pytest.raises(ConfigError, match="higher_is_better = .*allowed: True or False"):
            StopMonitor("evalstop:k=1", higher_is_better=bad)


@pytest.mark.parametrize("policy", ["margin", "cusum", "peak", "bocpd", "evalstop:k=1"])
def test_a_score_beyond_the_detectors_range_is_refused(policy):
    """After observe('j', 3, 1e308) margin, cusum, peak and bocpd never fired again: their
    noise fit's sum of squares overflowed."""
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor(policy)
    m.observe("j", 1, 0.1)
    for bad in (1e308, -1e151, np.float64(2e150)):
        with pytest.raises(ConfigError, match=r"observe\('j', step=2\): score = .*; allowed: a "
                           r"number from -1e150 to 1e150, inf or -inf"):
            m.observe("j", 2, bad)
    assert m.observe("j", 2, 1e150).eval_index == 2  # the refused calls recorded nothing
    assert m.observe("j", 3, -math.inf).eval_index == 3


def test_bad_input_is_a_clear_error():
    m = EvalStopMonitor(k=2)
    m.observe("j", 5, 0.1)
    with pytest.raises(ConfigError, match="step 5 is not after the previous step 5"):
        m.observe("j", 5, 0.2)
    with pytest.raises(ConfigError, match="score = 'x'"):
        m.observe("j", 6, "x")
    with pytest.raises(ConfigError, match="step = 1.5"):
        m.observe("j", 1.5, 0.1)
    with pytest.raises(ConfigError, match="k = 0"):
        EvalStopMonitor(k=0)
    for bad in (True, np.bool_(True), 2.0, np.int64(0)):
        with pytest.raises(ConfigError, match="k = "):
            EvalStopMonitor(k=bad)
    # numpy's integer is an integer: it was refused as 'allowed: an integer >= 1'
    assert type(EvalStopMonitor(k=np.int64(2)).k) is int
    # and numpy's numbers are thresholds ('allowed: a finite number >= 0' refused them)
    assert EvalStopMonitor(threshold=np.float32(0.25)).threshold == 0.25
    assert EvalStopMonitor(threshold=np.int64(0)).threshold == 0.0
    with pytest.raises(ConfigError, match="threshold = "):
        EvalStopMonitor(threshold=np.float64("nan"))
    m.reset("j")
    assert not m.observe("j", 1, 0.3).stop  # a reset job starts over
    assert m.observe("j", np.int64(2), 0.2).eval_index == 2


def test_a_loss_policy_observed_without_a_loss_is_refused_not_silently_skipped():
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor("loss_plateau:w=2,tol=0.01")
    with pytest.raises(ConfigError, match="no loss given, and loss_plateau"):
        m.observe("j", 1, 0.5)  # it used to skip every call as missing, and never stop
    assert m.observe("j", 2, 0.5, loss=math.nan).reason.endswith("missing value skipped")
    assert not m.observe("j", 3, 0.5, loss=2.0).stop
    assert not StopMonitor("evalstop:k=2").observe("j", 1, 0.5).stop  # scores only: no loss needed


# Scores on a coarse grid so ties are common; NaN marks a missing evaluation.
scores = st.lists(st.one_of(st.integers(0, 4).map(float), st.just(math.nan)), min_size=0, max_size=25)


@settings(max_examples=300, deadline=None)
@given(seqs=st.lists(scores, min_size=1, max_size=4), k=st.integers(1, 4), hib=st.booleans())
def test_monitor_replay_and_engine_decide_identically(seqs, k, hib):
    rows = []
    for j, seq in enumerate(seqs):
        rows += [{"job_id": f"j{j}", "step": 10 * (e + 1), "metric": x} for e, x in enumerate(seq)]
    if not rows:
        return
    table = pl.DataFrame(rows, schema={"job_id": pl.String, "step": pl.Int64, "metric": pl.Float64})
    table = table.with_columns((pl.col("metric") * (1.0 if hib else -1.0)).alias("score"))
    res = replay(EvalLog(table, "metric", hib), [f"evalstop:k={k}"])
    for j, seq in enumerate(seqs):
        if not seq:
            continue
        steps = [10 * (e + 1) for e in range(len(seq))]
        # monitor
        m = EvalStopMonitor(k=k, higher_is_better=hib)
        mon = None
        for s, x in zip(steps, seq):
            d = m.observe("j", s, x)
            if d.stop and mon is None:
                mon = (s, d.keep_step)
        # engine: the same kernels on the observed (non-missing) sequence
        seen = [(s, x if hib else -x) for s, x in zip(steps, seq) if not math.isnan(x)]
        arr = np.array([x for _, x in seen], dtype=np.float64)
        trig = evalstop_trigger_nb(arr, k)
        act, trig2, deliv = stop_decision_1j_nb(EVALSTOP, k, 0.65, 2, 0.01, np.zeros(0), arr,
                                                np.zeros(arr.size), np.arange(1.0, arr.size + 1),
                                                float(arr.size))
        assert trig == trig2
        eng = (seen[trig - 1][0], seen[deliv - 1][0]) if act == ACT_STOP else None
        # replay
        r = res.filter(pl.col("job_id") == f"j{j}").row(0, named=True)
        # a stop at the last evaluation is the same decision, reported as at completion
        rep = (r["trigger_step"], r["delivered_step"]) if r["detected"] else None
        assert mon == eng == rep, (seq, k, hib)
        assert r["stopped"] == (rep is not None and rep[0] < steps[-1]), (seq, k, hib)


def test_callback_is_an_importable_class_with_trainer_conventions(monkeypatch, tmp_path):
    """The callback's logic without transformers: Trainer objects are stand-ins here; the
    real Trainer run is tests/test_hf_callback.py (``pytest -m hf``)."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    assert "StopPolicyCallback" in dir(hf) and hf.EvalStopCallback is hf.StopPolicyCallback
    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True,
                           max_steps=100, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path), load_best_model_at_end=False)

    def run(cb, values):
        state, control = SimpleNamespace(global_step=0), SimpleNamespace(should_training_stop=False)
        cb.on_train_begin(args, state, control)
        for i, v in enumerate(values):
            state.global_step = 10 * (i + 1)
            cb.on_evaluate(args, state, control, metrics={"eval_accuracy": v})
            if control.should_training_stop:
                break
        return state.global_step if control.should_training_stop else None

    acc = [0.5, 0.6, 0.58, 0.57, 0.3]
    cb = hf.StopPolicyCallback("evalstop:k=2")  # metric and sense from TrainingArguments
    assert run(cb, acc) == 40 and cb.keep_step == 20 and cb.metric == "eval_accuracy"
    # the 0.01 drop is within the threshold: it resets the run, as a tie would
    assert run(hf.StopPolicyCallback("evalstop:k=2", threshold=0.015), acc + [0.1]) == 60
    assert run(hf.StopPolicyCallback("stop_at:f=0.3"), acc) == 30  # progress = step / max_steps
    with pytest.raises(ConfigError, match="no streaming form"):
        hf.StopPolicyCallback("oracle")
    # the default policy's text given with k: k=3 ran without a word
    with pytest.raises(ConfigError, match=r"policy='evalstop:k=2' and k=3; allowed: one of"):
        hf.StopPolicyCallback("evalstop:k=2", k=3)
    assert hf.StopPolicyCallback(k=3).k == 3 and hf.StopPolicyCallback().k == 2


@pytest.mark.parametrize("spec", ["evalstop:k=3", "loss_plateau:w=2,tol=-0.5", "stop_at:f=5"])
def test_builtin_streaming_state_does_not_grow(spec):
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor(spec, planned_steps=10)
    rng = np.random.default_rng(1)
    sizes = []
    for step in range(1, 2001):
        d = m.observe("j", step, float(rng.random()), float(2.0 + rng.random()))
        st = m._jobs["j"]
        state = vars(st.stream).values() if st.stream is not None else ()  # None: stopped
        sizes.append(len(st.recent_steps) + sum(len(v) for v in state if hasattr(v, "__len__")))
        if d.stop:
            break
    assert max(sizes) <= 4, f"{spec}: per-job state grew to {max(sizes)}"


DETECTORS = [d.name for d in R.BUILTIN_POLICIES if d.vector]


@pytest.mark.parametrize("name", DETECTORS)
@settings(max_examples=60, deadline=None)
@given(seqs=st.lists(st.lists(st.one_of(st.floats(0, 1), st.integers(0, 4).map(lambda x: x / 4),
                                        st.just(math.nan)), max_size=14), min_size=1, max_size=3),
       hib=st.booleans(), data=st.data())
def test_detector_monitor_replay_and_engine_decide_identically(name, seqs, hib, data):
    """Each online detector as a policy: the monitor's streaming form, replay and the
    engine's decision kernel stop at the same step and keep the same (best) checkpoint."""
    from fastsim.config import PolicyConfig
    from fastsim.replay.monitor import StopMonitor

    d = R.lookup("policy", name)
    z = data.draw(st.sampled_from([0.5, 1.0, 2.0]))
    extra = {"patience": "patience=2", "margin": f"z={z}", "cusum": f"h={z}",
             "peak": f"z={z},min_evals=3", "bocpd": f"z={z}"}[name]
    spec = f"{name}:{extra},sigma0=0.05,scope=all" if name != "patience" else f"{name}:{extra},scope=all"
    p = PolicyConfig.parse(spec)
    rows = [{"job_id": f"j{j}", "step": 10 * (e + 1), "metric": x}
            for j, seq in enumerate(seqs) for e, x in enumerate(seq)]
    if not rows:
        return
    table = pl.DataFrame(rows, schema={"job_id": pl.String, "step": pl.Int64, "metric": pl.Float64})
    table = table.with_columns((pl.col("metric") * (1.0 if hib else -1.0)).alias("score"))
    res = replay(EvalLog(table, "metric", hib), [p])
    for j, seq in enumerate(seqs):
        if not seq:
            continue
        m = StopMonitor(p, higher_is_better=hib)
        mon = None
        for e, x in enumerate(seq):
            dec = m.observe("j", 10 * (e + 1), x)
            if dec.stop and mon is None:
                mon = (10 * (e + 1), dec.keep_step)
        seen = [(10 * (e + 1), x if hib else -x) for e, x in enumerate(seq) if not math.isnan(x)]
        arr = np.array([x for _, x in seen], dtype=np.float64)
        act, trig, deliv = stop_decision_1j_nb(d.code, 0, 0.0, 1, 0.0, np.array(p.vector), arr,
                                               np.zeros(arr.size), np.arange(1.0, arr.size + 1), 1.0)
        eng = (seen[trig - 1][0], seen[deliv - 1][0]) if act == ACT_STOP else None
        r = res.filter(pl.col("job_id") == f"j{j}").row(0, named=True)
        # a stop at the last evaluation is the same decision, reported as at completion
        rep = (r["trigger_step"], r["delivered_step"]) if r["detected"] else None
        assert mon == eng == rep, (seq, spec, hib)
        assert r["stopped"] == (rep is not None and rep[0] < 10 * len(seq)), (seq, spec, hib)


@pytest.mark.parametrize("name", DETECTORS)
def test_detector_streaming_state_is_bounded(name):
    """3,000 evaluations (beyond BOCPD's kept run lengths): the per-job state keeps its size."""
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor(f"{name}:scope=all")
    sizes = set()
    for step in range(1, 3001):
        d = m.observe("j", step, math.log(step))  # rising: no detector fires
        st = m._jobs["j"]
        sizes.add((st.stream.state.size, len(st.recent_steps)))
    assert not d.stop and len(sizes) == 1, sizes
    assert next(iter(sizes))[0] <= 3 * 1001 + 13


def test_patience_callback_is_early_stopping_with_the_best_checkpoint(monkeypatch, tmp_path):
    """``StopPolicyCallback("patience:patience=P", threshold=T)`` stops where Hugging Face's
    ``EarlyStoppingCallback(P, T)`` does (its rule: tests/test_detectors_online.py), keeps
    the best checkpoint and marks it for rotation at every new best."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True, max_steps=100,
                           eval_strategy="steps", save_strategy="steps", eval_steps=10,
                           save_steps=10, save_total_limit=None, output_dir=str(tmp_path),
                           load_best_model_at_end=False)
    acc = [0.5, 0.6, 0.61, 0.605, 0.62, 0.3, 0.2]
    cb = hf.StopPolicyCallback("patience:patience=2", threshold=0.015)
    state, control = SimpleNamespace(global_step=0), SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control)
    marked = []
    for i, v in enumerate(acc):
        state.global_step = 10 * (i + 1)
        cb.on_evaluate(args, state, control, metrics={"eval_accuracy": v})
        marked.append(state.best_model_checkpoint)
        if control.should_training_stop:
            break
    # 0.61 and 0.605 do not beat 0.6 by more than 0.015: counter 2 at step 40
    assert state.global_step == 40 and cb.keep_step == 30
    assert marked[-1].endswith("checkpoint-30") and marked[0].endswith("checkpoint-10")
    assert cb.policy.label == "patience(patience=2,threshold=0.015)"
    with pytest.raises(ConfigError, match="differs"):
        hf.StopPolicyCallback("patience:threshold=0.1", threshold=0.015)
    with pytest.raises(ConfigError, match="applies to evalstop and patience only"):
        hf.StopPolicyCallback("cusum", threshold=0.015)


def test_callback_takes_a_reading_the_monitor_refuses_as_missing_with_a_warning(monkeypatch,
                                                                               tmp_path):
    """A metric that is no number (a compute_metrics string) and, under loss_plateau, a
    training loss <= 0 (GRPO logs them) raised StopMonitor's ConfigError inside the Trainer
    and ended the run; they are missing readings with a warning, as a score beyond
    +-1e150 is, live and when a resumed run reads its log."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True,
                           max_steps=100, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path), load_best_model_at_end=False)

    def run(cb, values, losses, history=()):
        state = SimpleNamespace(global_step=len(history) * 10, log_history=list(history))
        control = SimpleNamespace(should_training_stop=False)
        cb.on_train_begin(args, state, control)
        for v, loss in zip(values, losses):
            state.global_step += 10
            state.log_history.append({"loss": loss, "step": state.global_step})
            cb.on_evaluate(args, state, control, metrics={"eval_accuracy": v})
        return cb.decision

    with pytest.warns(UserWarning, match=r"eval_accuracy = 'n/a' at step 20 is not a number; "
                                         r"taken as a missing reading"):
        d = run(hf.StopPolicyCallback("evalstop:k=2"), [0.6, "n/a", 0.5, 0.4], [1.0] * 4)
    assert d.stop and d.keep_step == 10 and d.eval_index == 3
    with pytest.warns(UserWarning, match=r"loss = -0\.1 at step 20 is not allowed: a positive "
                                         r"loss for loss_plateau"):
        d = run(hf.StopPolicyCallback("loss_plateau:w=2,tol=0.01"), [0.5] * 5,
                [0.5, -0.1, 0.2, 0.2, 0.2])
    assert d.stop and d.eval_index == 4
    history = [{"loss": 0.0, "step": 10}, {"eval_accuracy": 0.5, "step": 10}]
    with pytest.warns(UserWarning, match=r"loss = 0\.0 at step 10 is not allowed"):
        d = run(hf.StopPolicyCallback("loss_plateau:w=2,tol=0.01"), [0.5], [0.5], history)
    assert not d.stop and d.eval_index == 1


def test_monitor_arguments_a_float_cannot_hold_are_one_line():
    import numpy as np

    from fastsim.errors import ConfigError
    from fastsim.replay.monitor import StopMonitor

    calls = [lambda: StopMonitor().observe("a", 1, 10**400),
             lambda: StopMonitor().observe("a", 1, 0.5, loss=10**400),
             lambda: StopMonitor().observe("a", 1, np.array([0.5])),
             lambda: StopMonitor().observe("a", 1, np.complex128(0.5 + 3j)),
             lambda: StopMonitor("stop_at:f=0.5", planned_steps=100).observe("a", 10**400, 0.5),
             lambda: StopMonitor("stop_at:f=0.5", planned_steps=10**400),
             lambda: StopMonitor(threshold=10**400)]
    for call in calls:
        with pytest.raises(ConfigError):
            call()


def test_a_reading_beyond_a_floats_range_is_not_read_as_inf():
    """A long double or a Decimal of 1e4000 became inf, an ordinary reading, where replay
    refuses 1e400 in a log; inf itself stays a reading."""
    from decimal import Decimal

    import numpy as np

    from fastsim.errors import ConfigError
    from fastsim.replay.monitor import StopMonitor

    for big in (np.longdouble("1e4000"), -np.longdouble("1e4000"), Decimal("1e400")):
        with pytest.raises(ConfigError, match=r"score = .*; allowed: a number"):
            StopMonitor().observe("a", 1, big)
        with pytest.raises(ConfigError, match=r"loss = .*; allowed: a number"):
            StopMonitor().observe("a", 1, 0.5, loss=big)
    for inf in (np.longdouble("inf"), Decimal("-Infinity"), math.inf):
        assert not StopMonitor().observe("a", 1, inf).stop


@pytest.mark.parametrize("job_id", [1.5, 1.0, float("nan"), np.float64(2.0), np.nan, None, True,
                                    np.bool_(False), ("exp", 1), 1 + 0j, b"run", "", " \t"])
def test_a_job_id_is_a_string_or_an_integer(job_id):
    """A float id would merge with an int (1.0 is job 1) or, NaN, be a new job at every
    call (NaN != NaN): refused at every entry point, naming job_id and the value."""
    from fastsim.replay.monitor import StopMonitor

    m = StopMonitor("evalstop:k=2")
    for call in (lambda: m.observe(job_id, 1, 0.5), lambda: m.reset(job_id),
                 lambda: m.decision(job_id), lambda: m.best_step(job_id)):
        with pytest.raises(ConfigError) as exc:
            call()
        msg = str(exc.value)
        assert f"job_id = {job_id!r}; allowed: a non-empty string or an integer" in msg
        assert len(msg.splitlines()) == 1
    assert not m._jobs


def test_integer_and_text_job_ids_are_one_job_as_replay_reads_them(tmp_path):
    """observe(1, ...) and observe("1", ...) were two jobs (keys 1 and "1"), where replay
    reads JSONL job ids 1 and "1" as one job: the same log decided two ways."""
    import json

    from fastsim.replay.logs import read_logs
    from fastsim.replay.monitor import StopMonitor

    ids, scores = (1, "1", np.int64(1)), (0.5, 0.4, 0.3)
    p = tmp_path / "ids.jsonl"
    p.write_text("".join(json.dumps({"job_id": i if isinstance(i, str) else int(i), "step": s,
                                     "score": x}) + "\n"
                         for s, (i, x) in enumerate(zip(ids, scores), start=1)))
    assert read_logs([p]).job_ids == ["1"]
    m = StopMonitor("evalstop:k=2")
    decisions = [m.observe(i, s, x) for s, (i, x) in enumerate(zip(ids, scores), start=1)]
    assert [d.eval_index for d in decisions] == [1, 2, 3]  # one job: two declines stop it
    assert decisions[-1].stop and decisions[-1].keep_step == 1
    assert list(m._jobs) == ["1"] and m.decision(np.uint8(1)) is decisions[-1]


def test_text_job_ids_with_white_space_around_are_the_job_replay_reads():
    """Replay reads a log's " 1" and "1\t" as job "1" (its column stripped): the monitor
    filed them as three jobs, and the same log decided two ways."""
    import polars as pl

    from fastsim.replay.logs import job_key
    from fastsim.replay.monitor import StopMonitor

    ids = (" 1", "1\t", "\u30001\n")
    m = StopMonitor("evalstop:k=2")
    decisions = [m.observe(i, s, x) for s, (i, x) in enumerate(zip(ids, (0.5, 0.4, 0.3)), 1)]
    assert [d.eval_index for d in decisions] == [1, 2, 3] and decisions[-1].stop
    assert list(m._jobs) == ["1"]
    # the same characters as the log reader's polars strip: every code point at both ends
    # (white space ends below U+3001), the separators U+001C-U+001F kept as polars keeps them
    text = [chr(c) + "x" + chr(c) for c in range(0x3001) if not 0xD800 <= c <= 0xDFFF]
    assert [job_key(t) for t in text] == pl.Series(text).str.strip_chars().to_list()
    assert job_key("\x1c1\x1f") == "\x1c1\x1f" and job_key("\u30001 ") == "1"


@pytest.mark.parametrize("threshold", [math.inf, 1e400, math.nan, -0.1])
def test_a_threshold_that_is_not_a_finite_number_names_what_is_allowed(threshold):
    # inf is a number >= 0: the message has to say finite
    from fastsim import StopMonitor

    with pytest.raises(ConfigError, match=r"threshold = .*allowed: a finite number >= 0"):
        StopMonitor("evalstop:k=2", threshold=threshold)


def test_a_bool_step_is_refused_as_a_bool_job_id_is():
    """observe('j', True, x) recorded an evaluation at step 1."""
    m = EvalStopMonitor(k=2)
    for step in (True, np.bool_(False)):
        with pytest.raises(ConfigError, match=r"step = (True|np.False_|False); allowed: a non-neg"):
            m.observe("j", step, 0.5)
    assert m.decision("j") is None and m.best_step("j") is None  # nothing recorded


def test_an_unknown_observe_keyword_is_one_line_naming_the_nearest():
    """observe('j', 1, 0.5, los=2.0) was Python's TypeError, unlike StopMonitor(...)."""
    with pytest.raises(ConfigError, match=r"keyword 'los' is unknown \(did you mean loss\?\)"):
        EvalStopMonitor(k=2).observe("j", 1, 0.5, los=2.0)


@pytest.mark.parametrize("kwargs,needle", [
    ({"policy": "evalstop:k=0"}, "k=0 is invalid"),
    ({"policy": "oracle"}, "oracle"),
    ({"greater_is_better": "yes"}, "greater_is_better = 'yes': allowed: True or False"),
    ({"metric_for_best_model": ""}, "metric_for_best_model = '': allowed: a metric name"),
    ({"metric_for_best_model": " "}, "metric_for_best_model = ' ': allowed: a metric name"),
    ({"k": 3, "policy": "evalstop:k=3"}, "allowed: one of the two"),
    ({"job_id": 1.5}, "job_id"),
    # k went into the spec as text: "3,scope=all" set the scope, True read policy.k='True'
    ({"k": "3,scope=all"}, "StopPolicyCallback k = '3,scope=all': allowed: an integer >= 1"),
    ({"k": True}, "StopPolicyCallback k = True: allowed: an integer >= 1"),
    ({"k": 2.0}, "StopPolicyCallback k = 2.0: allowed: an integer >= 1"),
])
def test_callback_arguments_are_checked_before_transformers_is_asked_for(monkeypatch, kwargs,
                                                                         needle):
    """Without transformers, a wrong argument was hidden behind the ImportError: installing
    the extra was the first thing a user was told to do, the argument error the second."""
    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", object)  # as when transformers is missing
    with pytest.raises(ConfigError, match=re.escape(needle)):
        hf.StopPolicyCallback(**kwargs)
    with pytest.raises(ImportError) as exc:
        hf.StopPolicyCallback("evalstop:k=2")
    msg = str(exc.value)
    assert "\n" not in msg and "pip install 'fastsim[hf]'" in msg and "transformers" in msg


def test_an_evaluation_before_training_of_a_run_with_no_planned_length_yet_is_no_error(
        monkeypatch, tmp_path):
    """trainer.evaluate() before train() (a baseline) in a run set by num_train_epochs
    (max_steps -1, the Trainer's state.max_steps still 0) under a policy that reads
    progress raised 'the run has no planned length' from inside evaluate(); it decides
    nothing, and training plans the run by the steps the Trainer computed."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model=None, greater_is_better=None, max_steps=-1,
                           eval_strategy="steps", save_strategy="steps", eval_steps=10,
                           save_steps=10, save_total_limit=None, output_dir=str(tmp_path),
                           load_best_model_at_end=False)
    cb = hf.StopPolicyCallback("stop_at:f=0.5")
    state = SimpleNamespace(global_step=0, max_steps=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
    assert cb.decision is None and not control.should_training_stop
    state.max_steps = 40  # train(): the Trainer has computed the steps of its epochs
    cb.on_train_begin(args, state, control)
    for step in (10, 20):
        state.global_step = step
        cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
    assert control.should_training_stop and cb.decision.eval_index == 2


@pytest.mark.parametrize("max_steps, stops_at", [(np.int64(40), 20), (True, None)])
def test_a_numpy_max_steps_plans_the_run_and_a_bool_does_not(monkeypatch, tmp_path, max_steps,
                                                             stops_at):
    """TrainingArguments(max_steps=np.int64(40)) under stop_at was 'the run has no planned
    length' (a ConfigError that ended training), and max_steps=True planned a run of one
    step (stop_at stopped at the first evaluation)."""
    from types import SimpleNamespace

    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model=None, greater_is_better=None,
                           max_steps=max_steps, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path), load_best_model_at_end=False)
    cb = hf.StopPolicyCallback("stop_at:f=0.5")
    state = SimpleNamespace(global_step=0, max_steps=0 if stops_at else 80, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    cb.on_train_begin(args, state, control)
    for step in (10, 20, 30):
        state.global_step = step
        cb.on_evaluate(args, state, control, metrics={"eval_loss": 1.0})
        if control.should_training_stop:
            break
    assert state.global_step == (stops_at or 30) and control.should_training_stop == bool(stops_at)


def test_callback_warnings_are_one_bounded_line(monkeypatch, tmp_path):
    """The callback's warnings echoed the Trainer's values whole: a metric value of 15,000
    characters made a warning of 15,000, and a checkpoint path's line break broke its
    line; they are one line, bounded, as a ConfigError's message is."""
    import warnings
    from types import SimpleNamespace

    from fastsim.errors import MAX_WORD
    from fastsim.replay import hf

    monkeypatch.setattr(hf, "_TrainerCallback", type("Base", (), {}))
    args = SimpleNamespace(metric_for_best_model="accuracy", greater_is_better=True,
                           max_steps=100, eval_strategy="steps", save_strategy="steps",
                           eval_steps=10, save_steps=10, save_total_limit=None,
                           output_dir=str(tmp_path / "run\nx"), load_best_model_at_end=False)
    cb = hf.StopPolicyCallback("evalstop:k=1")
    state = SimpleNamespace(global_step=0, log_history=[])
    control = SimpleNamespace(should_training_stop=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb.on_train_begin(args, state, control)
        for step, value in ((10, 0.6), (20, "bad" * 5000), (30, 0.5)):
            state.global_step = step
            cb.on_evaluate(args, state, control, metrics={"eval_accuracy": value})
        assert control.should_training_stop
        cb.on_train_end(args, state, control)
    said = [str(w.message) for w in caught]
    assert any("eval_accuracy = 'badbad" in m for m in said)
    assert any("was not saved" in m and "run\\nx" in m for m in said), said
    assert all(len(m) < 2 * MAX_WORD and "\n" not in m for m in said), said


def test_a_stopped_job_keeps_its_decision_not_its_policy_state():
    """Every finished job kept its policy's state: 26 kB each for BOCPD (its run lengths),
    a user policy's whole series, though a stopped job only answers its decision."""
    import tracemalloc

    from fastsim import StopMonitor

    m = StopMonitor("bocpd")
    scores = [0.5, 0.6, 0.7, 0.8, 0.4, 0.3, 0.2, 0.1, 0.05, 0.01] + [0.0] * 30

    def finish(job):
        for i, s in enumerate(scores):
            if m.observe(job, i, s).stop:
                return
        raise AssertionError("bocpd never stopped")

    finish("warm")
    tracemalloc.start()
    for job in range(100):
        finish(job)
    per_job = tracemalloc.get_traced_memory()[0] / 100
    tracemalloc.stop()
    assert per_job < 4000, per_job
    assert m.decision(7).stop and m.observe(7, 1000, 1.0) == m.decision(7)
    assert m.best_step(7) == 3


_SPLIT_SCORES = (0.5, 0.6, 0.55, 0.5, 0.45, 0.4)
_SPLIT_LOSSES = (2.0, 1.5, 1.495, 1.49, 1.489, 1.488)
_SPLIT_STEPS = [10 * (i + 1) for i in range(len(_SPLIT_SCORES))]


def _replayed_split_log(tmp_path, spec: str, loss_first: bool) -> dict:
    """Replay's row for a log whose every step is a scored row and a loss-only row, the
    loss first or second (replay merges them in either order); it stops the job."""
    from fastsim.replay.logs import read_logs

    rows = [(f"a,{s},,{x}\n", f"a,{s},{y},\n")
            for s, y, x in zip(_SPLIT_STEPS, _SPLIT_SCORES, _SPLIT_LOSSES)]
    p = tmp_path / "log.csv"
    p.write_text("job_id,step,score,loss\n"
                 + "".join(loss + score if loss_first else score + loss for loss, score in rows))
    r = replay(read_logs([p]), [spec]).row(0, named=True)
    assert r["status"] == "stopped"
    return r


@pytest.mark.parametrize("spec", ["evalstop:k=2", "loss_plateau:w=2,tol=0.01"])
def test_a_steps_loss_then_its_evaluation_are_one_reading_as_replay_merges_them(tmp_path,
                                                                                  spec):
    """A Trainer logs a step's training loss (on_log), then evaluates at that step
    (on_evaluate): fed to the monitor as they come, the evaluation was refused ("step 10
    is not after the previous step 10").  They are one reading, as replay reads the
    loss-only and scored rows of one step of a log: the same triggers and checkpoints."""
    from fastsim.replay.monitor import StopMonitor

    r = _replayed_split_log(tmp_path, spec, loss_first=True)
    m = StopMonitor(spec)
    for s, y, x in zip(_SPLIT_STEPS, _SPLIT_SCORES, _SPLIT_LOSSES):
        m.observe("a", s, math.nan, loss=x)  # on_log: the loss alone
        d = m.observe("a", s, y)             # on_evaluate: the score, at the same step
        if d.stop:
            break
    # one evaluation per step, not two, and the loss read with its step's score
    assert (d.stop, s, d.keep_step, d.eval_index) == (
        True, r["trigger_step"], r["delivered_step"], _SPLIT_STEPS.index(s) + 1)
    with pytest.raises(ConfigError, match="step 60 is not after the previous step 60"):
        m.reset("a")
        m.observe("a", 60, 0.5, loss=1.0)
        m.observe("a", 60, 0.4, loss=1.0)  # two scores of one step are still refused


@pytest.mark.parametrize("spec", ["evalstop:k=2", "loss_plateau:w=2,tol=0.01"])
def test_a_steps_evaluation_then_its_loss_are_one_reading_as_replay_merges_them(tmp_path,
                                                                                  spec):
    """The loss-only reading merged with its step's score only when it came first: the
    score, then the loss, at one step was refused ("step 10 is not after the previous step
    10"), where replay merges a log's two rows in either order."""
    from fastsim.replay.monitor import StopMonitor

    r = _replayed_split_log(tmp_path, spec, loss_first=False)
    m = StopMonitor(spec)
    for s, y, x in zip(_SPLIT_STEPS, _SPLIT_SCORES, _SPLIT_LOSSES):
        first = m.observe("a", s, y, loss=math.nan)  # the score, its loss not yet logged
        d = m.observe("a", s, math.nan, loss=x)      # the loss alone, at the same step
        assert d.stop or not first.stop
        if d.stop:
            break
    assert (d.stop, s, d.keep_step, d.eval_index) == (
        True, r["trigger_step"], r["delivered_step"], _SPLIT_STEPS.index(s) + 1)
