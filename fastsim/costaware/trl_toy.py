"""A tiny, offline GRPO task for ``fastsim.costaware.trl``: nothing is downloaded.

* ``char_tokenizer()``: a character-level ``PreTrainedTokenizerFast`` over ``VOCAB`` built
  in memory (left padding, ``<pad>`` and ``<eos>``);
* ``tiny_causal_lm(tokenizer, seed)``: a randomly initialised 2-layer GPT-2;
* prompts ``"say: LETTERS ....."`` (``PROMPTS``, shipped with the package): the dots only
  vary the prompt's length; ``letter_reward`` scores a completion by the share of its
  characters among ``LETTERS`` (0 for an empty completion), which does not favour long or
  short completions;
* ``gradnorm_study``: the |A|-vs-per-sample-gradient-norm premise on this model.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from fastsim.stats import cluster_corr_ci

VOCAB = list("abcdefghsy:. ")
PROMPTS = Path(__file__).with_name("trl_prompts.jsonl")  # the 32 prompts of the toy task
SPECIAL = ("<pad>", "<eos>")


def char_tokenizer():
    """Character-level tokenizer over ``VOCAB`` (unknown characters are an error upstream)."""
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate((*SPECIAL, *VOCAB))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                   padding_side="left", truncation_side="left")


def tiny_causal_lm(tokenizer, seed: int = 0, n_positions: int = 64):
    """A randomly initialised GPT-2 (2 layers, width 32, no dropout: a rollout's gradient
    is a function of the rollout) for ``tokenizer``'s vocabulary."""
    import torch
    from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=32, n_layer=2,
                     n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     bos_token_id=tokenizer.eos_token_id,
                     eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = GPT2LMHeadModel(cfg)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id)
    return model


def read_prompts(path) -> list[dict]:
    """The prompt set: one JSON object with a ``prompt`` string per line, each a toy-task
    prompt (``"say: LETTERS ....."``, characters of ``VOCAB`` only: the tokenizer would
    read any other as padding, and ``letter_reward`` needs the letters).  A malformed line
    is a ``ConfigError`` naming the file and the line, before any model is built."""
    from fastsim.errors import ConfigError
    from fastsim.io import JSONError, loads_json, read_text  # refuses a pipe or device unread

    path = Path(path)
    allowed = ('allowed: {"prompt": "say: LETTERS ....."}, characters from '
               f"{''.join(VOCAB)!r} only")
    out = []
    for n, line in enumerate(read_text(path, "JSONL prompt set").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except JSONError as exc:
            said = f"allowed: {exc.allowed}" if exc.allowed else allowed
            raise ConfigError(f"{path}:{n}: invalid JSON ({exc.msg}{exc.at(line=False)}); "
                              f"{said}") from None
        prompt = row.get("prompt") if isinstance(row, dict) else None
        if not isinstance(prompt, str):
            raise ConfigError(f"{path}:{n}: field 'prompt': {prompt!r} is not a string; {allowed}")
        bad = sorted(set(prompt) - set(VOCAB))
        if bad or len(prompt.split()) < 2:
            why = f"characters {''.join(bad)!r} are not in the vocabulary" if bad else \
                "no letters after the first word"
            raise ConfigError(f"{path}:{n}: field 'prompt': {prompt!r}: {why}; {allowed}")
        out.append({"prompt": prompt})
    if not out:
        raise ConfigError(f"{path}: no prompts; {allowed}, one per line")
    return out


def letter_reward(prompts, completions, **_) -> list[float]:
    """Share of a completion's characters among the prompt's letters (TRL reward signature)."""
    out = []
    for prompt, completion in zip(prompts, completions):
        letters = set(prompt.split()[1])
        out.append(sum(ch in letters for ch in completion) / len(completion) if completion
                   else 0.0)
    return out


def gradnorm_study(trainer, batches: int = 4) -> pl.DataFrame:
    """Per rollout: ``|A|``, cost and gradient norms of the GRPO loss term, ``batches``
    generation batches of ``trainer`` (a ``CostAwareGRPOTrainer`` with ``costaware=None``).

    Columns: ``batch``, ``group`` (the prompt whose ``num_generations`` rollouts share it
    and its advantages' normalisation, numbered across batches), ``abs_advantage``,
    ``prompt_tokens``, ``completion_tokens``,
    ``logprob_grad_norm_{grpo,dapo}`` (``||grad m_i||``) and ``grad_norm_{grpo,dapo}``
    (``|A_i| ||grad m_i||``, the per-sample gradient norm).
    """
    import torch

    from fastsim.costaware.trl import sequence_logprob_grad_norms

    trainer.model.train()
    loader = iter(trainer.get_train_dataloader())
    rows = []
    for b in range(batches):
        with torch.no_grad():
            batch = trainer._generate_and_score_completions(next(loader))
        a = batch["advantages"].abs().double().cpu().numpy()
        # TRL lays out each prompt's rollouts next to each other (its advantages are
        # normalised over rows reshaped to (-1, num_generations))
        per = trainer.num_generations
        group = b * (a.size // per) + np.arange(a.size) // per
        row = {"batch": np.full(a.size, b), "group": group, "abs_advantage": a,
               "prompt_tokens": batch["prompt_mask"].sum(1).cpu().numpy(),
               "completion_tokens": batch["completion_mask"].sum(1).cpu().numpy()}
        # grpo's term is dapo's divided by the completion length (a constant per rollout)
        g_sum = sequence_logprob_grad_norms(trainer.model, batch, "dapo")
        for loss_type, g in (("dapo", g_sum),
                             ("grpo", g_sum / np.maximum(row["completion_tokens"], 1))):
            row[f"logprob_grad_norm_{loss_type}"] = g
            row[f"grad_norm_{loss_type}"] = a * g
        rows.append(pl.DataFrame(row))
    return pl.concat(rows)


def toy_trainer(prompts_path, out_dir, costaware=None, steps: int = 4, prompts: int = 4,
                generations: int = 4, loss_type: str = "grpo", seed: int = 0, **extra):
    """A ``CostAwareGRPOTrainer`` on the toy task (CPU, fp32, no dropout, nothing downloaded;
    no gradient checkpointing, which TRL turns on by default and ``torch.func`` cannot run)."""
    from datasets import Dataset
    from trl import GRPOConfig

    from fastsim.costaware.trl import CostAwareGRPOTrainer

    tok = char_tokenizer()
    extra = {"save_strategy": "no", **extra}  # a test of resuming saves checkpoints
    args = GRPOConfig(output_dir=str(out_dir), max_steps=steps,
                      per_device_train_batch_size=prompts * generations,
                      num_generations=generations, max_completion_length=24, learning_rate=1e-3,
                      logging_steps=1, report_to=[], use_cpu=True, seed=seed, disable_tqdm=True,
                      dataloader_num_workers=0, loss_type=loss_type, bf16=False,
                      gradient_checkpointing=False, **extra)
    return CostAwareGRPOTrainer(
        model=tiny_causal_lm(tok, seed=seed), args=args, reward_funcs=letter_reward,
        train_dataset=Dataset.from_list(read_prompts(prompts_path)), processing_class=tok,
        costaware=costaware)


def gradnorm_correlations(rollouts: pl.DataFrame) -> pl.DataFrame:
    """Correlations over rollouts: ``|A|`` vs the per-sample gradient norm, and the
    advantage-free factor ``||grad m_i||`` vs ``|A|`` and vs completion tokens, each with
    a 95% interval over prompt groups (``stats.cluster_corr_ci``; ``n`` counts groups)."""
    groups = rollouts["group"].to_numpy()
    a = rollouts["abs_advantage"].to_numpy()
    n_tok = rollouts["completion_tokens"].to_numpy().astype(float)
    rows = []
    for loss_type in ("grpo", "dapo"):
        g = rollouts[f"grad_norm_{loss_type}"].to_numpy()
        m = rollouts[f"logprob_grad_norm_{loss_type}"].to_numpy()
        for name, x, y in ((f"|A| vs grad norm ({loss_type})", a, g),
                           (f"|A| vs ||grad m|| ({loss_type})", a, m),
                           (f"completion tokens vs ||grad m|| ({loss_type})", n_tok, m)):
            for rank in (False, True):
                e = cluster_corr_ci(x, y, groups, rank)
                rows.append({"pair": name, "kind": "spearman" if rank else "pearson",
                             "r": e.mean, "lo": e.lo, "hi": e.hi, "n": e.n,
                             "rollouts": len(x)})
    return pl.DataFrame(rows)
