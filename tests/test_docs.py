"""The documentation runs as written: README's Python examples and its command lines
(printing the output it shows), every block of docs/tutorial.md (shell commands through
the real CLI, Python in one session, TOML files written where they say), and every
module's doctests under its package name."""
from __future__ import annotations

import contextlib
import doctest
import importlib
import io
import pkgutil
import re
import shlex
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from conftest import own_lines

import fastsim
from fastsim.cli import main
from fastsim.config import SimConfig

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[tuple[str, str]]:
    return FENCE.findall(path.read_text())


def run_console(block: str) -> None:
    # a line with output shown under it must print that output (the tutorial's replay
    # table was run but never compared, so a changed column or number went unseen)
    for argv, shown in shown_runs(block):
        line = shlex.join(argv)
        assert argv[0] == "fastsim", line
        code, out, err = cli(argv[1:])
        if code == 2:  # an example of bad input: refused in one line naming the value
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "error:" in lines[0], (line, err)
        else:
            assert code == 0, (line, err)
            assert out.strip(), f"{line} printed nothing"
        if shown.strip():
            assert as_shown(out).strip("\n") == as_shown(shown).strip("\n"), (line, out)


def run_blocks(path: Path, tmp_path: Path, monkeypatch, kinds=("python", "console", "toml")):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__doc_example__"}
    ran = 0
    for kind, body in blocks(path):
        if kind not in kinds:
            continue
        if kind == "python":
            exec(compile(body, f"{path.name}:python", "exec"), namespace)
        elif kind == "console":
            run_console(body)
        elif kind == "toml" and body.startswith("# file: "):
            name = body.splitlines()[0][len("# file: "):].strip()
            (tmp_path / name).write_text(body)
        else:
            continue
        ran += 1
    return ran


def test_readme_python_examples_run_as_written(tmp_path, monkeypatch):
    assert run_blocks(ROOT / "README.md", tmp_path, monkeypatch, kinds=("python",)) >= 1
    assert "import fastsim\n" in (ROOT / "README.md").read_text()


def shown_runs(block: str) -> list[tuple[list[str], str]]:
    """Each ``$ `` line of a console block, split as a shell would, with the text shown
    under it (up to the next ``$ `` line)."""
    runs = []
    for line in block.splitlines(keepends=True):
        if line.startswith("$ "):
            runs.append((shlex.split(line[2:]), []))
        elif runs:
            runs[-1][1].append(line)
    return [(argv, "".join(shown)) for argv, shown in runs]


def cli(argv: list[str]) -> tuple[int, str, str]:
    """``fastsim ARGV`` in process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's own errors
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def as_shown(text: str) -> str:
    """What a doc shows of an output: a wall time and a checkout's own path elided, and
    the one-time compile notice dropped (printed when this file runs first on an empty
    numba cache)."""
    text = "\n".join(own_lines(text))
    text = re.sub(r"simulated in [\d.]+ s", "simulated in ... s", text)
    return re.sub(r"example log: .*/fastsim/replay/", "example log: .../fastsim/replay/", text)


def readme_console_blocks() -> list[str]:
    return [body for kind, body in blocks(ROOT / "README.md") if kind == "console"]


def readme_runs() -> list[tuple[list[str], str]]:
    return [run for block in readme_console_blocks() for run in shown_runs(block)
            if run[0][:2] == ["fastsim", "run"]]


def check_shown(argv: list[str], shown: str) -> None:
    code, out, err = cli(argv[1:])
    # the output shown is the command's stdout, or, for a refusal or notes, its stderr
    printed = err if shown.startswith(("note:", "fastsim run: error")) else out
    assert as_shown(printed).strip("\n") == as_shown(shown).strip("\n"), (argv, printed)
    assert code == (2 if "error:" in shown else 0), (argv, err)


# README's worked example, its refusal and its notes are what a newcomer compares first;
# no test ran them, so a change of output or numbers left them showing another program's
def test_readme_refusal_and_notes_print_what_it_shows():
    runs = [run for run in readme_runs() if "--clusters" not in run[0]]
    assert len(runs) == 2
    for argv, shown in runs:
        check_shown(argv, shown)


def test_readme_worked_example_prints_what_it_shows():
    # every row and interval of its 2,000 clusters (about 1 s on a quiet machine)
    (argv, shown), = [run for run in readme_runs() if "--clusters" in run[0]]
    check_shown(argv, shown)


def test_readme_own_policy_example_runs_as_shown(tmp_path, monkeypatch):
    # its sweep file is the one shown, of 4 cells (the sweep itself, 40,000 clusters, is
    # tests/test_extending.py's at a smaller size); its replay prints the block after it
    from fastsim.sweep.grid import load_sweep

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mydetectors", raising=False)
    for kind, body in blocks(ROOT / "README.md"):
        if kind == "python" and body.startswith("# file: mydetectors.py"):
            (tmp_path / "mydetectors.py").write_text(body)
    consoles = readme_console_blocks()
    i = next(i for i, b in enumerate(consoles) if b.startswith("$ cat below_best.toml"))
    (cat, toml), (sweep, _), (replay, _) = shown_runs(consoles[i])
    (tmp_path / cat[1]).write_text(toml)
    assert sweep[:3] == ["PYTHONPATH=.", "fastsim", "sweep"] and sweep[3] == cat[1]
    grid = load_sweep(tmp_path / cat[1])
    assert (len(grid.cells), grid.clusters) == (4, 10000)
    readme = (ROOT / "README.md").read_text()
    assert "The sweep (4 cells with the shared baseline, 40,000 simulated clusters)" in readme
    assert replay[:3] == ["PYTHONPATH=.", "fastsim", "replay"]
    code, out, err = cli(replay[2:])
    assert code == 0, err
    assert as_shown(out).strip("\n") == consoles[i + 1].strip("\n")


def test_readme_sweep_command_names_the_file_its_block_shows(tmp_path):
    """README's first sweep ran `fastsim sweep my_noise.toml` beside a TOML block that never
    said it was my_noise.toml: a newcomer copying both had to guess where the block goes."""
    from fastsim.sweep.grid import load_sweep

    readme = (ROOT / "README.md").read_text()
    files = {}
    for kind, body in FENCE.findall(re.sub(r"^ +(?=```|\S)", "", readme, flags=re.M)):
        if kind == "toml" and body.startswith("# file: "):
            files[body.splitlines()[0][len("# file: "):].strip()] = body
    named = re.findall(r"^ *fastsim sweep (\S+\.toml) --out", readme, re.M)
    assert named, "README runs no sweep file of its own"
    for name in named:
        assert name in files, (name, sorted(files))
        (tmp_path / name).write_text(files[name])
        grid = load_sweep(tmp_path / name)
        assert (len(grid.cells), grid.clusters) == (9, 500)  # 3 x 2 and a baseline per sigma


def test_readme_says_how_fastsim_gets_on_the_path_before_using_it_bare():
    # its setup line runs .venv/bin/fastsim; every later example runs `fastsim`, which a
    # shell without the environment activated does not find
    for doc in ("README.md", "docs/tutorial.md"):
        text = (ROOT / doc).read_text()
        bare = re.search(r"^\$ (PYTHONPATH=\S+ )?fastsim ", text, re.M)
        assert bare and "source .venv/bin/activate" in text[:bare.start()], doc


def test_tutorial_runs_as_written(tmp_path, monkeypatch):
    assert run_blocks(ROOT / "docs" / "tutorial.md", tmp_path, monkeypatch) >= 8
    assert (tmp_path / "results" / "tiny" / "summary.parquet").exists()
    assert list((tmp_path / "results" / "tiny" / "figures").glob("*.png"))


def test_extending_replay_lines_run_as_written(tmp_path, monkeypatch, capsys):
    # its replay line named logs/*.csv, which a reader does not have: refused, exit 2
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mydetectors", raising=False)
    for kind, body in blocks(ROOT / "docs" / "extending.md"):
        if kind == "python" and body.startswith("# file: "):
            (tmp_path / body.splitlines()[0][len("# file: "):].strip()).write_text(body)
    lines = [shlex.split(line[2:], comments=True)
             for kind, body in blocks(ROOT / "docs" / "extending.md") if kind == "console"
             for line in body.splitlines() if line.startswith("$ ")]
    replays = [argv[2:] for argv in lines if argv[:3] == ["PYTHONPATH=.", "fastsim", "replay"]]
    assert replays
    for argv in replays:
        assert main(argv) == 0, (argv, capsys.readouterr().err)
    assert "below_best(k=3" in capsys.readouterr().out


def test_extending_run_lines_name_what_they_declare(tmp_path, monkeypatch):
    # its three 'fastsim run' lines (a policy with a parameter, a scheduler key with one, a
    # metric) were in no test as written: tests/test_extending.py runs its own argv (and
    # compiles the user code, a few seconds); here each line's options are parsed by the
    # command line's parser and its specs resolved against the page's own modules
    from fastsim.cli import build_parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("mydetectors", "mykeys", "mymetrics"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    for kind, body in blocks(ROOT / "docs" / "extending.md"):
        if kind == "python" and body.startswith("# file: "):
            (tmp_path / body.splitlines()[0][len("# file: "):].strip()).write_text(body)
    runs = [argv for kind, body in blocks(ROOT / "docs" / "extending.md") if kind == "console"
            for argv, _ in shown_runs(body) if argv[:3] == ["PYTHONPATH=.", "fastsim", "run"]]
    labels = []
    for argv in runs:
        args = build_parser().parse_args(argv[2:])
        cfg = SimConfig.from_specs(args.scheduler or "srtf_est", args.policy or "evalstop:k=2",
                                   metrics=args.metric or ())
        labels.append((cfg.scheduler.label, cfg.policy.label, cfg.metrics))
    assert labels == [("srtf_est", "below_best(k=2,drop=0.01)", ()),
                      ("gpu_h_first(per_gpu=0.5)", "evalstop(k=2)", ()),
                      ("srtf_est", "evalstop(k=2)", ("mymetrics:waste_per_hacking_job",))]


def test_extending_says_what_compiling_a_user_policy_costs_each_command():
    # a user's function is compiled in every process (a disk cache is refused for it): each
    # `fastsim run` naming one paid about 2 s more than a built-in's, and no page said so;
    # the page names the command it was measured with, on the walkthrough's own policy
    text = " ".join((ROOT / "docs" / "extending.md").read_text().split())
    said = re.search(r"`PYTHONPATH=\. fastsim run --policy (\S+) --clusters 10` took "
                     r"[\d.]+-[\d.]+ CPU-seconds where `--policy (\S+)` took", text)
    assert said, "docs/extending.md does not say what compiling a user's policy costs"
    assert said.groups() == ("mydetectors:below_best:k=2", "evalstop:k=2")


def test_sweeps_doc_examples_run_as_written(tmp_path, monkeypatch):
    # docs/sweeps.md's sweep files and the commands under them: no test read them, so a
    # renamed field or option would have left the page showing files fastsim refuses
    from fastsim.sweep.grid import load_sweep

    monkeypatch.chdir(tmp_path)
    text = (ROOT / "docs" / "sweeps.md").read_text()
    files = [body for kind, body in blocks(ROOT / "docs" / "sweeps.md") if kind == "toml"]
    (tmp_path / "format.toml").write_text(files[0])  # the annotated format: it must parse
    assert len(load_sweep(tmp_path / "format.toml").cells) == 9  # 3 sigmas x (2 + none)
    (tmp_path / "k_vs_plateau.toml").write_text(_named_file(files, "k_vs_plateau.toml"))
    grid = load_sweep(tmp_path / "k_vs_plateau.toml")
    command = "fastsim sweep k_vs_plateau.toml --out results/k_vs_plateau"
    assert f"```\n{command}\n```\nruns 6 cells" in text and len(grid.cells) == 6
    # at 20 clusters, not the file's 400: the first cell's changes are those of the run line
    code, out, err = cli([*shlex.split(command)[1:], "--clusters", "20", "--chunk", "10",
                          "--no-progress"])
    assert code == 0 and "6 cells x 20 clusters" in out, err
    run = re.search(r"`(fastsim run --policy evalstop:k=2 [^`]*)`", text).group(1).split()
    assert run[-2:] == ["--clusters", str(grid.clusters)]
    code, out, err = cli([*run[1:-1], "20", "--no-progress"])
    change = next(line for line in out.splitlines() if line.startswith("mean JCT change"))
    summary = (tmp_path / "results" / "k_vs_plateau" / "summary.txt").read_text()
    first = summary.split("== srtf_est | evalstop(k=2) | sigma=0.02  vs evalstop(k=3)")[1]
    assert f"\n{change}\n" in first.split("\n== ")[0], (change, first)


def _named_file(files: list[str], name: str) -> str:
    return next(body for body in files if body.startswith(f"# file: {name}\n"))


# the module docs/sweeps.md's drawdown.toml names, declared as its words say
MYPOL = """
from numba import njit
from fastsim.registry import Param, stop_policy


@stop_policy(params=[Param("delta", "float", 0.01, lo=0, hi=1),
                     Param("patience", "int", 1, lo=1, unit="evaluations")],
             label="drawdown(delta={delta},patience={patience})")
@njit
def drawdown(scores, losses, attained_h, t_est_h, delta, patience):
    return 0
"""


def test_sweeps_doc_parameter_fields_are_the_cells_of_their_specs(tmp_path, monkeypatch):
    """The page's sweep of a user's parameters runs the cells of the specs it names, and
    refuses the values it quotes in the words it quotes."""
    from fastsim.sweep.grid import load_sweep, parse_sweep

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mypol.py").write_text(MYPOL)
    monkeypatch.syspath_prepend(str(tmp_path))
    text = " ".join((ROOT / "docs" / "sweeps.md").read_text().split())
    files = [body for kind, body in blocks(ROOT / "docs" / "sweeps.md") if kind == "toml"]
    toml = _named_file(files, "drawdown.toml")
    (tmp_path / "drawdown.toml").write_text(toml)
    specs = [f"mypol:drawdown:delta={d},patience={p}" for d in (0.005, 0.01, 0.02)
             for p in (1, 2, 3)]
    assert f'runs the 9 cells of `policy = ["{specs[0]}", ...]`' in text
    by_specs = parse_sweep({"clusters": 400, "axes": {"policy": specs}}, "specs.toml")
    assert ({c.id for c in load_sweep("drawdown.toml").cells}
            == {c.id for c in by_specs.cells})  # and the baseline's: 10
    for old, new in (("delta = [0.005", "delta = [-1"),
                     ("[axes]", "patience = 1.5\n[axes]")):
        (tmp_path / "drawdown.toml").write_text(toml.replace(old, new))
        code, out, err = cli(["sweep", "drawdown.toml", "--out", "out", "--no-progress"])
        said = err.strip().split("fastsim sweep: error: drawdown.toml: ")[1]
        assert code == 2 and f"`{said}`" in text.replace("`drawdown.toml: ", "`"), err


def test_replay_doc_monitor_example_runs_as_written():
    # it used step and eval_loss without defining them: a NameError for whoever ran it
    code = [body for kind, body in blocks(ROOT / "docs" / "replay.md") if kind == "python"
            and "fastsim.replay.hf" not in body]  # the Trainer one needs the hf extra
    assert len(code) == 1
    namespace: dict = {}
    exec(compile(code[0], "replay.md:python", "exec"), namespace)
    assert namespace["keep"] == re.search(r"# (checkpoint-\d+)", code[0]).group(1)
    assert namespace["d"].stop


def test_costaware_doc_counts_its_tests():
    # the table said 158 tests for files that held 168; collecting them takes about 1.5 s
    text = (ROOT / "docs" / "costaware.md").read_text()
    row = re.search(r"\| `tests/test_costaware_\{(.*?)\}\.py` \| (\d+) tests,", text)
    files = [f"tests/test_costaware_{name}.py" for name in row.group(1).split(",")]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert f"{row.group(2)} tests collected" in done.stdout, done.stdout[-200:]
    assert sorted(ROOT.glob("tests/test_costaware_*.py")) == sorted(ROOT / f for f in files)


def test_detectors_doc_default_specs_are_the_defaults():
    # the block of specs "with every parameter at its default" was checked by nothing: a
    # changed default (fastsim/defaults.py) or a new parameter would leave it stale
    from fastsim import detectors as det
    from fastsim.config import PolicyConfig

    text = (ROOT / "docs" / "detectors.md").read_text()
    block = re.search(r"The specs with every parameter at its default.*?\n```\n(.*?)```", text, re.S)
    specs = block.group(1).split()
    assert [s.split(":")[0] for s in specs] == [n for n in det.DETECTORS if n != "evalstop"]
    for spec in specs:
        shown, default = PolicyConfig.parse(spec), PolicyConfig.parse(spec.split(":")[0])
        assert shown == default, (spec, default.params)
        assert [k for k, _ in shown.params] == [k.split("=")[0] for k in spec.split(":")[1].split(",")]


def test_sweeps_doc_names_every_summary_metric():
    from fastsim.metrics import BUILTIN_METRICS, mean_metrics, paired_metrics, pooled_metrics

    text = (ROOT / "docs" / "sweeps.md").read_text()
    names = [*mean_metrics(), *pooled_metrics(), *(f"{n}_change" for n in paired_metrics())]
    # the built-ins only: a user metric another test declared stays registered for the
    # session, and this test then failed in any order that ran that test first
    builtin = {m.name for m in BUILTIN_METRICS}
    names = [n for n in names if n.removesuffix("_change") in builtin]
    assert [n for n in names if f"`{n}`" not in text] == []


def _modules() -> list[str]:
    names = ["fastsim"] + [m.name for m in pkgutil.walk_packages(fastsim.__path__, "fastsim.")]
    # replay.hf needs the hf extra, costaware.trl(_toy) the trl extra (their own test groups)
    extras = ("replay.hf", "costaware.trl", "costaware.trl_toy")
    return sorted(n for n in names if not n.endswith(extras))


@pytest.mark.parametrize("name", _modules())
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_calibration_doc_knob_measurements_carry_the_intervals_a_run_gives():
    """docs/calibration.md explains the misses at sigma 0.05 and 0.12 by switching one
    curve knob back at a time, and quoted each precision as a bare number ("89.3% at sigma
    0.05"), with no interval and no command that measures it.  Each quoted precision is
    now the estimate and 95% interval a run of 400 clusters gives."""
    from fastsim.api import simulate
    from fastsim.summary import summarize

    text = " ".join((ROOT / "docs" / "calibration.md").read_text().split())
    assert "fastsim run --scheduler srtf_est --policy evalstop:k=2 --mix rlhf_heavy" in text
    for name, knob in (("`kl_gamma = 1`", {"kl_gamma": 1.0}),
                       ("`sigma_spread = 0`", {"sigma_spread": 0.0})):
        shown = []
        for sigma in (0.05, 0.12):
            cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", mix="rlhf_heavy",
                                       sigma=sigma, **knob)
            r = summarize(simulate(cfg, 400, seed=0).clusters).row(
                by_predicate=pl.col("metric") == "precision", named=True)
            shown.append(f"{100 * r['mean']:.1f}% [{100 * r['lo']:.1f}, {100 * r['hi']:.1f}]")
        at = text.index(name)
        assert shown[0] in text[at:at + 200] and shown[1] in text[at:at + 300], (name, shown)


DOC_NUMBERS_PY = ROOT / "benchmarks" / "doc_numbers.py"
DOC_NUMBERS = re.compile(r"`python\s+benchmarks/doc_numbers\.py\s+([^`]*)`")


def doc_numbers_script():
    from conftest import benchmark_script

    return benchmark_script("doc_numbers")


def doc_pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "MODEL.md", ROOT / "REPRODUCTION.md",
            *sorted((ROOT / "docs").glob("*.md"))]


def test_docs_name_only_doc_numbers_subcommands_that_exist():
    """The numbers README.md and docs/model.md quote from one-off computations were given
    by `python -c "..."` commands wrapped over several lines, which broke mid-statement
    when copied and which nothing ran; each is a subcommand of benchmarks/doc_numbers.py
    now.  Every such command line on a page parses as written (argparse alone: nothing is
    computed), sits on one line, and every subcommand is named by some page."""
    module = doc_numbers_script()
    named = set()
    for page in doc_pages():
        for line in DOC_NUMBERS.findall(page.read_text()):
            assert "\n" not in line, (page.name, line)
            args = module.parser().parse_args(shlex.split(line))
            named.add(args.name)
        inline = re.findall(r'`python -c "[^`]*`', page.read_text())
        assert [c for c in inline if "\n" in c] == [], page.name
    assert named == set(module.NUMBERS)
    shown = subprocess.run([sys.executable, str(DOC_NUMBERS_PY), "--help"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert all(f"\n    {name}" in shown.stdout for name in module.NUMBERS), shown.stdout


@pytest.mark.parametrize("runs", ["missing.parquet", "notes.txt", "short.parquet"])
def test_doc_numbers_refuses_a_runs_file_it_cannot_read_before_any_work(tmp_path, capsys, runs):
    (tmp_path / "notes.txt").write_text("not parquet")
    pl.DataFrame({"cluster": [0], "arm": ["policy"], "fp": [1]}).write_parquet(
        tmp_path / "short.parquet")  # no fp_freed
    assert doc_numbers_script().main(["fp-unfreed", "--runs", str(tmp_path / runs)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    assert f"--runs={tmp_path / runs} is invalid" in err and "allowed: the --out file" in err


def test_no_command_on_a_page_is_broken_across_lines():
    """A command written inline and wrapped with the paragraph (`fastsim run --scheduler
    srtf_est --policy` on one line, `evalstop:k=2 ...` on the next) renders as one line
    but breaks when copied from the page's text, where most readers of a terminal copy
    it.  docs/performance.md, the record of each round as it was written, is left out."""
    pages = [p for p in doc_pages() if p.name != "performance.md"]
    command = re.compile(r"\s*(fastsim |python |pip |pytest |git |PYTHONPATH=|NUMBA_|\.venv/)")
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"),
                      page.read_text(encoding="utf-8"), flags=re.S)
        for m in re.finditer(r"`([^`]+)`", text):
            if "\n" in m.group(1) and command.match(m.group(1)):
                broken.append(f"{page.name}:{text[:m.start()].count(chr(10)) + 1}")
    assert not broken, broken


def test_sweeps_doc_own_sweep_figure_lines_fit_the_file_they_name(tmp_path):
    """docs/sweeps.md's own-sweep figure block ran `fastsim sweep mine.toml` and held
    `--where sigma=0.1` on a file the page never showed: a reader's own mine.toml had no
    such value, and the line was refused.  The page names the tutorial's file; every
    `--x` and `--where` of the block is an axis, and a value, of that file."""
    import tomllib

    from fastsim.sweep.grid import load_sweep

    text = (ROOT / "docs" / "sweeps.md").read_text()
    section = text.split("### A figure of your own sweep")[1]
    assert "`mine.toml` here is [tutorial.md](tutorial.md)'s" in section
    body = re.search(r"^```\n(fastsim sweep mine\.toml.*?)^```", section, re.S | re.M).group(1)
    toml = _named_file([b for k, b in blocks(ROOT / "docs" / "tutorial.md") if k == "toml"],
                       "mine.toml")
    (tmp_path / "mine.toml").write_text(toml)
    axes = tomllib.loads(toml)["axes"]
    assert set(load_sweep(tmp_path / "mine.toml").axes) == set(axes)
    held = 0
    for line in body.splitlines():
        argv = shlex.split(line, comments=True)
        for flag, value in zip(argv, argv[1:]):
            if flag == "--x":
                assert value in axes, (line, sorted(axes))
            elif flag == "--where":
                name, _, shown = value.partition("=")
                assert float(shown) in axes[name], (line, axes.get(name))
                held += 1
    assert held
