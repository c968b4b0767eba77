"""Integer codes shared by the kernels (named, with their parameters, in ``fastsim.registry``)."""

# Evaluations a simulated job has at most (fastsim.config checks n_evals against it); BOCPD
# keeps that many run lengths and merges longer ones, in the simulator, replay and the
# live monitor alike.
MAX_EVALS = 1_000

# Job types (MODEL.md section 3).
LORA = 0
DPO = 1
RLHF = 2
JOB_TYPE_LABELS = ("lora", "dpo", "rlhf")  # the job_type column's values, by code

# Base schedulers (MODEL.md section 6).
FIFO = 0
SJF_EST = 1
SRTF_EST = 2
LOSS_AWARE = 3
TIRESIAS = 4
SCHEDULERS = (FIFO, SJF_EST, SRTF_EST, LOSS_AWARE, TIRESIAS)  # in code order

# Stop policies (MODEL.md section 7).
NONE = 0
EVALSTOP = 1
STOP_AT = 2
LOSS_PLATEAU = 3
DEPRIORITIZE = 4
ORACLE = 5
# Online detectors (kernels/detectors_online.py): every code from PATIENCE on is one;
# they stop a job and deliver its best observed checkpoint.
PATIENCE = 6
MARGIN = 7
CUSUM = 8
PEAK = 9
BOCPD = 10

# What a stop policy decided for one job.
ACT_CONTINUE = 0
ACT_STOP = 1
ACT_DEMOTE = 2

# Random streams: one per kind of draw, so adding a draw never shifts another.
S_TYPE = 1
S_GPUS = 2
S_DURATION = 3
S_ESTIMATE = 4
S_HACKING = 5
S_USTAR = 6
S_HEIGHT = 7
S_TAU = 8
S_LOSS0 = 9
S_LOSSINF = 10
S_LOSSTAU = 11
S_ARRIVAL = 12
S_EVAL_NOISE = 13
S_LOSS_NOISE = 14
S_NOISE_SCALE = 15  # per-job evaluation-noise scale (sigma_spread)

# Cost-aware SGD (fastsim.costaware.sgd): the problem, the cost distribution, the step rule.
LEAST_SQUARES = 0
LOGISTIC = 1
LOGNORMAL = 0
PARETO = 1
STEP_CONVEX = 0
STEP_STRONGLY_CONVEX = 1
