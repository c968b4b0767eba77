"""The numba workload kernel draws exactly what docs/model.md's table says.

``tests/reference.py`` implements the table job by job in plain Python (``math`` and
loops, ``kernels.rng`` as the only random primitive); the kernel must match it bit for
bit, for any chunking of clusters.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fastsim.config import WorkloadConfig
from fastsim.workload import arrival_rate, generate_workload

sys.path.insert(0, str(Path(__file__).parent))
from reference import reference_arrival_rate, reference_workload  # noqa: E402

FIELDS = ("job_type", "gpus", "arrival_h", "duration_h", "t_est_h", "hacking", "ustar",
          "height", "tau", "loss0", "loss_inf", "loss_tau", "gold", "score", "loss",
          "peak_eval")

CONFIGS = {
    "default-small": WorkloadConfig(n_jobs=25),
    "mixed": WorkloadConfig(n_jobs=30, mix="mixed", n_evals=4),
    "dpo-hacks": WorkloadConfig(n_jobs=30, mix="mixed", dpo_base_rate=0.5, n_evals=7,
                                sigma=0.1, loss_sigma=0.05),
    "custom": WorkloadConfig(gpus=16, n_jobs=20, load=1.5, mix=(0.2, 0.3, 0.5),
                             demands_lora=(1,), demands_dpo=(2, 4, 8, 16),
                             demands_rlhf=(4, 8), log_sd=0.3, n_evals=2, base_rate=0.9,
                             est_sigma=1.2, sigma=0.0, ustar_hacking=(0.5, 0.6),
                             ustar_healthy=(1.0, 1.2)),
    "many-evals": WorkloadConfig(n_jobs=8, n_evals=40, sigma=0.15),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_arrival_rate(name):
    cfg = CONFIGS[name]
    assert arrival_rate(cfg) == pytest.approx(reference_arrival_rate(cfg), rel=1e-15)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("seed,cluster_start,n_clusters", [(0, 0, 3), (12345, 7, 2),
                                                           (2**40 + 3, 1000, 2)])
def test_workload_matches_table(name, seed, cluster_start, n_clusters):
    cfg = CONFIGS[name]
    w = generate_workload(cfg, n_clusters, seed=seed, cluster_start=cluster_start)
    assert list(w.cluster_ids) == list(range(cluster_start, cluster_start + n_clusters))
    for row in range(n_clusters):
        ref = reference_workload(cfg, seed, cluster_start + row)
        for f in FIELDS:
            got = getattr(w, f)[row]
            assert got.dtype == ref[f].dtype or got.dtype.kind == ref[f].dtype.kind, f
            assert np.array_equal(got, ref[f], equal_nan=got.dtype.kind == "f"), (f, row)


def test_workload_exercises_every_branch():
    # The configs above draw every type, hacking and healthy RLHF and DPO, and NaN u*.
    cfg = CONFIGS["dpo-hacks"]
    ref = reference_workload(cfg, 3, 0)
    t, hack = ref["job_type"], ref["hacking"]
    for typ in (0, 1, 2):
        assert (t == typ).any()
    assert (hack & (t == 1)).any() and (hack & (t == 2)).any() and (~hack & (t == 2)).any()
    assert np.isnan(ref["ustar"][(t == 0)]).all()
    assert np.all(np.diff(ref["arrival_h"]) > 0)
