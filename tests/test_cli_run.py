"""``fastsim run`` end to end on a small cell."""
import polars as pl
import pytest

from fastsim.cli import main


def test_run_prints_table_and_writes_both_arms(capsys, tmp_path):
    out, jobs = tmp_path / "cells.parquet", tmp_path / "jobs.parquet"
    rc = main(["run", "--scheduler", "fifo:backfill", "--policy", "evalstop:k=2", "--clusters", "30",
               "--n-jobs", "25", "--seed", "4", "--out", str(out), "--jobs-out", str(jobs),
               "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    for needle in ("evalstop(k=2) over fifo+backfill vs none", "mean JCT (h)", "precision",
                   "mean JCT change", "wasted compute change",
                   "30 clusters, seed 4; simulated in "):
        assert needle in text
    cells = pl.read_parquet(out)
    assert cells.height == 60 and set(cells["arm"]) == {"policy", "baseline"}
    per_job = pl.read_parquet(jobs)
    assert per_job.height == 2 * 30 * 25
    # same clusters in both arms (common random numbers)
    a = per_job.filter(pl.col("arm") == "policy").select("cluster", "job", "arrival_h", "gpus")
    b = per_job.filter(pl.col("arm") == "baseline").select("cluster", "job", "arrival_h", "gpus")
    assert a.equals(b)


def test_one_cluster_is_said_in_the_singular(capsys, tmp_path):
    """`fastsim run --clusters 1` said "1 clusters" on its workload line, and fastsim
    sweep "2 cells x 1 clusters" on its last."""
    assert main(["run", "--clusters", "1", "--n-jobs", "10", "--no-progress"]) == 0
    assert "; 1 cluster, seed 0; simulated in " in capsys.readouterr().out
    p = tmp_path / "one.toml"
    p.write_text("clusters = 1\n[base]\nn_jobs = 8\n[axes]\nscheduler = ['fifo']\n")
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    assert "one: 2 cells x 1 cluster -> " in capsys.readouterr().out


def test_oracle_is_labelled_as_hidden_truth(capsys):
    assert main(["run", "--policy", "oracle", "--clusters", "3", "--n-jobs", "10",
                 "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "oracle (hidden truth)" in text and "upper bound" in text


def test_workload_options_reach_the_config(capsys):
    assert main(["run", "--policy", "evalstop:k=3", "--n-evals", "6", "--mix", "0.2,0.3,0.5",
                 "--demands-rlhf", "8,16", "--ustar-hacking", "0.4,0.6", "--clusters", "4",
                 "--n-jobs", "12", "--baseline", "off", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "evalstop(k=3)" in text and "mean JCT change" not in text
    assert "changes are paired" not in text  # the header spoke of changes there are none of


@pytest.mark.parametrize("cache,then", [
    ("on", "first run only, cached afterwards)"),
    # both said "first run only ... cached afterwards" at every run
    ("off", "FASTSIM_NO_CACHE=1: every run compiles again)"),
    ("unwritable", "every run compiles again; set NUMBA_CACHE_DIR to a writable directory)")])
def test_first_compile_is_announced_in_one_line(capsys, monkeypatch, cache, then):
    import fastsim.compile_notice

    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *scheduler: False)
    monkeypatch.setattr(fastsim.compile_notice, "CACHE", cache != "off")
    monkeypatch.setattr(fastsim.compile_notice, "UNCACHED",
                        ["pipeline_nb"] * (cache == "unwritable"))
    assert main(["run", "--clusters", "2", "--n-jobs", "8", "--no-progress"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiling the simulation kernels"), err
    assert err[0].endswith(then), err


@pytest.mark.parametrize("user", [False, True])
@pytest.mark.parametrize("terminal,cached,said", [(True, False, True), (True, True, False),
                                                  (False, False, True), (False, True, False)])
def test_a_sweep_announces_a_first_compile(tmp_path, monkeypatch, terminal, cached, said,
                                           user, forget_compiled):
    """Its progress bar sat at the first chunk, silent, while the kernels compiled (a
    newcomer's first fastsim reproduce --quick); in a log (no terminal) the bar's next
    line read 31 s a chunk and an hour to go, with no word of why."""
    import io

    import fastsim.compile_notice

    class Stderr(io.StringIO):
        def isatty(self):
            return terminal

    err = Stderr()
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: cached)
    forget_compiled()
    monkeypatch.setattr("sys.stderr", err)
    p = tmp_path / "s.toml"
    # with a user's metric its first cluster is run before the rest, and said once too
    metric = "metrics = ['toy_notice_metric:notice_jct']\n" if user else ""
    (tmp_path / "toy_notice_metric.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\ndef notice_jct(jobs):\n"
        "    return jobs['jct_h'].mean(axis=1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p.write_text(f"clusters = 2\n[base]\nn_jobs = 8\n{metric}[axes]\n"
                 "scheduler = ['fifo', 'sjf_est']\n")
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 0
    lines = err.getvalue().splitlines()
    assert (lines[0].startswith("compiling the simulation kernels (about 10-40 s") == said
            and sum("compiling" in line for line in lines) == said), lines


def test_cached_kernels_print_no_notice():
    """Run in fresh processes with the on-disk cache on whatever this process uses, so the
    check never depends on how the suite was started: the first run caches the kernels
    (if need be), the second finds them and prints no notice."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "FASTSIM_NO_CACHE": "0"}
    code = ("import sys; from fastsim.cli import main; from fastsim.compile_notice import "
            "engine_is_cached; rc = main(['run', '--clusters', '2', '--n-jobs', '8', "
            "'--no-progress']); sys.exit(rc if engine_is_cached() else 3)")
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr  # 3: the run left no cached engine
    second = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True)
    assert second.returncode == 0, second.stderr
    assert "compiling" not in second.stderr


def test_a_boolean_workload_field_takes_true_or_false_only(monkeypatch):
    """No workload field is a flag today; one added later must not read 'yes' or 'on' as
    true and everything else, typos included, as false."""
    import fastsim.cli_run as cr
    from fastsim.errors import ConfigError

    monkeypatch.setitem(cr.FIELD_HELP, "flag", "true or false")
    assert cr._parse_field("flag", "True", False) is True
    assert cr._parse_field("flag", "false", True) is False
    for text in ("yes", "1", "on", "treu", ""):
        with pytest.raises(ConfigError, match="--flag="):
            cr._parse_field("flag", text, False)


@pytest.mark.parametrize("arm, argv", [("policy", ["--policy", "oracle"]),
                                       ("baseline", ["--baseline", "oracle"])])
def test_the_arm_that_reads_hidden_truth_is_named_an_upper_bound(capsys, arm, argv):
    """--baseline oracle printed no note, though every change is then against an upper bound."""
    assert main(["run", "--clusters", "3", "--n-jobs", "10", "--no-progress", *argv]) == 0
    notes = [x for x in capsys.readouterr().out.splitlines() if x.startswith("NOTE:")]
    assert notes == [f"NOTE: the {arm}, oracle (hidden truth), reads the hacking labels and "
                     "gold peak: an upper bound, not a policy"]


@pytest.mark.parametrize("argv, needle", [
    (["--baseline", "evalstop:k=0"],
     "--baseline evalstop: k=0 is invalid; allowed: an integer in [1, "),
    (["--baseline", "peak:z=-1"], "--baseline peak: z=-1 is invalid; allowed: a number in [0, 100]"),
    (["--baseline", "evalstop:q=1"],
     "--baseline evalstop: parameter 'q' is not a parameter of evalstop"),
    (["--policy", "evalstop:K=2"], "--policy evalstop: parameter 'K' is not a parameter of"),
    (["--baseline", "nosuch"], "--baseline=nosuch is invalid; allowed: none, evalstop"),
    # the flags a run is given, as typed: they read 'policy.k=0', 'policy='bogus'',
    # 'scheduler.thresholds=(3.0, 1.0)' and 'sigma=-1.0', names and values no one typed
    (["--policy", "evalstop:k=0"], "--policy evalstop: k=0 is invalid; allowed: an integer"),
    (["--policy", "bogus"], "--policy=bogus is invalid; allowed: none, evalstop"),
    (["--scheduler", "tiresias:thresholds=3/1"],
     "--scheduler tiresias: thresholds=3/1 is invalid; allowed: increasing positive numbers"),
    (["--scheduler", "nope"], "--scheduler=nope is invalid; allowed: fifo, sjf_est"),
    (["--sigma", "-1"], "--sigma=-1 is invalid; allowed: an evaluation-noise standard deviation"),
    (["--n-jobs", "0"], "--n-jobs=0 is invalid; allowed: an integer from 1 to"),
    (["--mix", "0.5,0.5"], "--mix=0.5,0.5 is invalid; allowed: three non-negative fractions"),
    # checked across options (SimConfig), it read 'n_evals=2 is invalid'
    (["--n-evals", "2"], "--n-evals=2 is invalid; allowed: at least k+1=3 evaluations"),
    (["--policy", "evalstop:k=9"], "--n-evals=7 is invalid; allowed: at least k+1=10 "
     "evaluations for evalstop(k=9) (the default of --n-evals, which the options given rule "
     "out)"),
    # a default the options rule out read 'demands_dpo=(2, 4, 8) is invalid', a field and a
    # Python tuple no one typed
    (["--gpus", "3"], "error: --demands-dpo=2,4,8 is invalid; allowed: a non-empty list of "
     "integers from 1 to gpus=3 (the default of --demands-dpo, which the options given rule "
     "out)"),
    (["--baseline", "evalstop:k=7"], "(the default of --n-evals, which the options given"),
    # a MODULE:ATTR naming no module read "policy=':evalstop': ..."
    (["--policy", ":evalstop"], "--policy=:evalstop: '' is not a module name; allowed: none"),
    (["--scheduler", ":x"], "--scheduler=:x: '' is not a module name; allowed: fifo"),
    # read "metric='nosuchmod:f' cannot be imported"
    (["--metric", "nosuchmod:f"], "--metric=nosuchmod:f cannot be imported (No module named"),
    (["--metric", "nocolon"], "--metric=nocolon is invalid; allowed: MODULE:FUNCTION")])
def test_a_bad_flag_names_the_flag_and_the_value_as_typed(capsys, tmp_path, argv, needle):
    """A bad parameter read '--baseline.k=0 is invalid', a field no one typed."""
    out = tmp_path / "cells.parquet"
    assert main(["run", *argv, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and not out.exists(), err


def test_the_api_announces_a_first_compile_once(capsys, monkeypatch, forget_compiled):
    """fastsim.simulate and fastsim.compare compiled for 10-40 s in silence on a first
    call from Python (a notebook's first cell), where fastsim run says so: the notice is
    one line, once per scheduler and process, after the arguments are checked."""
    import fastsim
    import fastsim.compile_notice
    from fastsim.errors import ConfigError

    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: False)
    forget_compiled()
    cfg = fastsim.SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=8)
    with pytest.raises(ConfigError):
        fastsim.simulate(cfg, n_clusters="2")
    assert capsys.readouterr().err == ""  # bad input: refused before any notice
    fastsim.simulate(cfg, 2)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("compiling the simulation kernels"), err
    fastsim.compare(cfg, n_clusters=2)  # the same scheduler: compiled already
    assert capsys.readouterr().err == ""


def test_the_api_sweep_announces_a_first_compile(tmp_path, capsys, monkeypatch, forget_compiled):
    """fastsim.sweep(...) in a notebook (no terminal, no bar by default) compiled its
    schedulers' kernels in silence, where fastsim sweep says so on a terminal; it says so
    in one line, after the file is checked, and nothing once they are cached."""
    import fastsim
    import fastsim.compile_notice

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 8\n[axes]\nscheduler = ['fifo', 'sjf_est']\n")
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: False)
    forget_compiled()
    fastsim.sweep(p, tmp_path / "a")
    err = capsys.readouterr().err.strip().splitlines()
    assert sum("compiling" in line for line in err) == 1, err
    assert err[0].startswith("compiling the simulation kernels"), err
    fastsim.sweep(p, tmp_path / "c")  # compiled in this process, with or without the cache
    assert "compiling" not in capsys.readouterr().err
    forget_compiled()
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: True)
    fastsim.sweep(p, tmp_path / "b")
    assert "compiling" not in capsys.readouterr().err


def test_the_api_sweep_with_a_bar_announces_a_first_compile_once(tmp_path, capsys,
                                                                 monkeypatch, forget_compiled):
    """fastsim.sweep(..., progress=True) off a terminal: the sweep says it before its bar,
    so the API's own notice (for a sweep without one) must not say it again."""
    import fastsim
    import fastsim.compile_notice

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 8\n[axes]\nscheduler = ['fifo', 'sjf_est']\n")
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: False)
    forget_compiled()
    fastsim.sweep(p, tmp_path / "a", progress=True)
    err = capsys.readouterr().err.splitlines()
    assert sum(line.startswith("compiling the simulation kernels") for line in err) == 1, err


def test_a_run_beyond_hours_is_refused_before_work(capsys):
    """--clusters 9223372036854775807 (every cluster id the counters hold) passed: the
    run streams its chunks, so memory never refused it, and it ran for what its pace made
    millions of years.  A run does not resume: past 10^8 clusters it is a sweep's work."""
    from conftest import one_line

    out = one_line(capsys, ["run", "--clusters", "9223372036854775807", "--no-progress"],
                   "--clusters=9223372036854775807 is invalid; allowed: an integer from 1 to "
                   "100,000,000 (")
    assert out == ""


def test_a_long_run_says_how_long_after_its_first_chunk(capsys, monkeypatch):
    """--clusters 9223372036854775807 ran in silence without a terminal (no bar) for what
    its pace made about 10^8 years; a run past a minute now says so after its first chunk."""
    import fastsim.cli_run as run

    argv = ["run", "--clusters", "700", "--n-jobs", "8", "--no-progress"]
    assert main(argv) == 0
    assert "to go at" not in capsys.readouterr().err  # a short run says nothing
    monkeypatch.setattr(run, "ESTIMATE_FROM_S", 0.0)
    assert main(argv) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "to go at" in ln]
    assert len(notes) == 1 and notes[0].startswith("note: --clusters 700: about "), notes
    assert notes[0].endswith(" us a cluster (the first 500, every arm); Ctrl-C stops it")
    run.say_estimate(2**63 - 1, 500, 0.025)
    assert "about 1.46e+07 years to go at 50 us" in capsys.readouterr().err


# fastsim run --help gave every workload option a meaning and a default but, for most of
# them (--sigma, --n-evals, --base-rate, --kl-gamma, ...), not what it accepts: a newcomer
# learnt the bounds only from a refusal.  Each help line now says what the refusal says.
@pytest.mark.parametrize("option, bad", [
    ("--gpus", "0"), ("--n-evals", "1"), ("--base-rate", "1.2"), ("--sigma", "2"),
    ("--log-sd", "4"), ("--kl-gamma", "5"), ("--noise-rho", "1"), ("--height", "0,1"),
    ("--preempt-overhead-h", "101"), ("--median-rlhf-h", "0")])
def test_run_help_says_what_each_workload_option_accepts(capsys, option, bad):
    import argparse

    from fastsim.cli_run import add_workload_options

    parser = argparse.ArgumentParser(prog="fastsim run")
    add_workload_options(parser)
    helps = {a.option_strings[0]: a.help for a in parser._actions if a.option_strings}
    assert all("allowed: " in h for o, h in helps.items() if o != "-h"), [
        o for o, h in helps.items() if o != "-h" and "allowed: " not in h]
    assert main(["run", option, bad, "--no-progress"]) == 2
    refusal = capsys.readouterr().err.strip()
    allowed = refusal.split("allowed: ", 1)[1]
    assert f"allowed: {allowed} (default: " in helps[option], (helps[option], refusal)


def test_a_sweep_without_its_bar_announces_a_first_compile(
        tmp_path, capsys, monkeypatch, forget_compiled):
    """fastsim sweep --no-progress compiled its schedulers' kernels in silence, where
    fastsim run --no-progress and fastsim.sweep(...) say so: one line, and none once they
    are cached (the bar's own notice is said before the bar)."""
    import fastsim.compile_notice
    from fastsim.cli import main

    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 8\n[axes]\nscheduler = ['fifo', 'sjf_est']\n")
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: False)
    forget_compiled()
    assert main(["sweep", str(p), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert sum(line.startswith("compiling the simulation kernels") for line in err) == 1, err
    # said once the checks have passed, for chunks still to run: neither before a refusal
    # (another grid's sweep in --out), which stays one line, nor on a finished sweep
    assert main(["sweep", str(p), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert "compiling" not in capsys.readouterr().err
    p.write_text(p.read_text().replace("n_jobs = 8", "n_jobs = 9"))
    assert main(["sweep", str(p), "--out", str(tmp_path / "a"), "--no-progress"]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    monkeypatch.setattr(fastsim.compile_notice, "engine_is_cached", lambda *code: True)
    assert main(["sweep", str(p), "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    assert "compiling" not in capsys.readouterr().err


def test_out_tables_of_two_seeds_are_not_paired(tmp_path):
    """`fastsim run --out` wrote a null seed (its clusters were run as a hand-made
    workload), so summarize paired a table of --seed 0 with one of --seed 1 by cluster id:
    a "paired" change of unrelated clusters, without a word."""
    from fastsim import summarize
    from fastsim.errors import ConfigError
    tables = []
    for seed in ("0", "1"):
        out = tmp_path / f"s{seed}.parquet"
        assert main(["run", "--policy", "evalstop:k=2", "--clusters", "4", "--n-jobs", "10",
                     "--seed", seed, "--out", str(out), "--no-progress"]) == 0
        tables.append(pl.read_parquet(out))
    assert tables[1]["seed"].to_list() == [1] * 8
    policy = tables[0].filter(pl.col("arm") == "policy").drop("arm")
    baseline = tables[1].filter(pl.col("arm") == "baseline").drop("arm")
    with pytest.raises(ConfigError, match="drawn with seed 0 in clusters but seed 1"):
        summarize(policy, baseline)
