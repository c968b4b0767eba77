"""Does the offline Bayes bound's integration grid hold it down?  docs/detectors.md,
"Bounds": the posterior integrates ``u*`` on 60 points and the per-job noise on 12
quantiles; this recomputes the offline bound's recall at 95% precision (threshold chosen
in sample) with that grid and a finer one, on the same clusters.

    python benchmarks/bound_grid.py [SIGMA] [CLUSTERS] [SEED]    # default 0.12 40 0
"""
import sys

import numpy as np

from fastsim.config import WorkloadConfig
from fastsim.detector_bounds import bayes_posterior, threshold_at_precision
from fastsim.kernels.codes import RLHF
from fastsim.stats import proportion_ci
from fastsim.workload import generate_workload


def main(sigma: float = 0.12, n_clusters: int = 40, seed: int = 0) -> None:
    cfg = WorkloadConfig(sigma=sigma)
    w = generate_workload(cfg, n_clusters, seed)
    scope = w.job_type == RLHF
    score, hacking = w.score[scope], w.hacking[scope]
    cluster = np.broadcast_to(np.arange(n_clusters)[:, None], scope.shape)[scope]
    per = lambda x: np.bincount(cluster, x.astype(float), n_clusters)  # noqa: E731
    print(f"sigma {sigma}, {n_clusters} clusters, {int(hacking.sum())} hacking of "
          f"{hacking.size} RLHF jobs, threshold at 95% precision in sample")
    for n_ustar, n_sigma in ((60, 12), (150, 30)):
        post = bayes_posterior(score, cfg, n_ustar=n_ustar, n_sigma=n_sigma)
        fire = post >= threshold_at_precision(post, hacking, 0.95)
        rec = proportion_ci(per(fire & hacking), per(hacking))
        prec = proportion_ci(per(fire & hacking), per(fire))
        print(f"  grid {n_ustar:3d} x {n_sigma:2d}: recall {100 * rec.mean:.1f}% "
              f"[{100 * rec.lo:.1f}, {100 * rec.hi:.1f}], precision {100 * prec.mean:.1f}%")


if __name__ == "__main__":
    main(*(t(a) for t, a in zip((float, int, int), sys.argv[1:])))
