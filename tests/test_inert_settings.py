"""Settings that change no result are said, once: ``fastsim.config.inert_settings``."""
import warnings

import pytest

import fastsim
from fastsim.cli import main
from fastsim.config import PolicyConfig, SimConfig, inert_settings
from fastsim.errors import InertSettingWarning

# a value other than the default for every field inert_settings can name
CHANGED = {"preempt_overhead_h": 0.5, "loss_sigma": 0.02, "loss0": (1.0, 2.0),
           "loss_inf": (0.3, 0.5), "loss_tau": (0.05, 0.2), "sigma": 0.1, "sigma_spread": 0.0,
           "noise_rho": 0.5, "demands_lora": (2,), "median_lora_h": 2.0, "demands_dpo": (4,),
           "median_dpo_h": 1.0, "demands_rlhf": (8,), "median_rlhf_h": 4.0, "base_rate": 0.2,
           "dpo_base_rate": 0.5, "ustar_hacking": (0.3, 0.5), "ustar_healthy": (0.9, 3.0),
           "hack_sharpness": 1.0}

CELLS = [  # (scheduler, policy, baseline, workload)
    ("fifo", "evalstop:k=2", "none", {"mix": (1.0, 0.0, 0.0)}),
    ("sjf_est", "oracle", "none", {"mix": (0.5, 0.5, 0.0), "dpo_base_rate": 0.0}),
    ("srtf_est", "stop_at", "none", {"mix": (0.2, 0.0, 0.8), "base_rate": 1.0}),
    ("tiresias", "evalstop:k=2", "none", {"mix": (0.5, 0.0, 0.5), "base_rate": 0.0}),
]


@pytest.mark.parametrize("scheduler,policy,baseline,workload", CELLS)
def test_what_is_called_inert_changes_no_result(scheduler, policy, baseline, workload):
    base = SimConfig.from_specs(scheduler, policy, n_jobs=12, **workload)
    named = inert_settings(base, PolicyConfig.parse(baseline), given=CHANGED)
    assert named, "each cell has inert settings"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        want = fastsim.simulate(base, 4, seed=3, keep_jobs=True)
        for name in named:
            changed = SimConfig.from_specs(scheduler, policy, n_jobs=12,
                                           **{**workload, name: CHANGED[name]})
            got = fastsim.simulate(changed, 4, seed=3, keep_jobs=True)
            assert got.clusters.equals(want.clusters), name
            assert got.jobs.equals(want.jobs), name


def test_inert_settings_are_said_only_when_given():
    cfg = SimConfig.from_specs("fifo", "oracle", mix=(1.0, 0.0, 0.0), base_rate=0.3)
    assert set(inert_settings(cfg)) == {"base_rate"}  # sigma is inert too, but not set
    assert set(inert_settings(cfg, given=["preempt_overhead_h", "load"])) == {
        "preempt_overhead_h"}
    assert inert_settings(SimConfig.from_specs("loss_aware", "evalstop:k=2")) == {}


def test_command_line_notes_each_inert_option_once(capsys):
    assert main(["run", "--mix", "1,0,0", "--base-rate", "0.3", "--scheduler", "fifo",
                 "--preempt-overhead-h", "0.5", "--load", "0.5", "--clusters", "2",
                 "--n-jobs", "8", "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    notes = [ln for ln in err if ln.startswith("note: ")]
    assert notes == ["note: --base-rate has no effect: the mix has no RLHF jobs",
                     "note: --preempt-overhead-h has no effect: fifo never preempts a job, "
                     "so none resumes"], err


def test_the_api_warns_once_per_call_site():
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=8, preempt_overhead_h=0.5)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        for _ in range(3):
            fastsim.simulate(cfg, 2)
        fastsim.compare(cfg, "none", n_clusters=2)
    said = [str(w.message) for w in seen if w.category is InertSettingWarning]
    assert said == [
        "fastsim.simulate(): preempt_overhead_h=0.5 has no effect: fifo never preempts a "
        "job, so none resumes",
        "fastsim.compare(): preempt_overhead_h=0.5 has no effect: fifo never preempts a "
        "job, so none resumes"], said
    assert seen[0].filename == __file__  # the user's line, not fastsim's
    with warnings.catch_warnings():
        warnings.simplefilter("error", InertSettingWarning)
        fastsim.simulate(SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=8,
                                              preempt_overhead_h=0.5), 2)


SWEEP = ("clusters = 2\n[base]\nn_jobs = 8\nmix = [1.0, 0.0, 0.0]\npreempt_overhead_h = 0.5\n"
         "[axes]\nscheduler = ['fifo', 'srtf_est']\nbase_rate = [0.1, 0.3]\n")
BASE_RATE_NOTE = "has no effect in any cell: the mix has no RLHF jobs"


def test_a_sweep_notes_a_field_inert_in_every_cell_once(tmp_path, capsys):
    """base_rate touches no cell; the overhead is read by srtf_est's cells: no note."""
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == [f"note: {p}: base_rate {BASE_RATE_NOTE}"], notes


def test_the_sweep_api_warns_of_it(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    with pytest.warns(InertSettingWarning) as seen:
        fastsim.sweep(str(p), tmp_path / "o")
    assert [str(w.message) for w in seen] == [f"{p}: base_rate {BASE_RATE_NOTE}"]
