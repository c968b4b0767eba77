"""An error echoes a bad value bounded and escaped (``fastsim.errors.one_line``): one
short line whatever the value's length, and no control character of it on the terminal."""
import numpy as np
import pytest

from fastsim.cli import main
from fastsim.config import SimConfig
from fastsim.errors import MAX_MESSAGE, MAX_WORD, ConfigError

LONG = "x" * 5000


def _error(capsys, argv) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err


@pytest.mark.parametrize("argv", [
    ["run", "--scheduler", LONG], ["run", "--policy", LONG], ["run", "--sigma", LONG],
    ["run", "--clusters", LONG],  # argparse's "invalid int value"
    ["run", "--baseline", " ".join([LONG[:50]] * 100)]])  # many words, each short
def test_a_long_value_is_echoed_cut(capsys, argv):
    err = _error(capsys, argv)
    assert len(err) < MAX_MESSAGE + 100 and " characters)..." in err, err
    assert all(len(word) <= MAX_WORD for word in err.split()), err


@pytest.mark.parametrize("value,shown", [("x\ny", "x\\ny"), ("fi\x1b[31mfo", "fi\\x1b[31mfo"),
                                         ("a\rb", "a\\rb")])
def test_control_characters_are_escaped(capsys, value, shown):
    err = _error(capsys, ["run", "--scheduler", value])
    assert shown in err and "\x1b" not in err and "\r" not in err, err


def test_the_api_message_is_bounded_too():
    with pytest.raises(ConfigError) as info:
        SimConfig.from_specs(scheduler=LONG)
    msg = str(info.value)  # the value cut to MAX_WORD, beside what is allowed
    assert len(msg) < MAX_WORD + 200 and " characters)..." in msg, msg
    assert all(len(word) <= MAX_WORD for word in msg.split()), msg
    with pytest.raises(ConfigError) as info:
        raise ConfigError(f"x={np.eye(3)!r} is invalid")  # a repr's own rows: spaces
    assert str(info.value) == ("x=array([[1., 0., 0.], [0., 1., 0.], [0., 0., 1.]]) is "
                               "invalid")
