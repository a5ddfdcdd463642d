"""Policy-gradient losses over sampled tokens: clipped GRPO with a k3 KL penalty, and CISPO.

Pure tensor maths, no model I/O. Shapes: token tensors are [B, T] (B sequences, T completion tokens,
right-padded), ``advantages`` and ``weights`` are [B], ``mask`` is [B, T] (True on real completion tokens
of responses that may be learnt from; a masked response has an all-False row and contributes nothing).
Every loss is to be *minimised* (the negated objective).
"""

from __future__ import annotations

from typing import Literal

import torch

Norm = Literal["token", "sequence", "constant"]


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi_theta.

    Unbiased, always >= 0, zero where the two agree (Schulman 2020; the GRPO paper's KL term).
    """
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, norm: Norm = "token",
              group: torch.Tensor | None = None, max_tokens: int | None = None) -> torch.Tensor:
    """Reduce a [B, T] per-token objective to a scalar over the masked tokens.

    ``token``: sum / number of tokens; with ``group`` ([B] group index) the normaliser is per group,
    1 / sum_i |y_i| as in Reasoning Arena eq. 1, then the mean over groups. ``sequence``: mean over each
    sequence's tokens, then over sequences (the original GRPO). ``constant``: sum / (B * max_tokens), the
    Dr. GRPO normaliser that does not depend on response lengths (RARO App. C.1 drops length normalisation).
    """
    m = mask.to(per_token.dtype)
    x = per_token * m
    if norm == "token":
        if group is None:
            return x.sum() / m.sum().clamp(min=1.0)
        ids, inv = torch.unique(group, return_inverse=True)
        num = torch.zeros(len(ids), dtype=x.dtype, device=x.device).index_add(0, inv, x.sum(-1))
        den = torch.zeros(len(ids), dtype=x.dtype, device=x.device).index_add(0, inv, m.sum(-1))
        live = den > 0  # a group whose every response is masked has no tokens: it is left out
        return (num[live] / den[live]).sum() / live.sum().clamp(min=1)
    if norm == "sequence":
        n = m.sum(-1)
        live = n > 0
        return (x.sum(-1)[live] / n[live]).sum() / live.sum().clamp(min=1)
    if norm == "constant":
        t = max_tokens if max_tokens is not None else per_token.shape[-1]
        return x.sum() / (per_token.shape[0] * max(t, 1))
    raise ValueError(f"option 'norm': {norm!r} is not one of token, sequence, constant")


def _check(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
           eps_low: float, eps_high: float) -> None:
    if logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)} and mask "
                         f"{tuple(mask.shape)} must have the same [B, T] shape")
    if advantages.shape != logp.shape[:1]:
        raise ValueError(f"advantages must be [B] = [{logp.shape[0]}], got {tuple(advantages.shape)}")
    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
              eps_low: float = 0.2, eps_high: float = 0.2, ref_logp: torch.Tensor | None = None,
              beta: float = 0.0, weights: torch.Tensor | None = None, norm: Norm = "token",
              group: torch.Tensor | None = None, max_tokens: int | None = None) -> tuple[torch.Tensor, dict]:
    """Clipped GRPO surrogate: -[min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) - beta * k3 KL].

    r = pi_theta / pi_old per token. ``weights`` scale each sequence's terms (e.g. RARO's lambda_pol /
    lambda_crit). Returns the loss and detached statistics (clip fraction, mean KL).
    """
    _check(logp, old_logp, advantages, mask, eps_low, eps_high)
    ratio = torch.exp(logp - old_logp)
    a = advantages[:, None]
    surrogate = torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)
    return _finish(surrogate, ratio, logp, mask, eps_low, eps_high, ref_logp, beta, weights, norm, group,
                   max_tokens)


def cispo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
               eps_low: float = 1.0, eps_high: float = 2.0, ref_logp: torch.Tensor | None = None,
               beta: float = 0.0, weights: torch.Tensor | None = None, norm: Norm = "token",
               group: torch.Tensor | None = None, max_tokens: int | None = None) -> tuple[torch.Tensor, dict]:
    """CISPO (Reasoning Arena eq. 1-2): -sg(rho_hat) A log pi_theta, token-normalised.

    rho_hat = clip(pi_theta / pi_old, 1 - eps_lo, 1 + eps_hi) (eq. 2) is a stop-gradient weight: the
    importance weight is clipped, never the gradient, so rare tokens keep their signal. Defaults are the
    paper's one-sided setting (eps_lo = 1.0, eps_hi = 2.0, App. C).
    """
    _check(logp, old_logp, advantages, mask, eps_low, eps_high)
    ratio = torch.exp(logp - old_logp)
    rho = torch.clamp(ratio, 1 - eps_low, 1 + eps_high).detach()  # sg(rho_hat), eq. 2
    surrogate = rho * advantages[:, None] * logp  # eq. 1 summand
    return _finish(surrogate, ratio, logp, mask, eps_low, eps_high, ref_logp, beta, weights, norm, group,
                   max_tokens)


def _finish(surrogate, ratio, logp, mask, eps_low, eps_high, ref_logp, beta, weights, norm, group, max_tokens):
    objective = surrogate
    kl = None
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp)
        if beta != 0.0:
            objective = objective - beta * kl
    if weights is not None:
        objective = objective * weights[:, None]
    loss = -aggregate(objective, mask, norm, group, max_tokens)
    with torch.no_grad():
        m = mask.bool()
        n = m.sum().clamp(min=1)
        clipped = ((ratio < 1 - eps_low) | (ratio > 1 + eps_high)) & m
        stats = {"clip_fraction": float(clipped.sum() / n),
                 "kl": float((kl * m).sum() / n) if kl is not None else 0.0}
    return loss, stats


LOSSES = {"grpo": grpo_loss, "cispo": cispo_loss}
