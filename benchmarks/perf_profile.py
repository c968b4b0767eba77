"""Where compiled time goes, by function and by instruction, with Linux ``perf``.

    perf record -o OUT -- python benchmarks/perf_profile.py run SCHEDULER [SECONDS]
    perf report -i OUT --sort sym --stdio                       # by function
    python benchmarks/perf_profile.py annotate OUT SCHEDULER [engine|workload] [--blocks]

``run`` calls ``simulate`` on the bench's cluster (400 at a time, one thread) for
SECONDS (default 20).  numba's code lives in JIT memory that ``perf`` cannot name, so
after the first call it writes ``/tmp/perf-PID.map`` (the address, size and name of
every function in numba's JIT engine: ``perf report`` reads it) and keeps the machine
code of the engine and of workload generation in the current directory
(``perf-code-SCHEDULER-{engine,workload}.{bin,addr}``), where ``annotate`` looks.  ``annotate`` disassembles that
code (``objdump``) and prints each instruction's share of the function's samples, the
hottest first, or (``--blocks``) the shares of each 256-byte block, to find the loops.
A sample lands on the instruction after the one that cost it (skid), so read the
neighbourhood, not one line.
"""
import collections
import ctypes
import os
import re
import subprocess
import sys
import time
from pathlib import Path

TAGS = {"engine": "cluster_1c_nb", "workload": "workload_1c_nb"}


def _jit_functions():
    """(address, name) of every function numba's JIT engine holds, in address order."""
    from numba.core.registry import cpu_target

    engine = cpu_target.target_context.codegen()._engine
    found = []
    for name in engine._defined_symbols:
        try:
            addr = engine._ee.get_function_address(name)
        except Exception:  # a global variable, not a function
            continue
        if addr:
            found.append((addr, name))
    return sorted(found)


def _mapped_end(addr: int) -> int:
    """The end of the memory mapping holding ``addr`` (a function never runs past it)."""
    for line in open("/proc/self/maps"):
        lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
        if lo <= addr < hi:
            return hi
    return addr


def run(scheduler: str, seconds: float, keep: Path) -> None:
    import numba

    from fastsim.api import simulate
    from fastsim.bench import _config

    numba.set_num_threads(1)
    cfg = _config(scheduler)
    simulate(cfg, 400, seed=1)
    funcs = _jit_functions()
    ends = [min(nxt, _mapped_end(a)) for (a, _), (nxt, _) in zip(funcs, funcs[1:] + [(0, "")])]
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as fh:
        for (addr, name), end in zip(funcs, ends):
            fh.write(f"{addr:x} {max(end - addr, 1):x} {name}\n")
    for tag, needle in TAGS.items():  # the largest function of each name: the kernel itself
        size, addr = max((end - a, a) for (a, n), end in zip(funcs, ends) if needle in n)
        (keep / f"perf-code-{scheduler}-{tag}.bin").write_bytes(ctypes.string_at(addr, size))
        (keep / f"perf-code-{scheduler}-{tag}.addr").write_text(f"{addr:x}\n")
    t0 = time.time()
    while time.time() - t0 < seconds:
        simulate(cfg, 400, seed=1)


def annotate(data: Path, scheduler: str, tag: str, blocks: bool, top: int = 60) -> None:
    base = int(Path(f"perf-code-{scheduler}-{tag}.addr").read_text(), 16)
    code = Path(f"perf-code-{scheduler}-{tag}.bin")
    size = code.stat().st_size
    ips = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True,
                         text=True, check=True).stdout.split()
    counts = collections.Counter(int(ip, 16) - base for ip in ips
                                 if base <= int(ip, 16) < base + size)
    inside = sum(counts.values()) or 1
    print(f"{len(ips)} samples, {inside} in the {tag} ({inside / max(len(ips), 1):.1%}), "
          f"{size} bytes of code")
    if blocks:
        per = collections.Counter()
        for off, n in counts.items():
            per[off // 256] += n
        for b in sorted(per):
            share = 100 * per[b] / inside
            if share >= 1:
                print(f"{b * 256:6x} {share:6.2f}% " + "#" * int(share))
        return
    listing = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", str(code)],
                             capture_output=True, text=True, check=True).stdout
    text = {}
    for line in listing.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(?:[0-9a-f]{2} )+\s*(.*)", line)
        if m:
            text[int(m.group(1), 16)] = m.group(2).strip()
    for off, n in counts.most_common(top):
        print(f"{100 * n / inside:6.2f}% {off:6x}: {text.get(off, '?')}")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "run":
        run(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 20.0, Path.cwd())
    elif len(sys.argv) >= 4 and sys.argv[1] == "annotate":
        out = Path(sys.argv[2]).resolve()
        tag = sys.argv[4] if len(sys.argv) > 4 and not sys.argv[4].startswith("-") else "engine"
        annotate(out, sys.argv[3], tag, "--blocks" in sys.argv)
    else:
        sys.exit(__doc__)
