"""An output path holding a control character is refused before any work, in one line
naming its option (``fastsim.values.check_path_text``): a file named with a newline or an
escape breaks every tool that lists names a line at a time."""
import os

import pytest

from fastsim.cli import main
from fastsim.errors import ConfigError

BAD = "a\nb"


@pytest.mark.parametrize("argv,option", [
    (["run", "--out", BAD + ".parquet"], "--out"),
    (["run", "--jobs-out", "x\x1b.parquet"], "--jobs-out"),
    (["replay", "logs.csv", "--out", "r\t.csv"], "--out"),
    (["replay", "logs.csv", "--summary-out", BAD + ".csv"], "--summary-out"),
    (["reproduce", "--quick", "--out", "o", "--report", BAD + ".md"], "--report"),
    (["reproduce", "--quick", "--out", "o", "--figures-dir", BAD], "--figures-dir"),
    (["costaware", "sgd", "--out", BAD], "--out"),
    (["traces", "toy-rlhf", "--out", BAD], "--out"),
    (["detectors", "--figures", BAD], "--figures"),
    (["docs-figures", "--out", BAD], "--out"),
    (["sweep", "noise", "--out", "s\x7f"], "--out")])
def test_an_output_path_with_a_control_character_is_refused(capsys, tmp_path, monkeypatch,
                                                            argv, option):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f" {option}='" in err, err
    assert "holds a control character" in err and "allowed: a path without" in err, err
    assert os.listdir(tmp_path) == []  # nothing written


def test_the_api_refuses_it_too(tmp_path, monkeypatch):
    import fastsim

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="holds a control character"):
        fastsim.sweep("noise", BAD, clusters=2)
    assert os.listdir(tmp_path) == []
