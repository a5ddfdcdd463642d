"""The GRPO / CISPO losses against hand-derived gradients on a two-token toy policy."""

from __future__ import annotations

import math

import pytest
import torch

from rewardkit.grpo.losses import aggregate, cispo_loss, grpo_loss, k3_kl, mixed_loss

# The toy policy: one free logit vector z over a 2-token vocabulary, shared by every position, so
# log pi(0) = z0 - logsumexp(z) and, at z = (0, 0), p = (1/2, 1/2) and
#   d log pi(0) / dz = (1 - p0, -p1) = (+1/2, -1/2),   d log pi(1) / dz = (-1/2, +1/2).


def _logp(z: torch.Tensor, tokens: list[list[int]]) -> torch.Tensor:
    lp = torch.log_softmax(z, -1)
    return torch.stack([torch.stack([lp[t] for t in row]) for row in tokens])


def _grad(loss_fn, tokens, adv, mask, old_p0=None, **kw) -> torch.Tensor:
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, tokens)
    if old_p0 is None:
        old = logp.detach()
    else:
        old_lp = torch.log(torch.tensor([old_p0, 1 - old_p0]))
        old = torch.stack([torch.stack([old_lp[t] for t in row]) for row in tokens])
    loss, _ = loss_fn(logp, old, torch.tensor(adv), torch.tensor(mask), **kw)
    loss.backward()
    return z.grad


@pytest.mark.parametrize("loss_fn", [grpo_loss, cispo_loss])
def test_on_policy_gradient_matches_hand_derivation(loss_fn):
    # Two one-token responses: token 0 with A = +1, token 1 with A = -1; on-policy (ratio 1, weight 1).
    # Both losses reduce to -(1/2) [A1 dlogpi(0) + A2 dlogpi(1)] = -(1/2) [(1/2, -1/2) + (1/2, -1/2)] = (-1/2, +1/2).
    g = _grad(loss_fn, [[0], [1]], [1.0, -1.0], [[True], [True]])
    assert torch.allclose(g, torch.tensor([-0.5, 0.5]))


def test_clipped_token_has_no_grpo_gradient_but_a_cispo_gradient():
    # One response, token 0, A = +1, behaviour policy had pi_old(0) = 1/4, so r = (1/2) / (1/4) = 2 > 1 + 0.2.
    # GRPO: min(r A, clip(r) A) = 1.2 (a constant) -> zero gradient.
    # CISPO: -sg(clip(r)) A log pi(0) -> gradient -1.2 * (1/2, -1/2) = (-0.6, +0.6).
    g_grpo = _grad(grpo_loss, [[0]], [1.0], [[True]], old_p0=0.25, eps_low=0.2, eps_high=0.2)
    g_cispo = _grad(cispo_loss, [[0]], [1.0], [[True]], old_p0=0.25, eps_low=0.2, eps_high=0.2)
    assert torch.allclose(g_grpo, torch.zeros(2))
    assert torch.allclose(g_cispo, torch.tensor([-0.6, 0.6]))


def test_k3_kl_gradient_matches_hand_derivation():
    # A = 0, one token 0, reference pi_ref(0) = 1/4, current pi(0) = 1/2: d = log(1/4) - log(1/2) = -log 2,
    # k3 = e^d - d - 1 = 1/2 + log 2 - 1, and dk3/dlogpi = 1 - e^d = 1/2.
    # loss = beta * k3 -> grad = beta * 1/2 * (1/2, -1/2) = (0.025, -0.025) for beta = 0.1.
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, [[0]])
    ref = torch.log(torch.tensor([[0.25]]))
    loss, stats = grpo_loss(logp, logp.detach(), torch.tensor([0.0]), torch.tensor([[True]]), ref_logp=ref, beta=0.1)
    loss.backward()
    assert torch.allclose(z.grad, torch.tensor([0.025, -0.025]))
    assert stats["kl"] == pytest.approx(0.5 + math.log(2) - 1)


def test_k3_is_nonnegative_and_zero_at_equality():
    a = torch.randn(50)
    b = torch.randn(50)
    assert torch.all(k3_kl(a, b) >= 0)
    assert torch.allclose(k3_kl(a, a), torch.zeros(50))


@pytest.mark.parametrize("loss_fn", [grpo_loss, cispo_loss])
def test_zero_advantages_give_zero_policy_gradient(loss_fn):
    torch.manual_seed(0)
    z = torch.randn(3, 5, requires_grad=True)  # [B, T] free log-prob-like parameters
    logp = torch.log_softmax(torch.stack([z, torch.zeros_like(z)], -1), -1)[..., 0]
    old = logp.detach() + 0.3 * torch.randn(3, 5)
    loss, _ = loss_fn(logp, old, torch.zeros(3), torch.ones(3, 5, dtype=torch.bool))
    loss.backward()
    assert torch.count_nonzero(z.grad) == 0


@pytest.mark.parametrize("loss_fn", [grpo_loss, cispo_loss])
@pytest.mark.parametrize("norm", ["token", "sequence", "constant"])
def test_masked_responses_contribute_nothing(loss_fn, norm):
    # Row 2 is masked out (e.g. a judge timeout): whatever its advantage, log-probs or KL, the loss and
    # the gradient equal those of the batch without it (normalisers count unmasked tokens only; the
    # constant normaliser is given the batch size explicitly by dropping the row).
    torch.manual_seed(1)
    z = torch.randn(3, 4, requires_grad=True)
    old = z.detach() - 0.1
    ref = z.detach() + 0.2
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]], dtype=torch.bool)
    adv = torch.tensor([1.0, -1.0, 123.0])
    group = torch.tensor([0, 0, 1])
    kw = dict(ref_logp=ref, beta=0.5, norm=norm, group=group)
    full, _ = loss_fn(z, old, adv, mask, **kw)
    full.backward()
    g_full = z.grad.clone()
    z2 = z.detach()[:2].clone().requires_grad_(True)
    if norm == "constant":
        full_c = full  # the constant normaliser divides by B * T: compare the unnormalised sums instead
        sub, _ = loss_fn(z2, old[:2], adv[:2], mask[:2], ref_logp=ref[:2], beta=0.5, norm=norm)
        assert float(full_c.detach()) * 3 == pytest.approx(float(sub.detach()) * 2, rel=1e-6)
        sub.backward()
        assert torch.allclose(g_full[:2] * 3, z2.grad * 2, atol=1e-6)
    else:
        sub, _ = loss_fn(z2, old[:2], adv[:2], mask[:2], ref_logp=ref[:2], beta=0.5, norm=norm, group=group[:2])
        assert float(full.detach()) == pytest.approx(float(sub.detach()), rel=1e-6)
        sub.backward()
        assert torch.allclose(g_full[:2], z2.grad, atol=1e-6)
    assert torch.count_nonzero(g_full[2]) == 0


def test_token_normaliser_is_per_group_as_in_eq_1():
    # eq. 1: each group's token sum is divided by that group's token count, then groups are averaged.
    # Group 0: one row, 2 tokens, values 1 and 3 -> 2. Group 1: two rows with 1 and 3 tokens, all 6 -> 6.
    x = torch.tensor([[1.0, 3.0, 0.0], [6.0, 0.0, 0.0], [6.0, 6.0, 6.0]])
    m = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    assert float(aggregate(x, m, "token", group=torch.tensor([0, 1, 1]))) == pytest.approx((2 + 6) / 2)
    assert float(aggregate(x, m, "token")) == pytest.approx(28 / 6)  # batch-level token mean
    assert float(aggregate(x, m, "sequence")) == pytest.approx((2 + 6 + 6) / 3)
    assert float(aggregate(x, m, "constant")) == pytest.approx(28 / 9)


def test_shape_and_option_errors_are_explicit():
    z = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="advantages must be"):
        grpo_loss(z, z, torch.zeros(3), torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="eps_low"):
        cispo_loss(z, z, torch.zeros(2), torch.ones(2, 3, dtype=torch.bool), eps_low=-1)
    with pytest.raises(ValueError, match="option 'norm'"):
        aggregate(z, torch.ones(2, 3, dtype=torch.bool), "bogus")  # type: ignore[arg-type]


# ------------------------------------------------------------------- asymmetric clips (mutation-tested)


def _one_token(ratio: float, adv: float):
    """Log-probs of one token whose importance ratio pi_theta / pi_old is ``ratio`` (pi_old = 1/2)."""
    logp = torch.tensor([[math.log(0.5 * ratio)]], requires_grad=True)
    return logp, torch.tensor([[math.log(0.5)]]), torch.tensor([adv]), torch.tensor([[True]])


@pytest.mark.parametrize("ratio, adv, expected, learns", [
    # DAPO's clip-higher as RARO (App. C.1) and the Dr. GRPO preset use it: eps_low = 0.2, eps_high = 0.28.
    (1.25, +1.0, 1.25, True),    # r A inside [0.8, 1.28]: unclipped, still learns (0.2 on both sides clips at 1.2)
    (1.30, +1.0, 1.28, False),   # above 1 + eps_high with A > 0: clipped, no gradient
    (0.75, -1.0, -0.80, False),  # below 1 - eps_low with A < 0: min(-0.75, -0.8) = -0.8, clipped, no gradient
    (0.75, +1.0, 0.75, True),    # below 1 - eps_low with A > 0: the min keeps r A, which learns
    (1.25, -1.0, -1.25, True),   # above 1 + eps with A < 0: the min keeps r A
])
def test_grpo_clip_is_asymmetric_low_02_high_028(ratio, adv, expected, learns):
    logp, old, a, m = _one_token(ratio, adv)
    loss, stats = grpo_loss(logp, old, a, m, eps_low=0.2, eps_high=0.28)
    assert -loss.item() == pytest.approx(expected, abs=1e-6)
    loss.backward()
    assert (float(logp.grad.abs().sum()) > 0) is learns
    assert stats["clip_fraction"] == (0.0 if 0.8 <= ratio <= 1.28 else 1.0)


@pytest.mark.parametrize("ratio, weight", [(2.5, 2.5), (3.5, 3.0), (0.5, 0.5)])
def test_cispo_default_clip_is_1_below_2_above(ratio, weight):
    # CISPO's defaults (Reasoning Arena App. C): rho_hat = clip(r, 1 - 1.0, 1 + 2.0) = clip(r, 0, 3), a stop-gradient
    # weight on A log pi: the gradient of -loss wrt log pi is rho_hat * A (with 2.0 below and 1.0 above it would be
    # clip(r, -1, 2): 2.0 at r = 2.5)
    logp, old, a, m = _one_token(ratio, 1.0)
    loss, _ = cispo_loss(logp, old, a, m)
    loss.backward()
    assert -float(logp.grad) == pytest.approx(weight, rel=1e-6)


def test_clip_fraction_counts_each_side_with_its_own_epsilon():
    # ratios 0.75 (below 1 - 0.2), 1.25 (inside, below 1 + 0.28) and 1.3 (above): 2 of 3 tokens clipped
    logp = torch.log(torch.tensor([[0.75, 1.25, 1.3]]) * 0.5)
    old = torch.full((1, 3), math.log(0.5))
    _, stats = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 3, dtype=torch.bool), eps_low=0.2, eps_high=0.28)
    assert stats["clip_fraction"] == pytest.approx(2 / 3)


# ------------------------------------------------------------------- RARO's objective weights (mutation-tested)


def _two_objectives():
    """Two rows, one per objective (0 = policy, 1 = critic), with different tokens so their gradients differ."""
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, [[0, 0], [1, 0]])
    return z, logp, logp.detach(), torch.tensor([1.0, 1.0]), torch.ones(2, 2, dtype=torch.bool), torch.tensor([0, 1])


def _mixed_grad(weights, **kw) -> torch.Tensor:
    z, logp, old, adv, mask, part = _two_objectives()
    loss, _ = mixed_loss("cispo", logp, old, adv, mask, part, weights, eps_low=1.0, eps_high=2.0, **kw)
    loss.backward()
    return z.grad


def test_mixed_loss_weights_each_objective_by_its_lambda():
    # RARO Alg. 2 line 17: lambda_pol J_pol + lambda_crit J_crit; Table 5's DeepMath weights are 1/9 and 8/9.
    # The loss is linear in the weights, so the gradient is 1/9 g_pol + 8/9 g_crit with g_k the gradient of
    # objective k alone (weights (1, 0) and (0, 1)).
    g_pol, g_crit = _mixed_grad([1.0, 0.0]), _mixed_grad([0.0, 1.0])
    assert not torch.allclose(g_pol, g_crit)  # the two rows pull differently
    assert torch.allclose(_mixed_grad([1 / 9, 8 / 9]), g_pol / 9 + 8 * g_crit / 9, atol=1e-7)
    assert torch.allclose(_mixed_grad([0.5, 0.5]), (g_pol + g_crit) / 2, atol=1e-7)


def test_mixed_loss_weights_do_not_depend_on_row_counts():
    # each objective is averaged over its own rows first: three copies of the critic row weigh as one
    z, logp, old, adv, mask, part = _two_objectives()
    rows = torch.tensor([0, 1, 1, 1])
    loss3, _ = mixed_loss("cispo", logp[rows], old[rows], adv[rows], mask[rows], part[rows], [1 / 9, 8 / 9],
                          eps_low=1.0, eps_high=2.0)
    loss1, _ = mixed_loss("cispo", logp, old, adv, mask, part, [1 / 9, 8 / 9], eps_low=1.0, eps_high=2.0)
    assert loss3.item() == pytest.approx(loss1.item())


def test_mixed_loss_one_objective_of_weight_one_is_the_policy_loss():
    z, logp, old, adv, mask, _ = _two_objectives()
    part = torch.tensor([0, 0])
    mixed, _ = mixed_loss("grpo", logp, old, adv * torch.tensor([1.0, -0.5]), mask, part, [1.0],
                          eps_low=0.2, eps_high=0.28)
    single, _ = grpo_loss(logp, old, adv * torch.tensor([1.0, -0.5]), mask, eps_low=0.2, eps_high=0.28, norm="token")
    assert mixed.item() == pytest.approx(single.item())
    with pytest.raises(ValueError, match="max_tokens"):
        mixed_loss("grpo", logp, old, adv, mask, part, [1.0, 1.0], eps_low=0.2, eps_high=0.2, max_tokens=[4])
