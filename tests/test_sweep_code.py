"""A sweep directory records the code its chunks were computed by (``Grid.code``: fastsim's
version and source, and the source of each user function its cells name), which the grid
hash does not cover: resuming with other code is refused, in one line and before anything is run or
written, instead of pooling chunks of two versions of a function into one interval.  A
directory written before the code was recorded still resumes, and says so."""
from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import after_connecting, own_lines

import fastsim
import fastsim.metrics
from fastsim.cli import main
from fastsim.registry import _source_hash
from fastsim.resources import MAPPED, package_sha256
from fastsim.sweep import grid as grid_module
from fastsim.sweep.grid import load_sweep

METRIC_SRC = '''
import numpy as np
from fastsim.metrics import cluster_metric


@cluster_metric(label="hacking share", unit="share")
def hacking_share(jobs):
    """Share of a cluster's jobs that hack."""
    return jobs["hacking"].sum(axis=1) / SCALE


SCALE = 20.0
'''

POLICY_SRC = '''
from numba import njit
from fastsim.registry import stop_policy


@stop_policy(label="at_eval")
@njit
def at_eval(scores, losses, attained_h, t_est_h):
    """Stop at the third evaluation."""
    return 3 if scores.shape[0] >= 3 else 0
'''

# the edits: a constant beside the metric, the policy's own body
EDITS = {"code_metric": ("SCALE = 20.0", "SCALE = 10.5"),
         "code_policy": ("return 3 if scores.shape[0] >= 3", "return 4 if scores.shape[0] >= 4")}
SOURCES = {"code_metric": METRIC_SRC, "code_policy": POLICY_SRC}
# fastsim's own source at another commit of a development checkout (same version)
OTHER_FASTSIM = "0" * 64


def sweep_text(module: str | None) -> str:
    user = {"code_metric": 'metrics = ["code_metric:hacking_share"]',
            "code_policy": 'policy = "code_policy:at_eval"', None: ""}[module]
    return f"clusters = 6\nchunk = 2\nseed = 3\n[base]\nn_jobs = 16\ngpus = 16\n{user}\n"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Write a user module on the import path; ``write(text)`` (re)writes it as a user's
    edit between two runs would, and forgets the imported one, as a new process does."""
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    monkeypatch.syspath_prepend(str(code_dir))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # no .pyc older than an edit
    # the metric registers itself process-wide; gone after the test, as its module is
    monkeypatch.setattr(fastsim.metrics, "_METRICS", dict(fastsim.metrics._METRICS))

    def write(module: str, text: str) -> None:
        (code_dir / f"{module}.py").write_text(text)
        sys.modules.pop(module, None)
        importlib.invalidate_caches()
        _source_hash.cache_clear()
    yield write
    for module in SOURCES:
        sys.modules.pop(module, None)


def set_code(module: str, monkeypatch, user_module, edited: bool) -> None:
    """The code of ``module`` (a user module, or ``"fastsim"`` itself) as first run, or as
    edited since: fastsim's is another commit's source first (an edit of the checkout
    cannot be undone here), then this one's."""
    if module == "fastsim":
        monkeypatch.setattr(grid_module, "package_sha256",
                            package_sha256 if edited else lambda: OTHER_FASTSIM)
    else:
        user_module(module, SOURCES[module].replace(*EDITS[module]) if edited
                    else SOURCES[module])


def sweep(path, out, *extra):
    return main(["sweep", str(path), "--out", str(out), "--no-progress", *extra])


def files(out):
    """Every file under ``out`` with its bytes: what a refused run must leave as it was."""
    return {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def edit_json(path, change) -> None:
    """Rewrite the JSON file ``path`` as ``change`` makes it; a key set to None is removed
    (a manifest or record written before the code was recorded has no ``code``)."""
    doc = change(json.loads(path.read_text()))
    path.write_text(json.dumps({k: v for k, v in doc.items() if v is not None}, indent=1))


def metric_sweep(tmp_path, user_module, chunks: int):
    """A sweep file naming the user metric ``code_metric``, interrupted after ``chunks``
    chunks: the file, its --out and its grid."""
    path = tmp_path / "s.toml"
    path.write_text(sweep_text("code_metric"))
    out = tmp_path / "out"
    user_module("code_metric", METRIC_SRC)
    return path, out, interrupted(path, out, chunks)


def interrupted(path, out, chunks: int):
    """A run of ``path`` into ``out`` stopped after ``chunks`` chunks (as a kill would)."""
    from fastsim.sweep.runner import run_sweep
    from fastsim.sweep.store import SweepStore

    grid = load_sweep(path)
    with SweepStore.open(out, grid) as store:
        run_sweep(grid, store, progress=False, max_chunks=chunks)
    return grid


@pytest.mark.parametrize("module", ["code_metric", "code_policy", "fastsim"])
def test_an_edited_user_function_is_refused_then_the_restored_one_resumes(
        user_module, tmp_path, capsys, monkeypatch, module):
    """A metric's source is in no cell's config, so its edit left the grid hash as it was
    and the resume pooled chunks of both versions; a policy's edit changed its cells' hash
    and was refused as "a different grid" without naming the edit.  Both now name it.  So
    does an edit of fastsim's own code (a kernel, a metric) under one version, as in a
    development checkout from commit to commit, which resumed and pooled silently."""
    path = tmp_path / "s.toml"
    path.write_text(sweep_text(module if module in SOURCES else None))
    out = tmp_path / "out"
    set_code(module, monkeypatch, user_module, edited=False)
    grid = interrupted(path, out, 2)
    before = files(out)
    set_code(module, monkeypatch, user_module, edited=True)
    capsys.readouterr()
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    ref = {"code_metric": "code_metric:hacking_share", "code_policy": "code_policy:at_eval",
           "fastsim": "fastsim's own source"}[module]
    said = (f"{ref} has been edited since they were computed " + (
        f"(version {fastsim.__version__} both: a development checkout at another commit"
        if module == "fastsim" else f"(module {module}"))
    assert f"{out}/sweep.json: the results in {out} are of other code than this run's: " \
           f"{said}" in err, err
    # after updating fastsim, deleting the old results is the usual way on: say so, as the
    # refusal of a different grid does
    assert err.endswith("restore the code they were computed by, use a new --out directory, "
                        "or delete the old one to compute them again with this code")
    assert files(out) == before  # nothing run, nothing written
    # deleted manifest: the chunk records name the code, and are asked instead (a
    # policy's edit also changed its cells, but the edit is what is named)
    (out / "sweep.json").unlink()
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not (out / "sweep.json").exists(), err
    assert f"is a chunk record of other code than this run's: {said}" in err, err
    # the code as it was: the directory resumes (the manifest rebuilt from the records)
    set_code(module, monkeypatch, user_module, edited=False)
    assert sweep(path, out) == 0
    err = capsys.readouterr().err
    total = len(grid.cells) * grid.n_chunks
    assert f"resumed: 2 of {total} chunks were already done (verified)" in err, err
    assert json.loads((out / "sweep.json").read_text())["code"] == grid.code


def installed_copy(root: Path) -> Path:
    """This fastsim copied into ``root`` as a wheel installs it (kernels/, figures/ and
    sweeps/ inside fastsim/), whatever the install it was copied from: its fastsim/."""
    wheel = root / "fastsim"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(fastsim.__file__).parent, wheel, ignore=ignore)
    for sub in MAPPED:
        shutil.copytree(Path(importlib.import_module(f"fastsim.{sub}").__file__).parent,
                        wheel / sub, ignore=ignore)
    return wheel


def test_fastsim_source_is_every_py_file_by_its_path_in_the_package(tmp_path):
    """The hash a wheel install gives (kernels/, figures/ and sweeps/ inside fastsim/) is
    the editable checkout's (they map from the repository's top there); a byte of a kernel
    changes it, the compiled files Python writes beside the source do not."""
    wheel = installed_copy(tmp_path)

    def sha() -> str:  # a new process: the hash is read once per process
        code = "import fastsim.resources as r; print(r.__file__, r.package_sha256())"
        where, digest = subprocess.run(
            [sys.executable, "-c", code], env={"PYTHONPATH": str(tmp_path)}, cwd=tmp_path,
            capture_output=True, text=True, check=True).stdout.split()
        assert where == str(wheel / "resources.py")
        return digest

    assert sha() == package_sha256()
    assert list(wheel.glob("__pycache__/*.pyc"))  # written by that process: not source
    assert sha() == package_sha256()
    engine = wheel / "kernels" / "engine.py"
    engine.write_text(engine.read_text() + "\n")
    assert sha() != package_sha256()


def test_an_edited_user_module_beside_the_fastsim_folder_is_refused(tmp_path):
    """A module in the folder that holds fastsim/ was taken for fastsim's own code and
    hashed as nothing, so its edit resumed, pooling two versions: in an editable install
    that folder is the checkout, where the README keeps a user's modules (``PYTHONPATH=.
    fastsim sweep``).  Run in a new process on a copy of the package with the module
    beside it, so the test means the same in an editable and in a wheel install."""
    installed_copy(tmp_path)
    path, out = tmp_path / "s.toml", tmp_path / "out"
    path.write_text(sweep_text("code_metric"))
    metric_file = tmp_path / "code_metric.py"
    metric_file.write_text(METRIC_SRC)
    env = {"PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(code: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                              cwd=tmp_path, capture_output=True, text=True)

    # its manifest and first chunk, as a run killed after it left them (with no result
    # under it, the manifest takes the edited code: nothing to mix)
    opened = run("import sys, fastsim; from fastsim.sweep.grid import load_sweep; from "
                 "fastsim.sweep.store import SweepStore; from fastsim.sweep.runner import "
                 "run_sweep; print(fastsim.__file__); g = load_sweep(sys.argv[1]); "
                 "s = SweepStore.open(sys.argv[2], g); "
                 "run_sweep(g, s, progress=False, max_chunks=1); s.close()", path, out)
    assert opened.stdout.strip() == str(tmp_path / "fastsim" / "__init__.py"), opened.stderr
    metric_file.write_text(METRIC_SRC.replace(*EDITS["code_metric"]))
    resumed = run("import sys; from fastsim.cli import main; sys.exit(main(sys.argv[1:]))",
                  "sweep", path, "--out", out, "--no-progress")
    assert resumed.returncode == 2, resumed.stderr
    assert ("code_metric:hacking_share has been edited since they were computed "
            "(module code_metric") in resumed.stderr, resumed.stderr


def test_another_fastsim_version_is_refused_on_every_backend(tmp_path, capsys, monkeypatch):
    path = tmp_path / "s.toml"
    path.write_text(sweep_text(None))
    out = tmp_path / "out"
    monkeypatch.setattr(fastsim, "__version__", "0.0.9")
    grid = interrupted(path, out, 1)
    assert grid.code == {"fastsim": "0.0.9", "fastsim_sha256": package_sha256(), "user": {}}
    monkeypatch.undo()
    before = files(out)
    capsys.readouterr()
    # Dask: refused before connecting (this address answers nothing), as the local backend
    for extra in ((), ("--backend", "dask", "--address", "tcp://127.0.0.1:9")):
        assert sweep(path, out, *extra) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert (f"of other code than this run's: they were computed by fastsim 0.0.9, this "
                f"is fastsim {fastsim.__version__}; refusing to mix") in err, err
        assert files(out) == before


def without_source(doc: dict) -> dict:
    """A manifest or record as written before fastsim's source was recorded (format 3)."""
    return {**doc, "code": {k: v for k, v in doc["code"].items() if k != "fastsim_sha256"}}


@pytest.mark.parametrize("checked", ["on connecting", "with each chunk"])
def test_a_dask_worker_running_other_code_is_refused(user_module, tmp_path, capsys,
                                                     monkeypatch, checked):
    """A worker of another fastsim source, or with another copy of a user's module,
    computed chunks that the driver recorded as its own code's.  A worker's code is
    checked on connecting, before anything is written, and with each chunk it returns (a
    worker may join later), before the chunk is written."""
    distributed = pytest.importorskip("dask.distributed")
    from fastsim.sweep import runner

    path, out = tmp_path / "s.toml", tmp_path / "out"
    path.write_text(sweep_text("code_metric"))
    user_module("code_metric", METRIC_SRC)
    other = {"on connecting": {"fastsim_sha256": OTHER_FASTSIM},
             "with each chunk": {"user": {"code_metric:hacking_share": "0" * 64}}}[checked]
    if checked == "on connecting":
        code = runner.worker_code
        monkeypatch.setattr(runner, "worker_code", lambda configs: {**code(configs), **other})
    else:
        chunk = runner.run_chunks_on_worker

        def other_chunk(*args):
            worker, code, result = chunk(*args)
            return worker, {**code, **other}, result
        monkeypatch.setattr(runner, "run_chunks_on_worker", other_chunk)
    monkeypatch.setattr(runner, "warm_up", lambda: "warm")  # compiling is beside the point
    with distributed.LocalCluster(n_workers=1, processes=False,
                                  dashboard_address=None) as cluster:
        assert sweep(path, out, "--backend", "dask", "--address",
                     cluster.scheduler_address) == 2
        worker = next(iter(cluster.workers.values())).address
        err = after_connecting(capsys.readouterr().err, cluster.scheduler_address)
    assert len(err.splitlines()) == 1, err
    said = {"on connecting": f"fastsim's own source differs (version {fastsim.__version__} "
                             "both: a development checkout at another commit",
            "with each chunk": "code_metric:hacking_share differs (module code_metric"}
    assert (f"the Dask worker {worker} runs other code than this process: {said[checked]}"
            in err), err
    assert err.endswith("refusing to mix results of two versions: give every worker the "
                        "code this process runs, then run the same command again"), err
    assert not out.exists() if checked == "on connecting" else not list(out.glob("cells/*/*"))


def test_a_dask_worker_of_another_version_is_named_in_one_short_line(tmp_path, user_module):
    """A worker's version, read from another process, is escaped and cut as a version
    read from a damaged manifest is (``clipped``): one line, the two versions named."""
    from fastsim.config import ConfigError
    from fastsim.sweep.runner import check_worker_code

    _, _, grid = metric_sweep(tmp_path, user_module, 1)
    long = "0.0.9\n" + "x" * 100
    for version, shown in [("0.0.9", "0.0.9"), (long, "0.0.9\\n" + "x" * 53 + "...")]:
        with pytest.raises(ConfigError) as refused:
            check_worker_code("tcp://w:1", {**grid.code, "fastsim": version}, grid)
        said = str(refused.value)
        assert len(said.splitlines()) == 1, said
        assert (f"the Dask worker tcp://w:1 runs other code than this process: fastsim "
                f"{shown} there, {fastsim.__version__} here; refusing") in said, said


@pytest.mark.parametrize("older", ["code", "fastsim_sha256"])
def test_a_directory_written_before_the_code_was_recorded_resumes(user_module, tmp_path,
                                                                 capsys, monkeypatch, older):
    """A manifest of format 2 and records without ``code``, or of format 3 without
    fastsim's source: kept as this code's (one line says so), the manifest then records
    this code, so a later edit is refused."""
    path, out, grid = metric_sweep(tmp_path, user_module, 3)
    manifest = out / "sweep.json"
    strip = {"code": lambda doc: {**doc, "code": None}, "fastsim_sha256": without_source}[older]
    edit_json(manifest, lambda m: {**strip(m), "format": 2 if older == "code" else 3})
    for rec in out.glob("cells/*/chunk-*.json"):
        edit_json(rec, strip)
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == {
        "code": f"{manifest} does not record the code its chunks were computed by (written "
                "before sweeps did), so they are kept as this code's, unchecked; it records "
                f"this code (fastsim {fastsim.__version__} and its user functions' sources) "
                "from now on",
        "fastsim_sha256": f"{manifest} does not record fastsim's source its chunks were "
                          f"computed by, only its version ({fastsim.__version__}, this one's; "
                          "written before sweeps did), so they are kept as this source's, "
                          "unchecked; it records this source from now on"}[older], err
    total = len(grid.cells) * grid.n_chunks
    assert err[1] == f"resumed: 3 of {total} chunks were already done (verified)"
    assert json.loads(manifest.read_text())["code"] == grid.code
    assert all(json.loads(r.read_text())["code"] == grid.code  # and so does each record
               for r in out.glob("cells/*/chunk-*.json"))
    assert sweep(path, out) == 0  # said once: the manifest records the code now
    assert "does not record" not in capsys.readouterr().err
    # an edit since: the metric's, or fastsim's (its source hashes as another commit's)
    module = "code_metric" if older == "code" else "fastsim"
    set_code(module, monkeypatch, user_module, edited=module != "fastsim")
    assert sweep(path, out) == 2
    edited = "code_metric:hacking_share" if older == "code" else "fastsim's own source"
    assert f"{edited} has been edited" in capsys.readouterr().err


@pytest.mark.parametrize("older", ["code", "fastsim_sha256"])
def test_an_older_record_beside_a_manifest_that_records_the_code_is_re_run(
        user_module, tmp_path, capsys, older):
    """A record naming no code (or not fastsim's source) beside a manifest that records
    it was copied in from an older directory, not adopted on opening: its chunk, computed
    by code nobody can name, is re-run, never pooled with this code's."""
    path, out, grid = metric_sweep(tmp_path, user_module, 3)
    strip = {"code": lambda doc: {**doc, "code": None}, "fastsim_sha256": without_source}[older]
    copied = sorted(out.glob("cells/*/chunk-*.json"))[0]
    edit_json(copied, strip)
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err
    assert f"resumed: 2 of {len(grid.cells) * grid.n_chunks} chunks were already done" in err
    assert json.loads(copied.read_text())["code"] == grid.code  # rewritten by the re-run


def test_a_rebuilt_manifest_keeps_older_records_and_says_so(user_module, tmp_path, capsys):
    path, out, _ = metric_sweep(tmp_path, user_module, 3)
    (out / "sweep.json").unlink()
    older, sourceless = sorted(out.glob("cells/*/chunk-*.json"))[:2]
    edit_json(older, lambda r: {**r, "code": None})
    edit_json(sourceless, without_source)
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert "rebuilt it: 3 chunk records in" in err[0] and "none another grid or other code" \
        in err[0] and "1 of them do not record the code" in err[0] and "; 1 of them record " \
        "fastsim's version but not its source (written before records did) and are kept as " \
        "this source's, unchecked" in err[0], err
    assert "resumed: 3 of" in err[1]


def test_a_manifest_whose_code_is_damaged_is_rebuilt_from_the_records(user_module, tmp_path,
                                                                      capsys):
    """Its code cannot be read, so the chunk records, which name it too, decide: kept when
    they name this code, refused, naming the function, when one names other code."""
    path, out, grid = metric_sweep(tmp_path, user_module, 2)
    manifest = out / "sweep.json"
    m = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**m, "code": "damaged"}))
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"{manifest}: damaged sweep manifest (its code field is damaged)"
                             "; rebuilt it: 2 chunk records in"), err
    assert json.loads(manifest.read_text())["code"] == grid.code
    manifest.write_text(json.dumps({**m, "code": "damaged"}))
    user_module("code_metric", METRIC_SRC.replace(*EDITS["code_metric"]))
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a chunk record of other code" in err, err


@pytest.mark.parametrize("part", ["fastsim", "fastsim_sha256", "user"])
def test_a_manifest_naming_other_code_than_every_record_is_rebuilt_from_them(
        user_module, tmp_path, capsys, part):
    """A flipped byte in the manifest's code (version 0.1.0 read as 1.1.0) was refused as
    results of other code, saying to delete them, though every chunk record beside it,
    written under it, names this run's code: the records decide, as when the field does
    not parse.  A manifest naming the code its records name is an edit, and refused."""
    path, out, grid = metric_sweep(tmp_path, user_module, 2)
    manifest = out / "sweep.json"
    m = json.loads(manifest.read_text())
    other = {"fastsim": {"fastsim": "1" + grid.code["fastsim"][1:]},
             "fastsim_sha256": {"fastsim_sha256": "0" * 64},
             "user": {"user": {"code_metric:hacking_share": "0" * 64}}}[part]
    manifest.write_text(json.dumps({**m, "code": {**m["code"], **other}}))
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"{manifest}: damaged sweep manifest (its code field names other "
                             "code than every chunk record beside it, which name this "
                             "run's); rebuilt it: 2 chunk records in"), err
    assert "resumed: 2 of" in err[1], err
    assert json.loads(manifest.read_text())["code"] == grid.code
    for f in [manifest, *sorted(out.glob("cells/*/chunk-*.json"))]:  # both: an edit
        edit_json(f, lambda doc: {**doc, "code": {**doc["code"], **other}})
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "of other code than this run's" in err, err


def test_a_record_of_other_code_beside_this_codes_manifest_is_rerun(user_module, tmp_path,
                                                                    capsys):
    path, out, _ = metric_sweep(tmp_path, user_module, 2)
    rec = sorted(out.glob("cells/*/chunk-*.json"))[0]
    r = json.loads(rec.read_text())
    r["code"]["user"]["code_metric:hacking_share"] = "0" * 64
    rec.write_text(json.dumps(r))
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = capsys.readouterr().err
    assert (f"re-running 1 chunk(s) that failed verification: {rec}: unreadable, or written "
            "for another grid or by other code") in err, err
    assert json.loads(rec.read_text())["code"] == json.loads(
        (out / "sweep.json").read_text())["code"]


def test_reproduce_checks_the_code_of_every_sweep_before_writing_any(tmp_path, capsys,
                                                                      monkeypatch):
    from fastsim.resources import shipped
    from fastsim.sweep.store import SweepStore

    out = tmp_path / "r"
    grid = load_sweep(shipped("sweeps") / "noise.toml", clusters=2, seed=0)
    monkeypatch.setattr(fastsim, "__version__", "0.0.9")
    from fastsim.sweep.runner import run_sweep

    with SweepStore.open(out / "noise", grid) as store:  # as an older fastsim wrote it
        run_sweep(grid, store, progress=False, max_chunks=1)
    monkeypatch.undo()
    before = files(out)
    before.pop(Path("noise/sweep.lock"))  # held while reproduce runs: the lock's own line
    assert main(["reproduce", "--clusters", "2", "--out", str(out), "--no-figures",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "noise/sweep.json: the results in" in err and "fastsim 0.0.9" in err, err
    # the directory to delete is OUT, all of it: 'delete the old one' after naming OUT/noise
    # was read as OUT/noise, and deleting it moved the refusal to the next sweep in OUT
    assert err.endswith(f"use a new --out directory, or delete the whole of {out} (not one "
                        "sweep in it) to compute them again with this code"), err
    after = files(out)
    after.pop(Path("noise/sweep.lock"))
    assert after == before and sorted(p.name for p in out.iterdir()) == ["noise"]


@pytest.mark.parametrize("field", ["code", "grid"])
def test_a_damaged_manifests_values_are_named_in_one_short_line(tmp_path, capsys, field):
    """A version (or a name, a source, a grid value) read from a damaged manifest went
    into the message as it was: a line break there made two lines, a megabyte a megabyte
    of message."""
    path, out = tmp_path / "s.toml", tmp_path / "out"
    path.write_text(sweep_text(None))
    interrupted(path, out, 1)
    damaged = "9.9\nTraceback (most recent call last):" + "x" * (1 << 20)
    edit_json(out / "sweep.json", lambda m: {
        **m, **({"code": {**m["code"], "fastsim": damaged}} if field == "code" else
                {"grid_hash": damaged, "name": damaged, "source": damaged,
                 "grid": {**m["grid"], "seed": damaged}})})
    if field == "code":  # the record too: a manifest naming other code than its records is
        # rebuilt from them (test_a_manifest_naming_other_code_than_every_record_is_rebuilt)
        for rec in out.glob("cells/*/chunk-*.json"):
            edit_json(rec, lambda r: {**r, "code": {**r["code"], "fastsim": damaged}})
    before = files(out)
    capsys.readouterr()
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and len(err) < 1000, err[:2000]
    assert ("they were computed by fastsim 9.9\\nTraceback (most recent call last):xxx"
            if field == "code" else "seed: 9.9\\nTraceback") in err, err
    assert files(out) == before


def test_a_code_that_does_not_name_the_grids_user_functions_is_damaged(user_module, tmp_path,
                                                                        capsys):
    """A manifest's or record's code that names none of the metric's source was taken for
    this code's, the metric unchecked: after an edit, the chunk of such a record was pooled
    with the edited metric's.  The cells name their user functions, so another set is
    damage: the manifest is rebuilt from the records, which name the edit."""
    path, out, grid = metric_sweep(tmp_path, user_module, 2)
    without_user = lambda doc: {**doc, "code": {**doc["code"], "user": {}}}  # noqa: E731
    edit_json(out / "sweep.json", without_user)
    edit_json(sorted(out.glob("cells/*/chunk-*.json"))[0], without_user)
    user_module("code_metric", METRIC_SRC.replace(*EDITS["code_metric"]))
    capsys.readouterr()
    assert sweep(path, out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(
        f"fastsim sweep: error: {out}/sweep.json: damaged sweep manifest (its code field is "
        "damaged), and ") and ("is a chunk record of other code than this run's: "
                               "code_metric:hacking_share has been edited") in err, err


def test_a_manifest_of_another_grid_with_no_result_under_it_is_rewritten(tmp_path, capsys):
    """A manifest of another grid of the same code with nothing under cells/ (a sweep
    stopped before its first chunk, then given another --clusters) was refused as "written
    for a different grid", and said to delete results that did not exist, where one of
    other code was rewritten.  Rewritten too now, in one line; with a result, refused."""
    from fastsim.errors import ConfigError
    from fastsim.sweep.store import SweepStore

    path = tmp_path / "s.toml"
    path.write_text(sweep_text(None))
    out = tmp_path / "out"
    interrupted(path, out, 0)
    other = load_sweep(path, clusters=4)
    capsys.readouterr()
    with SweepStore.open(out, other):
        pass
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"{out}/sweep.json was written for a different grid (hash "), err
    assert err[0].endswith(": clusters: 6 -> 4; no result was written under it: rewrote it "
                           "for this grid"), err
    assert json.loads((out / "sweep.json").read_text())["grid_hash"] == other.hash
    (out / "cells" / "cell=x").mkdir(parents=True)  # any file there is a result's
    (out / "cells" / "cell=x" / "chunk-0000.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"was written for a different grid .*Use a new "
                       r"--out directory, or delete the old one to start over\.$"):
        SweepStore.open(out, load_sweep(path))


def _with_manifest(tmp_path, manifest: str):
    """``(out, grid)``: ``out`` holding only a manifest of ``manifest`` ("other grid",
    "other code" or "none", no manifest) for a small sweep file's ``grid``."""
    from fastsim.sweep.store import SweepStore

    path = tmp_path / "s.toml"
    path.write_text(sweep_text(None))
    out = tmp_path / "out"
    grid = load_sweep(path)
    if manifest != "none":
        with SweepStore.open(out, load_sweep(path, clusters=4) if manifest == "other grid"
                             else grid):
            pass
    if manifest == "other code":
        edit_json(out / "sweep.json", lambda d: {**d, "code": {**d["code"],
                                                              "fastsim_sha256": "0" * 64}})
    return out, grid


@pytest.mark.parametrize("manifest", ["other grid", "other code", "none"])
def test_a_cells_folder_holding_no_file_is_no_result(tmp_path, capsys, manifest):
    """Another grid's or other code's manifest beside a cells/ of empty folders (a run
    stopped as it made a cell's folder, or made by hand) was refused as "holds files that
    are not a sweep's (cells)", and with no manifest as holding "sweep results" no record
    names.  Folders without a file are no result: removed, the manifest written for this
    grid, said in one line; only once the directory is held (check_manifest reads only)."""
    from fastsim.sweep.store import SweepStore

    out, grid = _with_manifest(tmp_path, manifest)
    (out / "cells" / "cell=x" / "deeper").mkdir(parents=True)
    (out / "cells" / "cell=y").mkdir()
    assert SweepStore.check_manifest(out, grid) is None and (out / "cells" / "cell=x").is_dir()
    capsys.readouterr()
    with SweepStore.open(out, grid):
        pass
    err = capsys.readouterr().err.strip().splitlines()
    said = f"{out}/cells holds folders but no file: removed them"
    assert len(err) == 1 and said in err[0], err
    assert not (out / "cells").exists()
    assert json.loads((out / "sweep.json").read_text())["grid_hash"] == grid.hash


@pytest.mark.parametrize("manifest", ["other grid", "other code"])
def test_aggregated_tables_are_results_whatever_the_manifest_names(tmp_path, manifest):
    """A manifest of other code beside its aggregated tables (cells/ deleted once
    aggregated) was rewritten for this run as holding "no result", and the sweep then
    replaced that code's tables; another grid's is refused the same way."""
    from fastsim.errors import ConfigError
    from fastsim.sweep.store import SweepStore

    out, grid = _with_manifest(tmp_path, manifest)
    (out / "summary.parquet").write_bytes(b"the old tables")
    with pytest.raises(ConfigError, match="(?i)use a new --out directory"):
        SweepStore.open(out, grid)
    assert (out / "summary.parquet").read_bytes() == b"the old tables"


@pytest.mark.parametrize("module", ["code_metric", "code_policy"])
def test_a_manifest_with_no_result_under_it_takes_the_edited_code(user_module, tmp_path,
                                                                  capsys, monkeypatch, module):
    """A sweep stopped before its first chunk was written (Ctrl-C while its kernels
    compiled, or a user function failing past the first cluster, which the trial runs)
    left its manifest only; once the function was edited, the same command was refused
    as "the results in OUT are of other code", though no result existed."""
    path = tmp_path / "s.toml"
    path.write_text(sweep_text(module))
    out = tmp_path / "out"
    set_code(module, monkeypatch, user_module, edited=False)
    interrupted(path, out, 0)
    assert not list(out.glob("cells/*/*")), "the interruption wrote a chunk"
    set_code(module, monkeypatch, user_module, edited=True)
    capsys.readouterr()
    assert sweep(path, out) == 0
    err = own_lines(capsys.readouterr().err)  # the edited policy compiles: said first
    assert err[0].startswith(f"{out}/sweep.json names other code than this run's ("), err
    assert err[0].endswith("and no result was written under it; rewrote it for this run"), err
    assert json.loads((out / "sweep.json").read_text())["code"] == load_sweep(path).code
