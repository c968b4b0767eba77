"""Two processes writing the same outputs at once (two ``fastsim run --out same.parquet
--jobs-out same_jobs.parquet``): each command's files are renamed into place together,
so the outputs are all of one command's, never some of each.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

from fastsim.io import bytes_writer, write_all


def test_two_writers_never_leave_files_of_each(tmp_path):
    # the first writer pauses between its two renames, as a descheduled process may
    first = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import os, time
        from fastsim.io import bytes_writer, write_all

        real = os.replace

        def slow(src, dst):
            real(src, dst)
            time.sleep(1.0)

        os.replace = slow
        write_all([("a.txt", bytes_writer(b"first")), ("b.txt", bytes_writer(b"first"))])
    """)], cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not (tmp_path / "a.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    write_all([(tmp_path / "a.txt", bytes_writer(b"second")),
               (tmp_path / "b.txt", bytes_writer(b"second"))])
    assert first.wait(timeout=30) == 0
    assert (tmp_path / "a.txt").read_text() == (tmp_path / "b.txt").read_text()
