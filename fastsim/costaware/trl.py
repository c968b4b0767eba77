"""Cost-Aware GRPO inside TRL's ``GRPOTrainer`` (arXiv 2604.28020; needs ``fastsim[trl]``).

``CostAwareGRPOTrainer`` is ``trl.GRPOTrainer`` with one step added after each
generation batch is scored: of the ``N`` rollouts it keeps ``B`` draws (with
replacement) for the update, sampled by ``fastsim.costaware.cost_aware_draw`` with::

    p_i = (1 - lam) q_i + lam / N,     q_i ∝ max(|A_i|, floor) / sqrt(c_i),
    c_i = prompt tokens + completion tokens of rollout i,

and multiplies each kept rollout's advantage by ``w_i = 1 / (N p_i)``.  Every loss type
accepted here is, per rollout, linear in its advantage (the PPO clip ``min(r A, clip(r) A)``
is positively homogeneous in ``A``) and averages rollouts with fixed weights, so the
weighted loss over the draws has the full batch's loss as its expectation, and so has
its gradient.  The ``dapo`` normaliser (completion tokens of the whole generation batch)
is scaled by ``B / N`` to match.  Terms that do not carry the advantage (a KL penalty,
an entropy bonus) would not be reweighted, so ``beta`` and ``entropy_coef`` must be 0.

Per generation batch it logs (to TRL's metrics and to ``trainer.costaware_history``):
tokens used by the update, tokens generated, rollouts kept, the effective sample size of
the weights ``(sum w)^2 / sum w^2`` and the share of zero-advantage rollouts.  With
``costaware=None`` it is plain GRPO that logs the same numbers (the baseline to compare).
"""
from __future__ import annotations

from dataclasses import dataclass

import json
import math
import warnings
from pathlib import Path

import numpy as np

try:
    import torch
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
    from trl import GRPOTrainer
except ModuleNotFoundError as exc:  # the extra is missing: "No module named 'torch'" alone
    # did not say that fastsim has an extra for it
    raise ImportError(f"fastsim.costaware.trl needs {exc.name}, which is not installed: pip "
                      "install 'fastsim[trl]' (the optional TRL extra)") from exc

from fastsim.costaware.grpo import cost_aware_draw, cost_aware_probs
from fastsim.costaware.sampling import check_lam, check_nonnegative
from fastsim.errors import ConfigError
from fastsim.io import JSONError, atomic_write_bytes, loads_json

#: loss types whose per-rollout term is linear in the advantage with fixed rollout weights
SUPPORTED_LOSS_TYPES = ("grpo", "dr_grpo", "dapo")
#: keys of TRL's batch dict that are not one row per rollout
_SCALARS = ("num_items_in_batch",)
#: file in each checkpoint holding the generation batches done (the draws' RNG counter)
STATE_FILE = "costaware_state.json"


@dataclass(frozen=True)
class CostAware:
    """How many rollouts of each generation batch the update keeps, and how they are drawn.

    Parameters
    ----------
    budget : int, optional
        Draws per generation batch (per process); a multiple of ``steps_per_generation``,
        at most ``N = per_device_train_batch_size * steps_per_generation`` (the rollouts
        the process generated).
    token_budget : float, optional
        Instead of ``budget``: tokens (prompt + completion) per update; the number of draws
        is ``token_budget / C(p)`` with ``C(p) = sum_i p_i c_i``, at most ``N``, rounded down
        to a multiple of ``steps_per_generation`` (at least one per step).
    lam : float in [0, 1]
        Uniform mixing: every rollout keeps probability ``>= lam / N``.
    floor : float >= 0
        Smallest ``|A|`` a rollout is scored with (0: zero-advantage rollouts are never drawn
        unless ``lam > 0``; their policy-gradient term is zero anyway).
    seed : int
        Counter-based RNG seed of the draws (coordinates: seed, data-parallel process,
        generation batch, draw).
    """

    budget: int | None = None
    token_budget: float | None = None
    lam: float = 0.1
    floor: float = 0.0
    seed: int = 0

    def __post_init__(self):
        if (self.budget is None) == (self.token_budget is None):
            raise ConfigError(f"CostAware: budget={self.budget!r} and token_budget="
                              f"{self.token_budget!r} are invalid; allowed: exactly one of "
                              "budget (rollouts per update) and token_budget (tokens per "
                              "update)")
        if self.budget is not None and (isinstance(self.budget, bool) or not isinstance(
                self.budget, (int, np.integer)) or self.budget < 1):
            raise ConfigError(f"budget={self.budget!r} is invalid; allowed: an integer >= 1")
        # numbers only: a bool or a string would pass float() here and be read as a number
        # (True as 1) or fail at the first generation batch, after the model has loaded
        for name in ("token_budget", "lam", "floor"):
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_, str, bytes)):
                raise ConfigError(f"{name}={value!r} is invalid; allowed: a number, not a "
                                  f"{type(value).__name__}")
        if self.token_budget is not None:
            check_nonnegative(self.token_budget, "token_budget", "a finite number above 0")
            if float(self.token_budget) <= 0:
                raise ConfigError(f"token_budget={self.token_budget!r} is invalid; allowed: a "
                                  "finite number above 0")
        check_lam(self.lam)
        check_nonnegative(self.floor, "floor")
        # the draws' counter-based RNG takes a signed 64-bit seed
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) \
                or not 0 <= self.seed <= 2**63 - 1:
            raise ConfigError(f"seed={self.seed!r} is invalid; allowed: an integer from 0 to "
                              "2^63-1")


def rollout_costs(batch: dict) -> torch.Tensor:
    """Prompt + completion tokens (padding excluded) of each rollout in TRL's batch dict."""
    return batch["prompt_mask"].sum(1) + batch["completion_mask"].sum(1)


def keep_rollouts(batch: dict, indices, weights) -> dict:
    """TRL's batch dict restricted to ``indices`` (repeats allowed), advantages times ``weights``.

    Every per-rollout tensor or list is indexed; ``num_items_in_batch`` (the ``dapo``
    normaliser, completion tokens of the generation batch) is scaled by ``B / N`` so that
    the normalised loss stays unbiased.
    """
    n = batch["advantages"].shape[0]
    idx = torch.as_tensor(np.asarray(indices), dtype=torch.long,
                          device=batch["advantages"].device)
    out = {}
    for key, value in batch.items():
        if key in _SCALARS or value is None:
            out[key] = value
        elif isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
            out[key] = value[idx]
        elif isinstance(value, list) and len(value) == n:
            out[key] = [value[int(i)] for i in idx]
        else:
            raise ConfigError(f"cost-aware GRPO cannot subsample batch field {key!r} (not one "
                              "row per rollout; multimodal inputs are not supported)")
    w = torch.as_tensor(np.asarray(weights), dtype=out["advantages"].dtype, device=idx.device)
    out["advantages"] = out["advantages"] * (w if out["advantages"].ndim == 1 else w[:, None])
    if out.get("num_items_in_batch") is not None:
        out["num_items_in_batch"] = batch["num_items_in_batch"] * (idx.numel() / n)
    return out


def effective_sample_size(weights) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of importance weights."""
    w = np.asarray(weights, dtype=np.float64)
    return float(w.sum() ** 2 / (w * w).sum())


def _check_args(costaware, args) -> None:
    """Refuse, before TRL loads anything, settings under which the weighting is biased."""
    if not isinstance(costaware, CostAware):
        raise ConfigError(f"costaware={costaware!r} is invalid; allowed: a CostAware or None")
    if args.loss_type not in SUPPORTED_LOSS_TYPES:
        raise ConfigError(f"loss_type={args.loss_type!r} is invalid for cost-aware GRPO; "
                          f"allowed: {SUPPORTED_LOSS_TYPES}")
    entropy_coef = getattr(args, "entropy_coef", 0.0)
    if args.beta != 0.0 or entropy_coef != 0.0:
        raise ConfigError(f"beta={args.beta!r} and entropy_coef={entropy_coef!r} are invalid; "
                          "allowed: 0 for both (terms without the advantage would not be "
                          "importance-weighted)")
    if costaware.budget is not None and costaware.budget % args.steps_per_generation:
        raise ConfigError(f"budget={costaware.budget} is invalid; allowed: a multiple of "
                          f"steps_per_generation={args.steps_per_generation}")
    # draws are the update's rows: more than the process's rollouts would put more than
    # per_device_train_batch_size rows in each forward pass (a huge budget allocated its
    # draws and indexed every batch tensor with them after the model had loaded)
    n = _rollouts_per_process(args)
    if costaware.budget is not None and costaware.budget > n:
        raise ConfigError(f"budget={costaware.budget} is invalid; allowed: from 1 to "
                          f"per_device_train_batch_size x steps_per_generation = {n} "
                          "(the rollouts each process generates per generation batch)")


def _rollouts_per_process(args) -> int:
    """``N``: rollouts of one generation batch on one process (TRL splits it into
    ``steps_per_generation`` micro-batches of ``per_device_train_batch_size``)."""
    return args.per_device_train_batch_size * args.steps_per_generation


def _saved_batches(path: Path) -> int:
    """The generation batches a checkpoint's ``STATE_FILE`` records."""
    try:
        n = loads_json(path.read_bytes()[:4096])["generation_batches"]
    except (JSONError, TypeError, KeyError):
        n = None
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"{path}: field 'generation_batches' is missing or damaged; allowed: "
                          "an integer >= 0 (the file this trainer writes with each checkpoint)")
    return n


class CostAwareGRPOTrainer(GRPOTrainer):
    """``trl.GRPOTrainer`` that updates on a cost-aware, importance-weighted subset of rollouts.

    Takes every argument of ``GRPOTrainer`` plus ``costaware`` (a ``CostAware``, or
    ``None`` for plain GRPO with the same logging).  ``costaware_history`` holds one dict
    per training generation batch of this ``train()`` call; its ``batch`` (the draws' RNG
    counter) is saved with each checkpoint (``STATE_FILE``), so a resumed run continues the
    numbering and draws as the uninterrupted run would.

    Examples
    --------
    ``trainer = CostAwareGRPOTrainer(model=m, args=GRPOConfig(...), reward_funcs=f,
    train_dataset=d, costaware=CostAware(budget=16, lam=0.1)); trainer.train()``
    """

    def __init__(self, *args, costaware: CostAware | None = None, **kwargs):
        if costaware is not None:
            # GRPOTrainer(model, reward_funcs, args=None, ...)
            config = kwargs["args"] if "args" in kwargs else (args[2] if len(args) > 2 else None)
            if config is None:
                raise ConfigError("CostAwareGRPOTrainer with costaware=... needs args=GRPOConfig(...): "
                                  "its loss_type, beta and steps_per_generation decide whether the "
                                  "weighting is unbiased, so TRL's defaults are not assumed")
            _check_args(costaware, config)
        super().__init__(*args, **kwargs)
        self.costaware = costaware
        self.costaware_history: list[dict] = []
        self._costaware_batches = 0

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        if self.args.should_save:
            folder = Path(self._get_output_dir(trial=trial)) / \
                f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
            atomic_write_bytes(folder / STATE_FILE, (json.dumps(
                {"generation_batches": self._costaware_batches}) + "\n").encode())

    def _load_optimizer_and_scheduler(self, checkpoint):
        # train(resume_from_checkpoint=...) calls this once the trainer state is loaded:
        # without the saved count a resumed run restarted the counter at 0 and drew its
        # batches with the uniforms of the run's first ones
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is None:
            return
        path = Path(checkpoint) / STATE_FILE
        if path.is_file():
            self._costaware_batches = _saved_batches(path)
            return
        # a checkpoint of TRL's own GRPOTrainer: the count of a run that generated every
        # steps_per_generation * num_iterations micro-steps from the start
        every = self.args.steps_per_generation * self.num_iterations
        micro = self.state.global_step * self.args.gradient_accumulation_steps
        self._costaware_batches = -(-micro // every)
        warnings.warn(f"{path} is missing: generation batches done taken as "
                      f"{self._costaware_batches} (optimizer steps x gradient_accumulation_steps "
                      "/ (steps_per_generation x num_iterations), rounded up)", stacklevel=2)

    def _draws(self, adv: np.ndarray, cost: np.ndarray) -> int:
        ca = self.costaware
        if ca.budget is not None:
            return int(ca.budget)
        p = cost_aware_probs(adv, cost, ca.lam, ca.floor)
        s = self.args.steps_per_generation
        # at most N draws, as budget: a token_budget above the rollouts' own tokens asked
        # for token_budget / C(p) draws, an array of that size
        draws = min(int(ca.token_budget / float(p @ cost)), _rollouts_per_process(self.args))
        return max(s, draws // s * s)

    def _generate_and_score_completions(self, inputs):
        batch = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return batch
        adv = batch["advantages"].detach().double().cpu().numpy()
        cost = rollout_costs(batch).double().cpu().numpy()
        zero = adv == 0.0
        record = {"batch": self._costaware_batches, "rollouts_generated": adv.size,
                  "tokens_generated": float(cost.sum()), "zero_adv_share": float(zero.mean())}
        if self.costaware is not None:
            ca = self.costaware
            # each data-parallel process draws from its own rollouts with its own stream; on
            # one seed they would all take the same positions (same uniforms)
            process = int(self.accelerator.process_index)
            if zero.all() and ca.floor == 0.0:
                # no policy-gradient signal at all: any subset gives the same (zero) loss
                draw = cost_aware_draw(adv, cost, self._draws(np.ones_like(adv), cost), lam=1.0,
                                       floor=1.0, seed=ca.seed, step=self._costaware_batches,
                                       process=process)
            else:
                draw = cost_aware_draw(adv, cost, self._draws(adv, cost), ca.lam, ca.floor,
                                       ca.seed, self._costaware_batches, process=process)
            batch = keep_rollouts(batch, draw.indices, draw.weights)
            record.update(rollouts_update=int(draw.indices.size), tokens_update=draw.tokens,
                          ess=effective_sample_size(draw.weights),
                          distinct_update=int(np.unique(draw.indices).size))
        else:
            record.update(rollouts_update=adv.size, tokens_update=float(cost.sum()),
                          ess=float(adv.size), distinct_update=adv.size)
        self._costaware_batches += 1
        self.costaware_history.append(record)
        for key in ("tokens_update", "tokens_generated", "rollouts_update", "ess",
                    "zero_adv_share"):
            self._metrics["train"][f"costaware/{key}"].append(float(record[key]))
        return batch


def sequence_logprob_grad_norms(model, batch: dict, loss_type: str = "grpo") -> np.ndarray:
    """Per-rollout gradient norm of TRL's on-policy GRPO loss term, over all parameters.

    On policy (ratio 1, no clipping) rollout ``i`` contributes ``-A_i * m_i`` to the loss,
    with ``m_i`` the mean (``grpo``) or the sum (``dapo``, up to the batch-wide token
    normaliser) of its completion tokens' log-probabilities.  Returns ``||grad m_i||``
    (N,), each from ``torch.func.grad`` on row ``i`` with the batch's padding and attention
    mask, exactly as TRL's loss sees it (one row at a time: HF attention masks do not go
    through ``vmap``); the per-sample gradient norm is ``|A_i| ||grad m_i||``.
    """
    from torch.func import functional_call, grad

    if loss_type not in ("grpo", "dapo"):
        raise ConfigError(f"loss_type={loss_type!r}; allowed: ('grpo', 'dapo')")
    if getattr(model, "is_gradient_checkpointing", False):
        raise ConfigError("per-sample gradients need gradient_checkpointing=False (torch.func "
                          "cannot run through checkpointing's saved-tensor hooks)")
    params = {k: v.detach() for k, v in model.named_parameters()}
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
    att = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
    n_completion = batch["completion_ids"].shape[1]

    def seq_term(p, i):
        logits = functional_call(model, p, (ids[i:i + 1],), {"attention_mask": att[i:i + 1]})
        logits = logits.logits[0, -n_completion - 1:-1]
        logp = torch.log_softmax(logits.float(), -1).gather(1, ids[i, -n_completion:, None])[:, 0]
        m = batch["completion_mask"][i].to(logp.dtype)
        total = (logp * m).sum()
        return total / m.sum().clamp(min=1.0) if loss_type == "grpo" else total

    # the input-requires-grad hook transformers adds for gradient checkpointing (possibly
    # more than once) cannot run inside a torch.func transform; it changes no value, so
    # lift it from the embedding while we differentiate and put it back after
    hooks = model.get_input_embeddings()._forward_hooks
    lifted = {k: h for k, h in hooks.items()
              if getattr(h, "__name__", "") == "make_inputs_require_grads"}
    for k in lifted:
        del hooks[k]
    try:
        norms = []
        for i in range(ids.shape[0]):
            g = grad(seq_term)(params, i)
            norms.append(math.sqrt(sum(float((v.double() ** 2).sum()) for v in g.values())))
    finally:
        hooks.update(lifted)
    return np.asarray(norms)


__all__ = ["CostAware", "CostAwareGRPOTrainer", "SUPPORTED_LOSS_TYPES", "effective_sample_size",
           "keep_rollouts", "rollout_costs", "sequence_logprob_grad_norms"]
