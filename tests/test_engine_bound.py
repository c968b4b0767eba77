"""The engine cannot loop forever: a cluster that does not finish within
``max_points_nb`` scheduling points stops there and ``run_engine`` raises, naming it."""
import numpy as np
import pytest

from fastsim.api import decide_stops, run_engine, run_workload
from fastsim.config import SimConfig
from fastsim.errors import SimulationError
from fastsim.workload import generate_workload
from fastsim.kernels.engine import max_points_nb

SCHEDULERS = ("fifo", "sjf_est", "srtf_est", "loss_aware", "tiresias")


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_non_finite_run_time_raises_instead_of_looping(scheduler):
    cfg = SimConfig.from_specs(scheduler, "evalstop:k=2", n_jobs=20, gpus=16)
    w = generate_workload(cfg.workload, 3, seed=1)
    # Finite run times (a given workload must have them: ``check_workload``), but so long
    # that the second job's event times overflow to inf: time never advances past them.
    w.duration_h[1, 5:7] = 1e308
    with pytest.raises(SimulationError, match=r"engine: cluster 1 reached the bound of \d+ "
                                           r"scheduling points"):
        run_workload(cfg, w)


@pytest.mark.parametrize("scheduler", SCHEDULERS + ("tiresias:thresholds=2/8/32",))
def test_real_clusters_stay_well_inside_the_bound(scheduler):
    """The bound is generous: crowded clusters with preemptions use under half of it."""
    cfg = SimConfig.from_specs(scheduler, "deprioritize:k=2", n_jobs=60, gpus=16, load=1.5,
                               preempt_overhead_h=0.2)
    w = generate_workload(cfg.workload, 40, seed=3)
    o = run_engine(cfg, w, decide_stops(cfg, w))
    bound = max_points_nb(w.n_jobs, w.n_evals, len(cfg.scheduler.thresholds_gpu_h))
    assert (o.n_points > 0).all() and o.n_points.max() < bound / 2


def test_cli_reports_the_bound_in_one_line(capsys):
    from fastsim.cli import main

    assert main(["run", "--median-rlhf-h", "1e308", "--clusters", "2", "--n-jobs", "10",
                 "--no-progress"]) in (1, 2)  # 2 once the config refuses such durations
    err = capsys.readouterr().err.strip()
    assert err.startswith("fastsim run: error:") and "\n" not in err
