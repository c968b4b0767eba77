"""benchmarks/signal_trials.py, the command behind docs/sweeps.md's signal trials: its
options and its summary, on made-up trials (no command is run here)."""
import re
import shlex
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "signal_trials.py"


@pytest.fixture(scope="module")
def trials():
    from conftest import benchmark_script

    return benchmark_script("signal_trials")


def test_targets_and_a_command_after_the_double_dash(trials):
    args, command = trials.parse(["run", "--trials", "40", "--window", "8", "20"])
    assert command == ["run", "--clusters", "10", "--no-progress"]
    assert (args.trials, tuple(args.window)) == (40, (8.0, 20.0))
    assert args.signals == ["INT", "TERM"]
    args, command = trials.parse(["--signal", "TERM", "--", "run", "--clusters", "2"])
    assert command == ["run", "--clusters", "2"] and args.signals == ["TERM"]
    assert trials.parse(["sweep"])[1][:2] == ["sweep", "s.toml"]


@pytest.mark.parametrize("argv", [[], ["run", "--", "run"], ["run", "--signal", "KILL"],
                                  ["run", "--signal", "INT,"], ["run", "--window", "5", "1"],
                                  ["run", "--trials", "0"], ["replay"]])
def test_bad_options_are_refused_in_one_line_before_any_trial(trials, argv, capsys):
    with pytest.raises(SystemExit) as stop:
        trials.parse(argv)
    out, err = capsys.readouterr()
    assert stop.value.code == 2 and out == "" and len(err.strip().splitlines()) == 1, err


def test_summary_counts_codes_delays_early_ends_and_noisy_exits(trials):
    T = trials.Trial
    made_up = [T("INT", 1.0, 0.5, 130, 1, False, "fastsim run: interrupted"),
               T("TERM", 2.0, 2.5, 143, 1, False, "fastsim run: terminated"),
               T("INT", 3.0, 1.5, 130, 3, True, "KeyboardInterrupt"),
               T("TERM", 7.5, None, 0, 0, False, ""),
               T("INT", 4.0, 1.0, 130, 2, False, "fastsim run: interrupted")]
    lines = trials.summary(made_up)
    assert lines[:6] == ["trials: 5", "exit codes: 0 x 1, 130 x 3, 143 x 1",
                         "exit after the signal: max 2.50 s, median 1.25 s (of 4 signalled)",
                         "ended before the signal: 1",
                         "with a traceback or more than one stderr line: 2",
                         "last stderr lines:"]
    assert lines[6] == "  2 x fastsim run: interrupted" and "  1 x (none)" in lines[7:]
    assert "ended before" in made_up[3].row() and "code  143" in made_up[1].row()


def test_compile_notice_is_not_counted_as_a_line_of_the_exit(trials):
    from fastsim.compile_notice import notice_text
    assert trials.COMPILE_NOTICE.match(notice_text())
    assert not trials.COMPILE_NOTICE.match("fastsim run: interrupted")


def test_the_commands_docs_sweeps_md_quotes_parse_as_written(trials):
    page = (SCRIPT.parents[1] / "docs" / "sweeps.md").read_text()
    quoted = re.findall(r"`python benchmarks/signal_trials\.py ([^`]*)`", page)
    assert {trials.parse(shlex.split(line))[0].target for line in quoted} == {"run", "sweep"}
