"""The GRPO / CISPO losses against hand-derived gradients on a two-token toy policy."""

from __future__ import annotations

import math

import pytest
import torch

from rewardkit.grpo.losses import aggregate, cispo_loss, grpo_loss, k3_kl, mixed_loss, policy_loss

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


# ------------------------------------------------------------------- normalisers, defaults, KL (mutation-tested)

K = math.log(2) - 0.5  # k3 at pi_theta = 1/2, pi_ref = 1/4: exp(-ln 2) + ln 2 - 1


def test_aggregate_normalisers_on_unequal_lengths():
    x = torch.tensor([[1.0, 3.0], [5.0, 0.0]])
    m = torch.tensor([[True, True], [True, False]])
    assert aggregate(x, m).item() == pytest.approx(3.0)  # default: token mean (1 + 3 + 5) / 3
    assert aggregate(x, m, "sequence").item() == pytest.approx(3.5)  # (2 + 5) / 2 (DeepSeekMath eq. 3)
    assert aggregate(x, m, "constant").item() == pytest.approx(9 / 4)  # sum / (B T), Dr. GRPO
    assert aggregate(x, m, "constant", max_tokens=6).item() == pytest.approx(9 / 12)  # sum / (B max_tokens)
    one = torch.tensor([[2.0], [4.0]])  # T = 1: the normaliser is B * 1
    assert aggregate(one, torch.ones(2, 1, dtype=torch.bool), "constant").item() == pytest.approx(3.0)


def test_token_normaliser_per_group_counts_single_token_groups_and_keeps_float64():
    x = torch.tensor([[2.0, 4.0], [5.0, 0.0], [7.0, 0.0]], dtype=torch.float64)
    m = torch.tensor([[True, True], [True, False], [True, False]])
    # groups {0}, {1, 2}: means 3 and (5 + 7) / 2 = 6, then their mean 4.5; a one-token group counts
    out = aggregate(x, m, "token", group=torch.tensor([0, 1, 1]))
    assert out.dtype == torch.float64 and out.item() == pytest.approx(4.5)
    # one live group (the other fully masked): its own mean, not halved
    only = aggregate(x, torch.tensor([[True, True], [False, False], [False, False]]), "token",
                     group=torch.tensor([0, 1, 1]))
    assert only.item() == pytest.approx(3.0)
    single = aggregate(x[1:2], m[1:2], "token", group=torch.tensor([4]))  # one group holding one token
    assert single.item() == pytest.approx(5.0)


def test_grpo_default_clip_is_02_on_both_sides():
    # DeepSeekMath's GRPO (and the grpo preset): eps = 0.2 both ways
    for ratio, adv, expected in ((1.25, 1.0, 1.2), (0.75, -1.0, -0.8)):
        logp, old, a, m = _one_token(ratio, adv)
        loss, _ = grpo_loss(logp, old, a, m)
        assert -loss.item() == pytest.approx(expected, abs=1e-6)


def test_cispo_lower_clip_applies_when_below_one():
    # with eps_low = 0.5 the weight of a token at r = 0.25 is clipped up to 0.5 (eq. 2 has both bounds)
    logp, old, a, m = _one_token(0.25, 1.0)
    loss, _ = cispo_loss(logp, old, a, m, eps_low=0.5, eps_high=2.0)
    loss.backward()
    assert -float(logp.grad) == pytest.approx(0.5, rel=1e-6)


def test_eps_zero_is_allowed_and_nothing_on_policy_is_clipped():
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, [[0, 1]])
    _, stats = grpo_loss(logp, logp.detach(), torch.tensor([1.0]), torch.ones(1, 2, dtype=torch.bool),
                         eps_low=0.0, eps_high=0.0)
    assert stats["clip_fraction"] == 0.0  # r = 1 lies in [1 - 0, 1 + 0]


def test_clip_fraction_with_a_token_inside_the_range():
    logp = torch.log(torch.tensor([[0.75, 1.0, 1.25, 1.3]]) * 0.5)
    old = torch.full((1, 4), math.log(0.5))
    _, stats = grpo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 4, dtype=torch.bool), eps_low=0.2, eps_high=0.28)
    assert stats["clip_fraction"] == pytest.approx(2 / 4)


def test_a_shape_mismatch_of_either_tensor_is_refused():
    logp = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="same"):
        grpo_loss(logp, torch.zeros(1, 3), torch.zeros(1), torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match="same"):
        grpo_loss(logp, torch.zeros(1, 2), torch.zeros(1), torch.ones(1, 3, dtype=torch.bool))


def _kl_batch():
    """Row 0: two tokens at pi = 1/2 against pi_ref = 1/4 (k3 = K each); row 1: one token equal to the reference
    (k3 = 0) and one masked token far from it. Zero advantages: the loss is the KL term alone."""
    logp = torch.full((2, 2), math.log(0.5))
    ref = torch.tensor([[math.log(0.25), math.log(0.25)], [math.log(0.5), math.log(0.01)]])
    mask = torch.tensor([[True, True], [True, False]])
    return logp, ref, mask


@pytest.mark.parametrize("beta", [0.5, 1.0])
@pytest.mark.parametrize("loss_fn", [grpo_loss, cispo_loss])
def test_kl_penalty_and_its_statistic(loss_fn, beta):
    logp, ref, mask = _kl_batch()
    adv = torch.zeros(2)
    loss, stats = loss_fn(logp, logp, adv, mask, ref_logp=ref, beta=beta, norm="token")
    assert loss.item() == pytest.approx(beta * 2 * K / 3)  # + beta * mean k3 over the 3 real tokens
    assert stats["kl"] == pytest.approx(2 * K / 3)  # the masked token's large k3 is not counted
    no_beta, stats0 = loss_fn(logp, logp, adv, mask, ref_logp=ref)  # default beta = 0: measured, not applied
    assert no_beta.item() == 0.0 and stats0["kl"] == pytest.approx(2 * K / 3)
    assert loss_fn(logp, logp, adv, mask)[1]["kl"] == 0.0  # no reference: no KL


@pytest.mark.parametrize("loss_fn", [grpo_loss, cispo_loss])
def test_losses_pass_group_and_budget_on(loss_fn):
    # on-policy with A = (1, 0): the objective per token is A (grpo: r A; cispo: the gradient weight, value A log pi)
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, [[0, 0], [0, 0]])
    mask = torch.tensor([[True, True], [True, False]])
    adv = torch.tensor([1.0, 0.0])
    per_token = 1.0 if loss_fn is grpo_loss else math.log(0.5)
    grouped, _ = loss_fn(logp, logp.detach(), adv, mask, norm="token", group=torch.tensor([0, 1]))
    assert -grouped.item() == pytest.approx(per_token / 2)  # group means (per_token, 0), not 2 per_token / 3
    budget, _ = loss_fn(logp, logp.detach(), adv, mask, norm="constant", max_tokens=4)
    assert -budget.item() == pytest.approx(2 * per_token / 8)


def _mixed(norm="token", **kw):
    z = torch.zeros(2, requires_grad=True)
    logp = _logp(z, [[0, 0], [0, 0], [0, 0]])
    mask = torch.tensor([[True, True], [True, False], [True, True]])
    loss, _ = mixed_loss("grpo", logp, logp.detach(), torch.tensor([1.0, 0.0, 3.0]), mask, torch.tensor([0, 0, 2]),
                         [1.0, 1.0, 0.5], eps_low=0.2, eps_high=0.28, norm=norm, **kw)
    return loss.item()


def test_mixed_loss_normalises_each_objective_with_its_own_group_and_budget():
    # objective 0: rows (A = 1, 2 tokens) and (A = 0, 1 token); objective 1 has no rows; objective 2: A = 3, 2 tokens
    assert _mixed() == pytest.approx(-(2 / 3 + 0.5 * 3))  # the empty objective 1 is skipped, 2 still counts
    assert _mixed(group=torch.tensor([0, 1, 2])) == pytest.approx(-(1 / 2 + 0.5 * 3))  # group means (1, 0)
    assert _mixed("sequence") == pytest.approx(-(1 / 2 + 0.5 * 3))
    assert _mixed("constant", max_tokens=[4, None, 8]) == pytest.approx(-(2 / 8 + 0.5 * 6 / 8))


@pytest.mark.parametrize("norm, kw, expected", [
    ("token", {}, 2 * K / 3),
    ("token", {"group": torch.tensor([0, 1])}, K / 2),
    ("sequence", {}, K / 2),
    ("constant", {"max_tokens": [4, 3]}, 2 * K / 8),  # the largest budget normalises the one KL term
])
@pytest.mark.parametrize("beta", [0.5, 1.0])
def test_mixed_loss_kl_is_one_term_over_every_row(norm, kw, expected, beta):
    logp, ref, mask = _kl_batch()
    loss, stats = mixed_loss("grpo", logp, logp, torch.zeros(2), mask, torch.tensor([0, 1]), [1 / 9, 8 / 9],
                             eps_low=0.2, eps_high=0.28, ref_logp=ref, beta=beta, norm=norm, **kw)
    assert loss.item() == pytest.approx(beta * expected)
    assert stats["kl"] == pytest.approx(2 * K / 3)
    default, _ = mixed_loss("grpo", logp, logp, torch.zeros(2), mask, torch.tensor([0, 1]), [1 / 9, 8 / 9],
                            eps_low=0.2, eps_high=0.28, ref_logp=ref, norm=norm, **kw)
    assert default.item() == 0.0  # default beta = 0


def test_policy_loss_defaults_are_token_mean_and_no_kl():
    logp, ref, mask = _kl_batch()
    adv = torch.tensor([1.0, 4.0])  # on-policy grpo: per-token objective A; token mean (1 + 1 + 4) / 3 = 2
    loss, stats = policy_loss("grpo", logp, logp, adv, mask, eps_low=0.2, eps_high=0.28, ref_logp=ref)
    assert loss.item() == pytest.approx(-2.0) and stats["kl"] == pytest.approx(2 * K / 3)
