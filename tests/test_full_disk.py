"""A full disk, for real: a small tmpfs filled to the last byte (root only; skipped
elsewhere, but a failure in CI, which runs as root).  Every command says so in one line naming the file, exit 2, with no
traceback, and leaves nothing half-written.

Commands run in a subprocess: an exception Python ignores at exit (in a ``__del__``) is
printed only there, after the command's own line.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import own_lines

TOML = 'clusters = 2\n[base]\nn_jobs = 10\n[axes]\npolicy = ["none"]\n'


def _cannot(why: str) -> None:
    """Skip where a full disk cannot be made (no root), but never in CI, which runs as root:
    there a test that cannot mount its disk fails rather than passing unrun."""
    (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(why)


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str = "1m"):
    where.mkdir()
    if os.geteuid() != 0:
        _cannot("mounting a tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        _cannot(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def fill(disk: Path) -> None:
    """Take every free byte of ``disk`` (a file of all of them)."""
    with open(disk / "filler", "wb", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 4096)


def cli(argv, cwd, stdout=False):
    """``fastsim ARGV`` in a subprocess: (exit code, stderr lines[, stdout])."""
    r = subprocess.run([sys.executable, "-c", "from fastsim.cli import main; "
                        "raise SystemExit(main())", *map(str, argv)], cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    return (r.returncode, own_lines(r.stderr)) + ((r.stdout,) if stdout else ())


def test_lock_of_a_sweep_directory_on_a_full_disk(tmp_path):
    (tmp_path / "s.toml").write_text(TOML)
    with small_tmpfs(tmp_path / "disk") as disk:
        (disk / "out").mkdir()
        (disk / "out" / "sweep.lock").touch()  # a sweep directory, as a run leaves it
        fill(disk)
        code, err = cli(["sweep", tmp_path / "s.toml", "--no-progress", "--out",
                         disk / "out"], tmp_path)
        assert code == 2, err
        assert len(err) == 1 and "No space left on device" in err[0], err
        assert "out/sweep.lock" in err[0], err
        assert (disk / "out" / "sweep.lock").read_text() == ""


@pytest.mark.parametrize("argv", [
    ["run", "--clusters", "2", "--n-jobs", "10", "--gpus", "16", "--no-progress"],
    ["replay", "--example"],
], ids=["run", "replay"])
def test_results_printed_only_once_written(tmp_path, argv):
    """A command whose --out cannot be written prints no results: it printed its whole
    table, then the refusal, so a reader of the output saw results that were not saved."""
    with small_tmpfs(tmp_path / "disk") as disk:
        fill(disk)
        code, err, out = cli([*argv, "--out", disk / "r.parquet"], tmp_path, stdout=True)
        assert code == 2, err
        assert len(err) == 1 and "No space left on device" in err[0], err
        assert out == "", out
        assert not (disk / "r.parquet").exists()
