"""The API's errors name its arguments, not the command line's options whose checks it
shares (``fastsim.errors.api_words``); the command line's still name the options."""
from pathlib import Path

import pytest

import fastsim
from fastsim.cli import main
from fastsim.errors import ConfigError


@pytest.mark.parametrize("make,said", [
    (lambda d: (d / "afile").write_text(""), "out={d}/afile: exists and is not a directory"),
    (lambda d: (d / "afile").mkdir() or (d / "afile" / "x.txt").write_text(""),
     "out={d}/afile: holds files that are not a sweep's"),
])
def test_sweep_names_its_out_argument(tmp_path, capsys, make, said):
    make(tmp_path)
    with pytest.raises(ConfigError) as info:
        fastsim.sweep("noise", tmp_path / "afile", clusters=2)
    msg = str(info.value)
    assert msg.startswith(said.format(d=tmp_path)) and "--" not in msg, msg
    assert main(["sweep", "noise", "--clusters", "2", "--out", str(tmp_path / "afile")]) == 2
    assert f"error: --out {tmp_path}/afile: " in capsys.readouterr().err


def test_a_control_character_is_named_as_the_argument(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=r"^out='a\\nb' holds a control character"):
        fastsim.sweep("noise", "a\nb", clusters=2)


@pytest.mark.parametrize("out", ["{d}/--out/afile", "--out/afile", "--out", "{d}/--out", "d"])
def test_an_option_name_in_the_users_path_is_left_as_given(tmp_path, monkeypatch, out):
    """A folder named --out: the path x/--out/afile was echoed as x/out/afile."""
    monkeypatch.chdir(tmp_path)
    out = out.format(d=tmp_path)
    (tmp_path / "--out").mkdir()
    (tmp_path / out).parent.mkdir(parents=True, exist_ok=True)
    if out.endswith("afile"):
        (tmp_path / out).write_text("")
    else:
        (tmp_path / out).mkdir(exist_ok=True)
        (tmp_path / out / "x.txt").write_text("")
    with pytest.raises(ConfigError) as info:
        fastsim.sweep("noise", out, clusters=2)
    msg = str(info.value)
    assert msg.startswith(f"out={out}: ") and "--out" not in msg.replace(out, "", 1), msg
    # the prose's option in the API's word: "(use a new out directory)"
    assert "out=" not in msg[4:] and "--" not in msg.replace(out, ""), msg


def test_the_cost_aware_sweep_leaves_the_users_path_as_given(tmp_path):
    from fastsim.costaware.sweep import run_costaware_sweep

    out = tmp_path / "--out" / "afile"
    out.parent.mkdir()
    out.write_text("")
    with pytest.raises(ConfigError, match=rf"^out_dir={out}: exists and is not a directory"):
        run_costaware_sweep(Path(__file__).parents[1] / "sweeps" / "costaware_sgd.toml", out)
