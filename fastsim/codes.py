"""User-facing names of the kernels' integer codes (mirrors ``kernels/codes.py``)."""
from enum import IntEnum

from fastsim.kernels import codes as K


class JobType(IntEnum):
    LORA = K.LORA
    DPO = K.DPO
    RLHF = K.RLHF


class Scheduler(IntEnum):
    FIFO = K.FIFO
    SJF_EST = K.SJF_EST
    SRTF_EST = K.SRTF_EST
    LOSS_AWARE = K.LOSS_AWARE
    TIRESIAS = K.TIRESIAS


class Policy(IntEnum):
    NONE = K.NONE
    EVALSTOP = K.EVALSTOP
    STOP_AT = K.STOP_AT
    LOSS_PLATEAU = K.LOSS_PLATEAU
    DEPRIORITIZE = K.DEPRIORITIZE
    ORACLE = K.ORACLE


JOB_TYPE_NAMES = tuple(t.name.lower() for t in JobType)
SCHEDULER_NAMES = tuple(s.name.lower() for s in Scheduler)
POLICY_NAMES = tuple(p.name.lower() for p in Policy)
SCOPE_NAMES = ("rlhf", "all")
