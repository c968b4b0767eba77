"""The toy GRPO task's prompt set (``--prompts``) is validated line by line, before any
model is built; no optional extra is needed to read it."""
import pytest

from fastsim.costaware.trl_toy import PROMPTS, read_prompts
from fastsim.errors import ConfigError


def test_the_shipped_prompt_set_reads():
    assert len(read_prompts(PROMPTS)) == 32


@pytest.mark.parametrize("text, message", [
    ('{"prompt": "say: abc ..."}\n{"prompt": "say: ab"\n', r"prompts.jsonl:2: invalid JSON"),
    ('{"text": "say: abc"}\n', r"prompts.jsonl:1: field 'prompt': None is not a string"),
    ('["say: abc"]\n', r"prompts.jsonl:1: field 'prompt': None is not a string"),
    ('{"prompt": 3}\n', r"prompts.jsonl:1: field 'prompt': 3 is not a string"),
    # read as padding by the character tokenizer, and letter_reward's IndexError
    ('{"prompt": "say: xyz ..."}\n', r"prompts.jsonl:1: field 'prompt': .*characters 'xz'"),
    ('{"prompt": "say:"}\n', r"prompts.jsonl:1: field 'prompt': 'say:': no letters"),
    ("\n\n", r"prompts.jsonl: no prompts"),
    # json recurses once per level: a RecursionError traceback
    ('{"prompt": "say: abc ..."}\n' + "[" * 100_000 + "]" * 100_000 + "\n",
     r"prompts.jsonl:2: invalid JSON \(nested too deeply\)"),
])
def test_a_malformed_prompt_set_is_one_line_naming_the_line(tmp_path, text, message):
    path = tmp_path / "prompts.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as err:
        read_prompts(path)
    assert "allowed:" in str(err.value) and "\n" not in str(err.value)
