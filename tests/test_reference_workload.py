"""The numba workload kernel draws exactly what docs/model.md's table says.

``tests/reference.py`` implements the table job by job in plain Python (``math`` and
loops, ``fastsim.kernels.rng`` as the only random primitive); the kernel must match it bit for
bit, for any chunking of clusters.
"""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fastsim.config import WorkloadConfig
from fastsim.workload import generate_workload

sys.path.insert(0, str(Path(__file__).parent))
from reference import reference_arrival_rate, reference_workload  # noqa: E402

FIELDS = ("job_type", "gpus", "arrival_h", "duration_h", "t_est_h", "hacking", "ustar",
          "height", "tau", "loss0", "loss_inf", "loss_tau", "gold", "score", "loss",
          "peak_eval")

CONFIGS = {
    "default-small": WorkloadConfig(n_jobs=25),
    "mixed": WorkloadConfig(n_jobs=30, mix="mixed", n_evals=4),
    "dpo-hacks": WorkloadConfig(n_jobs=30, mix="mixed", dpo_base_rate=0.5, n_evals=7,
                                sigma=0.1, loss_sigma=0.025),
    "custom": WorkloadConfig(gpus=16, n_jobs=20, load=1.5, mix=(0.2, 0.3, 0.5),
                             demands_lora=(1,), demands_dpo=(2, 4, 8, 16),
                             demands_rlhf=(4, 8), log_sd=0.3, n_evals=2, base_rate=0.9,
                             est_sigma=1.2, sigma=0.0, ustar_hacking=(0.5, 0.6),
                             ustar_healthy=(1.0, 1.2)),
    "many-evals": WorkloadConfig(n_jobs=8, n_evals=40, sigma=0.15),
    # The trace-grounded curve knobs (MODEL.md section 4), alone and together.
    "plain": WorkloadConfig(n_jobs=25, kl_gamma=1.0, hack_sharpness=1.0, sigma_spread=0.0, noise_rho=0.0,
                            ustar_healthy=(1.5, 4.0)),
    "kl-gamma": WorkloadConfig(n_jobs=25, mix="mixed", dpo_base_rate=0.5, kl_gamma=0.43,
                               sigma_spread=0.0, noise_rho=0.0),
    "sigma-spread": WorkloadConfig(n_jobs=25, kl_gamma=1.0, sigma_spread=0.6, noise_rho=0.0),
    "ar1": WorkloadConfig(n_jobs=20, n_evals=12, kl_gamma=1.0, sigma_spread=0.0, noise_rho=0.7),
    "ar1-negative": WorkloadConfig(n_jobs=10, n_evals=5, noise_rho=-0.4, sigma=0.05),
    "continuous-peaks": WorkloadConfig(n_jobs=30, n_evals=21, ustar_hacking=(0.3, 0.6),
                                       ustar_healthy=(0.6, 2.0), kl_gamma=1.0),
    "hack-sharpness": WorkloadConfig(n_jobs=25, mix="mixed", dpo_base_rate=0.5, kl_gamma=1.0,
                                     hack_sharpness=2.5),
    "all-knobs": WorkloadConfig(n_jobs=30, mix="mixed", dpo_base_rate=0.3, n_evals=21,
                                kl_gamma=0.5, hack_sharpness=1.7, sigma_spread=0.4, noise_rho=0.3,
                                ustar_hacking=(0.4, 0.75), ustar_healthy=(0.75, 3.0), sigma=0.03),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_arrival_rate(name):
    cfg = CONFIGS[name]
    assert cfg.arrival_rate() == pytest.approx(reference_arrival_rate(cfg), rel=1e-15)


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


def test_curve_knobs_do_what_they_say():
    # Each knob changes what it should and nothing else, against the plain model.
    plain = CONFIGS["plain"]
    base = reference_workload(plain, 3, 0)
    rl = base["job_type"] == 2
    gam = reference_workload(replace(plain, kl_gamma=0.43), 3, 0)
    assert np.array_equal(gam["gold"][~rl], base["gold"][~rl])
    assert not np.array_equal(gam["gold"][rl], base["gold"][rl])
    sharp = reference_workload(replace(plain, hack_sharpness=2.0), 3, 0)
    hk = base["hacking"]
    assert np.array_equal(sharp["gold"][~hk], base["gold"][~hk])
    assert np.all(sharp["gold"][hk, -1] < base["gold"][hk, -1])  # falls faster after u*
    healthy = rl & ~base["hacking"]  # flatter: more of the final gain by u = 1/E
    assert np.all(gam["gold"][healthy, 0] / gam["gold"][healthy, -1]
                  > base["gold"][healthy, 0] / base["gold"][healthy, -1])
    spread = reference_workload(replace(plain, sigma_spread=0.8), 3, 0)
    assert np.array_equal(spread["gold"], base["gold"])
    ratio = (spread["score"] - spread["gold"]) / (base["score"] - base["gold"])
    assert np.allclose(ratio, ratio[:, :1])  # one scale per job
    assert np.std(np.log(ratio[:, 0])) > 0.3
    iid = reference_workload(replace(plain, sigma=0.05), 3, 0)
    ar = reference_workload(replace(plain, noise_rho=0.9, sigma=0.05), 3, 0)
    assert np.array_equal(ar["score"][:, 0], iid["score"][:, 0])  # stationary from e = 1
    eps = (ar["score"] - ar["gold"]) / 0.05
    assert np.corrcoef(eps[:, :-1].ravel(), eps[:, 1:].ravel())[0, 1] > 0.6


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
