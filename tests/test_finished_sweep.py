"""Every reader of a finished sweep (fastsim figures, read_summary) verifies it first:
a manifest edited by hand or a results file moved is refused in one line naming the
file, exit 2, before anything is written; the sweep run again repairs it."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import one_line
from fastsim.cli import main
from fastsim.errors import ConfigError
from fastsim.sweep.aggregate import read_summary

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished sweep of four cells (k and policy), and its sweep file."""
    tmp = tmp_path_factory.mktemp("finished")
    path = tmp / "kp.toml"
    path.write_text('name = "kp"\nclusters = 3\nchunk = 3\nseed = 0\n[base]\nscheduler = '
                    '"srtf_est"\nn_jobs = 30\n[axes]\nk = [1, 2]\n'
                    'policy = ["evalstop", "stop_at:f=0.65"]\n')
    assert main(["sweep", str(path), "--out", str(tmp / "kp"), "--no-progress"]) == 0
    return tmp


def _edited(m):
    m["format"] = "3"


def _axis_value(m):  # k = 2 read as k = 3 by the figure's colours and labels
    for c in m["grid"]["cells"]:
        if c["config"]["policy"].get("k") == 2:
            c["config"]["policy"]["k"] = 3


def _cell_list(m):
    m["cells"].pop()


def _axes(m):
    m["axes"] = ["sigma", "policy"]


def _swapped(d):
    """The per-cluster results of two cells exchanged."""
    a, b = sorted((d / "cells").iterdir())[1:3]
    tmp = d / "moved.parquet"
    (a / "chunk-0000.parquet").rename(tmp)
    (b / "chunk-0000.parquet").rename(a / "chunk-0000.parquet")
    tmp.rename(b / "chunk-0000.parquet")
    return f"{a / 'chunk-0000.parquet'}: checksum mismatch (damaged or replaced)"


EDITS = {
    "format as text": (_edited, "damaged (its format field, '3', is not an integer 1 to 3)"),
    "an axis value": (_axis_value, "damaged (its grid is not the one its grid_hash"),
    "the cell list": (_cell_list, "damaged (its cells are not its grid's cells"),
    "the axes": (_axes, "damaged (its axes field, ['sigma', 'policy'], is not the axes of "
                        "cells.parquet"),
}


def _copy(finished, tmp_path, edit):
    d = tmp_path / "kp"
    shutil.copytree(finished / "kp", d)
    if edit is _swapped:
        return d, _swapped(d)
    m = json.loads((d / "sweep.json").read_text())
    edit(m)
    (d / "sweep.json").write_text(json.dumps(m, indent=1))
    return d, f"{d / 'sweep.json'}: "


@pytest.mark.parametrize("what", [*EDITS, "a results file swapped between two cells"])
def test_an_edited_or_moved_finished_sweep_is_refused_by_every_reader(finished, tmp_path,
                                                                      capsys, what):
    """Each was drawn from (and its summary read) as if the sweep had written it."""
    edit, why = EDITS.get(what, (_swapped, ""))
    d, where = _copy(finished, tmp_path, edit)
    needle = where + why
    one_line(capsys, ["figures", str(d), "--out", str(tmp_path / "f"), "--formats", "png"],
             needle)
    assert not (tmp_path / "f").exists()
    with pytest.raises(ConfigError, match="allowed: a sweep's --out directory") as refused:
        read_summary(d)
    assert needle in str(refused.value)


@pytest.mark.parametrize("what", [*EDITS, "a results file swapped between two cells"])
def test_the_sweep_run_again_repairs_what_its_readers_refuse(finished, tmp_path, what):
    """The refusal says to run the sweep again, and that run's aggregation writes the
    manifest (its axes and cells among it) from the grid."""
    d, _ = _copy(finished, tmp_path, EDITS.get(what, (_swapped, ""))[0])
    assert main(["sweep", str(finished / "kp.toml"), "--out", str(d), "--no-progress"]) == 0
    assert main(["figures", str(d), "--out", str(tmp_path / "f"), "--formats", "png"]) == 0
    assert read_summary(d).equals(read_summary(finished / "kp"))


def test_a_sweep_file_with_its_axes_reordered_is_no_damage(finished, tmp_path, capsys):
    """The same grid (its hash leaves out the order), run into the same directory: it was
    called a damaged manifest, whose axes and cells fields were not the sweep file's."""
    shutil.copytree(finished / "kp", tmp_path / "kp")
    path = tmp_path / "pk.toml"
    path.write_text((finished / "kp.toml").read_text().replace(
        'k = [1, 2]\npolicy = ["evalstop", "stop_at:f=0.65"]\n',
        'policy = ["evalstop", "stop_at:f=0.65"]\nk = [1, 2]\n'))
    capsys.readouterr()
    assert main(["sweep", str(path), "--out", str(tmp_path / "kp"), "--no-progress"]) == 0
    assert "damaged" not in "".join(capsys.readouterr())
    assert json.loads((tmp_path / "kp" / "sweep.json").read_text())["axes"] == ["policy", "k"]


def test_the_api_reads_the_summary_it_aggregated_without_verifying_every_chunk_again(
        finished, tmp_path, monkeypatch):
    """fastsim.sweep() aggregated (reading every chunk, verified), then read_summary read
    and hashed every chunk once more (about 1 ms each)."""
    import fastsim
    from fastsim.sweep import finished as check

    shutil.copytree(finished / "kp", tmp_path / "kp")
    passes = []
    real = check._check_chunks
    monkeypatch.setattr(check, "_check_chunks", lambda *a: passes.append(a) or real(*a))
    summary = fastsim.sweep(finished / "kp.toml", tmp_path / "kp", progress=False)
    assert passes == []
    assert summary.equals(read_summary(finished / "kp"))
