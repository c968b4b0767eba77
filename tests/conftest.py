"""Session-wide set-up: numba compiles (or loads its cache) once, before any test."""
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

os.environ.setdefault("FASTSIM_PROGRESS", "0")

# The Ctrl-C tests press Ctrl-C as at a terminal.  A shell starting the suite in the
# background (`cmd &` in a script) ignores SIGINT in it, and an ignored signal is inherited
# by every process it starts (fastsim keeps it ignored, as a supervisor may want): give the
# suite, and so the commands it runs, Python's own Ctrl-C handler.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Hypothesis's timing checks fail at random on a loaded machine: a slow example (deadline)
# or slow data generation (too_slow) says nothing about the property.  Every @settings
# turns the deadline off; too_slow is turned off here, on top of the active profile
# (which, with CI set, is Hypothesis's own "ci" profile: derandomized, no database).
settings.register_profile(
    "fastsim", parent=settings.default, deadline=None,
    suppress_health_check={*settings.default.suppress_health_check, HealthCheck.too_slow})
settings.load_profile("fastsim")

# `python -m pytest` puts the checkout itself on sys.path, where the source folder kernels/
# (installed as fastsim.kernels) would answer for any package named `kernels`: transformers
# probes for Hugging Face's package of that name. Tests import the installed package only.
_ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != _ROOT]

from fastsim import registry as R  # noqa: E402

# Every built-in, from its declaration: each scheduler (and each with a bool parameter
# set), each policy with its default parameters.
SCHEDULERS = tuple(d.name for d in R.BUILTIN_SCHEDULERS) + tuple(
    f"{d.name}:{p.name}" for d in R.BUILTIN_SCHEDULERS for p in d.params if p.kind == "bool")
POLICIES = tuple(d.usage() for d in R.BUILTIN_POLICIES)
POLICY_NAMES = R.BUILTIN_POLICY_NAMES


def small_sweep(clusters: int) -> str:
    """A sweep file of one cell (and its baseline) on 12-job clusters in chunks of 2: the
    smallest sweep directory with several chunks, for tests of its files."""
    return (f"clusters = {clusters}\nchunk = 2\nseed = 1\n[base]\nn_jobs = 12\ngpus = 16\n"
            '[axes]\npolicy = ["evalstop:k=2"]\n')


def modules_on_path(tmp_path_factory, folder: str, modules: dict[str, str]):
    """A module-scoped fixture's body (``yield from`` it): ``modules`` (file name ->
    source) written to a new folder, which is first on ``sys.path`` while the fixture
    lives, as a user's own modules are."""
    d = tmp_path_factory.mktemp(folder)
    for name, text in modules.items():
        (d / name).write_text(text)
    sys.path.insert(0, str(d))
    yield d
    sys.path.remove(str(d))


@pytest.fixture
def drawings(monkeypatch) -> list:
    """The ``generate`` flag of every call of the one-pass kernel (``fastsim.api``'s
    ``run_pipeline``) while the test runs: True where a call drew its clusters."""
    import fastsim.api as api

    calls: list = []
    real = api.run_pipeline

    def counting(scheduler, n, generate, *args):
        calls.append(generate)
        return real(scheduler, n, generate, *args)
    monkeypatch.setattr(api, "run_pipeline", counting)
    return calls


@pytest.fixture
def forget_compiled(monkeypatch):
    """A function that forgets which kernels and user functions this process has compiled,
    as in a fresh process: the once-per-process compile notice is said again (restored
    after the test)."""
    import fastsim.compile_notice as notice

    return lambda: monkeypatch.setattr(notice, "_WARM", set())


def own_lines(err: str) -> list[str]:
    """stderr's lines but numba's one-time compile notice, which a command prints first when
    its kernels are not cached yet (a test run alone, or first, on an empty cache): the
    simulation kernels', a replay's stop-policy kernels', the cost-aware kernels'
    (``fastsim.compile_notice.notice_text``)."""
    return [line for line in err.strip().splitlines()
            if not (line.startswith("compiling the ") and " s by machine load; " in line)]


def after_connecting(err: str, address: str) -> str:
    """stderr, stripped, after the line a sweep given ``--address`` says first (that it is
    connecting, and for how long it retries): what a test of the run's own lines reads."""
    first, _, rest = err.strip().partition("\n")
    assert first.startswith(f"dask: connecting to the scheduler at {address} (retried for "
                            "up to "), err
    return rest


def run_fenced(argv, timeout=300, env=()):
    """``fastsim ARGV`` in a child limited to 8 GiB of address space and a deadline, so a
    regression fails the test instead of exhausting the machine; ``env``: more variables."""
    import resource

    def limit():  # the interpreter and its libraries take about 1 GiB of it
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))

    return subprocess.run([sys.executable, "-m", "fastsim.cli", *argv], capture_output=True,
                          text=True, timeout=timeout, preexec_fn=limit,
                          env={**os.environ, "FASTSIM_PROGRESS": "0", **dict(env)})


def one_line(capsys, argv, needle):
    """``fastsim ARGV`` exits 2 with one line on stderr holding ``needle``; returns stdout."""
    from fastsim.cli import main

    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert needle in err, err
    assert len(own_lines(err)) == 1 and "Traceback" not in err, err
    return cap.out


def side_by_side(*runs: dict, timeout: float = 900) -> list[tuple[int | None, str, str]]:
    """Start every one of ``runs`` (``subprocess.Popen`` keyword arguments, ``args`` among
    them) at once and wait for all: for the processes that each keep one core busy for
    many seconds (a cold compile, a memory measurement) and depend on nothing but their
    own arguments, so that two of them take the time of one on a two-core machine.
    Returns each one's (exit code, stdout, stderr) in order; one still running after
    ``timeout`` seconds is killed and has exit code None."""
    with tempfile.TemporaryDirectory() as d:
        logs = [(Path(d, f"{i}.out"), Path(d, f"{i}.err")) for i in range(len(runs))]
        procs, codes = [], []
        try:
            for kw, (out, err) in zip(runs, logs):
                with open(out, "w") as o, open(err, "w") as e:
                    procs.append(subprocess.Popen(stdout=o, stderr=e, **kw))
            deadline = time.monotonic() + timeout
            for p in procs:
                try:
                    codes.append(p.wait(timeout=max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    codes.append(None)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return [(code, out.read_text(), err.read_text()) for code, (out, err) in zip(codes, logs)]


@contextlib.contextmanager
def held_elsewhere(directory, env=None):
    """Another process holding ``directory``'s sweep lock (``DirLock``) while the block
    runs; yields that process."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; "
         "from fastsim.sweep.store import DirLock; l = DirLock.acquire(Path(sys.argv[1])); "
         "print('held', flush=True); sys.stdin.read()", str(directory)],
        env=env, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


@pytest.fixture(scope="session", autouse=True)
def warm_kernels():
    """Touch every kernel once so compile time is paid here, not inside a test's timing."""
    from fastsim.api import simulate
    from fastsim.config import SimConfig

    cfg = SimConfig.from_specs("srtf_est", "evalstop:k=2", n_jobs=5, gpus=16)
    for pol in ("none", "oracle"):
        simulate(cfg.with_policy(pol), 2, keep_jobs=True, record_segments=True)
    yield


@pytest.fixture(scope="session", autouse=True)
def no_fsync():
    """``os.fsync`` does nothing in the test process.  Every file a command writes is synced
    before it is renamed into place (``fastsim.io.write_all``), a few ms each on a disk, and
    the suite writes some thousands of them; what a sync adds, the data surviving a power
    cut, no test can see.  ``test_every_output_is_synced_before_any_rename`` checks the
    syncs themselves, and commands run in a child process sync as they do for a user."""
    real = os.fsync
    os.fsync = lambda fd: None
    yield
    os.fsync = real


def pytest_ignore_collect(collection_path, config):
    """The Hugging Face group runs only with ``-m hf`` (its own CI step, with the extra
    installed); elsewhere its module is not even imported, so it neither runs nor skips."""
    if collection_path.name != "test_hf_callback.py":
        return None
    expr = (config.getoption("markexpr") or "").replace("not hf", "")
    return True if "hf" not in expr else None


def benchmark_script(name: str):
    """``benchmarks/NAME.py`` loaded as a module (scripts, not a package), with the
    benchmarks folder importable while it loads (``from _engine_copy import ...``) and the
    module in ``sys.modules`` as ``bench_NAME`` (a dataclass looks itself up there; the
    plain name would shadow a package: ``coverage``)."""
    import importlib.util

    folder = Path(__file__).resolve().parents[1] / "benchmarks"
    spec = importlib.util.spec_from_file_location(f"bench_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    sys.path.insert(0, str(folder))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module
