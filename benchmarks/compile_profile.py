"""Where a command's numba compile time goes: every compiled function, its
specialisations, and its own compile CPU seconds (nested compiles of the functions it calls
subtracted), from numba's ``numba:compile`` events.

    NUMBA_CACHE_DIR=$(mktemp -d) python benchmarks/compile_profile.py run --clusters 10 --seed 1

Arguments are a ``fastsim`` command line (default: ``run --clusters 10 --seed 1``).  With
an empty cache every kernel the command needs compiles; with a warm one only what is
not cached (user functions, per-process drivers) shows up.  Also prints the process's
user and system CPU seconds, and LLVM's share of the compile by phase (the function
passes as numba adds each module, the optimisation of each library's linked module, the
machine code), summed over every code library.

    python benchmarks/compile_profile.py --inlines run --clusters 10 --seed 1

``--inlines`` also counts and times each part numba's inliner inlines
(``InlineWorker.inline_function``, a part's nested inlines counted in its caller's time
too): run it with ``FASTSIM_NO_CACHE=1`` (or an empty cache) to see every inline.
"""
import contextlib
import io
import resource
import sys
import time
from collections import defaultdict

t_start = time.perf_counter()

from numba.core import event  # noqa: E402


class _Nested(event.Listener):
    """Inclusive and exclusive (own) CPU seconds per compiled (function, signature)."""

    def __init__(self):
        self.stack = []  # [key, start, seconds of nested compiles]
        self.own = defaultdict(float)
        self.total = defaultdict(float)
        self.top = 0.0

    def on_start(self, ev):
        d = ev.data["dispatcher"]
        name = f"{d.py_func.__module__.replace('fastsim.kernels.', '')}.{d.py_func.__qualname__}"
        self.stack.append([(name, str(ev.data["args"])), time.process_time(), 0.0])

    def on_end(self, ev):
        key, t0, nested = self.stack.pop()
        dt = time.process_time() - t0
        self.total[key] += dt
        self.own[key] += dt - nested
        if self.stack:
            self.stack[-1][2] += dt
        else:
            self.top += dt


def _time_llvm_phases():
    """CPU seconds per LLVM phase, summed over numba's code libraries (numba internals,
    0.60-0.68: an empty table if they are missing)."""
    phases = defaultdict(float)
    try:
        from numba.core.codegen import CPUCodeLibrary, JITCodeLibrary
    except ImportError:
        return phases
    wrapped = ((CPUCodeLibrary, "add_llvm_module", "function passes (as each module is added)"),
               (CPUCodeLibrary, "_optimize_final_module", "linked module optimisation"),
               (JITCodeLibrary, "_finalize_specific", "machine code"))
    for cls, name, phase in wrapped:
        if not hasattr(cls, name):
            continue

        def timed(self, *args, _orig=getattr(cls, name), _phase=phase, **kws):
            t0 = time.process_time()
            try:
                return _orig(self, *args, **kws)
            finally:
                phases[_phase] += time.process_time() - t0
        setattr(cls, name, timed)
    return phases


def _time_inlines():
    """part name -> [times inlined, CPU seconds], for numba's inliner (numba internals,
    0.60-0.68: an empty table if it is missing)."""
    inlines = defaultdict(lambda: [0, 0.0])
    try:
        from numba.core.inline_closurecall import InlineWorker
    except ImportError:
        return inlines
    orig = InlineWorker.inline_function

    def timed(self, caller_ir, block, i, function, *args, **kws):
        t0 = time.process_time()
        try:
            return orig(self, caller_ir, block, i, function, *args, **kws)
        finally:
            entry = inlines[getattr(function, "__qualname__", repr(function))]
            entry[0] += 1
            entry[1] += time.process_time() - t0
    InlineWorker.inline_function = timed
    return inlines


def main(argv):
    from fastsim.cli import main as cli_main

    inlines = _time_inlines() if argv[:1] == ["--inlines"] else None
    argv = (argv[1:] if inlines is not None else argv) or ["run", "--clusters", "10", "--seed", "1"]
    llvm = _time_llvm_phases()

    listener = _Nested()
    event.register("numba:compile", listener)
    out = io.StringIO()
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out):
        cli_main(argv)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    event.unregister("numba:compile", listener)

    per_func = defaultdict(lambda: [0, 0.0])
    for (name, _), own in listener.own.items():
        per_func[name][0] += 1
        per_func[name][1] += own
    print(f"{'function':58s} {'specs':>5s} {'own cpu s':>7s}")
    for name, (n, own) in sorted(per_func.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:58s} {n:5d} {own:7.2f}")
    for name, (n, _) in per_func.items():
        if n > 1 and not name.startswith("numba."):
            print(f"\n{name}: {n} specialisations")
            for key_name, args in listener.own:
                if key_name == name:
                    print(f"    {args}")
    if inlines is not None:
        print(f"\ninlined {sum(n for n, _ in inlines.values())} parts for "
              f"{sum(t for _, t in inlines.values()):.2f} CPU s:")
        for name, (n, seconds) in sorted(inlines.items(), key=lambda kv: -kv[1][1]):
            print(f"    {name:44s} {n:5d} {seconds:6.2f}")
    print("\nLLVM, CPU s by phase (within the compile above):")
    for phase, seconds in llvm.items():
        print(f"    {phase:44s} {seconds:6.2f}")
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(f"\ncompile (outermost events) {listener.top:.2f} CPU s of the command's {cpu:.2f} "
          f"CPU s ({wall:.2f} s wall); imports before it {t0 - t_start:.2f} s wall")
    print(f"process CPU: user {ru.ru_utime:.2f} s, system {ru.ru_stime:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
