"""The documentation runs as written: README's Python examples, every block of
docs/tutorial.md (shell commands through the real CLI, Python in one session, TOML files
written where they say), and every module's doctests under its package name."""
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

import pytest

import fastsim
from fastsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(path: Path) -> list[tuple[str, str]]:
    return FENCE.findall(path.read_text())


def run_console(block: str) -> None:
    for line in block.splitlines():
        if not line.startswith("$ "):
            continue
        argv = shlex.split(line[2:])
        assert argv[0] == "fastsim", line
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv[1:])
            except SystemExit as exc:  # argparse's own errors
                code = exc.code
        if code == 2:  # an example of bad input: refused in one line naming the value
            lines = err.getvalue().strip().splitlines()
            assert len(lines) == 1 and "error:" in lines[0], (line, err.getvalue())
        else:
            assert code == 0, (line, err.getvalue())
            assert out.getvalue().strip(), f"{line} printed nothing"


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


def test_costaware_doc_counts_its_tests():
    # the table said 158 tests for files that held 168; collecting them takes about 1.5 s
    text = (ROOT / "docs" / "costaware.md").read_text()
    row = re.search(r"\| `tests/test_costaware_\{(.*?)\}\.py` \| (\d+) tests,", text)
    files = [f"tests/test_costaware_{name}.py" for name in row.group(1).split(",")]
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    assert f"{row.group(2)} tests collected" in done.stdout, done.stdout[-200:]
    assert sorted(ROOT.glob("tests/test_costaware_*.py")) == sorted(ROOT / f for f in files)


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
