"""GAR discriminator data from ProcessBench's human labels: labelled slices, SFT targets, held-out metrics.

Each solution's steps are joined and sliced with GAR's slicing (``rewardkit.gar.slicing``, the same call
``SliceScorer.slices`` makes, so training and evaluation see the same slices). A slice wholly before the
human-labelled earliest error is ``YES``; the slice holding it is ``NO``; slices after it are unlabelled
(``None``: the annotators marked only the first error). Every slice of an error-free solution is ``YES``.

The SFT target follows GAR's analysis-score-rationale format (sec. 3, App. B): a brief analysis, the
verdict as ``**YES**`` / ``**NO**``, then a short rationale. GAR had o4-mini write analyses and rationales;
we have only the human labels, so ours are built from them (``sft_target``): the analysis quotes the
slice's last sentence (what the reasoning arrives at, label-free), the rationale of a NO quotes the start
of the labelled erroneous step, that of a YES says no step was marked wrong.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from rewardkit.evals.processbench import (
    STEP_SEPARATOR,
    PBExample,
    PBPrediction,
    processbench_metric,
    slices_to_steps,
    step_offsets,
    unit_labels,
)

from rewardkit.gar.slicing import Segmentation, TokenCounter, make_slices, whitespace_tokens

Verdict = Literal["YES", "NO"]


@dataclass(frozen=True)
class LabelledSlice:
    """One slice of a ProcessBench solution with its label (``None``: after the earliest error, unused)."""

    id: str  # "<solution id>#<slice index>"
    solution_id: str
    split: str
    problem: str
    text: str
    start: int  # character span in the joined steps
    end: int
    steps: tuple[int, ...]  # indices of the steps the slice overlaps
    error_step: int  # the solution's label: earliest erroneous step, -1 if none
    error_quote: str = ""  # NO slices: the start of the erroneous step's text inside this slice

    @property
    def verdict(self) -> Verdict | None:
        """YES wholly before the earliest error, NO holding it, None after it."""
        wrong = unit_labels([list(self.steps)], self.error_step)[0]
        return None if wrong is None else "NO" if wrong else "YES"


def label_slices(ex: PBExample, max_tokens: int, count_tokens: TokenCounter = whitespace_tokens,
                 min_tokens: int | None = None, segmentation: Segmentation = "delimiters") -> list[LabelledSlice]:
    """GAR slices of one solution (its steps joined by ``STEP_SEPARATOR``), each with its label."""
    joined = STEP_SEPARATOR.join(ex.steps)
    slices = make_slices(joined, segmentation, max_tokens, count_tokens, min_tokens)
    spans = [(s.start, s.end) for s in slices]
    steps = slices_to_steps(ex.steps, spans)
    offs = step_offsets(ex.steps)
    out = []
    for k, (s, st) in enumerate(zip(slices, steps, strict=True)):
        quote = ""
        if ex.label >= 0 and min(st) <= ex.label <= max(st):
            a, b = offs[ex.label]
            quote = first_sentence(joined[max(a, s.start):min(b, s.end)])
        out.append(LabelledSlice(f"{ex.id}#{k}", ex.id, ex.split, ex.problem, s.text, s.start, s.end, tuple(st),
                                 ex.label, quote))
    return out


# ------------------------------------------------------------------------------------ SFT targets

# a sentence ends at . ! ? before whitespace, except after a title ("Mr. Rogers"); a line break ends one too
_SENTENCE = re.compile(r"(?<=[.!?])(?<!Mr\.)(?<!Ms\.)(?<!Dr\.)(?<!Mrs\.)(?<!St\.)\s+|\n+")


def first_sentence(text: str, max_words: int = 25) -> str:
    """The first non-empty sentence (or line) of ``text``, cut to ``max_words`` words ("..." when cut)."""
    parts = [p.strip() for p in _SENTENCE.split(text.strip()) if p.strip()]
    return _words(parts[0] if parts else "", max_words)


def last_sentence(text: str, max_words: int = 25) -> str:
    """The last non-empty sentence (or line) of ``text``, cut to its last ``max_words`` words."""
    parts = [p.strip() for p in _SENTENCE.split(text.strip()) if p.strip()]
    if not parts:
        return ""
    w = parts[-1].split()
    return parts[-1] if len(w) <= max_words else "... " + " ".join(w[-max_words:])


def _words(s: str, n: int) -> str:
    w = s.split()
    return s if len(w) <= n else " ".join(w[:n]) + " ..."


YES_RATIONALE = "No step in this part of the reasoning was marked wrong; each step follows from the problem and the steps before it."


def sft_target(sl: LabelledSlice, analysis: bool = True) -> str:
    """GAR's analysis-score-rationale text for a labelled slice (App. B; ``rewardkit.grpo.sft.judgment_text``);
    ``analysis=False`` leaves the analysis out (verdict first, then the rationale)."""
    from rewardkit.grpo.sft import judgment_text

    v = sl.verdict
    if v is None:
        raise ValueError(f"slice {sl.id} comes after the earliest error: it has no label to train on")
    text = f"The reasoning arrives at: \"{last_sentence(sl.text)}\"" if analysis else ""
    rationale = YES_RATIONALE if v == "YES" else f"This step is wrong: \"{sl.error_quote}\""
    return judgment_text(v == "YES", text, rationale)


def sft_example(sl: LabelledSlice, analysis: bool = True) -> Any:
    """One stage-1 SFT example (``rewardkit.grpo.sft.JudgmentExample``): the slice as the discriminator sees it
    (no context, as ``SliceScorer`` judges by default), its label (True: YES) and the target judgment."""
    from rewardkit.gar.slices import SliceItem
    from rewardkit.grpo.sft import JudgmentExample

    return JudgmentExample(SliceItem(sl.problem, sl.text), sl.verdict == "YES", sft_target(sl, analysis))


# --------------------------------------------------------------------------------- held-out metrics


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """ROC AUC of ``scores`` for the positive class (scikit-learn); NaN when a class is missing."""
    from sklearn.metrics import roc_auc_score

    y = np.asarray(positive, dtype=bool)
    if y.all() or not y.any():
        return math.nan
    return float(roc_auc_score(y, np.asarray(scores, dtype=float)))


def balanced_accuracy(predicted: Sequence[bool], positive: Sequence[bool]) -> float:
    """Mean of the per-class recalls (scikit-learn); NaN when a class is missing."""
    from sklearn.metrics import balanced_accuracy_score

    y = np.asarray(positive, dtype=bool)
    if y.all() or not y.any():
        return math.nan
    return float(balanced_accuracy_score(y, np.asarray(predicted, dtype=bool)))


def discriminator_report(preds: Sequence[PBPrediction], threshold: float = 0.5) -> dict[str, Any]:
    """Held-out metrics of a slice discriminator from ``processbench.predict(..., mode="reslice")`` rows.

    Slice level, over labelled slices: AUROC of P(YES) for YES (= AUROC of 1 - P(YES) for NO) and balanced
    accuracy of ``P(YES) >= threshold``. Solution level: ProcessBench's F1 (earliest error = first NO),
    pooled over the solutions and per split.
    """
    p, yes = [], []
    missing = 0
    for pr in preds:
        for q, wrong in zip(pr.p_yes, unit_labels(pr.unit_steps, pr.label), strict=True):
            if wrong is None:
                continue
            if q is None:
                missing += 1
                continue
            p.append(q)
            yes.append(not wrong)
    pooled = processbench_metric([pr.prediction for pr in preds], [pr.label for pr in preds])
    splits = {}
    for split in sorted({pr.split for pr in preds}):
        ps = [pr for pr in preds if pr.split == split]
        splits[split] = processbench_metric([pr.prediction for pr in ps], [pr.label for pr in ps])
    return {
        "auroc": auroc(p, yes),
        "balanced_accuracy": balanced_accuracy([q >= threshold for q in p], yes),
        "f1": pooled["f1"], "error_acc": pooled["error_acc"], "correct_acc": pooled["correct_acc"],
        "n": len(p), "n_yes": int(sum(yes)), "n_no": len(yes) - int(sum(yes)), "no_p_yes": missing,
        "n_solutions": len(preds), "threshold": threshold,
        "mean_p_yes": float(np.mean(p)) if p else math.nan,
        "per_split_f1": {k: v["f1"] for k, v in splits.items()},
    }


def evaluate_discriminator(judge: Any, examples: Sequence[PBExample], slice_tokens: int,
                           threshold: float = 0.5) -> tuple[dict[str, Any], list[PBPrediction]]:
    """Judge every GAR slice of every solution in verdict-logit mode (one backend call) and report the held-out
    metrics (``discriminator_report``); also returns the per-solution predictions."""
    from rewardkit.evals.processbench import predict

    from rewardkit.gar.slices import SliceScorer

    scorer = SliceScorer(judge=judge, mode="logit", slice_tokens=slice_tokens, threshold=threshold)
    preds = predict(examples, scorer, "reslice")
    return discriminator_report(preds, threshold), preds


def _labelled(pr: PBPrediction) -> tuple[list[float], list[bool]]:
    """(P(YES), is YES) of one solution's labelled slices with a probability."""
    pairs = [(q, not w) for q, w in zip(pr.p_yes, unit_labels(pr.unit_steps, pr.label), strict=True)
             if w is not None and q is not None]
    return [q for q, _ in pairs], [y for _, y in pairs]


def auroc_bootstrap(before: Sequence[PBPrediction], after: Sequence[PBPrediction], n_boot: int = 1000,
                    seed: int = 0) -> dict[str, list[float]]:
    """Percentile 95% intervals of the slice AUROC before, after, and after - before, from one paired
    bootstrap that resamples whole solutions (slices of one solution are correlated), seeded."""
    if [p.id for p in before] != [p.id for p in after]:
        raise ValueError("auroc_bootstrap: before and after must judge the same solutions in the same order")
    b, a = [_labelled(p) for p in before], [_labelled(p) for p in after]
    rng = np.random.default_rng(seed)
    vals = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(b), len(b))
        sb = auroc([q for i in idx for q in b[i][0]], [y for i in idx for y in b[i][1]])
        sa = auroc([q for i in idx for q in a[i][0]], [y for i in idx for y in a[i][1]])
        vals.append((sb, sa, sa - sb))
    v = np.array(vals, dtype=float)
    out = {}
    for k, name in enumerate(("before", "after", "delta")):
        col = v[:, k][np.isfinite(v[:, k])]
        out[name] = [float(np.percentile(col, 2.5)), float(np.percentile(col, 97.5))] if col.size else [math.nan] * 2
    return out
