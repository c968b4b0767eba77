"""Cost-Aware GRPO (arXiv 2604.28020): advantages, mini-batch sampling, and a toy RL task.

Sampler: group-normalised advantages ``A = (r - mean_g r) / std_g r`` (0 when a group's
rewards are all equal), probabilities ``p_i ∝ max(|A_i|, floor) / sqrt(len_i)`` mixed
with uniform, draws with replacement and importance weights ``1 / (N p_i)``.

Task: each prompt has ``M`` candidate reasoning traces with features ``phi`` (d,),
a length in tokens and a correctness bit that depends on the trace.  The policy is
``pi(k | q) = softmax_k(w . phi_qk)``; it is trained with on-policy GRPO (one gradient
step per batch of rollouts, so the PPO ratio is 1 and clipping is inactive).
Replications are seeds (the RNG "cluster" coordinate); each writes only its own rows.
"""
import math

import numpy as np
from numba import prange

from .costaware import (S_GRPO_MINIBATCH, S_GRPO_PROMPT, S_GRPO_RESPONSE,
                               S_TASK_DIFFICULTY, S_TASK_FEATURE, S_TASK_LENGTH, S_TASK_NOISE,
                               S_TASK_PROMPT_LENGTH, S_TASK_QUALITY, draw_index_nb,
                               normal_total_nb)
from .jit import driver, entry
from .rng import normal_nb, uniform_nb

# Mini-batch distributions (arms of the ablation); all but uniform are mixed with uniform
# by ``lam`` and weighted by ``1 / (N p)``, so every arm's gradient is unbiased.
ARM_UNIFORM = 0          # 1 / N
ARM_COST_AWARE = 1       # |A| / sqrt(c)
ARM_COST_ONLY = 2        # 1 / sqrt(c)
ARM_ADVANTAGE_ONLY = 3   # |A|
ARM_NONZERO = 4          # uniform over A != 0
N_ARMS = 5
# a variance below this is read again in units of the largest |reward|: its square root
# and the deviations it divides keep their precision there
VAR_MIN = 1e-280


@entry
def group_moments_nb(rewards, g, scale):
    """Mean and population variance of ``rewards[g] / scale``."""
    G = rewards.shape[1]
    m = 0.0
    for j in range(G):
        m += rewards[g, j] / scale
    m /= G
    v = 0.0
    for j in range(G):
        v += (rewards[g, j] / scale - m) ** 2
    return m, v / G


@entry
def group_advantages_nb(rewards, out):
    """``out[g, j] = (r[g, j] - mean_g) / std_g`` (population std) for rewards (P, G);
    a group of equal rewards carries no signal and gets advantage 0, in any unit.

    A group whose variance overflows, or underflows (rewards of 1e-200), is taken again
    in units of its largest ``|r|`` (advantages do not depend on the unit; ``x / 1`` is
    exact, so other groups keep every bit)."""
    P, G = rewards.shape
    for g in range(P):
        if np.max(rewards[g]) == np.min(rewards[g]):
            # tested as equal, not by a small std: their mean can round away from them
            # (0.1 * 3 / 3), and a spread of 1e-13 is a signal in a unit of 1e-13
            out[g] = 0.0
            continue
        scale = 1.0
        m, var = group_moments_nb(rewards, g, scale)
        if not VAR_MIN < var < np.inf:
            scale = np.max(np.abs(rewards[g]))
            m, var = group_moments_nb(rewards, g, scale)
        sd = math.sqrt(var)
        for j in range(G):
            out[g, j] = (rewards[g, j] / scale - m) / sd


@entry
def arm_scores_nb(adv, lengths, arm, floor, a_scale, out):
    """Write the scores of ``arm`` with ``a = max(|A|, floor) / a_scale`` into ``out``;
    return their sum."""
    total = 0.0
    for i in range(adv.shape[0]):
        a = max(abs(adv[i]), floor)
        if arm == ARM_COST_AWARE:
            s = a / a_scale / math.sqrt(lengths[i])
        elif arm == ARM_COST_ONLY:
            s = 1.0 / math.sqrt(lengths[i])
        elif arm == ARM_ADVANTAGE_ONLY:
            s = a / a_scale
        else:
            s = 1.0 if a > 0.0 else 0.0
        out[i] = s
        total += s
    return total


@entry
def grpo_probs_nb(adv, lengths, arm, lam, floor, out):
    """Mini-batch distribution over N samples; ``adv``, ``lengths``, ``out`` are (N,).

    Uniform arm: ``1/N``.  Others: ``(1 - lam) q + lam / N`` with ``q`` proportional to
    the arm's score of ``a = max(|A|, floor)`` and cost ``c``: ``a / sqrt(c)`` (cost-aware),
    ``1 / sqrt(c)``, ``a``, or ``1[a > 0]``.  A sum of scores that overflows or underflows
    is taken again with ``a / max(a)`` (the same ``q``; ``x / 1`` is exact, so other
    inputs keep every bit).  The caller guarantees a positive ``a`` somewhere.
    """
    n = adv.shape[0]
    if arm == ARM_UNIFORM:
        for i in range(n):
            out[i] = 1.0 / n
        return
    total = arm_scores_nb(adv, lengths, arm, floor, 1.0, out)
    if not normal_total_nb(total):
        top = max(np.max(np.abs(adv)), floor)
        total = arm_scores_nb(adv, lengths, arm, floor, top, out)
    for i in range(n):
        out[i] = (1.0 - lam) * out[i] / total + lam / n


@entry
def sample_minibatch_nb(p, batch, seed, rep, step, stream, idx):
    """Write ``batch`` draws with replacement from ``p`` into ``idx`` (batch,) int64."""
    cdf = np.cumsum(p)
    for j in range(batch):
        idx[j] = draw_index_nb(cdf, uniform_nb(seed, rep, step, j, stream))


@entry
def make_task_nb(seed, rep, median_len, len_sigma, length_effect, difficulty_mean,
                 difficulty_sd, noise_sd, prompt_median_len, prompt_len_sigma, phi, length,
                 correct, prompt_length):
    """Fill one task instance: ``phi`` (Q, M, d), ``length`` (Q, M) response tokens,
    ``correct`` (Q, M) and ``prompt_length`` (Q,) tokens (lognormal around
    ``prompt_median_len``; all 0 when that is 0, i.e. cost = response tokens only).

    Feature 0 is the standardised log length; a trace is correct when
    ``v . phi + difficulty_q + noise > 0`` with ``v_0 = length_effect`` and the other
    coordinates a random unit direction, so a linear policy can learn it.
    """
    Q, M, d = phi.shape
    v = np.empty(d)
    nv = 0.0
    for j in range(1, d):
        v[j] = normal_nb(seed, rep, 0, j, S_TASK_QUALITY)
        nv += v[j] * v[j]
    nv = math.sqrt(nv)
    for j in range(1, d):
        v[j] /= nv
    v[0] = length_effect
    for q in range(Q):
        diff = difficulty_mean + difficulty_sd * normal_nb(seed, rep, q, 0, S_TASK_DIFFICULTY)
        prompt_length[q] = 0.0
        if prompt_median_len > 0.0:
            z_len = prompt_len_sigma * normal_nb(seed, rep, q, 0, S_TASK_PROMPT_LENGTH)
            prompt_length[q] = max(1.0, math.floor(prompt_median_len * math.exp(z_len) + 0.5))
        for k in range(M):
            trace = q * M + k
            phi[q, k, 0] = normal_nb(seed, rep, trace, 0, S_TASK_LENGTH)
            for j in range(1, d):
                phi[q, k, j] = normal_nb(seed, rep, trace, j, S_TASK_FEATURE)
            length[q, k] = max(1.0, math.floor(median_len * math.exp(len_sigma * phi[q, k, 0]) + 0.5))
            z = diff + noise_sd * normal_nb(seed, rep, trace, 0, S_TASK_NOISE)
            for j in range(d):
                z += v[j] * phi[q, k, j]
            correct[q, k] = 1.0 if z > 0.0 else 0.0


@entry
def policy_probs_nb(w, phi, q, out):
    """``out`` (M,) = softmax over the traces of prompt ``q``."""
    M, d = phi.shape[1], phi.shape[2]
    top = -np.inf
    for k in range(M):
        s = 0.0
        for j in range(d):
            s += w[j] * phi[q, k, j]
        out[k] = s
        top = max(top, s)
    total = 0.0
    for k in range(M):
        out[k] = math.exp(out[k] - top)
        total += out[k]
    for k in range(M):
        out[k] /= total


@entry
def expected_accuracy_nb(w, phi, correct, first, last):
    """Exact expected pass@1 ``mean_q sum_k pi(k|q) correct[q, k]`` over prompts [first, last)."""
    M = phi.shape[1]
    pi = np.empty(M)
    acc = 0.0
    for q in range(first, last):
        policy_probs_nb(w, phi, q, pi)
        for k in range(M):
            acc += pi[k] * correct[q, k]
    return acc / (last - first)


@entry
def arm_moments_nb(adv, lengths, gnorm, lam, floor, p, out):
    """Add, for every arm, ``S(p) = sum_i G_i^2 / (N^2 p_i)`` (second moment of one weighted
    draw) and ``C(p) = sum_i p_i c_i`` of this batch to ``out`` (N_ARMS, 2);
    ``gnorm`` (N,) are the exact per-sample gradient norms ``G_i``."""
    n = adv.shape[0]
    for a in range(N_ARMS):
        grpo_probs_nb(adv, lengths, a, lam, floor, p)
        s = 0.0
        c = 0.0
        for i in range(n):
            c += p[i] * lengths[i]
            if gnorm[i] > 0.0:
                s += gnorm[i] * gnorm[i] / (n * n * p[i])
        out[a, 0] += s
        out[a, 1] += c


@entry
def grpo_train_1r_nb(phi, length, correct, prompt_length, n_train, arm, n_steps, prompts, group,
                     batch, lr, lam, floor, eval_every, seed, rep, tokens_out, acc_out,
                     moments_out):
    """Train one policy from ``w = 0``; writes ``tokens_out`` / ``acc_out`` (n_evals,).

    A draw costs its prompt + response tokens; tokens are the summed costs of the
    mini-batch draws that enter gradient steps (a response drawn twice counts twice);
    rollouts are generated identically in every arm and are not counted.  A batch whose
    advantages are all zero is skipped (no step, no tokens) in every arm.  The uniform
    arm also adds every arm's ``S`` and ``C`` on its own batches to ``moments_out``
    (N_ARMS, 2).  Returns the number of skipped batches.
    """
    Q, M, d = phi.shape
    N = prompts * group
    w = np.zeros(d)
    pi = np.empty(M)
    cdf = np.empty(M)
    rewards = np.empty((prompts, group))
    adv = np.empty((prompts, group))
    q_of = np.empty(N, np.int64)
    k_of = np.empty(N, np.int64)
    lens = np.empty(N)
    gnorm = np.empty(N)
    p = np.empty(N)
    idx = np.empty(batch, np.int64)
    grad = np.empty(d)
    tokens = 0.0
    skipped = 0
    acc_out[0] = expected_accuracy_nb(w, phi, correct, n_train, Q)
    tokens_out[0] = 0.0
    for t in range(n_steps):
        for g in range(prompts):
            q = min(n_train - 1, int(uniform_nb(seed, rep, t, g, S_GRPO_PROMPT) * n_train))
            policy_probs_nb(w, phi, q, pi)
            acc_cdf = 0.0
            for k in range(M):
                acc_cdf += pi[k]
                cdf[k] = acc_cdf
            for j in range(group):
                i = g * group + j
                k = draw_index_nb(cdf, uniform_nb(seed, rep, t, i, S_GRPO_RESPONSE))
                q_of[i] = q
                k_of[i] = k
                lens[i] = length[q, k] + prompt_length[q]
                rewards[g, j] = correct[q, k]
        group_advantages_nb(rewards, adv)
        flat = adv.reshape(N)
        informative = False
        for i in range(N):
            if flat[i] != 0.0:
                informative = True
                break
        if informative:
            if arm == ARM_UNIFORM:
                for i in range(N):
                    # ||grad of A_i log pi(k|q)|| = |A_i| ||phi_qk - E_pi phi_q||
                    policy_probs_nb(w, phi, q_of[i], pi)
                    sq = 0.0
                    for j in range(d):
                        mean_phi = 0.0
                        for k in range(M):
                            mean_phi += pi[k] * phi[q_of[i], k, j]
                        sq += (phi[q_of[i], k_of[i], j] - mean_phi) ** 2
                    gnorm[i] = abs(flat[i]) * math.sqrt(sq)
                arm_moments_nb(flat, lens, gnorm, lam, floor, p, moments_out)
            grpo_probs_nb(flat, lens, arm, lam, floor, p)
            sample_minibatch_nb(p, batch, seed, rep, t, S_GRPO_MINIBATCH, idx)
            for j in range(d):
                grad[j] = 0.0
            for b in range(batch):
                i = idx[b]
                tokens += lens[i]
                if flat[i] == 0.0:
                    continue  # zero advantage: the policy-gradient term is exactly zero
                q = q_of[i]
                policy_probs_nb(w, phi, q, pi)
                # grad log pi(k|q) = phi_qk - E_pi phi_q., importance weight 1 / (N p_i)
                coef = flat[i] / (N * p[i]) / batch
                for j in range(d):
                    mean_phi = 0.0
                    for k in range(M):
                        mean_phi += pi[k] * phi[q, k, j]
                    grad[j] += coef * (phi[q, k_of[i], j] - mean_phi)
            for j in range(d):
                w[j] += lr * grad[j]
        else:
            skipped += 1
        if (t + 1) % eval_every == 0:
            e = (t + 1) // eval_every
            acc_out[e] = expected_accuracy_nb(w, phi, correct, n_train, Q)
            tokens_out[e] = tokens
    return skipped


@driver
def grpo_experiment_nb(n_train, n_test, n_traces, n_features, median_len, len_sigma,
                       length_effect, difficulty_mean, difficulty_sd, noise_sd,
                       prompt_median_len, prompt_len_sigma, arms, n_steps_arm, prompts, group,
                       batch, lr, lam, floor, eval_every, seed, rep0, tokens_out, acc_out,
                       skipped_out, moments_out):
    """The arms ``arms`` (n_arms,) on the same task per seed; ``arms[a]`` trains
    ``n_steps_arm[a]`` steps.

    Outputs ``tokens_out``/``acc_out`` (n_seeds, n_arms, n_evals), NaN past an arm's
    horizon, ``skipped_out`` (n_seeds, n_arms) and ``moments_out`` (n_seeds, N_ARMS, 2):
    every arm's summed ``S``, ``C`` over the uniform arm's batches (0 if it is not run);
    row ``r`` is replication ``rep0 + r`` (chunks of seeds give the same numbers as one call)."""
    for row in prange(tokens_out.shape[0]):
        r = rep0 + row
        Q = n_train + n_test
        phi = np.empty((Q, n_traces, n_features))
        length = np.empty((Q, n_traces))
        correct = np.empty((Q, n_traces))
        prompt_length = np.empty(Q)
        make_task_nb(seed, r, median_len, len_sigma, length_effect, difficulty_mean,
                     difficulty_sd, noise_sd, prompt_median_len, prompt_len_sigma, phi, length,
                     correct, prompt_length)
        moments_out[row, :, :] = 0.0
        for a in range(arms.shape[0]):
            tokens_out[row, a, :] = np.nan
            acc_out[row, a, :] = np.nan
            skipped_out[row, a] = grpo_train_1r_nb(
                phi, length, correct, prompt_length, n_train, arms[a], n_steps_arm[a], prompts,
                group, batch, lr, lam, floor, eval_every, seed, r, tokens_out[row, a],
                acc_out[row, a], moments_out[row])
