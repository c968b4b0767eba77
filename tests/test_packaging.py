"""Packaging and process hygiene: the wheel runs every command outside the checkout, the
kernels leave numba's global cache directory alone and compile each function once,
random-stream ids stay apart where they must."""
from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from conftest import side_by_side  # noqa: E402


def _streams(module) -> dict[str, int]:
    return {k: v for k, v in vars(module).items() if k.startswith("S_") and isinstance(v, int)}


def test_random_stream_ids_are_disjoint_where_they_must_be():
    import fastsim.kernels.codes as engine
    import fastsim.kernels.costaware as costaware
    import fastsim.kernels.toy_rlhf as toy

    sets = {name: _streams(m) for name, m in
            (("engine", engine), ("costaware", costaware), ("toy_rlhf", toy))}
    for name, ids in sets.items():
        assert ids, name
        assert len(set(ids.values())) == len(ids), f"{name} reuses a stream id"
    # the engine's draws may meet either system's inside one process and one seed
    assert not set(sets["engine"].values()) & set(sets["costaware"].values())
    assert not set(sets["engine"].values()) & set(sets["toy_rlhf"].values())


def test_importing_the_kernels_leaves_numba_cache_dir_alone():
    code = ("import numba; before = numba.config.CACHE_DIR\n"
            "import fastsim.api, fastsim.kernels.jit as jit\n"
            "assert numba.config.CACHE_DIR == before, (before, numba.config.CACHE_DIR)\n"
            "assert jit.CACHE_DIR.startswith(jit.os.path.expanduser('~')) or "
            "'XDG_CACHE_HOME' in jit.os.environ\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=ROOT)


# What a process compiling every kernel afresh (FASTSIM_NO_CACHE=1) does first, then
# second: ``uncached_parts`` runs both in one child, as two scripts, each in its own
# namespace, and reports each one's outcome.  A cold compile of a pipeline is most of
# either; the second compiles only its own pipeline, its callees being linked in compiled.
def test_one_compiled_pipeline_serves_generation_and_simulation(uncached_parts):
    """``generate_workload`` runs the one-pass kernel in its generate-only mode with the
    argument types ``simulate`` passes, so the cold start compiles it once, not twice; and
    only the run's scheduler's pipeline and engine are compiled (``kernels.engine._engine``)."""
    assert uncached_parts["one_pipeline"] == "ok", uncached_parts["one_pipeline"]


ONE_PIPELINE = ("from fastsim.config import SimConfig\n"
            "from fastsim.api import simulate, run_workload\n"
            "from fastsim.workload import generate_workload\n"
            "from fastsim.kernels import engine\n"
            "from fastsim.kernels.pipeline import PIPELINES\n"
            "cfg = SimConfig.from_specs('srtf_est', 'evalstop:k=2', n_jobs=8)\n"
            "simulate(cfg, 2, seed=1)\n"
            "run_workload(cfg, generate_workload(cfg.workload, 2, seed=1, scheduler=cfg.scheduler))\n"
            "compiled = [len(p.signatures) for p in PIPELINES]\n"
            "assert compiled == [0, 0, 1, 0, 0], compiled\n"
            "engines = [len(e.signatures) for e in (engine.cluster_fifo_1c_nb,\n"
            "           engine.cluster_sjf_est_1c_nb, engine.cluster_srtf_est_1c_nb,\n"
            "           engine.cluster_loss_aware_1c_nb, engine.cluster_tiresias_1c_nb)]\n"
            "assert engines == [0, 0, 1, 0, 0], engines\n"
            "assert not engine._choose_in_blocks_nb.signatures  # loss_aware's walk\n"
            "assert not engine._next_eval_nb.signatures  # Tiresias' pending point\n"
            "assert not engine._evaluation_rate_nb.signatures  # loss_aware's evaluations\n"
            "from fastsim.kernels import schedulers\n"
            "assert not schedulers.tiresias_queue_nb.signatures  # Tiresias' keys\n")


def _reachable_kernels(fn) -> set:
    """Every jitted function ``fn`` calls, directly or through other kernels (what numba
    compiles along with it), found through the global names its code uses."""
    seen, todo = set(), [fn]
    while todo:
        py = todo.pop().py_func
        codes = [py.__code__]
        names = set()
        while codes:
            code = codes.pop()
            names |= set(code.co_names)
            codes += [c for c in code.co_consts if hasattr(c, "co_names")]
        for name in names:
            obj = py.__globals__.get(name)
            if hasattr(obj, "py_func") and obj not in seen:
                seen.add(obj)
                todo.append(obj)
    return seen


def test_one_pass_pipeline_holds_no_online_detector():
    """A run without an online detector must not compile one: the one-pass kernel reaches
    the rule policies only (a detector decides in its own stage, ``decide_stops``)."""
    from fastsim.kernels import detectors, detectors_online, pipeline, stops
    from fastsim.kernels.codes import SRTF_EST
    reached = _reachable_kernels(pipeline.PIPELINES[SRTF_EST])
    assert detectors.evalstop_trigger_nb in reached  # the walk does find the decisions
    assert not {k.py_func.__module__ for k in reached} & {detectors_online.__name__}
    assert detectors_online.detector_trigger_nb in _reachable_kernels(stops.resolve_stops_nb)


def test_kernels_compile_once_whatever_constant_they_are_called_with():
    """Numba would compile a kernel once per literal argument value (one copy of the
    uniform draws per random stream); ``fastsim.kernels.jit`` types such calls plainly."""
    code = ("from numba import njit\n"
            "from fastsim.kernels.detectors import evalstop_step_nb\n"
            "@njit\n"
            "def both(x):\n"
            "    return evalstop_step_nb(1.0, x, 0) + evalstop_step_nb(1.0, x, 1)\n"
            "assert both(0.5) == 3\n"
            "assert len(evalstop_step_nb.signatures) == 1, evalstop_step_nb.signatures\n")
    env = {**os.environ, "FASTSIM_NO_CACHE": "1"}
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=env)


def test_a_kernel_only_kernels_call_refuses_a_call_from_python():
    """``kernel`` compiles without a CPython wrapper (``fastsim.kernels.jit``): a call
    from Python must raise a ``TypeError`` naming ``entry``, not jump into the missing
    wrapper (a crash, hence the subprocess)."""
    code = ("import numpy as np\n"
            "from fastsim.kernels.metrics import _min_to_front_nb\n"
            "try:\n"
            "    _min_to_front_nb(np.zeros(3), 0, 2)\n"
            "except TypeError as e:\n"
            "    assert 'entry' in str(e), e\n"
            "else:\n"
            "    raise SystemExit('a kernel-only kernel ran from Python')\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_a_kernel_has_no_machine_code_of_its_own_and_refuses_what_needs_it(uncached_parts):
    """A ``kernel`` is compiled for linking only (``fastsim.kernels.jit``): its callers'
    machine code holds it, it has none of its own, and its cache entry is bitcode.  Such
    a kernel has no Python environment set, so one whose code reads it (``print``) must
    be refused by name when it compiles, not fail when called."""
    assert uncached_parts["link_only"] == "ok", uncached_parts["link_only"]


LINK_ONLY = ("from fastsim.kernels.jit import entry, kernel\n"
            "from fastsim.kernels.metrics import accounting_1c_nb\n"
            "from fastsim.config import SimConfig\n"
            "from fastsim.api import simulate\n"
            "simulate(SimConfig.from_specs('fifo', 'none', n_jobs=4), 2)\n"
            "(cres,) = accounting_1c_nb.overloads.values()\n"
            "assert type(cres.library).__name__ == 'LinkOnlyLibrary', cres.library\n"
            "assert cres.library.serialize_using_object_code()[1] == 'bitcode'\n"
            "@kernel\n"
            "def noisy_nb(x):\n"
            "    print(x)\n"
            "@entry\n"
            "def caller_nb(x):\n"
            "    noisy_nb(x)\n"
            "try:\n"
            "    caller_nb(1.0)\n"
            "except Exception as e:\n"
            "    assert 'noisy_nb' in str(e) and 'entry' in str(e), e\n"
            "else:\n"
            "    raise SystemExit('a kernel reading the environment compiled')\n")

PARTS = """
import sys
for name, code in (("one_pipeline", sys.argv[1]), ("link_only", sys.argv[2])):
    try:
        exec(compile(code, name, "exec"), {"__name__": "__main__"})
    except BaseException as exc:
        print(name, "failed:", repr(exc).replace(chr(10), " "))
    else:
        print(name, "ok")
"""


@pytest.fixture(scope="module")
def cold_starts(tmp_path_factory) -> dict:
    """The module's two processes that compile what they run from nothing, most of half a
    minute each, side by side: ``PARTS`` compiling afresh (FASTSIM_NO_CACHE=1), and the
    first run of ``ENGINES`` into an empty cache directory (``engines_cache``), which
    ``test_the_engines_load_from_the_cache_in_a_new_process`` runs again to load from."""
    cache = tmp_path_factory.mktemp("engines_cache")
    # unrefused, LINK_ONLY's call reads the null environment without the GIL: it hangs
    parts, engines = side_by_side(
        dict(args=[sys.executable, "-c", PARTS, ONE_PIPELINE, LINK_ONLY], cwd=ROOT, text=True,
             env={**os.environ, "FASTSIM_NO_CACHE": "1"}),
        dict(args=[sys.executable, "-c", ENGINES], cwd=ROOT, text=True,
             env={**os.environ, "NUMBA_CACHE_DIR": str(cache)}), timeout=600)
    return {"parts": parts, "engines": engines, "engines_cache": cache}


@pytest.fixture(scope="module")
def uncached_parts(cold_starts) -> dict[str, str]:
    """``ONE_PIPELINE`` then ``LINK_ONLY`` in one process compiling afresh (a cached
    pipeline loads no callee): each one's "ok" or "failed: ERROR"."""
    code, out, err = cold_starts["parts"]
    parts = dict(line.split(" ", 1) for line in out.splitlines()
                 if line.startswith(("one_pipeline ", "link_only ")))
    assert code == 0 and len(parts) == 2, (out, err)
    return parts


def test_every_package_is_listed_for_the_wheel():
    """pyproject.toml lists the packages explicitly (three are mapped from top-level
    folders); a new subpackage missing from that list would be missing from the wheel."""
    import tomllib

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "fastsim").rglob("__init__.py")}
    assert found <= listed, found - listed
    for package, folder in cfg["package-dir"].items():
        assert package in listed and (ROOT / folder / "__init__.py").exists(), package


def test_every_shipped_data_file_is_listed_for_the_wheel():
    """Data files are in the wheel only if pyproject.toml's package-data matches them: the
    example log of ``fastsim replay --example`` (``fastsim.resources.example_log``) too."""
    import fnmatch
    import tomllib

    from fastsim.resources import example_log

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    log = example_log()
    assert log.is_file() and log.parent == ROOT / "fastsim" / "replay"
    assert any(fnmatch.fnmatch(log.name, pat) for pat in cfg["package-data"]["fastsim.replay"])
    for package, patterns in cfg["package-data"].items():
        folder = ROOT / cfg["package-dir"].get(package, package.replace(".", "/"))
        assert all(list(folder.glob(pat)) for pat in patterns), (package, patterns)


def test_kernels_load_once_under_their_package_name():
    """From the repository root the folder ``kernels/`` is on the path too: importing it
    as ``kernels`` would compile a second copy, so it refuses, and nothing the package or
    the tests import loads it under that name."""
    code = ("import sys, fastsim.api, fastsim.sweep.runner, fastsim.replay.traces\n"
            "assert 'kernels' not in sys.modules and 'fastsim.kernels.engine' in sys.modules\n"
            "try:\n    import kernels\nexcept ImportError as exc:\n    print(exc)\n"
            "else:\n    raise SystemExit('kernels imported under a second name')\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "fastsim.kernels" in r.stdout
    assert not [m for m in sys.modules if m == "kernels" or m.startswith("kernels.")]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("FASTSIM_WHEEL_TEST") != "1",
                    reason="builds and installs a wheel (minutes); CI runs it with "
                           "FASTSIM_WHEEL_TEST=1")
def test_wheel_runs_reproduce_and_figures_outside_the_checkout(tmp_path):
    import shutil
    import zipfile

    # build from a clean copy: setuptools reuses a stale build/ folder of the checkout
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "results", "*.egg-info", "__pycache__", "*.png", "*.pdf"))
    pip = [sys.executable, "-m", "pip"]
    subprocess.run([*pip, "wheel", "-q", "--no-deps", str(src), "-w", str(tmp_path / "dist")],
                   check=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("fastsim-*.whl")
    top = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert top == {"fastsim", "fastsim-0.1.0.dist-info"}, top  # no generic top-level name
    venv.create(tmp_path / "venv", with_pip=True)
    bin_dir = tmp_path / "venv" / "bin"
    subprocess.run([bin_dir / "pip", "install", "-q", str(wheel)], check=True, cwd=tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def fastsim(*args):
        r = subprocess.run([bin_dir / "fastsim", *args], cwd=work, env=env,
                           capture_output=True, text=True)
        print(r.stdout[-3000:], r.stderr[-3000:])
        assert r.returncode == 0, r.stderr
        return r.stdout

    assert "fastsim 0.1.0" in fastsim("--version")
    example = fastsim("replay", "--example", "--summary-only")
    assert "replay: 3 jobs" in example and "site-packages" in example  # the wheel's own copy
    fastsim("reproduce", "--quick", "--clusters", "50", "--no-progress")
    out = work / "results" / "reproduce-quick"
    assert (out / "REPRODUCTION.md").exists()
    assert len(list((out / "figures").glob("*.pdf"))) == 7
    fastsim("figures", str(out), "--out", "redrawn")
    # the paper's seven again, and the mixed-workload sweep's own figure (no paper figure
    # reads it; reproduce draws the paper's alone)
    drawn = sorted(f.name for f in (work / "redrawn").glob("*.png"))
    assert drawn == sorted([f.name for f in (out / "figures").glob("*.png")] +
                           ["sweep_mixed.png"]), drawn
    # the installed package is the wheel's, not the checkout's
    where = subprocess.run([bin_dir / "python", "-c", "import fastsim; print(fastsim.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout
    assert str(ROOT) not in where and "site-packages" in where


def test_each_schedulers_kernels_have_their_own_cache_index():
    """Numba rewrites a function's cache index without a lock; one index shared by the
    per-scheduler closures could, with two processes compiling two schedulers at once,
    point one scheduler's entry at the other's code (``fastsim.kernels.jit.one_of``)."""
    from fastsim.kernels import engine, pipeline
    for family in (pipeline.PIPELINES, engine._DRIVERS,
                   (engine.cluster_fifo_1c_nb, engine.cluster_sjf_est_1c_nb,
                    engine.cluster_srtf_est_1c_nb, engine.cluster_loss_aware_1c_nb,
                    engine.cluster_tiresias_1c_nb)):
        names = {k.py_func.__qualname__ for k in family}  # numba names the index after it
        assert len(names) == len(family), names


def test_the_engines_load_from_the_cache_in_a_new_process(cold_starts):
    """Each engine is a copy of one template bound to its scheduler's constants
    (``fastsim.kernels.jit.bind``), linked into its scheduler's pipeline.  Numba keys a
    cache entry on a function's code and closure, so the next process must load every
    pipeline it runs, with its engine, and compile no engine: a miss would only show as a
    cold start paid every time (as a closure over a kernel did, docs/performance.md,
    round 19).  Nor may any kernel compile numba's string formatting (a slice assignment
    does, for its shape-error message: a second of every cold start), nor any of numba's
    library functions but ``np.empty``'s: ``min``, ``max``, ``int`` or ``np.full`` compile
    one each per argument types and per kernel options (``kernels.jit.min_nb``).  Nor may a
    run compile a CPython wrapper for a kernel Python also calls (``kernel_and_entry``,
    round 39)."""
    code, out, err = cold_starts["engines"]  # the first run, into an empty cache
    assert code == 0, err
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cold_starts["engines_cache"])}
    runs = [out.split(), subprocess.run([sys.executable, "-c", ENGINES], check=True, cwd=ROOT,
                                        env=env, capture_output=True, text=True).stdout.split()]
    assert runs[0] == ["0/1", "0/1", "0/1", "0/1", "[]"], runs  # hits/misses: compiled, saved
    assert runs[1] == ["1/0", "1/0", "0/0", "0/0", "[]"], runs  # loaded, engines inside


ENGINES = ("from numba.core import event\n"
           "compiled, wrapped = [], []\n"
           "class Names(event.Listener):\n"
           "    def on_start(self, ev):\n"
           "        f = ev.data['dispatcher'].py_func\n"
           "        compiled.append(f'{f.__module__}.{f.__qualname__}')\n"
           "        if not ev.data['dispatcher'].targetoptions.get('no_cpython_wrapper'):\n"
           "            wrapped.append(f.__qualname__)\n"
           "    def on_end(self, ev):\n"
           "        pass\n"
           "event.register('numba:compile', Names())\n"
           "from fastsim.config import SimConfig\n"
           "from fastsim.api import compare\n"
           "from fastsim.kernels import engine\n"
           "from fastsim.kernels.pipeline import PIPELINES\n"
           "from fastsim.kernels.codes import FIFO, TIRESIAS\n"
           "for s in ('fifo', 'tiresias'):\n"
           "    compare(SimConfig.from_specs(s, 'evalstop:k=2', n_jobs=8), n_clusters=3, seed=1)\n"
           "for k in (PIPELINES[FIFO], PIPELINES[TIRESIAS], engine.cluster_fifo_1c_nb,\n"
           "          engine.cluster_tiresias_1c_nb):\n"
           "    print(f'{sum(k.stats.cache_hits.values())}/{sum(k.stats.cache_misses.values())}')\n"
           "allowed = ('numba.np.arrayobj.ol_np_empty', 'numba.np.arrayobj._ol_array_allocate')\n"
           "callable_too = {'percentiles_nb', 'max_points_nb',\n"
           "                'evalstop_step_nb'}\n"
           "print(sorted({n for n in compiled if n.startswith('numba.')\n"
           "              and not n.startswith(allowed)} | (callable_too & set(wrapped))))\n")


def test_the_subpackages_the_docs_name_are_attributes_of_fastsim():
    """After `import fastsim`, fastsim.costaware.sampling_distribution (the cost-aware API)
    and fastsim.metrics.metrics() (the columns' units) were AttributeErrors ('module
    'fastsim' has no attribute 'costaware''): they load on first use, as fastsim.sweep
    does, and costaware is listed in dir(fastsim)."""
    code = ("import fastsim; assert 'costaware' in dir(fastsim) and 'costaware' in fastsim.__all__; "
            "fastsim.costaware.sampling_distribution; fastsim.metrics.metrics(); "
            "import sys; sys.exit(0 if fastsim.summary.format_table is fastsim.format_table else 3)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
