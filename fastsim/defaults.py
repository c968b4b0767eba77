"""Every default of the model, in one place (MODEL.md sections 2-7).

Values are MODEL.md's *default* starting points unless a comment says otherwise;
``docs/calibration.md`` argues any change.  Ranges are ``(lo, hi)`` of a uniform draw.
"""

GPUS = 64
N_JOBS = 300
LOAD = 0.9
MIX = "rlhf_heavy"
# Named workload mixes: fractions of (LoRA, DPO, RLHF).
MIXES = {
    "rlhf_heavy": (0.10, 0.10, 0.80),
    "mixed": (0.40, 0.30, 0.30),
}
DEMANDS = {"lora": (1, 2), "dpo": (2, 4, 8), "rlhf": (4, 8, 16)}
MEDIAN_H = {"lora": 1.0, "dpo": 3.0, "rlhf": 8.0}
LOG_SD = 0.8
N_EVALS = 7  # fitted to the JCT and waste rows (MODEL.md: 10); see docs/calibration.md
BASE_RATE = 0.6
DPO_BASE_RATE = 0.0
EST_SIGMA = 1.15  # fitted to StopAt's FPR row (MODEL.md: 0.5); see docs/calibration.md
SIGMA = 0.015  # fitted to EvalStop's precision row (MODEL.md: 0.02); see docs/calibration.md
LOSS_SIGMA = 0.01
PREEMPT_OVERHEAD_H = 0.0
USTAR_HACKING = (0.5, 0.8)  # fitted with N_EVALS (MODEL.md: (0.3, 0.7)); docs/calibration.md
# MODEL.md's values of the parameters fitted to the paper's table, for
# benchmarks/unfitted.py (docs/calibration.md, "What the held-out matches owe to the fit")
MODEL_VALUES = {"n_evals": 10, "ustar_hacking": (0.3, 0.7), "sigma": 0.02, "est_sigma": 0.5}
# Healthy peaks start where hacking ones end, upper end fitted to the toy-RLHF traces
# (MODEL.md: (1.5, 4)); see the curve extensions below.
USTAR_HEALTHY = (USTAR_HACKING[1], 15.0)
HEIGHT = (0.6, 0.9)
TAU = (0.2, 0.5)
LOSS0 = (1.5, 2.5)
LOSS_INF = (0.2, 0.6)
LOSS_TAU = (0.02, 0.10)
# Curve extensions grounded in the toy-RLHF traces (MODEL.md section 4), fitted by
# `fastsim traces fit-curves` (docs/real-traces.md), never from the paper's table.
# USTAR_HEALTHY starts where USTAR_HACKING ends (peaks spread continuously); its upper
# end is fitted.  PLAIN_CURVES switches every extension off: the plain model of
# MODEL.md section 4, bit-identical to the simulator before the extensions.
KL_GAMMA = 0.51        # 95% CI [0.50, 0.52]: sqrt(KL) ~ u^gamma, median over 72 runs
HACK_SHARPNESS = 1.97  # [1.71, 2.07]: hacking gold falls like Gao's form in (d/d*)^m
SIGMA_SPREAD = 0.33    # [0.25, 0.39]: log-normal spread of the per-job noise
NOISE_RHO = 0.05       # [0.00, 0.09]: weakly correlated evaluation noise (AR(1))
PLAIN_CURVES = {"kl_gamma": 1.0, "hack_sharpness": 1.0, "sigma_spread": 0.0, "noise_rho": 0.0,
                "ustar_healthy": (1.5, 4.0)}

SCHEDULER = "srtf_est"
BACKFILL = False
TIRESIAS_THRESHOLDS_GPU_H = (16.0,)

POLICY = "evalstop"
K = 2
STOP_AT_F = 0.65
PLATEAU_W = 2
PLATEAU_TOL = 0.01
SCOPE = "rlhf"
# Online detectors as stop policies (docs/detectors.md), each knob in units of the noise
# except sigma0, the evaluation noise the user expects (default: the model's SIGMA).
# Chosen on the synthetic grid of `fastsim detectors`; patience's are the Trainer's rule.
DETECTORS = {
    "patience": {"patience": 2, "threshold": 0.0},
    "margin": {"k": 1, "z": 2.0, "sigma0": SIGMA},
    "cusum": {"drift": 0.0, "h": 2.0, "sigma0": SIGMA},
    "peak": {"z": 1.65, "sigma0": SIGMA, "min_evals": 4, "origin": 0, "window": 0, "gamma": 0.5},
    "bocpd": {"hazard": 0.2, "z": 0.5, "sigma0": SIGMA, "prior_sd": 0.1},
}
# The peak test's z by the noise (fastsim.detectors.default_params): from PEAK_HIGH_NOISE on,
# PEAK_Z_HIGH_NOISE (lower FPR than EvalStop(k=2) and more GPU-hours reclaimed at 0.05-0.15);
# below it the declared 1.65 (measured at 0.01 and 0.02).
PEAK_HIGH_NOISE = 0.05
PEAK_Z_HIGH_NOISE = 1.0

SEED = 0
CLUSTERS = 200
# `fastsim reproduce`'s clusters per cell, and with --quick: tight enough intervals to read
# the table, about 20 s on 2 cores
FULL_CLUSTERS = 2000
QUICK_CLUSTERS = 500
# The fewest bootstrap resamples behind a 95% percentile interval: 5 in each 2.5% tail (with
# fewer, one resample sets an end, and an interval of 1 resample can miss its own
# estimate); fastsim.stats.min_boot(0.95).  Here, not in fastsim.stats (scipy, numba), for
# fastsim traces fit-curves --help.
MIN_PERCENTILE_BOOT = 200
# Above this many clusters an interval is the linearised t interval alone (fastsim.stats)
BOOTSTRAP_MAX_N = 20_000
