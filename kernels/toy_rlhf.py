"""Toy RLHF at CPU scale: a softmax policy over every response, optimised against a proxy.

All responses of length ``L`` over ``V`` tokens are enumerated (``n_resp = V**L``), each
with a sparse feature row ``feats[y]`` (``F`` wide, stored as indices ``fi`` and values
``fv``, both ``n_resp x nnz``). A prompt is a feature vector
``z = (1, z_1..z_M)``; a reward or a policy is an ``F x (M + 1)`` matrix ``W`` with score
``feats[y] @ W @ z``.  The policy is the softmax of that score over all responses, so
its KL to the reference policy is exact, while the gold evaluation is a finite sample
(the noise is the sampling noise, nothing is added).

Randomness is counter-based (``kernels.rng``): a draw is a pure function of
``(seed, run, step, index, stream)``, so runs are bit-identical for any thread count.
"""
import math

import numpy as np
from numba import prange

from .jit import driver, entry
from .rng import normal_nb, uniform_nb

# Random streams of this module: >= 100, so disjoint from the cluster engine's
# (kernels/codes.py).  101-103 are also ids of the cost-aware streams
# (kernels/costaware.py): harmless, since no computation draws from both systems, and
# kept because new ids would change every committed toy trace.  tests/test_packaging.py
# checks the sets that must stay disjoint.
S_TRAIN_PROMPT = 101
S_TRAIN_SAMPLE = 102
S_EVAL_SAMPLE = 103

# Columns of the per-evaluation output, ``out[run, eval, column]``.
C_STEP = 0
C_GOLD_SAMPLED = 1   # the observed evaluation score
C_GOLD_EXACT = 2     # hidden truth: the expectation over the policy
C_PROXY_SAMPLED = 3
C_PROXY_EXACT = 4
C_KL = 5             # hidden truth: exact KL(pi || pi_ref), nats
C_REGRET = 6         # training loss: proxy regret of the sampled responses
N_COLS = 7


@entry
def scores_nb(fi, fv, w, z, out):
    """``out[y] = feats[y] @ w @ z`` (a reward model's score of every response).

    Features are sparse: ``feats[y, fi[y, j]] = fv[y, j]`` (padding has ``fv = 0``).
    """
    n_feat = w.shape[0]
    a = np.zeros(n_feat)
    for f in range(n_feat):
        acc = 0.0
        for m in range(z.shape[0]):
            acc += w[f, m] * z[m]
        a[f] = acc
    for y in range(fi.shape[0]):
        s = 0.0
        for j in range(fi.shape[1]):
            s += fv[y, j] * a[fi[y, j]]
        out[y] = s


@entry
def policy_probs_nb(fi, fv, w, z, probs):
    """``probs[y] = softmax_y(feats[y] @ w @ z)``; ``probs`` (n_resp,) is written in place."""
    scores_nb(fi, fv, w, z, probs)
    top = probs.max()
    tot = 0.0
    for y in range(probs.shape[0]):
        probs[y] = math.exp(probs[y] - top)
        tot += probs[y]
    for y in range(probs.shape[0]):
        probs[y] /= tot


@entry
def sample_nb(probs, u):
    """Inverse-CDF draw of one response index for a uniform ``u``."""
    c = 0.0
    for y in range(probs.shape[0]):
        c += probs[y]
        if u < c:
            return y
    return probs.shape[0] - 1


@entry
def evaluate_1r_nb(fi, fv, theta, w_ref, w_gold, w_proxy, z_eval, n_samples, seed, run, step,
                   e, out):
    """Evaluate the policy on held-out prompts ``z_eval`` (P x (M+1)); writes ``out[e, :]``.

    Gold and proxy are observed through ``n_samples`` sampled responses per prompt;
    their exact expectations and the exact KL are hidden truth columns.
    """
    n_resp = fi.shape[0]
    n_prompts = z_eval.shape[0]
    probs = np.empty(n_resp)
    ref = np.empty(n_resp)
    gold = np.empty(n_resp)
    proxy = np.empty(n_resp)
    g_s = 0.0
    g_x = 0.0
    p_s = 0.0
    p_x = 0.0
    kl = 0.0
    regret = 0.0
    for p in range(n_prompts):
        z = z_eval[p]
        policy_probs_nb(fi, fv, theta, z, probs)
        policy_probs_nb(fi, fv, w_ref, z, ref)
        scores_nb(fi, fv, w_gold, z, gold)
        scores_nb(fi, fv, w_proxy, z, proxy)
        best_proxy = proxy.max()
        for y in range(n_resp):
            g_x += probs[y] * gold[y]
            p_x += probs[y] * proxy[y]
            if probs[y] > 0.0:
                kl += probs[y] * (math.log(probs[y]) - math.log(ref[y]))
        for s in range(n_samples):
            y = sample_nb(probs, uniform_nb(seed, run, step, p * n_samples + s, S_EVAL_SAMPLE))
            g_s += gold[y]
            p_s += proxy[y]
            regret += best_proxy - proxy[y]
    n_draws = n_prompts * n_samples
    out[e, C_STEP] = step
    out[e, C_GOLD_SAMPLED] = g_s / n_draws
    out[e, C_GOLD_EXACT] = g_x / n_prompts
    out[e, C_PROXY_SAMPLED] = p_s / n_draws
    out[e, C_PROXY_EXACT] = p_x / n_prompts
    out[e, C_KL] = kl / n_prompts
    out[e, C_REGRET] = regret / n_draws


@entry
def grpo_step_1r_nb(fi, fv, theta, w_ref, w_proxy, kl_coef, lr, batch, group, seed, run, step):
    """One policy-gradient step with group-normalised advantages and an exact KL penalty.

    For each of ``batch`` fresh prompts, ``group`` responses are sampled, scored by the
    proxy, and their advantages normalised within the group (Shao et al. 2024, GRPO);
    the KL(pi || pi_ref) gradient is exact because every response is enumerated.
    ``theta`` (F x (M+1)) is updated in place.
    """
    n_resp, n_nz = fi.shape
    n_feat, n_m = theta.shape
    probs = np.empty(n_resp)
    ref = np.empty(n_resp)
    proxy = np.empty(n_resp)
    # coefficient of feats[y] in this prompt's gradient (before the outer product with z)
    coef = np.empty(n_resp)
    feat_grad = np.empty(n_feat)
    grad = np.zeros((n_feat, n_m))
    z = np.empty(n_m)
    picks = np.empty(group, dtype=np.int64)
    rewards = np.empty(group)
    for b in range(batch):
        z[0] = 1.0
        for m in range(1, n_m):
            z[m] = normal_nb(seed, run, step, b * n_m + m, S_TRAIN_PROMPT)
        policy_probs_nb(fi, fv, theta, z, probs)
        scores_nb(fi, fv, w_proxy, z, proxy)
        mu = 0.0
        for g in range(group):
            y = sample_nb(probs, uniform_nb(seed, run, step, b * group + g, S_TRAIN_SAMPLE))
            picks[g] = y
            rewards[g] = proxy[y]
            mu += proxy[y]
        mu /= group
        var = 0.0
        for g in range(group):
            var += (rewards[g] - mu) ** 2
        sd = math.sqrt(var / group) + 1e-6
        # grad log pi(y|z) = (feats[y] - E_pi feats) outer z; advantages sum to zero in a
        # group, so the E_pi feats term cancels and only the sampled rows remain.
        for y in range(n_resp):
            coef[y] = 0.0
        for g in range(group):
            coef[picks[g]] += (rewards[g] - mu) / sd / group
        if kl_coef > 0.0:
            policy_probs_nb(fi, fv, w_ref, z, ref)
            kl = 0.0
            for y in range(n_resp):
                kl += probs[y] * (math.log(probs[y] + 1e-300) - math.log(ref[y] + 1e-300))
            # d KL / d theta = sum_y p_y (log p_y / r_y - KL) feats[y] outer z
            for y in range(n_resp):
                coef[y] -= kl_coef * probs[y] * (
                    math.log(probs[y] + 1e-300) - math.log(ref[y] + 1e-300) - kl)
        for f in range(n_feat):
            feat_grad[f] = 0.0
        for y in range(n_resp):
            c = coef[y]
            if c != 0.0:
                for j in range(n_nz):
                    feat_grad[fi[y, j]] += c * fv[y, j]
        for f in range(n_feat):
            for m in range(n_m):
                grad[f, m] += feat_grad[f] * z[m]
    for f in range(n_feat):
        for m in range(n_m):
            theta[f, m] += lr * grad[f, m] / batch


@entry
def toy_rlhf_1r_nb(fi, fv, w_ref, w_gold, w_proxy, z_eval, kl_coef, lr, n_steps, batch, group,
                   eval_every, n_eval_samples, seed, run, out):
    """One RLHF run from ``pi_ref``; evaluation ``e`` at step ``e * eval_every`` into ``out``."""
    theta = w_ref.copy()
    e = 0
    for step in range(n_steps + 1):
        if step % eval_every == 0:
            evaluate_1r_nb(fi, fv, theta, w_ref, w_gold, w_proxy, z_eval, n_eval_samples, seed,
                           run, step, e, out)
            e += 1
        if step == n_steps:
            break
        grpo_step_1r_nb(fi, fv, theta, w_ref, w_proxy, kl_coef, lr, batch, group, seed, run, step)


@driver
def toy_rlhf_nb(fi, fv, w_ref, w_gold, w_proxies, z_eval, kl_coefs, seeds, lr, n_steps, batch,
                group, eval_every, n_eval_samples, out):
    """Many runs in parallel: run ``r`` uses ``w_proxies[r]``, ``kl_coefs[r]``, ``seeds[r]``.

    ``out`` (n_runs x n_evals x N_COLS) is written in place; each run writes its own rows.
    Draws depend on the seed only (run coordinate 0), so runs that share a seed share their
    prompts and samples (common random numbers across proxy sizes and KL coefficients).
    """
    for r in prange(w_proxies.shape[0]):
        toy_rlhf_1r_nb(fi, fv, w_ref, w_gold, w_proxies[r], z_eval, kl_coefs[r], lr, n_steps,
                       batch, group, eval_every, n_eval_samples, seeds[r], 0, out[r])
