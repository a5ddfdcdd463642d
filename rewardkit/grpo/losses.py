"""Policy-gradient losses over sampled tokens: clipped GRPO with a k3 KL penalty, CISPO, and their weighted mix.

Pure tensor maths, no model I/O. Shapes: token tensors are [B, T] (B sequences, T completion tokens,
right-padded), ``advantages`` is [B], ``mask`` is [B, T] (True on real completion tokens of responses that
may be learnt from; a masked response has an all-False row and contributes nothing). Every loss is to be
*minimised* (the negated objective).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch

Norm = Literal["token", "sequence", "constant"]


def k3_kl(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimator of KL(pi_theta || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi_theta.

    Unbiased, always >= 0, zero where the two agree (Schulman 2020; the DeepSeekMath GRPO KL term, eq. 4).

    >>> float(k3_kl(torch.tensor([0.0]), torch.tensor([0.0])))
    0.0
    """
    d = ref_logp - logp  # [B, T]
    return torch.exp(d) - d - 1.0  # [B, T]


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, norm: Norm = "token",
              group: torch.Tensor | None = None, max_tokens: int | None = None) -> torch.Tensor:
    """Reduce a [B, T] per-token objective to a scalar over the masked tokens.

    ``token``: sum / number of tokens; with ``group`` ([B] group index) the normaliser is per group,
    1 / sum_i |y_i| as in Reasoning Arena eq. 1, then the mean over groups. ``sequence``: mean over each
    sequence's tokens, then over sequences (DeepSeekMath eq. 3: 1/G sum_i 1/|o_i| sum_t). ``constant``:
    sum / (B * max_tokens), the Dr. GRPO normaliser that does not depend on response lengths (RARO App. C.1
    drops length normalisation).

    >>> x = torch.tensor([[1.0, 3.0], [5.0, 0.0]]); m = torch.tensor([[True, True], [True, False]])
    >>> float(aggregate(x, m, "token")), float(aggregate(x, m, "sequence")), float(aggregate(x, m, "constant"))
    (3.0, 3.5, 2.25)
    """
    m = mask.to(per_token.dtype)  # [B, T] 1.0 on counted tokens
    x = per_token * m  # [B, T] masked objective
    if norm == "token":
        if group is None:
            return x.sum() / m.sum().clamp(min=1.0)  # scalar
        ids, inv = torch.unique(group, return_inverse=True)  # [G] group ids, [B] row -> group
        num = torch.zeros(len(ids), dtype=x.dtype, device=x.device).index_add(0, inv, x.sum(-1))  # [G] token sums
        den = torch.zeros(len(ids), dtype=x.dtype, device=x.device).index_add(0, inv, m.sum(-1))  # [G] token counts
        live = den > 0  # [G] a group whose every response is masked has no tokens: it is left out
        return (num[live] / den[live]).sum() / live.sum().clamp(min=1)  # scalar
    if norm == "sequence":
        n = m.sum(-1)  # [B] tokens per sequence
        live = n > 0  # [B]
        return (x.sum(-1)[live] / n[live]).sum() / live.sum().clamp(min=1)  # scalar
    if norm == "constant":
        t = max_tokens if max_tokens is not None else per_token.shape[-1]
        return x.sum() / (per_token.shape[0] * max(t, 1))  # scalar
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


def grpo_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float,
                   eps_high: float) -> torch.Tensor:
    """Per-token clipped surrogate min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), r = pi_theta / pi_old ([B, T])."""
    ratio = torch.exp(logp - old_logp)  # [B, T] r_t
    a = advantages[:, None]  # [B, 1] one advantage per sequence, broadcast over its tokens
    return torch.minimum(ratio * a, torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * a)  # [B, T]


def cispo_surrogate(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float,
                    eps_high: float) -> torch.Tensor:
    """Per-token CISPO summand sg(rho_hat) A log pi_theta (Reasoning Arena eq. 1), rho_hat clipped by eq. 2 ([B, T])."""
    ratio = torch.exp(logp - old_logp)  # [B, T] importance weight pi_theta / pi_old
    rho = torch.clamp(ratio, 1 - eps_low, 1 + eps_high).detach()  # [B, T] sg(rho_hat), eq. 2
    return rho * advantages[:, None] * logp  # [B, T] eq. 1 summand


SURROGATES: dict[str, Callable[..., torch.Tensor]] = {"grpo": grpo_surrogate, "cispo": cispo_surrogate}


def _stats(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor, eps_low: float, eps_high: float,
           kl: torch.Tensor | None) -> dict[str, float]:
    """Detached clip fraction and mean KL over the masked tokens."""
    with torch.no_grad():
        m = mask.bool()  # [B, T]
        n = m.sum().clamp(min=1)  # scalar token count
        ratio = torch.exp(logp - old_logp)  # [B, T]
        clipped = ((ratio < 1 - eps_low) | (ratio > 1 + eps_high)) & m  # [B, T]
        return {"clip_fraction": float(clipped.sum() / n),
                "kl": float((kl * m).sum() / n) if kl is not None else 0.0}


def policy_loss(kind: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, *, eps_low: float, eps_high: float, ref_logp: torch.Tensor | None = None,
                beta: float = 0.0, norm: Norm = "token", group: torch.Tensor | None = None,
                max_tokens: int | None = None) -> tuple[torch.Tensor, dict]:
    """-aggregate(surrogate - beta * k3 KL) for one objective; ``kind`` is ``grpo`` or ``cispo``."""
    _check(logp, old_logp, advantages, mask, eps_low, eps_high)
    objective = SURROGATES[kind](logp, old_logp, advantages, eps_low, eps_high)  # [B, T]
    kl = None
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp)  # [B, T]
        if beta != 0.0:
            objective = objective - beta * kl  # [B, T]
    loss = -aggregate(objective, mask, norm, group, max_tokens)  # scalar
    return loss, _stats(logp, old_logp, mask, eps_low, eps_high, kl)


def grpo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
              eps_low: float = 0.2, eps_high: float = 0.2, ref_logp: torch.Tensor | None = None,
              beta: float = 0.0, norm: Norm = "sequence", group: torch.Tensor | None = None,
              max_tokens: int | None = None) -> tuple[torch.Tensor, dict]:
    """Clipped GRPO (DeepSeekMath eq. 3): -[min(r A, clip(r, 1 - eps_low, 1 + eps_high) A) - beta * k3 KL].

    r = pi_theta / pi_old per token; the default normaliser is the paper's per-sequence 1/|o_i|. Returns
    the loss and detached statistics (clip fraction, mean KL).
    """
    return policy_loss("grpo", logp, old_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high,
                       ref_logp=ref_logp, beta=beta, norm=norm, group=group, max_tokens=max_tokens)


def cispo_loss(logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, *,
               eps_low: float = 1.0, eps_high: float = 2.0, ref_logp: torch.Tensor | None = None,
               beta: float = 0.0, norm: Norm = "token", group: torch.Tensor | None = None,
               max_tokens: int | None = None) -> tuple[torch.Tensor, dict]:
    """CISPO (Reasoning Arena eq. 1-2): -sg(rho_hat) A log pi_theta, token-normalised per group.

    rho_hat = clip(pi_theta / pi_old, 1 - eps_lo, 1 + eps_hi) (eq. 2) is a stop-gradient weight: the
    importance weight is clipped, never the gradient, so rare tokens keep their signal. Defaults are the
    paper's one-sided setting (eps_lo = 1.0, eps_hi = 2.0, App. C) and no KL term.
    """
    return policy_loss("cispo", logp, old_logp, advantages, mask, eps_low=eps_low, eps_high=eps_high,
                       ref_logp=ref_logp, beta=beta, norm=norm, group=group, max_tokens=max_tokens)


def mixed_loss(kind: str, logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
               part: torch.Tensor, weights: Sequence[float], *, eps_low: float, eps_high: float,
               ref_logp: torch.Tensor | None = None, beta: float = 0.0, norm: Norm = "token",
               group: torch.Tensor | None = None, max_tokens: Sequence[int | None] | None = None,
               ) -> tuple[torch.Tensor, dict]:
    """sum_k w_k L_k - beta KL: each objective k averaged over its own rows, then weighted (RARO Alg. 2 line 17).

    ``part`` [B] says which objective each row belongs to (0..K-1), ``weights`` [K] are lambda_pol,
    lambda_crit, ...; ``max_tokens`` [K] each objective's generation budget (the ``constant`` normaliser).
    Averaging each objective on its own keeps the ratio of their weights whatever their row counts; the KL
    penalty is one term over every row (the same normaliser). One objective with weight 1 is ``policy_loss``.
    """
    budgets = list(max_tokens) if max_tokens is not None else [None] * len(weights)
    if len(budgets) != len(weights):
        raise ValueError(f"{len(weights)} weights but {len(budgets)} max_tokens")
    total = logp.new_zeros(())  # scalar
    for k, w in enumerate(weights):
        rows = part == k  # [B] bool: the rows of objective k
        if not bool(rows.any()):
            continue
        lk, _ = policy_loss(kind, logp[rows], old_logp[rows], advantages[rows], mask[rows],  # [B_k, T] each
                            eps_low=eps_low, eps_high=eps_high, norm=norm,
                            group=None if group is None else group[rows], max_tokens=budgets[k])
        total = total + w * lk  # scalar
    kl = None
    if ref_logp is not None:
        kl = k3_kl(logp, ref_logp)  # [B, T]
        if beta != 0.0:
            known = [b for b in budgets if b is not None]
            total = total + beta * aggregate(kl, mask, norm, group, max(known) if known else None)  # scalar
    return total, _stats(logp, old_logp, mask, eps_low, eps_high, kl)


LOSSES = {"grpo": grpo_loss, "cispo": cispo_loss}
