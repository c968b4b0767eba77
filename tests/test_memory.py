"""Memory of ``fastsim run`` does not grow with the number of clusters.

Peak RSS is measured in a fresh process per run (``ru_maxrss``); unlike time, it is
stable enough on a loaded machine to assert.  Before the streamed summaries, 40,000
clusters cost about 700 MB more than 2,000 (the bootstrap's index matrix alone).
"""
import subprocess
import sys

RUN = """
import resource, sys
from fastsim.cli import main
rc = main(["run", "--clusters", sys.argv[1], "--n-jobs", "20", "--gpus", "16", "--no-progress"])
print(rc, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def _peak_rss_mb(n_clusters: int) -> float:
    out = subprocess.run([sys.executable, "-c", RUN, str(n_clusters)], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[-2] == "0"
    return int(out[-1]) / 1024


def test_run_peak_rss_is_flat_in_clusters():
    small, large = _peak_rss_mb(2_000), _peak_rss_mb(40_000)
    assert large - small < 40, (small, large)
