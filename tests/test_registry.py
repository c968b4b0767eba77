"""Declarations agree with the kernels and the reference they describe."""
import sys
from pathlib import Path

import pytest

from fastsim import registry as R
from fastsim.kernels import codes as K
from fastsim.kernels.schedulers import is_preemptive_nb

sys.path.insert(0, str(Path(__file__).parent))
from reference import PREEMPTIVE  # noqa: E402


def test_declared_preemption_matches_the_engine_and_the_reference():
    for d in R.BUILTIN_SCHEDULERS:
        assert bool(is_preemptive_nb(d.code)) == d.preemptive == (d.name in PREEMPTIVE), d.name


def test_codes_are_declared_once_each():
    pol = {d.code for d in R.BUILTIN_POLICIES}
    sch = {d.code for d in R.BUILTIN_SCHEDULERS}
    assert pol == {K.NONE, K.EVALSTOP, K.STOP_AT, K.LOSS_PLATEAU, K.DEPRIORITIZE, K.ORACLE,
                   K.PATIENCE, K.MARGIN, K.CUSUM, K.PEAK, K.BOCPD}
    # the kernels send every code from PATIENCE on to the online detectors
    assert {d.code for d in R.BUILTIN_POLICIES if d.vector} == {c for c in pol if c >= K.PATIENCE}
    assert sch == {K.FIFO, K.SJF_EST, K.SRTF_EST, K.LOSS_AWARE, K.TIRESIAS}
    assert len(pol) == len(R.BUILTIN_POLICIES) and len(sch) == len(R.BUILTIN_SCHEDULERS)


def test_capabilities_are_what_config_and_replay_read():
    from fastsim.config import PolicyConfig

    assert [d.name for d in R.BUILTIN_POLICIES if d.uses_hidden_truth] == ["oracle"]
    assert PolicyConfig.parse("evalstop:k=4").min_evals == 5
    assert PolicyConfig.parse("loss_plateau:w=3").min_evals == 4
    assert PolicyConfig.parse("stop_at").min_evals == 1
    assert {d.name for d in R.BUILTIN_POLICIES if d.streaming} == {
        "none", "evalstop", "stop_at", "loss_plateau", "patience", "margin", "cusum", "peak", "bocpd"}
    assert PolicyConfig.parse("patience:patience=3").min_evals == 4
    assert PolicyConfig.parse("peak:min_evals=2").min_evals == 3  # an offset needs 3 points
    assert PolicyConfig.parse("peak:min_evals=2,origin=1").min_evals == 2


def test_spec_grammar_one_parser():
    assert R.parse_spec("fifo:backfill", "scheduler") == ("fifo", {"backfill": ""})
    assert R.parse_spec("mod.sub:fn:k=3", "policy") == ("mod.sub:fn", {"k": "3"})
    assert R.parse_spec("evalstop:k=2,scope=all", "policy") == (
        "evalstop", {"k": "2", "scope": "all"})
    import pytest

    from fastsim.errors import ConfigError

    # spaces were stripped: one spec had many spellings, none of them the canonical one
    with pytest.raises(ConfigError, match=r"has a space; allowed: .* with no white space$"):
        R.parse_spec(" evalstop : k=2 , scope=all ", "policy")


@pytest.mark.parametrize("blank,said", [("\t", "a tab"), ("\n", "a line break"),
                                        ("\u00a0", "a no-break space (U+00A0)")])
def test_white_space_in_a_spec_is_named_and_refused_as_white_space(blank, said, capsys):
    """A tab was 'a tab; allowed: ... with no spaces': the rule named the wrong character."""
    from fastsim.cli import main

    assert main(["run", "--policy", f"evalstop:k=2{blank}", "--clusters", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(
        f"has {said}; allowed: NAME or NAME:key=value,... with no white space\n"), err


def test_a_spec_that_is_not_a_string_is_not_called_empty():
    """PolicyConfig.parse(3), from_specs(b"fifo", ...) said 'policy=3 is empty'."""
    import pytest

    from fastsim.config import PolicyConfig, SimConfig
    from fastsim.errors import ConfigError

    for call, needle in ((lambda: PolicyConfig.parse(3), "policy=3 is invalid; allowed: a string"),
                         (lambda: SimConfig.from_specs(b"fifo", "none"),
                          "scheduler=b'fifo' is invalid; allowed: a scheduler spec"),
                         (lambda: PolicyConfig.parse("  "), "policy='  ' is empty")):
        with pytest.raises(ConfigError, match=needle):
            call()


def test_from_specs_takes_config_objects_as_with_policy_does():
    """from_specs(scheduler=SchedulerConfig(...), policy=PolicyConfig(...)) was refused
    ('allowed: a string') while with_policy and StopMonitor take a PolicyConfig."""
    import pytest

    from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig
    from fastsim.errors import ConfigError

    policy = PolicyConfig.parse("evalstop:k=3")
    cfg = SimConfig.from_specs(scheduler=SchedulerConfig(name="fifo"), policy=policy, n_jobs=20)
    assert cfg == SimConfig.from_specs("fifo", "evalstop:k=3", n_jobs=20)
    assert cfg.with_policy(policy) == cfg
    with pytest.raises(ConfigError, match=r"policy=SchedulerConfig\(.* is invalid; allowed: "
                       r"a policy spec .* or a PolicyConfig"):
        SimConfig.from_specs(policy=SchedulerConfig())


def test_an_unbounded_parameter_is_said_open_at_infinity():
    """A user's ``Param("k", "int", 2)`` (no ``lo``) was said to take "an integer in
    [-inf, 2147483647]", a closed bracket at an infinity no integer reaches."""
    assert R.Param("k", "int", 2).allowed() == "an integer in (-inf, 2147483647]"
    assert R.Param("x", "float", 0.0).allowed() == "a number in (-inf, inf)"
    assert R.Param("x", "float", 0.0, lo=0).allowed() == "a number in [0, inf)"
