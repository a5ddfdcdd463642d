"""Evaluation metrics as pure functions: pass@k, avg@k, maj@k, best-of-N / RM@k, a scorer as a verifier
(precision / recall / F1 / accuracy with bootstrap intervals), ranking AUC, length bias, cost per response.

Conventions. ``correct`` is one boolean array per group (the labels). Rewards are one float array per group
with NaN for masked (non-ok) responses; a masked response is never selected and never counted as a
prediction. Metrics over "the first k" responses use the first k in file order, as the upstream
Qwen2.5-Math ``rm_maj_eval.py`` does for maj@k and rm@k (samples are i.i.d., so the first k are a sample);
the best-of-n curve is expected over random n-subsets instead, as unbiased pass@n is, so the two compare.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence, Sized
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

__all__ = [
    "Interval", "VerifierMetrics", "auc", "avg_at_k", "best_of_n", "best_of_n_curve", "cost_per_response",
    "expected_best_of_n", "length_bias", "maj_at_k", "pass_at_k", "pass_at_k_groups", "powers_of_two", "rm_at_k",
    "verifier_metrics", "within_group_auc",
]


# ------------------------------------------------------------------------------------------ pass@k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem with ``c`` correct among ``n`` samples (Chen et al. 2021, "Evaluating
    Large Language Models Trained on Code", eq. 1 and Fig. 3's numerically stable product form):
    1 - C(n-c, k) / C(n, k) = 1 - prod_{i=n-c+1}^{n} (1 - k / i); exactly 1 when n - c < k."""
    if not (isinstance(n, (int, np.integer)) and isinstance(c, (int, np.integer)) and isinstance(k, (int, np.integer))):
        raise TypeError(f"pass@k takes integers, got n={n!r}, c={c!r}, k={k!r}")
    if k < 1:
        raise ValueError(f"pass@k: k must be >= 1, got k={k}")
    if k > n:
        raise ValueError(f"pass@k: k={k} is larger than the n={n} samples of the problem")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: c={c} correct is outside 0..n={n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def _bool_groups(correct: Sequence[Sequence[bool]]) -> list[np.ndarray]:
    out = []
    for i, g in enumerate(correct):
        a = np.asarray(g)
        if a.dtype != bool:
            if a.size and not np.isin(a, (0, 1)).all():
                raise ValueError(f"group {i}: correctness labels must be booleans, got {a.tolist()!r}")
            a = a.astype(bool)
        out.append(a)
    return out


def pass_at_k_groups(correct: Sequence[Sequence[bool]], k: int) -> float:
    """Mean unbiased pass@k over problems (each problem uses all of its n samples)."""
    groups = _bool_groups(correct)
    if not groups:
        raise ValueError("pass@k: no groups")
    return float(np.mean([pass_at_k(len(g), int(g.sum()), k) for g in groups]))


def avg_at_k(correct: Sequence[Sequence[bool]], k: int) -> float:
    """avg@k: accuracy averaged over the first k samples of each problem, then over problems (the
    "pass@1 estimated with k samples" of DeepSeek-R1's evaluation)."""
    groups = _check_k(_bool_groups(correct), k, "avg@k")
    return float(np.mean([g[:k].mean() for g in groups]))


def _check_k(groups: list[np.ndarray], k: int, what: str) -> list[np.ndarray]:
    if not groups:
        raise ValueError(f"{what}: no groups")
    if k < 1:
        raise ValueError(f"{what}: k must be >= 1, got k={k}")
    short = [i for i, g in enumerate(groups) if len(g) < k]
    if short:
        raise ValueError(f"{what}: k={k} is larger than n={len(groups[short[0]])} (group {short[0]}, "
                         f"{len(short)} group(s) too small)")
    return groups


def powers_of_two(n: int) -> list[int]:
    """1, 2, 4, ... up to n (the k of the accuracy table)."""
    return [2 ** i for i in range(int(n).bit_length())] if n >= 1 else []  # exact: no float log2 near 2**k


# ------------------------------------------------------------------------------------------ maj@k


def maj_at_k(answers: Sequence[Sequence[Hashable | None]], correct: Sequence[Sequence[bool]], k: int, *,
             cluster: bool = True, checker: Any = None) -> float:
    """maj@k: is the plurality answer of the first k samples correct? (Wang et al. 2023, self-consistency.)

    The vote is JURY-RL's (``rewardkit.jury.proof_gate.majority_vote``: math-verify equivalent answers are one
    vote, ties go to the answer that appears first; ``cluster=False`` votes on the raw labels with
    ``proof_gate.vote``). The majority is correct when its first response is labelled correct, as in the
    upstream rm_maj_eval.py. A group whose k samples have no answer at all counts as wrong.
    """
    from rewardkit.jury.vote import majority_vote, vote

    groups = _check_k(_bool_groups(correct), k, "maj@k")
    _paired("maj@k", answers, groups, ("answers", "labels"))
    hits = []
    for ans, ok in zip(answers, groups):
        head = list(ans[:k])
        v = majority_vote(head, checker=checker)[0] if cluster else vote(head)
        if v.majority is None:
            hits.append(False)
            continue
        hits.append(bool(ok[int(np.flatnonzero(v.mask(v.majority))[0])]))
    return float(np.mean(hits))


# -------------------------------------------------------------------------------------- best-of-N

TieRule = Literal["mean", "first"]


def _paired(what: str, a: Sequence[Sized], b: Sequence[Sized], names: tuple[str, str] = ("rewards", "labels")) -> None:
    """Refuse two per-response tables that do not line up group for group: a shifted pairing would score one
    response's reward against another's label, silently."""
    if len(a) != len(b):
        raise ValueError(f"{what}: {len(a)} {names[0][:-1]} groups for {len(b)} {names[1][:-1]} groups")
    for i, (x, y) in enumerate(zip(a, b)):
        if len(x) != len(y):
            raise ValueError(f"{what}: group {i} has {len(x)} {names[0]} and {len(y)} {names[1]}")


def _float_groups(rewards: Sequence[Sequence[float | None]]) -> list[np.ndarray]:
    return [np.array([np.nan if x is None else x for x in g], dtype=np.float64) for g in rewards]


def best_of_n(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]], n: int | None = None,
              *, ties: TieRule = "mean") -> tuple[float, int]:
    """Best-of-N accuracy with any scorer as the selector, over the first ``n`` responses of each group.

    Picks the highest reward among unmasked responses (NaN / None are never picked). Ties: ``"mean"``
    (default) counts the mean correctness of the tied best responses, i.e. the expected accuracy of a
    uniformly random tie-break, so the result does not depend on response order; ``"first"`` takes the
    first best in file order (upstream rm@k). A group with every response masked selects nothing and
    counts as wrong. Returns ``(accuracy, groups_with_nothing_selectable)``.
    """
    rs, cs = _float_groups(rewards), _bool_groups(correct)
    _paired("best-of-N", rs, cs)
    if ties not in ("mean", "first"):
        raise ValueError(f"best-of-N: ties must be 'mean' or 'first', got {ties!r}")
    k = n if n is not None else min((len(g) for g in cs), default=0)
    _check_k(cs, k, "best-of-N")
    acc, empty = [], 0
    for r, c in zip(rs, cs):
        r, c = r[:k], c[:k]
        ok = np.isfinite(r)
        if not ok.any():
            empty += 1
            acc.append(0.0)
            continue
        best = np.flatnonzero(ok & (r == r[ok].max()))
        acc.append(float(c[best].mean()) if ties == "mean" else float(c[best[0]]))
    return float(np.mean(acc)), empty


def expected_best_of_n(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]], n: int) -> float:
    """Best-of-n accuracy expected over uniformly random n-subsets of each group's responses (ties: mean),
    the estimator of unbiased pass@n (Chen et al. 2021, eq. 1), so a selector's curve and the oracle compare
    like with like: never above pass@n, and equal to it for rewards that are the labels.

    Exact: with the group's distinct rewards in levels from the best, level j holding a_j responses (c_j
    correct) and A_j above it, a random n-subset's best level is j with probability
    (C(N - A_j, n) - C(N - A_j - a_j, n)) / C(N, n), and its tied best are then a uniform draw from level j:
    c_j / a_j correct on average. Masked responses are never selected (a subset of only those is wrong)."""
    rs, cs = _float_groups(rewards), _bool_groups(correct)
    _paired("best-of-N", rs, cs)
    _check_k(cs, n, "best-of-N")
    acc = []
    for r, c in zip(rs, cs):
        total, above, e = math.comb(len(r), n), 0, 0.0
        for v in sorted(set(r[np.isfinite(r)].tolist()), reverse=True):
            level = r == v
            a = int(level.sum())
            e += (math.comb(len(r) - above, n) - math.comb(len(r) - above - a, n)) / total * c[level].mean()
            above += a
        acc.append(e)
    return float(np.mean(acc))


def best_of_n_curve(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]]) -> dict[int, float]:
    """Best-of-n accuracy for n = 1..N, expected over random n-subsets (``expected_best_of_n``): at n = N it
    is ``best_of_n``'s value; below N it compares with pass@n and random choice (the mean label)."""
    n_max = min((len(g) for g in correct), default=0)  # no groups: no n, an empty curve
    return {n: expected_best_of_n(rewards, correct, n) for n in range(1, n_max + 1)}


def rm_at_k(rm_scores: Sequence[Sequence[float]], correct: Sequence[Sequence[bool]], k: int, *,
            ties: TieRule = "first") -> float:
    """RM@k: best-of-k with a reward model's scores, first best on ties as upstream rm_maj_eval.py."""
    return best_of_n(rm_scores, correct, k, ties=ties)[0]


# ------------------------------------------------------------------------------- scorer as verifier


@dataclass(frozen=True)
class Interval:
    """A point estimate with a bootstrap 95% interval (NaN when the metric is undefined)."""

    value: float
    low: float
    high: float

    def __str__(self) -> str:
        if math.isnan(self.value):
            return "undefined"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class VerifierMetrics:
    """Precision / recall / F1 / accuracy of "reward >= threshold" as a prediction of the label."""

    precision: Interval
    recall: Interval
    f1: Interval
    accuracy: Interval
    tp: int
    fp: int
    fn: int
    tn: int
    masked: int  # responses without a usable reward (left out of every count)
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _prf(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray, tn: np.ndarray) -> np.ndarray:
    """[precision, recall, f1, accuracy] from confusion counts (NaN where a denominator is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        r = np.where(tp + fn > 0, tp / (tp + fn), np.nan)
        f = np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)
        a = np.where(tp + fp + fn + tn > 0, (tp + tn) / (tp + fp + fn + tn), np.nan)
    return np.stack([p, r, f, a])


def verifier_metrics(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]], *,
                     threshold: float = 0.5, n_boot: int = 1000, seed: int = 0) -> VerifierMetrics:
    """A scorer as a verifier: predict "correct" when reward >= ``threshold``; compare with the labels.

    The 95% intervals are percentile bootstraps that resample whole groups (responses of one problem are
    correlated), seeded, with ``n_boot`` resamples (Efron & Tibshirani 1993, ch. 13). Masked responses
    are left out and counted. F1 = 2TP / (2TP + FP + FN).
    """
    rs, cs = _float_groups(rewards), _bool_groups(correct)
    _paired("verifier metrics", rs, cs)
    counts = np.zeros((len(rs), 4))
    masked = 0
    for i, (r, c) in enumerate(zip(rs, cs)):
        ok = np.isfinite(r)
        masked += int((~ok).sum())
        pred, lab = r[ok] >= threshold, c[ok]
        counts[i] = [(pred & lab).sum(), (pred & ~lab).sum(), (~pred & lab).sum(), (~pred & ~lab).sum()]
    point = _prf(*counts.sum(0))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(rs), size=(n_boot, len(rs)))
    boot = counts[idx].sum(1)  # [n_boot, 4]
    stats = _prf(*boot.T)  # [4, n_boot]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: the metric is undefined
        lo = np.nanpercentile(stats, 2.5, axis=1) if len(rs) else np.full(4, np.nan)
        hi = np.nanpercentile(stats, 97.5, axis=1) if len(rs) else np.full(4, np.nan)
    ivs = [Interval(float(point[j]), float(lo[j]) if not math.isnan(point[j]) else math.nan,
                    float(hi[j]) if not math.isnan(point[j]) else math.nan) for j in range(4)]
    tp, fp, fn, tn = (int(x) for x in counts.sum(0))
    return VerifierMetrics(*ivs, tp=tp, fp=fp, fn=fn, tn=tn, masked=masked, threshold=threshold)


# ------------------------------------------------------------------------------- ranking and bias


def _pooled(rewards, correct) -> tuple[np.ndarray, np.ndarray]:
    rs, cs = _float_groups(rewards), _bool_groups(correct)
    _paired("AUC", rs, cs)
    r = np.concatenate(rs) if rs else np.zeros(0)
    c = np.concatenate(cs) if cs else np.zeros(0, bool)
    ok = np.isfinite(r)
    return r[ok], c[ok]


def auc(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]]) -> float:
    """Pooled ROC AUC of rewards as a ranking of correct over incorrect responses (scikit-learn); NaN when
    only one class is present among the unmasked responses."""
    from sklearn.metrics import roc_auc_score

    r, c = _pooled(rewards, correct)
    if c.all() or not c.any():
        return math.nan
    return float(roc_auc_score(c, r))


def within_group_auc(rewards: Sequence[Sequence[float | None]], correct: Sequence[Sequence[bool]]) -> tuple[float, int]:
    """Mean per-group AUC over the groups that hold both correct and incorrect unmasked responses (the
    ranking GRPO uses: only order within a group matters). Returns ``(mean AUC, groups used)``."""
    from sklearn.metrics import roc_auc_score

    vals = []
    rs, cs = _float_groups(rewards), _bool_groups(correct)
    _paired("within-group AUC", rs, cs)
    for r, c in zip(rs, cs):
        ok = np.isfinite(r)
        if c[ok].any() and not c[ok].all():
            vals.append(roc_auc_score(c[ok], r[ok]))
    return (float(np.mean(vals)) if vals else math.nan), len(vals)


def length_bias(rewards: Sequence[Sequence[float | None]], lengths: Sequence[Sequence[int]],
                correct: Sequence[Sequence[bool]] | None = None) -> dict[str, float]:
    """Spearman rank correlation of reward with response length (scipy), pooled over unmasked responses;
    with labels, also within correct responses only (length bias not explained by correctness)."""
    from scipy.stats import spearmanr

    rs = _float_groups(rewards)
    ls = [np.asarray(g, dtype=np.float64) for g in lengths]
    _paired("length bias", rs, ls, ("rewards", "lengths"))
    if correct is not None:
        _paired("length bias", rs, correct)
    r = np.concatenate(rs) if rs else np.zeros(0)
    ln = np.concatenate(ls) if ls else np.zeros(0)
    ok = np.isfinite(r)

    def rho(mask: np.ndarray) -> float:
        if mask.sum() < 3 or np.ptp(r[mask]) == 0 or np.ptp(ln[mask]) == 0:
            return math.nan  # constant input: no rank correlation is defined
        return float(spearmanr(r[mask], ln[mask]).statistic)

    out = {"spearman": rho(ok)}
    if correct is not None:
        c = np.concatenate(_bool_groups(correct)) if rs else np.zeros(0, bool)
        out["spearman_correct_only"] = rho(ok & c)
    return out


def cost_per_response(costs: Sequence[dict[str, float]], responses: int) -> dict[str, float]:
    """Judge calls, prompt + completion tokens, verifier calls and seconds per response (and per group)
    from the ``cost`` records of score rows."""
    keys = ("judge_calls", "prompt_tokens", "completion_tokens", "verifier_calls", "cache_hits", "seconds")
    tot = {k: float(sum(c.get(k, 0) or 0 for c in costs)) for k in keys}
    out = {f"{k}_per_response": tot[k] / responses if responses else math.nan for k in keys}
    out.update({f"{k}_per_group": tot[k] / len(costs) if costs else math.nan for k in keys})
    return out
