"""GAR's rewards (Sec. 3), pure: R^s (mean slice score), R^rea = l1 R^m + l2 R^s, R^d (the GAN objective over
reference and generated slices), R^a (agreement of slice scores with answer correctness), R^dis = l3 R^d + l4 R^a."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def slice_mean(scores: Sequence[float | None]) -> float:
    """R^s = (1/n) sum_i r^s_i (sec. 3) over the valid slices (None = invalid, left out); NaN if none."""
    valid = [float(s) for s in scores if s is not None and not math.isnan(s)]
    return float(np.mean(valid)) if valid else math.nan


def reasoner_reward(exact_match: float, slice_score: float, lambda1: float = 1.0, lambda2: float = 1.0) -> float:
    """R^rea = lambda1 * R^m + lambda2 * R^s (sec. 3; paper defaults lambda1 = lambda2 = 1)."""
    if lambda1 < 0 or lambda2 < 0:
        raise ValueError(f"reasoner_reward: lambdas must be >= 0 (sec. 3), got {lambda1}, {lambda2}")
    return lambda1 * exact_match + lambda2 * slice_score


def _probs(p: Sequence[float | None], eps: float) -> np.ndarray:
    a = np.array([x for x in p if x is not None and not math.isnan(x)], dtype=np.float64)
    if np.any((a < 0) | (a > 1)):
        raise ValueError("discriminator probabilities must lie in [0, 1]")
    return np.clip(a, eps, 1.0 - eps)


def gan_slice_terms(p_real: Sequence[float | None], is_reference: Sequence[bool], eps: float = 1e-6) -> np.ndarray:
    """Per-slice GAN terms: log M_d(x) for reference slices, log(1 - M_d(x)) for generated ones (NaN if
    the slice's probability is missing). ``p_real`` = M_d(x), the probability the slice is real (P(YES))."""
    if len(p_real) != len(is_reference):
        raise ValueError(f"gan_slice_terms: {len(p_real)} probabilities for {len(is_reference)} labels")
    out = np.full(len(p_real), np.nan)
    for i, (p, ref) in enumerate(zip(p_real, is_reference, strict=True)):
        if p is None or math.isnan(p):
            continue
        q = float(_probs([p], eps)[0])
        out[i] = math.log(q) if ref else math.log1p(-q)
    return out


def gan_reward(p_ref: Sequence[float | None], p_gen: Sequence[float | None], eps: float = 1e-6) -> float:
    """R^d = E_{x~p_ref}[log M_d(x)] + E_{x~p_gen}[log(1 - M_d(x))] (sec. 3, Goodfellow et al. 2014).

    Probabilities are clipped to [eps, 1 - eps] so a hard 0/1 verdict gives a finite reward; missing
    (None/NaN) probabilities are left out. Maximum 0 (perfect discrimination); log(1/4) at chance.
    """
    a, b = _probs(p_ref, eps), _probs(p_gen, eps)
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"gan_reward needs reference and generated slices ({len(a)} ref, {len(b)} gen valid)")
    return float(np.mean(np.log(a)) + np.mean(np.log1p(-b)))


def alignment_terms(scores: Sequence[float | None], correct: bool) -> np.ndarray:
    """Per-slice agreement 1 - |r^s_i - c| with the trace's answer correctness c (1 for a binary match)."""
    c = 1.0 if correct else 0.0
    return np.array([np.nan if s is None or math.isnan(s) else 1.0 - abs(float(s) - c) for s in scores])


def alignment_reward(scores_by_trace: Sequence[Sequence[float | None]], correct_by_trace: Sequence[bool]) -> float:
    """R^a (sec. 3): mean agreement of slice scores with their trace's final-answer correctness, pooled
    over all valid slices of all traces (NaN when no slice is valid)."""
    if len(scores_by_trace) != len(correct_by_trace):
        raise ValueError(f"alignment_reward: {len(scores_by_trace)} traces, {len(correct_by_trace)} labels")
    terms = [t for s, c in zip(scores_by_trace, correct_by_trace, strict=True) for t in alignment_terms(s, c)]
    terms = [t for t in terms if not math.isnan(t)]
    return float(np.mean(terms)) if terms else math.nan


def discriminator_reward(r_d: float, r_a: float, lambda3: float = 1.0, lambda4: float = 0.5) -> float:
    """R^dis = lambda3 * R^d + lambda4 * R^a (sec. 3; paper defaults lambda3 = 1, lambda4 = 0.5)."""
    if lambda3 < 0 or lambda4 < 0:
        raise ValueError(f"discriminator_reward: lambdas must be >= 0 (sec. 3), got {lambda3}, {lambda4}")
    return lambda3 * r_d + lambda4 * r_a


# Said wherever a GAR joint run is configured or reported (the gar mode's options, README, docs/training.md)
R_A_AT_PAPER_LAMBDA4 = ("M_d(x) is the discriminator's probability of **YES** where it wrote its verdict "
                        "(m_d=probability, the default; sec. 3 calls M_d a probability), so R^d and R^a both move "
                        "its advantages at the paper's lambda4 = 0.5; with m_d=verdict (hard verdicts: a wrong "
                        "verdict scores log 1e-6 = -13.8 in R^d) R^a reverses a slice's YES/NO rewards only for "
                        "lambda4 > 13.8, so at 0.5 it changes no advantage (with advantage=grpo)")


def judgment_rewards(scores: Sequence[float | None], is_reference: Sequence[bool],
                     correct: Sequence[bool | None], lambda3: float = 1.0, lambda4: float = 0.5,
                     eps: float = 1e-6, p_real: Sequence[float | None] | None = None) -> np.ndarray:
    """R^dis per sampled judgment (sec. 3): lambda3 * its GAN term + lambda4 * its alignment term.

    ``scores`` are the judgments' r^s (1 = **YES**, 0 = **NO**, None = unparseable: NaN, masked), which
    R^a compares with ``correct``, the final-answer correctness of a generated slice's trace (None:
    unknown, and reference slices have no R^a term). ``p_real`` is each judgment's M_d(x), the
    discriminator's probability that the slice is real; without it M_d(x) is the hard verdict itself,
    clipped to [eps, 1 - eps]. Averaged over the reference and over the generated judgments, these are
    R^d and R^a of ``gan_reward`` / ``alignment_reward``: the discriminator's GRPO reward on its judgments.

    >>> judgment_rewards([1.0, 1.0, 0.0], [True, False, False], [None, True, False]).round(2).tolist()
    [-0.0, -13.32, 0.5]
    """
    if not len(scores) == len(is_reference) == len(correct):
        raise ValueError(f"judgment_rewards: {len(scores)} scores, {len(is_reference)} kinds, {len(correct)} labels")
    if p_real is not None and len(p_real) != len(scores):
        raise ValueError(f"judgment_rewards: {len(p_real)} probabilities for {len(scores)} judgments")
    m_d = scores if p_real is None else [None if s is None or math.isnan(s) else p  # an unread judgment stays masked
                                         for s, p in zip(scores, p_real, strict=True)]
    d = gan_slice_terms(m_d, is_reference, eps)  # log M_d(x) (reference) / log(1 - M_d(x)) (generated)
    out = lambda3 * d
    for i, (s, ref, c) in enumerate(zip(scores, is_reference, correct, strict=True)):
        if not ref and c is not None and not math.isnan(out[i]):
            out[i] += lambda4 * alignment_terms([s], bool(c))[0]
    return out
