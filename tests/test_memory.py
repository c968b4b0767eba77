"""Memory of ``fastsim run`` and of sweep aggregation does not grow with the number of
clusters (or of chunks).

Peak RSS is measured in a fresh process per run (``own_peak_rss_mb``: the process's own
high-water mark, not ``ru_maxrss``, which on Linux keeps the parent's size at the fork);
unlike time, it is stable enough on a loaded machine to assert.  Before the streamed summaries, 40,000
clusters cost about 700 MB more than 2,000 (the bootstrap's index matrix alone).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from conftest import side_by_side  # noqa: E402

RUN = """
import sys
from fastsim.bench import own_peak_rss_mb
from fastsim.cli import main
rc = main(["run", "--clusters", sys.argv[1], "--n-jobs", "20", "--gpus", "16", "--no-progress"])
print(rc, own_peak_rss_mb())
"""


def test_own_peak_rss_is_the_childs_not_the_parents():
    # The parent holds 400 MB when it starts the child; ru_maxrss would report them.
    held = np.ones(50_000_000)
    out = subprocess.run([sys.executable, "-c",
                          "from fastsim.bench import own_peak_rss_mb; print(own_peak_rss_mb())"],
                         check=True, capture_output=True, text=True).stdout
    assert held[-1] == 1 and float(out.split()[-1]) < 300, out


def test_run_peak_rss_is_flat_in_clusters(peaks):
    # 198,000 more clusters move the peak by under 1 MB; 10 MB is 50 bytes a cluster.  At
    # 40,000 clusters against 40 MB, keeping every cluster's metrics (+24 MB) passed.
    small, large = peaks["run"]
    assert large - small < 10, (small, large)


AGGREGATE = """
import os, sys
import numpy as np, polars as pl
from fastsim.api import simulate
from fastsim.bench import own_peak_rss_mb
from fastsim.sweep.aggregate import aggregate
from fastsim.sweep.extracts import JCT_EDGES_H, JCT_GROUPS, jct_histogram
from fastsim.sweep.grid import load_sweep
from fastsim.sweep.store import SweepStore

os.fsync = lambda fd: None  # durability is not under test: keep a thousand small writes fast
n_bins = len(JCT_EDGES_H) - 1  # a chunk's JCT histogram holds every bin of every group
types = len(JCT_GROUPS) - 1  # one cluster with a job of every type in every bin
hist = jct_histogram({"jct_h": np.tile(JCT_EDGES_H[:-1], types)[None],
                      "job_type": np.repeat(np.arange(types, dtype=np.int8), n_bins)[None]})
for n, out in zip(map(int, sys.argv[2:4]), sys.argv[4:6]):
    grid = load_sweep(sys.argv[1], clusters=n, chunk=1)
    cell = grid.cells[0]
    one = simulate(cell.config, 1).clusters
    with SweepStore.open(out, grid) as store:
        for i in range(n):
            store.write_chunk(cell.id, i, one.with_columns(pl.lit(i, pl.Int64).alias("cluster")),
                              hist)
        aggregate(store)
    print(own_peak_rss_mb())
"""

SWEEP_FILE = """
title = "aggregation memory"
baseline = false
[base]
scheduler = "fifo"
policy = "none"
n_jobs = 8
gpus = 16
"""


def test_sweep_aggregation_peak_rss_is_flat_in_chunks(peaks):
    # A cell of 1,000 chunks aggregated after one of 50, in one process: the second may
    # raise the peak only by a bounded amount.  Reading a cell's JCT histograms all at
    # once cost about 125 kB per chunk here (+124 MB; 2,000 chunks per cell in the
    # million-cluster sweep); merged a batch at a time, 11 MB.
    small, large = peaks["aggregate"]
    assert large - small < 40, (small, large)


@pytest.fixture(scope="module")
def peaks(tmp_path_factory) -> dict[str, tuple[float, float]]:
    """The peak RSS (MB) the two tests above compare, each from fresh processes of its own
    (``fastsim run`` on 2,000 then on 200,000 clusters; ``AGGREGATE`` on 50 then 1,000
    chunks, in one process), the three processes side by side: each one's peak is its
    own, whatever runs beside it."""
    tmp = tmp_path_factory.mktemp("memory")
    sweep = tmp / "agg.toml"
    sweep.write_text(SWEEP_FILE)
    runs = side_by_side(*(dict(args=[sys.executable, "-c", RUN, str(n)], text=True)
                          for n in (2_000, 200_000)),
                        dict(args=[sys.executable, "-c", AGGREGATE, str(sweep), "50", "1000",
                                   str(tmp / "small"), str(tmp / "large")], text=True))
    for code, _, err in runs:
        assert code == 0, err
    (_, small, _), (_, large, _), (_, agg, _) = runs
    for out in (small, large):
        assert out.split()[-2] == "0"  # fastsim run's exit code
    return {"run": (float(small.split()[-1]), float(large.split()[-1])),
            "aggregate": (float(agg.split()[-2]), float(agg.split()[-1]))}


def test_aggregation_holds_one_chunk_of_a_cell_at_a_time(tmp_path, monkeypatch):
    """What the bound above cannot see: holding a whole cell's per-cluster chunks raised
    its reading from +10 MB to +33 MB at 1,000 one-cluster chunks, under its 40 MB.  So
    count the chunk frames alive at each read instead: at most the one being replaced
    and the new one, and the histograms a batch at a time."""
    import os
    import weakref

    import polars as pl

    from fastsim.api import simulate
    from fastsim.sweep import store as S
    from fastsim.sweep.aggregate import aggregate
    from fastsim.sweep.extracts import JCT_GROUPS, JCT_SCHEMA, MERGE_BATCH
    from fastsim.sweep.grid import load_sweep

    monkeypatch.setattr(os, "fsync", lambda fd: None)  # durability is not under test
    live = {"chunk": [], "jct": [], "sorted": []}  # as loaded, and as read_chunk returns
    peak, reads = dict.fromkeys(live, 0), dict.fromkeys(live, 0)

    def track(kind, df):
        live[kind] = [r for r in live[kind] if r() is not None] + [weakref.ref(df)]
        peak[kind] = max(peak[kind], len(live[kind]))
        reads[kind] += 1
        return df

    load, read_chunk = S.SweepStore._load, S.SweepStore.read_chunk
    monkeypatch.setattr(S.SweepStore, "_load",
                        lambda self, cid, kind, i: track(kind, load(self, cid, kind, i)))
    monkeypatch.setattr(S.SweepStore, "read_chunk",
                        lambda self, cid, i: track("sorted", read_chunk(self, cid, i)))
    sweep = tmp_path / "agg.toml"
    sweep.write_text(SWEEP_FILE)
    n = 2 * MERGE_BATCH + 10
    grid = load_sweep(sweep, clusters=n, chunk=1)
    cell = grid.cells[0]
    one = simulate(cell.config, 1).clusters
    hist = pl.DataFrame({"group": list(JCT_GROUPS), "bin": [0] * len(JCT_GROUPS),
                         **{c: [1] * len(JCT_GROUPS) for c in list(JCT_SCHEMA)[2:]}},
                        schema=JCT_SCHEMA)
    with S.SweepStore.open(tmp_path / "out", grid) as store:
        for i in range(n):
            store.write_chunk(cell.id, i, one.with_columns(pl.lit(i, pl.Int64).alias("cluster")),
                              hist)
        aggregate(store)
    assert peak["chunk"] <= 2 and peak["sorted"] <= 2, peak
    assert peak["jct"] <= MERGE_BATCH + 1, peak
    assert reads == {"chunk": n, "jct": n, "sorted": n}  # all went through the counted path


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 7, 10), (2, 300, 0)])
def test_workload_bytes_counts_every_array_allocate_makes(shape):
    """``fastsim.memory.workload_bytes`` (which cannot import ``fastsim.workload``: that
    imports it) writes ``allocate``'s arrays as numbers; tied here to them, so that an
    array or a dtype changed in one cannot leave the memory checks counting another.  The
    cluster ids (8 bytes a cluster) are left out."""
    from dataclasses import fields

    from fastsim.memory import workload_bytes
    from fastsim.workload import allocate

    w = allocate(*shape)
    total = sum(getattr(w, f.name).nbytes for f in fields(w) if f.name != "cluster_ids")
    assert workload_bytes(*shape) == total


def test_a_run_past_the_address_space_limit_is_refused_in_one_line():
    """Under ``ulimit -v`` the check read the machine's free memory alone: a run it
    admitted died at its first large array, a MemoryError traceback (exit 1).  What the
    limit leaves counts too: refused, exit 2, naming the largest run that fits."""
    from conftest import run_fenced

    # 11.3 GiB in one chunk of 500 clusters (one thread's drawing scratch with it): past the
    # limit; on a machine with that much free, the check admitted it (with less, it was
    # refused as now)
    r = run_fenced(["run", "--clusters", "500", "--n-jobs", "1000", "--n-evals", "1000",
                    "--no-progress"], env={"NUMBA_NUM_THREADS": "1"})
    err = r.stderr.strip()
    assert r.returncode == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("fastsim run: error: --clusters 500 with n_jobs=1000, n_evals=1000 "
                          "needs about 11.3 GiB of memory, ") and "largest feasible: --clusters" in err


def test_a_cgroups_memory_max_limits_what_is_available(tmp_path):
    """A container's ``memory.max`` (cgroup v2) at its own level or one holding it: what it
    leaves above ``memory.current`` (less the page cache it could reclaim) is what the
    process may take, however much the machine has free."""
    from fastsim.memory import UNKNOWN, _cgroup_left

    membership = tmp_path / "cgroup"
    membership.write_text("0::/outer/inner\n")
    root = tmp_path / "fs"
    inner = root / "outer" / "inner"
    inner.mkdir(parents=True)
    assert _cgroup_left(root, membership) == UNKNOWN  # no limit anywhere
    (inner / "memory.max").write_text("max\n")
    (root / "outer" / "memory.max").write_text(f"{4 << 30}\n")
    (root / "outer" / "memory.current").write_text(f"{3 << 30}\n")
    (root / "outer" / "memory.stat").write_text(f"anon 1\ninactive_file {1 << 29}\n")
    assert _cgroup_left(root, membership) == (1 << 30) + (1 << 29)
    (inner / "memory.max").write_text(f"{1 << 30}\n")  # the tighter of the two
    (inner / "memory.current").write_text(f"{1 << 29}\n")
    assert _cgroup_left(root, membership) == 1 << 29
    membership.write_text("0::/\n")  # at the root, which has no memory.max
    assert _cgroup_left(root, membership) == UNKNOWN


def test_a_cgroup_v1_memory_limit_limits_what_is_available(tmp_path):
    """A container on a cgroup v1 host (older Docker, Kubernetes) has its limit in the
    memory controller's ``memory.limit_in_bytes`` alone, and sees its own cgroup at the
    mount, not at the path the host names in ``/proc/self/cgroup``: a run the limit could
    not hold was admitted, and the kernel ended it.  "No limit" there is a number near
    2**63, which limits nothing."""
    from fastsim.memory import UNKNOWN, _cgroup_left

    membership = tmp_path / "cgroup"
    membership.write_text("12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n")
    root = tmp_path / "fs"
    mount = root / "memory"
    mount.mkdir(parents=True)
    assert _cgroup_left(root, membership) == UNKNOWN  # nothing readable
    (mount / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    (mount / "memory.usage_in_bytes").write_text(f"{1 << 30}\n")
    assert _cgroup_left(root, membership) == UNKNOWN  # v1's "no limit"
    (mount / "memory.limit_in_bytes").write_text(f"{2 << 30}\n")
    (mount / "memory.stat").write_text(f"inactive_file 1\ntotal_inactive_file {1 << 28}\n")
    assert _cgroup_left(root, membership) == (1 << 30) + (1 << 28)
    (root / "app").mkdir()  # a hybrid host: a tighter v2 limit counts as well
    (root / "app" / "memory.max").write_text(f"{1 << 29}\n")
    (root / "app" / "memory.current").write_text("0\n")
    membership.write_text("4:memory:/docker/abc\n0::/app\n")
    assert _cgroup_left(root, membership) == 1 << 29


BIG_CLUSTER = """
import sys
import fastsim
from fastsim.bench import own_peak_rss_mb
from fastsim.memory import simulate_bytes
shape = dict(n_jobs=10_000, n_evals=1_000)
fastsim.simulate(fastsim.SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=5), 1)
before = own_peak_rss_mb()
fastsim.simulate(fastsim.SimConfig.from_specs("fifo", "evalstop:k=2", **shape), 1)
print(own_peak_rss_mb() - before, simulate_bytes(1, *shape.values(), False) / 2**20)
"""


def test_the_estimate_of_a_run_holds_its_drawings_scratch():
    """One cluster of 10,000 jobs x 1,000 evaluations: drawing it holds its noise's
    uniforms, normals and tail indices and its curve's exponentials, 32-72 bytes a job and
    evaluation beside the workload's 24, in each thread.  The estimate counted the workload
    alone (231 MiB against 459 MiB used), and a run it admitted near the limit died with a
    MemoryError traceback; now it bounds what the run takes."""
    r = subprocess.run([sys.executable, "-c", BIG_CLUSTER], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "NUMBA_NUM_THREADS": "1"})
    assert r.returncode == 0, r.stderr
    used, estimate = map(float, r.stdout.split())
    assert used <= estimate, (used, estimate)
