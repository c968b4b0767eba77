"""Reference counts in the engine's machine code: how many ``NRT_incref``/``NRT_decref``
calls ``cluster_1c_nb`` holds in all and inside loops (blocks on a cycle of its LLVM
control-flow graph), for copies of ``kernels/engine.py``.  Each is an atomic add that
also stops LLVM from keeping state in registers across it, so in the scheduling loop it
costs speed (docs/performance.md, rounds 8, 9, 17 and 20); every part a list walk calls is
listed too, since a part LLVM leaves as a call pays its own counts on each call.

    FASTSIM_NO_CACHE=1 python benchmarks/engine_refcounts.py kernels/engine.py [OTHER.py ...] [-v] [-w]
        [--schedulers=fifo,srtf_est]
    FASTSIM_NO_CACHE=1 python benchmarks/engine_refcounts.py --pipeline [kernels/engine.py ...]

Every scheduler's engine is compiled and counted (``--schedulers`` names fewer); since
round 20 none holds a count in its loop, which ``tests/test_engine_refcounts.py`` checks.
``-v`` lists every kernel the engine module compiled, not only those with counts; ``-w``
also prints each count on a cycle of ``cluster_1c_nb`` (its block and the pointer counted:
``arg.<tuple>.<i>`` is a member of an argument tuple, names with ``.i`` come from a kernel
LLVM inlined).  ``--pipeline`` counts the other per-cluster kernels of the one-pass
pipeline instead (workload, stop decisions, service points, metrics), where a count in a
loop is paid once per job: the stop decisions paid two pairs per job until round 21.
With engine files as well, both are counted in one process, the pipeline after the
engines: the engines' arguments already compiled the workload kernels it counts.
"""
import re
import sys

import numpy as np
from numba.core.registry import CPUDispatcher

from _engine_copy import load_engine_copy


def functions(ir, name):
    """Body lines of the compiled functions named ``name`` (not the Python wrappers)."""
    out, cur = {}, None
    for line in ir.splitlines():
        if line.startswith("define"):
            fn = re.search(r'@"?([^"(]+)"?\(', line).group(1)
            cur = fn if name in fn and "cpython" not in fn else None
            if cur:
                out[cur] = []
        elif cur is not None:
            if line.startswith("}"):
                cur = None
            else:
                out[cur].append(line)
    return out


def counts(lines, where=False):
    """(increfs, decrefs) in all and in blocks on a cycle; and the calls left.  ``where``:
    print every count on a cycle."""
    blocks, cur = {"entry": []}, "entry"
    for line in lines:
        m = re.match(r'^([\w.$"-]+):', line)
        if m:
            cur = m.group(1).strip('"')
            blocks[cur] = []
        else:
            blocks[cur].append(line)
    succ = {b: [x.strip('"') for line in ls if re.match(r"\s+(br|switch)\b", line)
                for x in re.findall(r'label %("[^"]+"|[\w.$-]+)', line)] for b, ls in blocks.items()}
    on_cycle = set()
    for b in blocks:  # b is on a cycle if it reaches itself
        seen, todo = set(), list(succ[b])
        while todo:
            x = todo.pop()
            if x == b:
                on_cycle.add(b)
                break
            if x not in seen:
                seen.add(x)
                todo += succ.get(x, [])
    if where:
        for b in blocks:
            for line in blocks[b] if b in on_cycle else ():
                m = re.search(r"@(NRT_incref|NRT_decref)\((?:ptr|i8\*)[^%]*(%[^)]*)\)", line)
                if m:
                    print(f"    on a cycle: {m.group(1)} {m.group(2)}  (block {b[:40]})")
    res = {}
    for op in ("NRT_incref", "NRT_decref"):
        res[op] = (sum(line.count("@" + op) for ls in blocks.values() for line in ls),
                   sum(line.count("@" + op) for b in on_cycle for line in blocks[b]))
    calls = sorted({re.sub(r"B\d+v\d+.*", "", c) for ls in blocks.values() for line in ls
                    for c in re.findall(r"call [^@]*@_ZN\w*?(_[a-z_]+_nb)", line)})
    return res, calls


def gathers(f, sig=None):
    """AVX2/AVX-512 gather instructions in the machine code of kernel ``f`` (with what
    LLVM inlined into it).  On CPUs with the Gather Data Sampling mitigation a gather
    costs several times the scalar loads it replaces (docs/performance.md, rounds 41
    and 43)."""
    asm = f.inspect_asm(f.signatures[0] if sig is None else sig)
    return len(re.findall(r"^\s+v(?:p)?gather", asm, re.MULTILINE))


from fastsim.config import SimConfig  # noqa: E402
from fastsim.registry import BUILTIN_SCHEDULER_NAMES  # noqa: E402
from fastsim.workload import generate_workload  # noqa: E402

def engine_args(scheduler):
    """Arguments of ``cluster_nb`` for two small clusters under ``scheduler`` (a name)."""
    cfg = SimConfig.from_specs(scheduler, "evalstop:k=2")
    w = generate_workload(cfg.workload, 2, seed=1)
    sh = (2, w.n_jobs)
    # the service each job gets: every other one stopped half-way.  The machine code
    # depends on the arguments' types only, so no stop policy is asked (its driver,
    # ``resolve_stops_nb``, took about 5 s to compile for this one argument)
    es = w.duration_h.copy()
    es[:, ::2] *= 0.5
    thresholds = np.asarray(cfg.scheduler.thresholds_gpu_h, dtype=np.float64)
    return (cfg.scheduler.code, cfg.scheduler.backfill, thresholds, 0.0, cfg.workload.gpus,
            w.gpus, w.arrival_h, w.t_est_h, w.loss, w.duration_h, es, np.full(sh, np.inf),
            np.full(sh, np.inf), np.full(sh, np.nan), np.full(sh, np.nan), np.zeros(sh),
            np.zeros(sh), np.zeros(sh, np.int32), np.zeros((2, 0), np.int64), np.zeros((2, 0)),
            np.zeros((2, 0)), np.zeros(2, np.int64), np.zeros(2, np.int64))


# The per-cluster kernels the one-pass pipeline calls once per cluster or once per job
# (besides the engine): a count in one of their loops is paid per job.
PIPELINE_KERNELS = ("workload.workload_1c_nb", "stops.resolve_rule_stops_1c_nb",
                    "oracle.oracle_stops_1c_nb", "engine.service_points_1c_nb",
                    "metrics.accounting_1c_nb", "metrics.cluster_metrics_1c_nb")


def pipeline_counts():
    """Print the counts of each of ``PIPELINE_KERNELS``, compiled by a run of the default
    cell under ``evalstop:k=2`` and under the oracle."""
    import importlib

    from fastsim.api import simulate
    for policy in ("evalstop:k=2", "oracle"):
        simulate(SimConfig.from_specs("srtf_est", policy), 2, seed=1)
    for dotted in PIPELINE_KERNELS:
        module, attr = dotted.split(".")
        f = getattr(importlib.import_module(f"fastsim.kernels.{module}"), attr)
        for sig in f.signatures:
            bodies = functions(f.inspect_llvm(sig), attr)
            own = [b for b in bodies.values() if attr not in counts(b)[1]] or list(bodies.values())
            (inc, inc_loop), (dec, dec_loop) = counts(max(own, key=len))[0].values()
            print(f"kernel {dotted:34s} incref {inc:3d} ({inc_loop} in loops), decref "
                  f"{dec:3d} ({dec_loop} in loops); {gathers(f, sig)} gathers")


def main():
    flags = [a for a in sys.argv[1:] if a.startswith("-")]
    paths = [a for a in sys.argv[1:] if not a.startswith("-")]
    schedulers = next((f.split("=", 1)[1].split(",") for f in flags
                       if f.startswith("--schedulers=")), BUILTIN_SCHEDULER_NAMES)
    for i, path in enumerate(paths):
        m = load_engine_copy(path, f"_engine_refcounts{i}")
        for scheduler in schedulers:
            m.cluster_nb(*engine_args(scheduler))
        for attr, f in vars(m).items():
            if not isinstance(f, CPUDispatcher) or not f.signatures or "cluster_nb" == attr:
                continue
            # one engine per scheduler (``cluster_srtf_est_1c_nb``...), each a ``cluster_1c_nb``
            engine = attr.startswith("cluster_") and attr.endswith("_1c_nb")
            name = "cluster_1c_nb" if engine else attr
            bodies = functions(f.inspect_llvm(f.signatures[0]), name)
            if bodies:
                # the kernel itself, not a wrapper that calls it
                own = [b for b in bodies.values() if name not in counts(b)[1]] or list(bodies.values())
                res, calls = counts(max(own, key=len), where=engine and "-w" in flags)
                (inc, inc_loop), (dec, dec_loop) = res.values()
                if engine or inc or "-v" in flags:
                    print(f"{path}: {attr:28s} incref {inc:3d} ({inc_loop} in loops), decref "
                          f"{dec:3d} ({dec_loop} in loops); {gathers(f)} gathers; "
                          f"calls left: {', '.join(calls) or '-'}")


if __name__ == "__main__":
    main()
    if "--pipeline" in sys.argv:
        pipeline_counts()
