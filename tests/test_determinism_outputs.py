"""Every file a run writes is the same for any thread count and chunk size.

``test_determinism`` checks the engine's results in memory; this checks what users keep:
a sweep's chunk files, per-job records, aggregated tables and ``summary.txt``, the
reproduce extracts the figures read, the cost-aware sweeps' tables and the detector
benchmark's tables, each written by a fresh process with ``NUMBA_NUM_THREADS`` 1 and 2
(numba reads it once, at import), and the sweep again in chunks of another size; and a
user's policy and key, whose drivers numba compiles per function.  The Dask backend is
checked in ``test_sweep_dask``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from fastsim.cli import main
from test_user_extensions import user_dir  # noqa: F401  (the toy user modules)

SWEEP = """clusters = 6
chunk = 2
seed = 4
baseline = "none"
[base]
n_jobs = 16
gpus = 16
[axes]
scheduler = ["srtf_est", "tiresias"]
policy = ["evalstop:k=2", "margin"]
"""
COSTAWARE = {
    "sgd": 'name = "ca_sgd"\nexperiment = "sgd"\nreplications = 4\nseed = 1\n'
           '[base]\nn = 16\nd = 2\neps = 0.1\n[axes]\ncost_sigma = [0.0, 1.0]\n',
    "subset": 'name = "ca_subset"\nexperiment = "subset"\nreplications = 4\nseed = 1\n'
              'gamma_fracs = [0.0, 0.05]\n[base]\nn = 16\nd = 2\neps = 0.1\n'
              '[axes]\ncost_corr = [0.0, 0.5]\n',
    "grpo": 'name = "ca_grpo"\nexperiment = "grpo"\nreplications = 2\nseed = 7\n'
            '[base]\nn_steps = 10\nn_train = 8\nn_test = 8\n[axes]\nlam = [0.1, 0.3]\n',
}
# One process writes every output; the detector benchmark at one noise level, and without
# its figure (pixels, not a table).
WRITE_ALL = r"""
import sys
from pathlib import Path

import fastsim.detectors_cli as D
import fastsim.sweep.figures as F
from fastsim.cli import main
from fastsim.sweep.reproduce import write_extracts

src, out = Path(sys.argv[1]), Path(sys.argv[2])
assert main(["sweep", str(src / "tiny.toml"), "--out", str(out / "sweep"), "--keep-jobs",
             "--no-progress"]) == 0
for name in ("sgd", "subset", "grpo"):
    assert main(["costaware", "sweep", str(src / f"ca_{name}.toml"),
                 "--out", str(out / "costaware")]) == 0
write_extracts(out / "reproduce", seed=3)
D.SIGMAS = D.TABLE_SIGMAS = (0.05,)
F.load_script = lambda name: type("NoFigure", (), {"main": staticmethod(lambda *a: None)})
assert main(["detectors", "--quick", "--clusters", "2", "--out", str(out / "detectors")]) == 0
"""


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """``{threads: output directory}``, the two processes run side by side."""
    src = tmp_path_factory.mktemp("inputs")
    (src / "tiny.toml").write_text(SWEEP)
    for name, text in COSTAWARE.items():
        (src / f"ca_{name}.toml").write_text(text)
    outs = {t: tmp_path_factory.mktemp(f"threads{t}") for t in (1, 2)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITE_ALL, str(src), str(out)],
                              env=dict(os.environ, NUMBA_NUM_THREADS=str(t)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for t, out in outs.items()]
    for p in procs:
        assert p.wait() == 0, p.stderr.read()
    return src, outs


def _files(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*")
                  if p.is_file() and p.suffix != ".lock")


def test_every_output_is_the_same_bytes_on_one_and_two_threads(written):
    _, outs = written
    files = _files(outs[1])
    assert files == _files(outs[2])
    for top in ("sweep", "costaware", "reproduce", "detectors"):
        assert any(f.parts[0] == top for f in files), top
    assert any(f.name.startswith("jobs-") for f in files)
    for rel in files:
        assert (outs[1] / rel).read_bytes() == (outs[2] / rel).read_bytes(), rel
    stops = pl.read_parquet(outs[1] / "sweep" / "summary.parquet").filter(
        pl.col("metric") == "stop_recall")["mean"]
    assert stops.max() > 0  # the policies did stop jobs: the comparison is not vacuous


def _chunks(cell: Path, kind: str) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in sorted(cell.glob(f"{kind}-*.parquet"))])


def test_every_sweep_output_is_the_same_for_any_chunk_size(written, tmp_path):
    src, outs = written
    ref = outs[2] / "sweep"
    out = tmp_path / "chunk5"
    assert main(["sweep", str(src / "tiny.toml"), "--out", str(out), "--chunk", "5",
                 "--keep-jobs", "--no-progress"]) == 0
    for name in ("summary.parquet", "cells.parquet", "jct_hist.parquet"):
        assert_frame_equal(pl.read_parquet(out / name), pl.read_parquet(ref / name),
                           check_exact=True)
    # summary.txt names the grid, whose hash covers the chunk size; the rest is the same
    text = [(out / "summary.txt").read_text(), (ref / "summary.txt").read_text()]
    assert [[x for x in t.splitlines() if ", grid " not in x] for t in text] == [
        [x for x in text[0].splitlines() if ", grid " not in x]] * 2
    cells = sorted(p.name for p in (ref / "cells").iterdir())
    assert cells == sorted(p.name for p in (out / "cells").iterdir()) and len(cells) == 6
    for cell in cells:
        a, b = out / "cells" / cell, ref / "cells" / cell
        for kind, key in (("chunk", ["cluster"]), ("jobs", ["cluster", "job"])):
            assert_frame_equal(_chunks(a, kind).sort(key), _chunks(b, kind).sort(key),
                               check_exact=True)
        jct = [_chunks(d, "jct").group_by("group", "bin").agg(pl.exclude("group", "bin").sum())
               .sort("group", "bin") for d in (a, b)]
        assert_frame_equal(*jct, check_exact=True)


def test_user_code_gives_the_same_results_on_any_thread_count_and_chunking(user_dir):  # noqa: F811
    """A user's policy and key run through drivers numba compiles per function: the same
    results on one and two threads and in two chunks as in one."""
    import numba

    from fastsim.api import simulate
    from fastsim.config import SimConfig

    cfg = SimConfig.from_specs("toy_user_schedulers:typed", "toy_user_policies:drawdown",
                               n_jobs=30, sigma=0.05)
    before = numba.get_num_threads()
    try:
        runs = []
        for threads in (1, 2):
            numba.set_num_threads(threads)
            runs.append(simulate(cfg, 6, seed=3, keep_jobs=True))
    finally:
        numba.set_num_threads(before)
    parts = [simulate(cfg, n, seed=3, cluster_start=s, keep_jobs=True) for s, n in ((0, 2), (2, 4))]
    one, two = runs
    for name in ("jobs", "clusters"):
        assert_frame_equal(getattr(one, name), getattr(two, name), check_exact=True)
        assert_frame_equal(getattr(one, name), pl.concat([getattr(p, name) for p in parts]),
                           check_exact=True)
    assert one.jobs["stopped"].sum() > 0
