"""Every command's --help: each option says what it is, and the text reads as text (no raw
reStructuredText, no doubled percent signs, no default printed twice)."""
from __future__ import annotations

import argparse

from fastsim.cli import build_parser


def _parsers(parser, path=("fastsim",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_option_of_every_command_has_help():
    missing = []
    for path, parser in _parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._VersionAction,
                                   argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip():
                missing.append(f"{' '.join(path)} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, missing


def test_every_command_and_action_says_what_it_does():
    """`fastsim costaware sgd --help` showed its options alone: what the action does was
    in the list of `fastsim costaware --help` only."""
    silent = [" ".join(path) for path, parser in _parsers(build_parser())
              if not (parser.description or "").strip()]
    assert not silent, silent


def test_help_text_reads_as_text():
    for path, parser in _parsers(build_parser()):
        text = parser.format_help()
        for bad in ("``", "%%", "(default: None)", ">>>", ":func:", "(default: X) (default"):
            assert bad not in text, f"{' '.join(path)} --help shows {bad!r}"


def test_replay_path_help_says_a_log_may_come_through_a_pipe():
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "replay")]
    text = " ".join(sub.format_help().split())
    from fastsim.replay.logs import PIPE_LIMIT

    assert "/dev/stdin" in text and "<(...)" in text
    assert f"up to {PIPE_LIMIT // 2**20} MiB" in text  # the help's number is the code's


def test_replay_help_names_every_lower_is_better_suffix():
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "replay")]
    text = " ".join(sub.format_help().split())
    from fastsim.replay.logs import LOWER_IS_BETTER_SUFFIXES

    assert "ending in " + "/".join(LOWER_IS_BETTER_SUFFIXES) in text  # it listed 3 of the 6


def test_replay_help_names_the_at_completion_status():
    """The status triggered_at_completion was in docs/replay.md only: replay's help never
    said why a trigger could save nothing, or what the summary's 'at completion' counts."""
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "replay")]
    text = " ".join(sub.format_help().split())
    from fastsim.replay.policies import AT_COMPLETION

    assert f"status {AT_COMPLETION}, not stopped" in text and "'at completion'" in text


def test_replay_help_names_its_default_scope():
    """Replay's policies default to scope=all, fastsim run's to rlhf; replay's help never
    said scope at all, so a reader of run's help took rlhf for replay's too."""
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "replay")]
    text = " ".join(sub.format_help().split())
    from fastsim.config import PolicyConfig
    from fastsim.replay.policies import parse_policy

    here, run = parse_policy("evalstop").scope, PolicyConfig.parse("evalstop").scope
    assert here != run
    assert f"every policy takes scope=all|rlhf (default {here} here, unlike fastsim run" in text


def test_figures_help_says_a_sweep_of_another_baseline_is_skipped():
    """A sweep file's baseline may be any policy now; 'fastsim figures --help' said only that
    a missing sweep is skipped, not why a sweep that is there is skipped too."""
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "figures")]
    text = " ".join(sub.format_help().split())
    assert "changes against no stop policy from a sweep whose baseline is another" in text


def test_reproduce_no_progress_help_says_it_silences_the_stage_lines():
    """'no progress bar' it said, shared with fastsim sweep; reproduce's --no-progress also
    drops its line per sweep and per figure, so a run of a minute printed nothing at all
    until the table (sweep's, without a bar, prints its closing line only, as it says)."""
    subs = dict((path, parser) for path, parser in _parsers(build_parser()))
    text = " ".join(subs[("fastsim", "reproduce")].format_help().split())
    assert "no progress bars, nor the line per sweep and per figure drawn" in text
    options = subs[("fastsim", "sweep")].format_help().split("\nexamples:\n")[0]
    assert " ".join(options.split()).endswith("--no-progress no progress bar")


def test_docs_figures_help_quotes_the_detector_benchmarks_measured_time():
    """It said 'about 12 minutes' while docs/detectors.md measured 1,206 s."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "detectors.md").read_text()
    seconds = re.search(r"([\d,]+) s on 2 cores", doc).group(1)
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "docs-figures")]
    text = " ".join(sub.format_help().split())
    minutes = round(int(seconds.replace(",", "")) / 60)
    assert f"about {minutes} minutes: {seconds} s" in text


import pytest  # noqa: E402

from fastsim.cli import main  # noqa: E402


def _refused(capsys, argv: list[str]) -> str:
    """The stderr of ``fastsim ARGV``, which its parser refuses with exit 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("argv, needle", [
    (["sweep", "no_such_sweep", "--out", "{tmp}/a"], "nor a sweep shipped with fastsim"),
    (["costaware", "sweep", "noise", "--out", "{tmp}/b"], "run it with `fastsim sweep"),
    (["detectors", "--seed", "-1", "--out", "{tmp}/c"], "seed=-1 is invalid"),
    (["costaware", "trl-gradnorm", "--batches", "0", "--out", "{tmp}/d"], "--batches=0"),
    (["docs-figures", "--draw-only", "--results", "{tmp}/none", "--out", "{tmp}/e"],
     "--results"),
])
def test_first_hour_mistakes_get_one_line_and_exit_2(argv, needle, capsys, tmp_path):
    assert main([a.format(tmp=tmp_path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing written before the error


def test_an_unknown_option_points_to_its_own_command_help(capsys):
    """argparse left a subcommand's unknown option to the top parser: 'fastsim: error:
    unrecognized arguments: --chunks 5 (see fastsim --help)', whose help lists no option
    of fastsim sweep."""
    for argv, prog, unknown in (
            (["sweep", "x.toml", "--out", "y", "--chunks", "5"], "fastsim sweep",
             "--chunks 5 (did you mean --chunk?)"),
            (["run", "--n_jobs", "5"], "fastsim run", "--n_jobs 5 (did you mean --n-jobs?)"),
            (["run", "--base_rate=0.3"], "fastsim run",
             "--base_rate=0.3 (did you mean --base-rate?)"),
            (["traces", "toy-rlhf", "--bogus"], "fastsim traces toy-rlhf", "--bogus"),
            # never a flag's opposite (detectors' --figures takes where they go)
            (["detectors", "--no-figures"], "fastsim detectors", "--no-figures"),
            (["sweep", "x.toml", "--out", "y", "--progress"], "fastsim sweep", "--progress"),
            # nor another option that is near by ratio alone: --eps is not a misspelt --reps
            (["costaware", "sgd", "--reps", "3"], "fastsim costaware sgd", "--reps 3"),
            (["run", "--Seed", "3"], "fastsim run", "--Seed 3 (did you mean --seed?)"),
            # given before the subcommand, it is the command's before it (it read
            # 'fastsim sweep: error: ... --bogus', whose help is not where it was typed)
            (["--bogus", "sweep", "x.toml", "--out", "y"], "fastsim", "--bogus"),
            (["costaware", "--bogus=1", "sgd"], "fastsim costaware", "--bogus=1")):
        assert _refused(capsys, argv) == (f"{prog}: error: unrecognized arguments: {unknown} "
                                          f"(see {prog} --help)\n")


def test_a_commands_option_typed_before_the_command_is_named(capsys):
    """`fastsim --out x sweep` read 'x' as the command: "invalid choice: 'x' (choose from
    'run', ...)", which names neither --out nor where it goes."""
    for argv, prog, option in ((["--out", "x", "sweep", "s.toml"], "fastsim sweep", "--out"),
                               (["--clusters=5", "run"], "fastsim run", "--clusters"),
                               (["costaware", "--out", "x", "sgd"], "fastsim costaware sgd",
                                "--out")):
        command = prog.rpartition(" ")[2]
        assert _refused(capsys, argv) == (f"{prog}: error: {option} is given before "
                                          f"'{command}'; allowed: after it (see {prog} "
                                          "--help)\n")


def test_an_option_of_one_value_given_twice_is_refused(capsys):
    """`fastsim run --policy evalstop:k=2 --policy evalstop:k=3` ran k=3 alone without a
    word (replay takes several --policy, so both were expected); so did --seed, --out."""
    for argv, prog, option in ((["run", "--policy", "evalstop:k=2", "--policy=evalstop:k=3"],
                                "fastsim run", "--policy"),
                               (["run", "--seed", "1", "--seed", "2"], "fastsim run", "--seed"),
                               (["costaware", "sgd", "--out", "a", "--out", "b"],
                                "fastsim costaware sgd", "--out")):
        assert _refused(capsys, argv) == (f"{prog}: error: {option} is given twice; allowed: "
                                          f"once (see {prog} --help)\n")


def test_an_empty_output_path_is_refused(capsys, tmp_path, monkeypatch):
    """`--out ''` is the path '.', so `fastsim costaware sgd --out ''` wrote its tables
    into the current directory."""
    monkeypatch.chdir(tmp_path)
    for argv, prog in ((["costaware", "sgd", "--n", "4", "--out", ""], "fastsim costaware sgd"),
                       (["run", "--clusters", "2", "--out="], "fastsim run"),
                       (["sweep", "noise", "--out", " "], "fastsim sweep")):
        assert _refused(capsys, argv) == (f"{prog}: error: --out is empty; allowed: a path "
                                          f"(see {prog} --help)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,prog,hint", [
    # argparse took any unambiguous prefix: this ran EvalStop at k=2 with --kl-gamma 1
    (["run", "--policy", "evalstop", "--k", "1"], "fastsim run",
     "--k (k is a parameter of evalstop, deprioritize, margin: it goes in the spec, "
     "--policy evalstop:k=...)"),
    # and this set the evaluation noise's AR(1) coefficient, not its sigma
    (["run", "--noise", "0.1"], "fastsim run",
     "--noise (options are written in full: did you mean --noise-rho?)"),
    # the checks read options whole: `--ou ''` was refused as "FILE is empty", and
    # `--policy none --pol evalstop` ran evalstop alone
    (["sweep", "noise", "--ou", ""], "fastsim sweep",
     "--ou (options are written in full: did you mean --out?)"),
    (["run", "--policy", "none", "--pol", "evalstop"], "fastsim run",
     "--pol (options are written in full: did you mean --policy?)"),
    (["sweep", "noise", "--o=x"], "fastsim sweep",
     "--o=x (options are written in full: did you mean --out?)")])
def test_an_abbreviated_option_is_refused_naming_the_whole_one(capsys, tmp_path, monkeypatch,
                                                               argv, prog, hint):
    monkeypatch.chdir(tmp_path)
    assert _refused(capsys, argv) == (f"{prog}: error: unrecognized arguments: {hint} "
                                      f"(see {prog} --help)\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv,prog", [
    (["run", "--threads", "2"], "fastsim run"),
    (["sweep", "noise", "--out", "o", "--threads=2"], "fastsim sweep")])
def test_a_thread_count_option_is_told_where_the_count_is_set(capsys, tmp_path, monkeypatch,
                                                             argv, prog):
    """`fastsim run --threads 2` said "unrecognized arguments: --threads 2", and no help
    text said how to choose the number of threads."""
    monkeypatch.chdir(tmp_path)
    err = _refused(capsys, argv)
    assert err.startswith(f"{prog}: error: unrecognized arguments: --threads") and (
        "(the thread count is numba's: NUMBA_NUM_THREADS=2 fastsim ..., one thread per core "
        "when unset; results are the same bits for any count)" in err), err
    assert list(tmp_path.iterdir()) == []


def test_a_spec_in_the_help_is_never_cut_inside():
    """argparse wrapped a word longer than the help column inside it: `fastsim replay
    --help` listed 'peak:z=1.65,sigma0=0.0' and '15,min_evals=4,...' on two lines, a spec
    that could not be copied."""
    from fastsim import registry as R

    parsers = dict(_parsers(build_parser()))
    for path in (("fastsim", "run"), ("fastsim", "replay")):
        words = parsers[path].format_help().split()
        for spec in R.help_text("policy").split():
            spec = spec.rstrip(";,")
            if spec.startswith("peak:"):
                assert any(w.startswith(spec) for w in words), (path, spec)


def test_fastsim_sweep_lists_only_the_sweeps_it_runs(capsys, tmp_path):
    """'fastsim sweep nope' listed costaware_sgd and the other cost-aware files among the
    shipped sweeps it allows, which it then refuses (they are fastsim costaware sweep's)."""
    assert main(["sweep", "nope", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "one of base_rate," in err and "noise" in err and "costaware_" not in err


# What the command line's --help and usage errors must not import: together about 1 s of
# every such call (docs/performance.md, round 30); numpy about 0.1 s
HEAVY = ("numba", "polars", "scipy", "pyarrow", "numpy")
# One usage error per command line (a bad value, a missing argument, an unknown option)
USAGE_ERRORS = [["run", "--clusters", "x"], ["sweep"], ["--bogus"], ["replay", "--format", "x"],
                ["costaware", "sgd", "--n", "x"], ["traces", "fit-curves"],
                ["bench", "--reps", "x"], ["detectors", "--seed", "x"],
                ["run", "--policy", "a", "--policy", "b"]]


def test_help_and_usage_errors_import_no_heavy_module():
    """``fastsim --help``, every command's and subcommand's ``--help`` and argparse's usage
    errors run in a fresh process without numba, polars, scipy, pyarrow or numpy: the
    parser imported every command's modules, and each such call took 1.1 s."""
    import json
    import subprocess
    import sys

    calls = [[*path[1:], "--help"] for path, _ in _parsers(build_parser())] + USAGE_ERRORS
    code = ("import json, sys\nfrom fastsim.cli import main\n"
            f"for argv in json.loads({json.dumps(json.dumps(calls))}):\n"
            "    try:\n        main(argv)\n    except SystemExit as exc:\n"
            "        assert exc.code in (0, 2), (argv, exc.code)\n"
            "    else:\n        raise AssertionError(f'{argv} did not exit')\n"
            f"    loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
            "    assert not loaded, f'fastsim {\" \".join(argv)} imported {loaded}'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(calls) > 20  # every command and subcommand was called


def test_the_callable_packages_show_their_functions_signature():
    """``fastsim.sweep`` and ``fastsim.replay`` are called as functions; their signature
    and help() showed ``(*args, **kwargs)``."""
    import inspect

    import fastsim
    from fastsim.replay import replay_logs
    from fastsim.sweep import run_sweep_file

    assert inspect.signature(fastsim.sweep) == inspect.signature(run_sweep_file)
    assert inspect.signature(fastsim.replay) == inspect.signature(replay_logs)
    assert "progress" in inspect.signature(fastsim.sweep).parameters
    assert list(inspect.signature(fastsim.replay).parameters) == ["logs", "policies", "gpus"]


def test_the_lazy_packages_still_reach_their_submodules_as_attributes():
    """``fastsim.sweep``, ``fastsim.replay`` and ``fastsim.costaware`` imported their
    modules when imported, so ``fastsim.replay.logs.read_logs`` or ``fastsim.costaware.sgd``
    worked after ``import fastsim.replay``; loading names on first use made them an
    AttributeError, and ``dir()`` of the package lost its names.  In a fresh process, as
    the test run has imported the modules already."""
    import subprocess
    import sys

    code = ("import fastsim.sweep, fastsim.replay, fastsim.costaware\n"
            "assert callable(fastsim.replay.logs.read_logs)\n"
            "assert fastsim.replay.monitor.StopMonitor is fastsim.replay.StopMonitor\n"
            "assert callable(fastsim.replay.policies.replay)\n"
            "assert fastsim.sweep.grid.Grid is fastsim.sweep.Grid\n"
            "assert fastsim.costaware.sgd.SGDConfig is fastsim.costaware.SGDConfig\n"
            "assert callable(fastsim.costaware.sweep.run_costaware_sweep)\n"
            "ns = {}\n"
            "exec('from fastsim.sweep import *', ns)\n"
            "assert {'Cell', 'Grid', 'load_sweep', 'run_sweep_file'} <= set(ns), sorted(ns)\n"
            "for pkg in (fastsim.sweep, fastsim.replay, fastsim.costaware):\n"
            "    missing = set(pkg._EXPORTS) - set(dir(pkg))\n"
            "    assert not missing, (pkg.__name__, missing)\n"
            "    try:\n        pkg.no_such_name\n    except AttributeError as exc:\n"
            "        assert 'no_such_name' in str(exc)\n"
            "    else:\n        raise AssertionError(pkg.__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]


def test_reproduces_cluster_counts_keep_their_module_names():
    """FULL_CLUSTERS and QUICK_CLUSTERS live in ``fastsim.defaults`` (the parser's help of
    ``fastsim.sweep.cli`` quotes them without importing numba); ``fastsim.sweep.reproduce``,
    which defined them, still has them, as ``fastsim.replay.logs`` keeps FORMATS."""
    from fastsim.sweep import cli, reproduce

    assert (reproduce.FULL_CLUSTERS, reproduce.QUICK_CLUSTERS) == (cli.FULL_CLUSTERS,
                                                                  cli.QUICK_CLUSTERS)


def test_a_long_argument_that_is_almost_a_negative_number_is_refused_at_once(capsys):
    """The pattern that reads '-3' and '-1e-3' as values backtracked quadratically on a
    long run of digits that did not end as a number: 30,000 characters took about 17 s
    before argparse's refusal."""
    import time

    t0 = time.perf_counter()
    with pytest.raises(SystemExit) as exc:  # argparse's own refusal
        main(["run", "--seed", "-" + "1" * 30_000 + "x"])
    assert exc.value.code == 2 and time.perf_counter() - t0 < 1.0
    assert "error:" in capsys.readouterr().err


def test_run_clusters_help_says_the_hours_are_the_largest_runs():
    """`--clusters`: "an integer from 1 to 100,000,000 (1.5-12 hours of simulation; ...)
    (default: 200)" read as the time of any run, the default's too (a fraction of a
    second): the hours are those of the largest run."""
    sub = dict((path, parser) for path, parser in _parsers(build_parser()))[("fastsim", "run")]
    text = " ".join(sub.format_help().split())
    assert "an integer from 1 to 100,000,000 (that many take 1.5-12 hours; " in text


def test_python_dash_m_fastsim_is_the_command():
    # an environment whose scripts directory is not on PATH still reaches the command
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "fastsim", "--version"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("fastsim "), r.stdout
    r = subprocess.run([sys.executable, "-m", "fastsim", "run", "--clusters", "x"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("fastsim run: error: --clusters"), r.stderr


def test_importing_fastsim_main_runs_nothing():
    # only python -m fastsim runs the command: an import (pydoc, the doctests of every
    # module) ran it with the importer's arguments and exited (2, under pytest)
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", "import fastsim.__main__", "run", "--k", "1"],
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def _help_examples(parser) -> list[list[str]]:
    """The command lines of a parser's ``examples:`` epilog, split as a shell would."""
    import shlex

    text = parser.format_help()
    assert "\nexamples:\n" in text, parser.prog
    block = text.split("\nexamples:\n", 1)[1]
    return [shlex.split(line) for line in block.splitlines() if line.startswith("  fastsim ")]


def test_the_first_commands_a_newcomer_reads_show_examples_that_work(capsys, tmp_path,
                                                                      monkeypatch):
    """No --help had an example: a newcomer pieced a first command line together from the
    options (fastsim --help listed commands only; run's --policy spec syntax, a sweep's
    name or file, replay's columns were said in prose).  fastsim, run, sweep, figures and
    replay now end with examples; each parses as written, its specs resolve, and the
    replays run (on the shipped example, and on a log of the columns the help names)."""
    from fastsim.cli_run import workload_from_args
    from fastsim.config import PolicyConfig, SchedulerConfig, SimConfig, parse_baseline

    monkeypatch.chdir(tmp_path)
    (tmp_path / "evals.csv").write_text(
        "job_id,step,score\n" + "".join(f"a,{s},{v}\n" for s, v in
                                        enumerate([0.5, 0.6, 0.62, 0.6, 0.57, 0.55], 1)))
    top = build_parser()
    subs = dict((path[1:], p) for path, p in _parsers(top) if len(path) == 2)
    lines = [argv for p in (top, *(subs[(c,)] for c in ("run", "sweep", "figures", "replay")))
             for argv in _help_examples(p)]
    assert len(lines) >= 12
    for argv in lines:
        assert argv[0] == "fastsim", argv
        args = build_parser().parse_args(argv[1:])
        if args.command == "run":
            w = workload_from_args(args)
            cfg = SimConfig(w, SchedulerConfig.parse(args.scheduler),
                            PolicyConfig.parse(args.policy))
            parse_baseline(args.baseline)
            assert cfg.policy.label
        elif args.command == "replay" and (args.example or args.paths == ["evals.csv"]):
            assert main(argv[1:]) == 0, (argv, capsys.readouterr().err)
    assert "stopped" in capsys.readouterr().out


def test_every_option_that_takes_a_value_says_its_default():
    """fastsim run --out and --jobs-out, replay's --out and --summary-out, detectors' --traces
    and --doc, ... said what they write but not what happens without them: whether a run
    without --out keeps its per-cluster results somewhere a newcomer had to try."""
    missing = []
    for path, parser in _parsers(build_parser()):
        formatter = parser._get_formatter()
        for action in parser._actions:
            if (not action.option_strings or action.nargs == 0 or action.required
                    or isinstance(action, (argparse._HelpAction, argparse._VersionAction))):
                continue
            shown = formatter._expand_help(action) if action.help else ""
            if "default" not in shown:
                missing.append(" ".join(path) + " " + action.option_strings[-1])
    assert missing == []


def test_run_policy_help_names_the_default_policy():
    """`fastsim run --help` said "(default rlhf)" of the policies' scope, and that word
    kept the formatter from adding the policy's own default: a newcomer reading the help
    could not tell which policy a run without --policy runs (evalstop:k=2)."""
    from fastsim import defaults as D

    sub = dict(_parsers(build_parser()))[("fastsim", "run")]
    text = " ".join(sub.format_help().split())
    assert f"(default: {D.POLICY}:k={D.K})" in text, text


def test_an_unknown_policy_or_scheduler_names_the_user_form_as_help_does(capsys):
    """`fastsim run --policy evalstp` listed the built-ins 'or MODULE:ATTR of a user's
    declaration', where --help says MODULE:FUNCTION (a user's @stop_policy) and MODULE:KEY
    (a user's @scheduler_key): two names for one thing, and ATTR in neither's words."""
    helps = {a.dest: a.help for p in [dict(_parsers(build_parser()))[("fastsim", "run")]]
             for a in p._actions}
    for option, bad, form, made_by in (("--policy", "evalstp", "MODULE:FUNCTION", "@stop_policy"),
                                       ("--scheduler", "srtf", "MODULE:KEY", "@scheduler_key")):
        assert f"{form}[:...] (a user's {made_by})" in helps[option.lstrip("-")]
        err = _refused_run(capsys, [option, bad])
        assert f" or {form} of a user's {made_by} (did you mean" in err, err
        assert "ATTR" not in err


def _refused_run(capsys, argv: list[str]) -> str:
    assert main(["run", *argv, "--no-progress"]) == 2
    return capsys.readouterr().err
