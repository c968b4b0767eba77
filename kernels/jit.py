"""One place for numba options, so no kernel hard-codes them.

``fastmath`` is limited to ``nsz``: ``reassoc``/``contract``/``arcp`` would let the
compiler change float results, and the engine must agree with the pure-Python reference
to the last bit; ``nnan``/``ninf`` would be unsafe because ``inf`` is a sentinel
("never") and NaN marks undefined metrics.

Caching: numba keys a cached function on its own file only, so a change in a kernel it
calls from another module would silently load stale machine code.  We therefore cache
under a directory named by a hash of every ``kernels/*.py`` source: any kernel edit
gives a fresh cache, and identical code (e.g. every Dask worker) shares one.  The
directory is chosen per function by a cache locator that claims only the functions
defined in this folder; ``numba.config.CACHE_DIR``, which would move every other
package's cache too, is left alone.  (numba has no public per-function cache directory:
the locator list is its documented extension point, ``numba/core/caching.py``.)  The
cache is only an optimisation: a cache file that cannot be written (a full disk) or read
(a damaged one) is compiled anew in memory (``_cache_is_optional``), and machine code is
loaded only if its file's SHA-256 and the signature it was saved for check out
(``_checked_data``).

Environment: ``FASTSIM_NO_PARALLEL=1`` compiles the ``prange`` drivers without ``parallel`` (for
profilers; results are identical by construction), ``FASTSIM_NO_CACHE=1`` disables the
on-disk cache, ``NUMBA_CACHE_DIR`` moves it.  The numba variables fastsim cannot run under
are refused here, at import, with a ``ValueError`` naming the variable
(``threads.numba_variables_error``): a ``NUMBA_NUM_THREADS`` numba cannot launch
(``threads.MAX_THREADS``), a threading layer (or its priority) it cannot load, and
``NUMBA_DISABLE_JIT`` set.
"""
import gc
import hashlib
import os
import pickle
import re
import stat
from pathlib import Path
from types import FunctionType

from .threads import numba_variables_error

# before numba is imported here (its own refusal of 0 does not name the variable) and
# before any kernel is defined: a count numba cannot launch crashed the first parallel
# kernel (``threads``).  The command line says it first, in its own line.
if (_numba_error := numba_variables_error()) is not None:
    raise ValueError(_numba_error)

import numba  # noqa: E402
from numba import njit  # noqa: E402
from numba.core import caching, event, types  # noqa: E402
from numba.core.dispatcher import Dispatcher  # noqa: E402

CACHE = os.environ.get("FASTSIM_NO_CACHE", "0") != "1"
UNCACHED: list[str] = []  # kernels compiled in memory for want of a writable cache (``_njit``)
PARALLEL = os.environ.get("FASTSIM_NO_PARALLEL", "0") != "1"
FASTMATH = {"nsz"}


class _NoFullCollection(event.Listener):
    """No full collection of Python's cycle collector while numba compiles (a function's
    outermost compile; the compiles nested in it run inside it, all under numba's
    compiler lock).  Numba's front end builds and drops a great many objects, and each
    full collection walks all of them: a cold ``fastsim run --clusters 10 --seed 1``
    spent about 0.6 of its 10 CPU seconds in eleven of them (docs/performance.md, round
    38).  The young generations are still collected as usual, and the thresholds are
    restored when the compile ends, so the next full collection frees what the compile
    left (a cold compile peaks about 60 MB higher).  What numba compiles is unchanged:
    the collector decides only when unreachable objects are freed."""

    def __init__(self):
        self.depth = 0
        self.thresholds = None

    def on_start(self, ev):
        self.depth += 1
        if self.depth == 1:
            self.thresholds = gc.get_threshold()
            gc.set_threshold(*self.thresholds[:2], NO_FULL_COLLECTION)

    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            gc.set_threshold(*self.thresholds)


NO_FULL_COLLECTION = 10**9  # the third threshold while numba compiles: never reached
event.register("numba:compile", _NoFullCollection())


def _source_hash() -> str:
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(f"{PARALLEL}{sorted(FASTMATH)}{numba.__version__}".encode())
    return h.hexdigest()[:16]


HERE = Path(__file__).resolve().parent
CACHE_DIR = os.path.join(
    os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache"), "fastsim-numba"),
    _source_hash())


class _KernelCacheLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """Puts the cache of a function defined in this folder under ``CACHE_DIR``; declines
    every other function, which numba's own locators then place as usual."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(CACHE_DIR, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self):
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        if Path(py_file).resolve().parent != HERE:
            return None
        locator = super().from_function(py_func, py_file)
        if locator is None:
            # ``CACHE_DIR`` cannot be made or written.  Declined, the kernel went to numba's
            # next locators (``kernels/__pycache__``, the user's numba cache), which key it
            # on its own file alone: a kernel edited in another module loaded stale machine
            # code there.  Compiled in memory instead (``_njit``).
            raise _NoKernelCache(f"cannot cache function {py_func.__qualname__!r}: "
                                 f"{CACHE_DIR} is not writable")
        return locator


class _NoKernelCache(RuntimeError):
    """A kernel whose cache cannot be written under ``CACHE_DIR``, the one place it may go."""


if CACHE:
    _impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.61
    if _KernelCacheLocator not in _impl._locator_classes:
        _impl._locator_classes.insert(0, _KernelCacheLocator)

# No C-callable wrapper: nothing here takes a kernel's address, and numba would compile
# one per specialisation.
_OPTIONS = dict(fastmath=FASTMATH, nogil=True, no_cfunc_wrapper=True)


def _plain_types(dispatcher):
    """Type calls from other kernels with plain types, not literal ones.  Numba compiles a
    separate copy of a function for every distinct constant argument it is called with
    (``Literal[int](1)``, ``Literal[int](2)``, ...): one per random stream, one per
    ``0`` or ``False`` passed.  No kernel here asks for a literal (``numba.literally``),
    so one copy per plain signature is the same code."""
    get_call_template = dispatcher.get_call_template

    def plain(args, kws):
        return get_call_template([types.unliteral(a) for a in args],
                                 {k: types.unliteral(v) for k, v in kws.items()})
    dispatcher.get_call_template = plain
    return dispatcher


# What starts every data file ``_checked_data`` writes (a file without it is another
# writer's: a miss).
_CHECKED = b"fastsim-checked-1\n"


class _DamagedCacheFile(ValueError):
    """A cache data file whose bytes or signature do not check out."""


def _checked_data(cache_file):
    """Every data file of numba's ``IndexDataCacheFile`` ``cache_file`` carries a SHA-256
    of its bytes and the key (signature, CPU, code) it was saved for, both checked before
    its machine code is trusted.  numba unpickles what it finds: a flipped byte inside the
    object code loads, and runs, as is; a damaged index naming another specialisation's
    file loads that code for this signature.  Either is now a miss (``_cache_is_optional``),
    compiled anew and saved over."""
    save, load, load_index = cache_file.save, cache_file.load, cache_file._load_index

    def regular(path):
        # a named pipe would block its open forever, a link to /dev/zero read in full
        # fill the memory: not a regular file, a damaged one (a missing one: numba's miss)
        try:
            mode = os.stat(path).st_mode
        except OSError:
            return
        if not stat.S_ISREG(mode):
            raise _DamagedCacheFile(path)

    def checked_index():
        regular(cache_file._index_path)
        return load_index()

    def save_data(name, data):
        payload = cache_file._dump(data)
        with cache_file._open_for_write(cache_file._data_path(name)) as f:
            f.write(_CHECKED + hashlib.sha256(payload).digest() + payload)

    def load_data(name):
        regular(cache_file._data_path(name))
        with open(cache_file._data_path(name), "rb") as f:
            blob = f.read()
        n = len(_CHECKED)
        payload = blob[n + 32:]
        if blob[:n] != _CHECKED or hashlib.sha256(payload).digest() != blob[n:n + 32]:
            raise _DamagedCacheFile(name)
        return pickle.loads(payload)

    def save_keyed(key, data):
        save(key, (key, data))

    def load_keyed(key):
        found = load(key)
        if found is None:
            return None
        if not (isinstance(found, tuple) and len(found) == 2 and found[0] == key):
            raise _DamagedCacheFile(key)
        return found[1]
    cache_file._save_data, cache_file._load_data = save_data, load_data
    cache_file._load_index = checked_index
    cache_file.save, cache_file.load = save_keyed, load_keyed


def _cache_is_optional(dispatcher):
    """The on-disk cache only saves compile time: a cache file that cannot be written
    (disk full, file too large) or read (truncated or damaged) is a miss, compiled in
    memory as without a cache, never a traceback ending the command.  numba raises both
    (it forgives only Windows' spurious ``EACCES``).  Only this function's cache."""
    cache = getattr(dispatcher, "_cache", None)
    if cache is None or not hasattr(cache, "save_overload"):
        return dispatcher
    load, save = cache.load_overload, cache.save_overload
    if hasattr(cache, "_cache_file"):
        _checked_data(cache._cache_file)

    def forget_index():
        # a damaged index would fail every later load and save (a save reads it first):
        # removed, the next save writes a new one
        index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
        if index is not None:
            try:
                os.unlink(index)
            except OSError:
                pass

    def load_overload(sig, target_context):
        try:
            return load(sig, target_context)
        except OSError:
            return None
        except Exception:  # pickle's errors, EOFError: a truncated or damaged cache file
            forget_index()
            return None

    def save_overload(sig, data):
        try:
            save(sig, data)
        except OSError:
            pass  # the compiled code is in memory; a later run compiles (and saves) again
        except Exception:
            forget_index()
    cache.load_overload, cache.save_overload = load_overload, save_overload
    return dispatcher


def _njit(**options):
    """``njit(**options)``, whose function is compiled in memory, as with
    ``FASTSIM_NO_CACHE=1``, when numba finds no writable place for its cache (a kernel's:
    ``CACHE_DIR``; any other function's: neither beside its source nor the user's cache: a
    read-only install and home), where decorating it raised a ``RuntimeError`` ending
    every command."""
    cached, plain = njit(**options), njit(**{**options, "cache": False})

    def decorate(fn):
        try:
            return cached(fn)
        except RuntimeError as exc:
            if not isinstance(exc, _NoKernelCache) and "no locator available" not in str(exc):
                raise
            UNCACHED.append(fn.__name__)
            return plain(fn)
    return decorate


def _jit(**options):
    decorate = _njit(**_OPTIONS, **options)
    return lambda fn: _plain_types(_cache_is_optional(decorate(fn)))


def _kernels_only(dispatcher):
    """A kernel compiled without a CPython wrapper can only be called from other kernels:
    its compiled versions are kept out of the table that calls from Python go through, so
    such a call raises this ``TypeError`` instead of jumping to the missing wrapper."""
    def add_overload(cres):
        dispatcher.overloads[tuple(cres.signature.args)] = cres

    def called_from_python(*args, **kws):
        raise TypeError(f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__name__} "
                        "is called from kernels only (``kernel``); declare it with "
                        "``fastsim.kernels.jit.entry`` to call it from Python")
    dispatcher.add_overload = add_overload
    dispatcher._compile_for_args = called_from_python
    return dispatcher


# Serial kernels called only from other kernels (the per-cluster ones, linked into their
# callers), compiled without the CPython wrapper numba would otherwise build, optimise
# and compile for each: about a tenth of a cold start (docs/performance.md, round 16),
# and without machine code of their own (``_link_only_compiler``: about 6%, round 23).
# The hooks are numba internals (0.60-0.68); a numba without them gets the wrapper and
# the machine code back (a slower cold start, never a crash).
_CAN_HIDE = all(hasattr(Dispatcher, name)
                for name in ("add_overload", "_compile_for_args"))


def _edited_nopython_compiler(edit):
    """A numba compiler class running numba's nopython pipeline after ``edit(pm, passes)``
    (``passes``: the pipeline's pass classes, in order); numba's pipeline unedited if it
    has no ``NativeLowering`` to edit around; None if this numba lacks the internals used
    (0.60-0.68)."""
    try:
        from numba.core.compiler import CompilerBase, DefaultPassBuilder
        from numba.core.typed_passes import NativeLowering
    except ImportError:
        return None

    class EditedCompiler(CompilerBase):
        def define_pipelines(self):
            pm = DefaultPassBuilder.define_nopython_pipeline(self.state)
            passes = [p for p, _ in pm.passes]
            if NativeLowering not in passes:
                return [pm]
            edit(pm, passes)
            pm.finalize()
            return [pm]
    return EditedCompiler


def _link_only_compiler():
    """A numba compiler for kernels that only other kernels call: their code is optimised
    and kept for linking into callers (and cached as LLVM bitcode), but never turned into
    machine code on its own, which only a call from Python would need.  Each caller's
    library turns the linked code into machine code anyway (docs/performance.md, round
    23).  None if this numba lacks the internals used (0.60-0.68)."""
    try:
        from numba.core.codegen import JITCodeLibrary
        from numba.core.compiler_machinery import register_pass
        from numba.core.typed_passes import NativeLowering
    except ImportError:
        return None
    needed = ("_finalize_dynamic_globals", "_verify_declare_only_symbols",
              "serialize_using_bitcode", "_finalize_final_module")
    if not all(hasattr(JITCodeLibrary, name) for name in needed):
        return None
    # an instruction (not the global's own definition) naming a function's environment
    env_use = re.compile(r"^[ \t]+[^\n]*@\"?_ZN08NumbaEnv", re.MULTILINE)

    class LinkOnlyLibrary(JITCodeLibrary):
        def _finalize_final_module(self):
            # numba's, without adding the module to the JIT engine and emitting its code
            self._finalize_dynamic_globals()
            self._verify_declare_only_symbols()
            self._finalized = True

        def serialize_using_object_code(self):
            # the cache keeps the optimised bitcode (a process loading it emits the code)
            return self.serialize_using_bitcode()

    class KernelKey:
        """What numba's table of compiled functions keys a kernel's code on, in place of
        the machine-code entry point it does not have."""
        def __init__(self, name):
            self.name = name

    @register_pass(mutates_CFG=True, analysis_only=False)
    class LinkOnlyLowering(NativeLowering):
        _name = "fastsim_link_only_lowering"

        def run_pass(self, state):
            state.library = LinkOnlyLibrary(state.targetctx.codegen(),
                                            state.func_id.func_qualname)
            state.flags.no_compile = True  # lower, and stop before the machine code
            try:
                NativeLowering.run_pass(self, state)
            finally:
                state.flags.no_compile = False
            lowered = state["cr"]
            # A kernel whose code reads numba's environment (``print``, object mode)
            # needs it set by the machine-code step this skips: refuse, rather than
            # read a null pointer when called.
            if env_use.search(str(state.library._final_module)):
                raise TypeError(f"{state.func_id.func_qualname} reads numba's Python "
                                "environment (print or object mode?): declare it with "
                                "``fastsim.kernels.jit.entry``, not ``kernel``")
            key = KernelKey(lowered.fndesc.qualname)
            state.targetctx.insert_user_function(key, lowered.fndesc, [state.library])
            state["cr"] = lowered._replace(cfunc=key)
            return True

    def use_link_only_lowering(pm, passes):
        pm.passes[passes.index(NativeLowering)] = (LinkOnlyLowering, "link-only lowering")
    return _edited_nopython_compiler(use_link_only_lowering)


_LINK_ONLY = _link_only_compiler() if _CAN_HIDE else None


def _kernel_jit(**options):
    if _LINK_ONLY:
        options["pipeline_class"] = _LINK_ONLY
    decorate = _jit(cache=CACHE, no_cpython_wrapper=_CAN_HIDE, **options)

    def kernel(fn):
        dispatcher = decorate(fn)
        return _kernels_only(dispatcher) if _CAN_HIDE else dispatcher
    return kernel


kernel = _kernel_jit()

# The engine's scheduling loop: numpy's error model, under which a float division by
# zero gives inf or NaN instead of raising.  The engine's own divisors (the number of
# evaluations, a job's GPUs and run time) are positive in every valid run
# (``fastsim.api.check_workload``); a raise path would stop numba's pruner from removing
# the reference counts of the steps, the parts the loop is written in, inside the loop
# (docs/performance.md, round 20).  The kernels the loop calls keep the Python model.
engine_kernel = _kernel_jit(error_model="numpy")


def one_of(fn, value):
    """``fn``, one of a family of closures or ``bind`` copies (one per ``value``), renamed
    for numba's cache.
    Numba keeps one index file per function name and line, holding every compiled version
    keyed on the closure's constants, and rewrites it without a lock: two processes
    compiling two members at once could both claim the first data file, and one index
    entry would then point at the other member's code.  A name per member gives each its
    own index."""
    fn.__qualname__ = f"{fn.__qualname__}_{value}"
    return fn


def bind(fn, **constants):
    """A copy of ``fn`` that reads ``constants`` as globals.  Numba takes a global's value
    as a constant when it compiles, and prunes a branch on a constant before it inlines
    the parts the branch calls; a branch on an argument of an inlined part is pruned only
    after every part in it was inlined (docs/performance.md, round 20).  So one source,
    written over a global such as ``SCHEDULER``, compiles per value with only that
    value's steps.  Numba keys a cached function on its code and closure, not on its
    globals: a copy that numba caches needs its own name (``one_of``)."""
    scope = dict(fn.__globals__, **constants)
    copy = FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__qualname__, copy.__doc__ = fn.__qualname__, fn.__doc__
    return copy


# Serial kernels that Python calls too: the one-pass pipeline over a range of clusters,
# which Python threads share out (``kernels.pipeline.run_pipeline``), and those the
# replay, the registry and the tests call directly.
entry = _jit(cache=CACHE)


def kernel_and_entry(fn):
    """A ``kernel`` (no CPython wrapper, no machine code of its own: its callers link it)
    that Python may call too: a call from Python goes to an ``entry`` copy of ``fn``,
    compiled and cached apart (its own name, ``<name>.entry``), only once Python calls it.
    For the kernels a pipeline calls and tests or ``fastsim`` also call (a pipeline alone
    then compiles no wrapper for them: docs/performance.md, round 39)."""
    if not _CAN_HIDE:
        return entry(fn)
    dispatcher = kernel(fn)
    twin = FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                        fn.__closure__)
    twin.__qualname__, twin.__doc__ = f"{fn.__qualname__}.entry", fn.__doc__
    compiled = []

    def called_from_python(*args, **kws):
        # numba's dispatcher calls what this returns with the same arguments
        if not compiled:
            compiled.append(entry(twin))
        return compiled[0]
    dispatcher._compile_for_args = called_from_python
    return dispatcher


def _linked_compiler():
    """A numba compiler whose code library skips the optimisation of the whole linked
    module (``_optimize_final_module``): the machine code is made from the kernel's own
    code, optimised function by function, and its callees' code as each was optimised in
    its own library.  None if this numba lacks the internals used (0.60-0.68)."""
    try:
        from numba.core.codegen import JITCodeLibrary
        from numba.core.compiler_machinery import LoweringPass, register_pass
        from numba.core.typed_passes import IRLegalization
    except ImportError:
        return None
    if not hasattr(JITCodeLibrary, "_optimize_final_module"):
        return None

    class LinkedLibrary(JITCodeLibrary):
        def _optimize_final_module(self):
            pass

    @register_pass(mutates_CFG=False, analysis_only=False)
    class UseLinkedLibrary(LoweringPass):
        _name = "fastsim_linked_library"

        def __init__(self):
            LoweringPass.__init__(self)

        def run_pass(self, state):  # what NativeLowering does when given no library
            state.library = LinkedLibrary(state.targetctx.codegen(), state.func_id.func_qualname)
            state.library.enable_object_caching()
            return True

    def use_linked_library(pm, passes):
        pm.add_pass_after(UseLinkedLibrary, IRLegalization)
    return _edited_nopython_compiler(use_linked_library)


# The one-pass pipeline, which Python calls: a loop over clusters calling each stage's
# kernel once per cluster, so inlining the stages into it gains nothing measurable,
# while optimising all their code once more, linked into it, cost about half a second
# of a cold start per pipeline (docs/performance.md, round 19).
_LINKED = _linked_compiler()
linked_entry = _jit(cache=CACHE, pipeline_class=_LINKED) if _LINKED else entry
# Drivers that loop over clusters with prange.
driver = _jit(cache=CACHE, parallel=PARALLEL)
# Drivers specialised on a user's @njit function (one compilation per function per
# process).  Never cached: numba keys its cache on the driver's bytecode and closure,
# not on the function it calls, so a cached copy could run another user's function.
user_driver = _jit(cache=False, parallel=PARALLEL)
# The same for a function called from Python on one job (replay).
user_entry = _jit(cache=False)
# The parts a kernel is written in (one step of the engine's scheduling point, say):
# inlined by numba into the caller before type inference, so a hot step costs no call.
_part = _njit(inline="always", cache=CACHE, fastmath=FASTMATH, nogil=True)


def part(fn):
    return _cache_is_optional(_part(fn))


@part
def last_use_nb(value, arrays):
    """``value``.  A part returns through this with every array it takes, so that their
    last use is one point that every path reaches: numba then drops each inlined copy of
    an array there, once, and its pruner removes the reference-count pair the copy costs.
    An array last used in one branch only is dropped in each branch, and the pair (an
    atomic count up and down) stays on every call (docs/performance.md, rounds 9, 20 and
    21)."""
    return value


# Python's ``min`` and ``max`` of two numbers, as numba's own select them (the second only
# if strictly smaller or larger, so a tie or a NaN keeps the first), as parts: numba
# compiles its ``min``, ``max`` and ``int`` (and ``np.full``) as library functions of their
# own, one per argument types and per calling kernel's options, a few hundredths of a
# second of a cold start each.  For ``int(x)`` kernels write ``np.int64(x)``, the same
# truncating cast without a compiled function.
@part
def min_nb(a, b):
    """``min(a, b)``."""
    return b if b < a else a


@part
def max_nb(a, b):
    """``max(a, b)``."""
    return b if b > a else a
