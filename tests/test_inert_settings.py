"""Settings that change no result are said, once: ``fastsim.config.inert_settings``."""
import warnings

import pytest

import fastsim
from fastsim.cli import main
from fastsim.config import LOSS_FIELDS, SCORE_FIELDS, PolicyConfig, SimConfig, inert_settings
from fastsim.errors import InertSettingWarning
from fastsim.sweep.grid import load_sweep

# a value other than the default for every field inert_settings can name
CHANGED = {"preempt_overhead_h": 0.5, "loss_sigma": 0.02, "loss0": (1.0, 2.0),
           "loss_inf": (0.3, 0.5), "loss_tau": (0.05, 0.2), "sigma": 0.1, "sigma_spread": 0.0,
           "noise_rho": 0.5, "demands_lora": (2,), "median_lora_h": 2.0, "demands_dpo": (4,),
           "median_dpo_h": 1.0, "demands_rlhf": (8,), "median_rlhf_h": 4.0, "base_rate": 0.2,
           "dpo_base_rate": 0.5, "ustar_hacking": (0.3, 0.5), "ustar_healthy": (0.9, 3.0),
           "hack_sharpness": 1.0, "est_sigma": 0.3, "kl_gamma": 0.7, "tau": (0.5, 0.9)}

CELLS = [  # (scheduler, policy, baseline, workload)
    ("fifo", "evalstop:k=2", "none", {"mix": (1.0, 0.0, 0.0)}),
    ("sjf_est", "oracle", "none", {"mix": (0.5, 0.5, 0.0), "dpo_base_rate": 0.0}),
    ("srtf_est", "stop_at", "none", {"mix": (0.2, 0.0, 0.8), "base_rate": 1.0}),
    ("tiresias", "evalstop:k=2", "none", {"mix": (0.5, 0.0, 0.5), "base_rate": 0.0}),
    ("fifo:backfill", "margin", "evalstop:k=2", {"mix": (0.0, 0.3, 0.7), "dpo_base_rate": 1.0,
                                                 "sigma": 0.0}),
    ("loss_aware", "loss_plateau", "none", {"mix": (0.0, 0.0, 1.0)}),
]


@pytest.mark.parametrize("jobs", [True, False])
@pytest.mark.parametrize("scheduler,policy,baseline,workload", CELLS)
def test_what_is_called_inert_changes_no_result(scheduler, policy, baseline, workload, jobs):
    """Without per-job records (jobs=False), what no cluster row depends on."""
    base = SimConfig.from_specs(scheduler, policy, n_jobs=12, **workload)
    named = inert_settings(base, PolicyConfig.parse(baseline), given=CHANGED, jobs=jobs)
    assert named, "each cell has inert settings"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        want = fastsim.simulate(base, 4, seed=3, keep_jobs=jobs)
        want_base = fastsim.simulate(base.with_policy(baseline), 4, seed=3, keep_jobs=jobs)
        for name in named:
            changed = SimConfig.from_specs(scheduler, policy, n_jobs=12,
                                           **{**workload, name: CHANGED[name]})
            assert getattr(changed.workload, name) != getattr(base.workload, name), name
            got = fastsim.simulate(changed, 4, seed=3, keep_jobs=jobs)
            assert got.clusters.equals(want.clusters), name
            got = fastsim.simulate(changed.with_policy(baseline), 4, seed=3, keep_jobs=jobs)
            assert got.clusters.equals(want_base.clusters), name
            if jobs:
                assert got.jobs.equals(want_base.jobs), name


@pytest.mark.parametrize("policy", ["evalstop:k=2", "oracle", "deprioritize:k=2",
                                    "peak:sigma0=0.02", "stop_at"])
def test_a_policy_acting_on_rlhf_jobs_only_is_inert_in_a_mix_without_any(policy):
    """scope=rlhf (every policy's default) in a mix of LoRA and DPO jobs acts on no job:
    every row is the policy none's, and it was run and compared without a word."""
    cfg = SimConfig.from_specs("srtf_est", policy, n_jobs=12, mix=(0.5, 0.5, 0.0),
                               dpo_base_rate=0.5)
    named = inert_settings(cfg, PolicyConfig.parse("none"), given=["policy", "baseline"])
    assert list(named) == ["policy"], named
    assert named["policy"].endswith("acts on RLHF jobs only (scope=rlhf), and the mix has no "
                                    "RLHF jobs: every result is the policy none's"), named
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        got = fastsim.simulate(cfg, 4, seed=3, keep_jobs=True)
        want = fastsim.simulate(cfg.with_policy("none"), 4, seed=3, keep_jobs=True)
    assert got.clusters.equals(want.clusters) and got.jobs.equals(want.jobs)
    # scope=all acts on the LoRA and DPO jobs too: not inert
    everyone = cfg.with_policy(policy + ("," if ":" in policy else ":") + "scope=all")
    assert inert_settings(everyone, None, given=["policy"]) == {}
    # nor in a mix with RLHF jobs
    assert inert_settings(SimConfig.from_specs("srtf_est", policy), None, ["policy"]) == {}


@pytest.mark.parametrize("jobs", [False, True])
@pytest.mark.parametrize("policy,series_fields", [
    ("evalstop:k=2", SCORE_FIELDS), ("loss_plateau", LOSS_FIELDS), ("stop_at", ("est_sigma",))])
def test_what_only_a_policy_acting_on_no_job_reads_is_inert(policy, series_fields, jobs):
    """A policy acting on no job reads nothing: the scores' noise (sigma, sigma_spread,
    noise_rho), the losses' and the estimate's settings were said to matter beside
    evalstop, loss_plateau and stop_at in a mix without RLHF jobs, though every row is the
    policy none's.  Each field called inert is changed here, every row compared."""
    base = SimConfig.from_specs("fifo", policy, n_jobs=12, mix=(0.5, 0.5, 0.0),
                                dpo_base_rate=0.5)
    named = inert_settings(base, PolicyConfig.parse("none"), given=CHANGED, jobs=jobs)
    want_named = set(series_fields) - ({"est_sigma"} if jobs else set())  # records carry it
    assert want_named <= set(named), set(named)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        want = fastsim.simulate(base, 4, seed=3, keep_jobs=jobs)
        for name in named:
            changed = SimConfig.from_specs("fifo", policy, n_jobs=12, mix=(0.5, 0.5, 0.0),
                                           dpo_base_rate=0.5, **{name: CHANGED[name]})
            got = fastsim.simulate(changed, 4, seed=3, keep_jobs=jobs)
            assert got.clusters.equals(want.clusters), name
            if jobs:
                assert got.jobs.equals(want.jobs), name
    # scope=all acts on the LoRA and DPO jobs: what it reads matters again
    everyone = base.with_policy(policy + ("," if ":" in policy else ":") + "scope=all")
    assert not set(series_fields) & set(inert_settings(everyone, None, CHANGED))


def test_the_score_noise_beside_a_policy_acting_on_no_job_is_said(capsys):
    assert main(["run", "--mix", "1,0,0", "--sigma", "0.1", "--clusters", "2", "--n-jobs", "8",
                 "--no-progress"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: -")]
    assert notes == [
        "note: --sigma has no effect: no stop policy here reads evaluation scores "
        "(evalstop(k=2) and none; evalstop(k=2) acts on RLHF jobs only (scope=rlhf), and the "
        "mix has no RLHF jobs)",
        "note: --policy has no effect: evalstop(k=2) acts on RLHF jobs only (scope=rlhf), and "
        "the mix has no RLHF jobs: every result is the policy none's"], notes


def test_a_policy_acting_on_no_job_is_said(capsys):
    assert main(["run", "--mix", "0.5,0.5,0", "--policy", "oracle", "--baseline",
                 "evalstop:k=2", "--clusters", "2", "--n-jobs", "8", "--no-progress"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == [
        "note: --policy has no effect: oracle (hidden truth) acts on RLHF jobs only "
        "(scope=rlhf), and the mix has no RLHF jobs: every result is the policy none's",
        "note: --baseline has no effect: evalstop(k=2) acts on RLHF jobs only (scope=rlhf), "
        "and the mix has no RLHF jobs: every result is the policy none's"], notes
    cfg = SimConfig.from_specs("fifo", "evalstop:k=2", n_jobs=8, mix=(1.0, 0.0, 0.0))
    with pytest.warns(InertSettingWarning) as seen:
        fastsim.simulate(cfg, 2)
    assert [str(w.message) for w in seen] == [
        "fastsim.simulate(): policy='evalstop(k=2)' has no effect: evalstop(k=2) acts on "
        "RLHF jobs only (scope=rlhf), and the mix has no RLHF jobs: every result is the "
        "policy none's"]


def test_every_rule_is_tested():
    """Each field inert_settings can name is named in some cell above, with and without
    per-job records (est_sigma: without only; they carry t_est_h)."""
    def named(jobs):
        return {n for s, p, b, w in CELLS for n in inert_settings(
            SimConfig.from_specs(s, p, n_jobs=12, **w), PolicyConfig.parse(b), CHANGED, jobs)}
    assert named(False) == set(CHANGED), set(CHANGED) - named(False)
    assert named(True) == set(CHANGED) - {"est_sigma"}


@pytest.mark.parametrize("scheduler,policy,jobs,metrics", [
    ("sjf_est", "evalstop:k=2", False, ()),    # orders by the estimate
    ("srtf_est", "none", False, ()),
    ("fifo", "stop_at", False, ()),            # stops on attained / estimate
    ("fifo", "evalstop:k=2", True, ()),        # the per-job records carry t_est_h
    ("tiresias", "none", False, ("toy_estimate_metric:mean_estimate",)),  # a user's metric
])
def test_the_estimate_error_is_said_only_where_nothing_reads_the_estimate(
        scheduler, policy, jobs, metrics, tmp_path, monkeypatch):
    (tmp_path / "toy_estimate_metric.py").write_text(
        "from fastsim.metrics import cluster_metric\n\n\n@cluster_metric()\n"
        "def mean_estimate(jobs):\n    return jobs['t_est_h'].mean(axis=1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    crowded = {"gpus": 16, "load": 2.0, "n_jobs": 24}  # jobs wait: their order matters
    cfg = SimConfig.from_specs(scheduler, policy, est_sigma=0.3, metrics=metrics, **crowded)
    assert "est_sigma" not in inert_settings(cfg, jobs=jobs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InertSettingWarning)
        changed = [fastsim.simulate(cfg if sigma else SimConfig.from_specs(
            scheduler, policy, est_sigma=0.0, metrics=metrics, **crowded), 4, seed=3,
            keep_jobs=jobs) for sigma in (1, 0)]
    assert not (changed[0].clusters.equals(changed[1].clusters)
                and (not jobs or changed[0].jobs.equals(changed[1].jobs)))


def test_the_estimate_error_is_said_with_its_readers():
    cfg = SimConfig.from_specs("tiresias", "evalstop:k=2", est_sigma=0.3)
    assert inert_settings(cfg) == {"est_sigma": (
        "nothing reads the run-time estimate t_est_h (tiresias with evalstop(k=2); sjf_est, "
        "srtf_est and stop_at do, and per-job records carry it)")}


def test_inert_settings_are_said_only_when_given():
    cfg = SimConfig.from_specs("fifo", "oracle", mix=(1.0, 0.0, 0.0), base_rate=0.3)
    # sigma is inert too, but not set; the policy is always given
    assert set(inert_settings(cfg)) == {"base_rate", "policy"}
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
                     "so none resumes",
                     "note: --policy has no effect: evalstop(k=2) acts on RLHF jobs only "
                     "(scope=rlhf), and the mix has no RLHF jobs: every result is the policy "
                     "none's"], err


def test_the_estimate_error_is_noted_unless_the_per_job_records_are_written(tmp_path, capsys):
    """--jobs-out writes t_est_h: there --est-sigma changes a result, and is not noted."""
    args = ["run", "--scheduler", "tiresias", "--est-sigma", "0.5", "--clusters", "2",
            "--n-jobs", "8", "--no-progress"]
    assert main(args) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == ["note: --est-sigma has no effect: nothing reads the run-time estimate "
                     "t_est_h (tiresias with evalstop(k=2) and none; sjf_est, srtf_est and "
                     "stop_at do, and per-job records carry it)"], notes
    assert main(args + ["--jobs-out", str(tmp_path / "j.parquet")]) == 0
    assert "note: " not in capsys.readouterr().err


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
SWEEP_POLICY_NOTE = ("policy has no effect in any cell: evalstop(k=2) acts on RLHF jobs only "
                     "(scope=rlhf), and the mix has no RLHF jobs: every result is the policy "
                     "none's")


def test_a_sweep_notes_a_field_inert_in_every_cell_once(tmp_path, capsys):
    """base_rate touches no cell; the overhead is read by srtf_est's cells: no note."""
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == [f"note: {p}: base_rate {BASE_RATE_NOTE}",
                     f"note: {p}: {SWEEP_POLICY_NOTE}"], notes


def test_the_sweep_api_warns_of_it(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(SWEEP)
    with pytest.warns(InertSettingWarning) as seen:
        fastsim.sweep(str(p), tmp_path / "o")
    assert [str(w.message) for w in seen] == [f"{p}: base_rate {BASE_RATE_NOTE}",
                                              f"{p}: {SWEEP_POLICY_NOTE}"]


@pytest.mark.parametrize("keep_jobs", [False, True])
def test_a_sweep_keeping_jobs_does_not_call_the_estimate_error_inert(tmp_path, keep_jobs):
    """--keep-jobs writes the per-job records, which carry t_est_h."""
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 8\nest_sigma = 0.5\n"
                 "[axes]\nscheduler = ['fifo', 'tiresias']\n")
    with pytest.warns(InertSettingWarning) if not keep_jobs else warnings.catch_warnings():
        if keep_jobs:
            warnings.simplefilter("error", InertSettingWarning)
        fastsim.sweep(str(p), tmp_path / "o", keep_jobs=keep_jobs)


def test_a_baseline_that_is_the_policy_itself_is_noted(capsys):
    """--baseline evalstop with --policy evalstop printed 0.00% changes without a word."""
    assert main(["run", "--policy", "evalstop", "--baseline", "evalstop:k=2", "--clusters", "2",
                 "--n-jobs", "8", "--no-progress"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == ["note: --baseline evalstop:k=2 is --policy evalstop: the baseline is the "
                     "policy itself, evalstop(k=2), on the same clusters: every change is 0 "
                     "by construction"], notes
    assert main(["run", "--policy", "evalstop:k=3", "--baseline", "evalstop:k=2",
                 "--clusters", "2", "--n-jobs", "8", "--no-progress"]) == 0
    assert "note: " not in capsys.readouterr().err
    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=8)
    with pytest.warns(InertSettingWarning) as seen:
        fastsim.compare(cfg, "evalstop", n_clusters=2)
    assert [str(w.message) for w in seen] == [
        "fastsim.compare(): the baseline is the policy itself, evalstop(k=2), on the same "
        "clusters: every change is 0 by construction"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", InertSettingWarning)
        fastsim.compare(cfg, "none", n_clusters=2)


NO_RLHF_SWEEP = ("clusters = 2\n[base]\nn_jobs = 8\n[axes]\nmix = [[0.5, 0.5, 0.0], "
                 "[0.4, 0.3, 0.3]]\nscheduler = ['fifo', 'srtf_est']\n")
POLICY_NOTE = ("policy has no effect in 2 of 4 cells: evalstop(k=2) acts on RLHF jobs only "
               "(scope=rlhf), and the mix has no RLHF jobs: every result is the policy none's")


def test_a_sweep_notes_a_policy_acting_on_no_job_once(tmp_path, capsys):
    """fastsim run notes --policy acting on no job of a mix without RLHF jobs; a sweep of
    such cells ran and compared them without a word.  One note for the cells it touches,
    as the other notes of a sweep, before any work."""
    p = tmp_path / "s.toml"
    p.write_text(NO_RLHF_SWEEP)
    grid = load_sweep(p)
    assert grid.inert_notes() == [f"{p}: {POLICY_NOTE}"]
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note: ")]
    assert notes == [f"note: {p}: {POLICY_NOTE}"], notes
    # every cell without RLHF jobs, and a baseline acting on none of their jobs either
    p.write_text("clusters = 2\nbaseline = 'oracle'\n[base]\nn_jobs = 8\nmix = [0.5, 0.5, 0.0]\n"
                 "[axes]\nscheduler = ['fifo', 'srtf_est']\n")
    assert load_sweep(p).inert_notes() == [
        f"{p}: policy has no effect in any cell: evalstop(k=2) acts on RLHF jobs only "
        "(scope=rlhf), and the mix has no RLHF jobs: every result is the policy none's",
        f"{p}: baseline has no effect in any cell: oracle (hidden truth) acts on RLHF jobs "
        "only (scope=rlhf), and the mix has no RLHF jobs: every result is the policy none's"]
    # scope=all acts on every job: no note
    p.write_text(NO_RLHF_SWEEP + "policy = ['evalstop:k=2,scope=all']\n")
    assert load_sweep(p).inert_notes() == []


def test_a_user_policy_reading_losses_it_does_not_declare_is_a_reader(tmp_path, monkeypatch):
    """A user's policy that read the losses with the default reads=("scores",) had
    `--loss-sigma` noted as having no effect, while the simulator handed it the losses and
    its results moved with them; a policy whose code loads no loss is still noted."""
    (tmp_path / "toy_loss_readers.py").write_text(
        "from numba import njit\nfrom fastsim.registry import stop_policy\n\n\n"
        "@stop_policy(params=[], label='loss_up')\n@njit\n"
        "def loss_up(scores, losses, attained_h, t_est_h):\n"
        "    for e in range(1, losses.shape[0]):\n"
        "        if losses[e] > losses[e - 1]:\n            return e + 1\n    return 0\n\n\n"
        "@stop_policy(params=[], label='first_drop')\n@njit\n"
        "def first_drop(scores, losses, attained_h, t_est_h):\n"
        "    for e in range(1, scores.shape[0]):\n"
        "        if scores[e] < scores[e - 1]:\n            return e + 1\n    return 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = SimConfig.from_specs("fifo", "toy_loss_readers:loss_up", n_jobs=12, loss_sigma=0.02)
    assert "loss_sigma" not in inert_settings(cfg)
    quiet = SimConfig.from_specs("fifo", "toy_loss_readers:loss_up", n_jobs=12, loss_sigma=0.0)
    stops = [fastsim.simulate(c, 4, seed=3).clusters["n_stopped"].sum() for c in (cfg, quiet)]
    assert stops[0] > 0 == stops[1]  # noisy losses rise somewhere; smooth ones never do
    other = SimConfig.from_specs("fifo", "toy_loss_readers:first_drop", n_jobs=12,
                                 loss_sigma=0.02)
    assert "loss_sigma" in inert_settings(other)


def test_a_sweep_says_each_reason_once_naming_the_cells_it_concerns(tmp_path):
    """Each cell's reason was joined to the next: "no stop policy here reads evaluation
    scores (none); no stop policy here reads evaluation scores (evalstop(k=2) and none;
    ...)".  One clause, once, naming every scheduler and policy it concerns."""
    p = tmp_path / "s.toml"
    p.write_text("clusters = 2\n[base]\nn_jobs = 8\nmix = [1.0, 0.0, 0.0]\nloss_sigma = 0.02\n"
                 "[axes]\nsigma = [0.01]\nscheduler = ['fifo', 'srtf_est']\n")
    idle = "evalstop(k=2) acts on RLHF jobs only (scope=rlhf), and the mix has no RLHF jobs"
    assert load_sweep(p).inert_notes()[:2] == [
        f"{p}: loss_sigma has no effect in any cell: nothing reads training losses (fifo and "
        f"srtf_est with none and evalstop(k=2); {idle}; loss_aware and loss_plateau do)",
        f"{p}: sigma has no effect in any cell: no stop policy here reads evaluation scores "
        f"(none and evalstop(k=2); {idle})"]
    # a run's own reason reads as it did
    cfg = SimConfig.from_specs("fifo", "evalstop", n_jobs=8, mix=(1.0, 0.0, 0.0), sigma=0.01)
    assert inert_settings(cfg, PolicyConfig(name="none"))["sigma"] == (
        f"no stop policy here reads evaluation scores (evalstop(k=2) and none; {idle})")
