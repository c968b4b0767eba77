"""The toy GRPO task's prompt set (``--prompts``) is validated line by line, before any
model is built; no optional extra is needed to read it."""
import numpy as np
import polars as pl
import pytest

from fastsim.costaware.trl_toy import PROMPTS, gradnorm_correlations, read_prompts
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


def _grouped_rollouts(rng, groups=24, per=4):
    """Rollouts in prompt groups: every column is mostly its group's value, the groups
    drawn independently, so every true correlation is 0."""
    def column():
        return np.repeat(rng.lognormal(size=groups), per) * rng.lognormal(0.0, 0.1, groups * per)
    return pl.DataFrame({"group": np.repeat(np.arange(groups), per), "abs_advantage": column(),
                         "completion_tokens": np.round(10 * column()),
                         **{f"{k}_{t}": column() for k in ("grad_norm", "logprob_grad_norm")
                            for t in ("grpo", "dapo")}})


def test_gradnorm_correlations_resample_prompt_groups_not_rollouts():
    # rollouts of one prompt share it: an interval over 96 rollouts treated as independent
    # (Fisher-z, se 1/sqrt(93)) held the true 0 in about 70% of such data sets
    rng = np.random.default_rng(3)
    held, total = 0, 0
    for _ in range(40):
        table = gradnorm_correlations(_grouped_rollouts(rng))
        assert set(table["n"]) == {24} and set(table["rollouts"]) == {96}
        held += int(((table["lo"] <= 0) & (table["hi"] >= 0)).sum())
        total += table.height
    assert held / total >= 0.88, held / total
