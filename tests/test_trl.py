"""Cost-Aware GRPO inside TRL's own GRPOTrainer (tiny random GPT-2, CPU, no downloads).

Run with ``pytest -m trl``: needs the optional extra ``fastsim[trl]``.  Imports of torch
and trl happen inside the tests, so a default run (which deselects ``trl``) neither
imports nor skips anything here.
"""
import itertools

import numpy as np
import pytest

from fastsim.costaware.trl_toy import PROMPTS
from fastsim.errors import ConfigError

pytestmark = pytest.mark.trl


def _modules():
    pytest.importorskip("trl")
    torch = pytest.importorskip("torch")
    from fastsim.costaware import trl as ca
    from fastsim.costaware import trl_toy as toy
    torch.set_num_threads(1)  # tiny model: threads only add contention
    return torch, ca, toy


def _trainer(tmp_path, costaware=None, prompts=4, generations=4, steps=4, loss_type="grpo",
             **extra):
    _, _, toy = _modules()
    return toy.toy_trainer(PROMPTS, tmp_path / "run", costaware, steps=steps, prompts=prompts,
                           generations=generations, loss_type=loss_type, **extra)


def test_tokens_per_update_fall_against_plain_grpo(tmp_path):
    _, ca, _ = _modules()
    plain = _trainer(tmp_path / "plain")
    plain.train()
    cost_aware = _trainer(tmp_path / "ca", costaware=ca.CostAware(budget=8, lam=0.1, seed=0))
    cost_aware.train()
    p, c = plain.costaware_history, cost_aware.costaware_history
    assert len(p) == len(c) == 4
    # same seed, same first generation batch: the comparison is paired
    assert p[0]["tokens_generated"] == c[0]["tokens_generated"]
    tokens_plain = sum(r["tokens_update"] for r in p)
    tokens_ca = sum(r["tokens_update"] for r in c)
    print(f"\ntokens per update, 4 steps of 16 rollouts (4 prompts x 4): plain GRPO "
          f"{tokens_plain / 4:.1f}, cost-aware (8 draws) {tokens_ca / 4:.1f}")
    assert tokens_ca < 0.6 * tokens_plain
    # equal batch size: 8 cost-aware draws against the expected tokens of 8 rollouts drawn
    # uniformly from the same generation batches
    uniform_8 = sum(8 * r["tokens_generated"] / r["rollouts_generated"] for r in c)
    print(f"equal batch size (8 rollouts): uniform {uniform_8 / 4:.1f}, cost-aware "
          f"{tokens_ca / 4:.1f} tokens per update ({1 - tokens_ca / uniform_8:.1%} fewer)")
    assert tokens_ca < uniform_8
    for r in c:
        assert r["rollouts_update"] == 8 and 1.0 <= r["ess"] <= 8.0
        assert 0.0 <= r["zero_adv_share"] <= 1.0
    logged = [e for e in cost_aware.state.log_history if "costaware/tokens_update" in e]
    assert len(logged) == 4 and {"costaware/ess", "costaware/zero_adv_share"} <= set(logged[0])
    assert [e["costaware/tokens_update"] for e in logged] == [r["tokens_update"] for r in c]


def _grad(trainer, batch):
    trainer.model.zero_grad()
    trainer._compute_loss(trainer.model, batch).backward()
    return np.concatenate([q.grad.reshape(-1).double().numpy()
                           for q in trainer.model.parameters() if q.grad is not None])


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
def test_weighted_loss_is_unbiased_exhaustively(tmp_path, loss_type):
    """E over every ordered pair of draws of the weighted subset gradient == full gradient."""
    torch, ca, _ = _modules()
    from fastsim.costaware.grpo import cost_aware_probs

    trainer = _trainer(tmp_path, prompts=2, generations=2, steps=1, loss_type=loss_type)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    with torch.no_grad():
        batch = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    adv = batch["advantages"].double().numpy()
    cost = ca.rollout_costs(batch).double().numpy()
    assert (adv != 0).any() and np.unique(cost).size > 1
    p = cost_aware_probs(adv, cost, lam=0.2)
    n, draws = adv.size, 2
    full = _grad(trainer, batch)
    expected = np.zeros_like(full)
    unweighted = np.zeros_like(full)
    for idx in itertools.product(range(n), repeat=draws):
        prob = float(np.prod(p[list(idx)]))
        expected += prob * _grad(trainer, ca.keep_rollouts(batch, idx, 1.0 / (n * p[list(idx)])))
        unweighted += prob * _grad(trainer, ca.keep_rollouts(batch, idx, np.ones(draws)))
    scale = np.abs(full).max()
    assert np.abs(expected - full).max() < 1e-5 * scale
    # the test can fail: without the weights the same draws are biased
    assert np.abs(unweighted - full).max() > 1e-2 * scale


def test_token_budget_sets_the_number_of_draws(tmp_path):
    _, ca, _ = _modules()
    trainer = _trainer(tmp_path, costaware=ca.CostAware(token_budget=200.0, lam=0.1), steps=2)
    trainer.train()
    for r in trainer.costaware_history:
        assert 1 <= r["rollouts_update"] <= 16
        # B = floor(200 / C(p)): the update's expected tokens stay within the budget
        assert r["tokens_update"] < 200.0 * 2


def test_bad_settings_are_refused_before_training(tmp_path):
    _, ca, _ = _modules()
    with pytest.raises(ConfigError, match="exactly one of budget"):
        ca.CostAware()
    with pytest.raises(ConfigError, match="lam"):
        ca.CostAware(budget=4, lam=1.5)
    with pytest.raises(ConfigError, match="loss_type='bnpo'"):
        _trainer(tmp_path, costaware=ca.CostAware(budget=8), loss_type="bnpo")
    with pytest.raises(ConfigError, match="beta"):
        _trainer(tmp_path, costaware=ca.CostAware(budget=8), beta=0.1)


def test_per_sample_gradient_norms_match_trl_loss_one_rollout_at_a_time(tmp_path):
    """``torch.func`` norms == the norm of TRL's own loss gradient on a one-rollout batch
    whose advantage is set to 1 (``grpo``: the loss is ``-mean_t log p``)."""
    torch, ca, _ = _modules()
    trainer = _trainer(tmp_path, prompts=2, generations=2, steps=1)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    with torch.no_grad():
        batch = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    got = ca.sequence_logprob_grad_norms(trainer.model, batch, "grpo")
    unit = {**batch, "advantages": torch.ones_like(batch["advantages"])}
    for i in range(got.size):
        norm = np.linalg.norm(_grad(trainer, ca.keep_rollouts(unit, [i], [1.0])))
        assert got[i] == pytest.approx(norm, rel=1e-4)


@pytest.mark.parametrize("kwargs, message", [
    # accepted before, then read as a number (True as 1) or failed mid-training
    (dict(token_budget=True), "token_budget=True is invalid; allowed: a number"),
    (dict(token_budget="200"), "token_budget='200' is invalid; allowed: a number"),
    (dict(budget=4, lam=True), "lam=True is invalid; allowed: a number"),
    (dict(budget=4, lam="0.5"), "lam='0.5' is invalid; allowed: a number"),
    (dict(budget=4, floor=True), "floor=True is invalid; allowed: a number"),
    # beyond the RNG's 64-bit seed: OverflowError at the first generation batch
    (dict(budget=4, seed=2**63), "seed=9223372036854775808 is invalid; allowed: an integer "
     "from 0 to 2"),
])
def test_costaware_settings_of_the_wrong_type_are_refused_at_construction(kwargs, message):
    _, ca, _ = _modules()
    with pytest.raises(ConfigError, match=message):
        ca.CostAware(**kwargs)
    ca.CostAware(budget=4, seed=2**63 - 1)  # the largest seed is fine


def test_costaware_without_a_grpo_config_is_refused_before_training():
    # args omitted (GRPOTrainer would build its default config): an IndexError before
    _, ca, _ = _modules()
    for kwargs in ({}, {"args": None}):
        with pytest.raises(ConfigError, match="needs args=GRPOConfig"):
            ca.CostAwareGRPOTrainer("unused-model", lambda **kw: [], costaware=ca.CostAware(budget=4),
                                    **kwargs)


def test_each_process_draws_with_its_own_process_index(tmp_path, monkeypatch):
    _, ca, _ = _modules()
    seen = []
    draw = ca.cost_aware_draw

    def spy(*args, **kwargs):
        seen.append(kwargs.get("process"))
        return draw(*args, **kwargs)

    monkeypatch.setattr(ca, "cost_aware_draw", spy)
    trainer = _trainer(tmp_path, costaware=ca.CostAware(budget=8), steps=1)
    trainer.train()
    assert seen and set(seen) == {trainer.accelerator.process_index}


def _draw_steps(ca, monkeypatch):
    """Spy on the trainer's draws: (RNG step, drawn indices) of each generation batch."""
    import inspect

    seen = []
    draw = ca.cost_aware_draw
    signature = inspect.signature(draw)

    def spy(*args, **kwargs):
        out = draw(*args, **kwargs)
        seen.append((signature.bind(*args, **kwargs).arguments["step"], out.indices.tolist()))
        return out

    monkeypatch.setattr(ca, "cost_aware_draw", spy)
    return seen


def test_a_resumed_run_continues_the_draws_counter(tmp_path, monkeypatch):
    """The RNG counter of the draws is saved with each checkpoint: a run resumed at step 2
    draws generation batches 2 and 3 with the uninterrupted run's uniforms (it restarted at
    0 before, reusing the first batches' uniforms)."""
    _, ca, _ = _modules()
    costaware = ca.CostAware(budget=8, lam=0.1, seed=0)
    seen = _draw_steps(ca, monkeypatch)
    whole = _trainer(tmp_path / "whole", costaware=costaware, save_strategy="steps", save_steps=2)
    whole.train()
    assert [s for s, _ in seen] == [0, 1, 2, 3]
    checkpoint = tmp_path / "whole" / "run" / "checkpoint-2"
    assert (checkpoint / ca.STATE_FILE).is_file()

    uninterrupted = list(seen)
    seen.clear()
    resumed = _trainer(tmp_path / "resumed", costaware=costaware)
    resumed.train(resume_from_checkpoint=str(checkpoint))
    assert seen == uninterrupted[2:]
    assert [r["batch"] for r in resumed.costaware_history] == [2, 3]
    assert resumed.costaware_history == whole.costaware_history[2:]

    # a checkpoint without the file (written by TRL's own GRPOTrainer): the count is
    # derived from the trainer state, one generation batch per optimizer step here
    (checkpoint / ca.STATE_FILE).unlink()
    seen.clear()
    with pytest.warns(UserWarning, match=ca.STATE_FILE):
        _trainer(tmp_path / "legacy", costaware=costaware).train(
            resume_from_checkpoint=str(checkpoint))
    assert [s for s, _ in seen] == [2, 3]

    # a damaged file is one line naming it, not a traceback from inside train()
    # (4,096 nested brackets: deeper than json parses, a RecursionError traceback before)
    for damaged in ("", "{", '{"generation_batches": -1}', '{"generation_batches": "2"}', "[]",
                    "[" * 4096):
        (checkpoint / ca.STATE_FILE).write_text(damaged)
        with pytest.raises(ConfigError, match=f"{ca.STATE_FILE}: field 'generation_batches'"):
            _trainer(tmp_path / "damaged", costaware=costaware).train(
                resume_from_checkpoint=str(checkpoint))


def test_a_budget_above_the_rollouts_is_refused_before_trl_loads_anything(tmp_path):
    # budget=10^12 was accepted and allocated its draws (8 TB of indices) at the first
    # generation batch, after the model had loaded
    _, ca, _ = _modules()
    from trl import GRPOConfig

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=16,
                      num_generations=4, use_cpu=True, report_to=[])
    for budget in (10**12, 17):
        with pytest.raises(ConfigError, match=f"budget={budget} is invalid; allowed: from 1 to "
                           r"per_device_train_batch_size x steps_per_generation = 16"):
            ca.CostAwareGRPOTrainer("unused-model", lambda **kw: [], args=args,
                                    costaware=ca.CostAware(budget=budget))


def test_a_huge_token_budget_draws_at_most_the_rollouts(tmp_path):
    # token_budget=1e15 asked for 1e15 / C(p) draws: a MemoryError at the first batch
    _, ca, _ = _modules()
    trainer = _trainer(tmp_path, costaware=ca.CostAware(token_budget=1e15), steps=1)
    trainer.train()
    assert [r["rollouts_update"] for r in trainer.costaware_history] == [16]
