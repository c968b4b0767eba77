"""The API's errors name its arguments, not the command line's options whose checks it
shares (``fastsim.errors.api_words``); the command line's still name the options."""
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
