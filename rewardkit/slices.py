"""GAR (Generative Adversarial Reasoner, sec. 3, App. B and D): slice-level discriminator rewards.

Three layers, kept apart:

1. Slicing (pure): a reasoning trace is cut at delimiters (line and paragraph breaks, discourse cues such
   as "Wait", "Alternatively", "Therefore", "So", "But") into segments, and adjacent segments are merged
   until a clear new beginning or the token budget L (default 320, counted with the discriminator's
   tokenizer) is reached. Cuts never fall inside ``$$..$$``, ``\\[..\\]``, ``\\begin{..}..\\end{..}``,
   ``\\boxed{..}``, inline math or fenced code, and the slices concatenate back to the exact text.
   ``fixed_windows`` is the App. D.1 "pure fixed-length token windows" ablation.
2. Rewards (pure): R^s (mean slice score), R^rea = l1 R^m + l2 R^s, R^d (the GAN objective over
   reference and generated slices), R^a (agreement of slice scores with answer correctness) and
   R^dis = l3 R^d + l4 R^a.
3. ``SliceScorer`` (``--scorer slices``): slices every response of every group, sends all slices of the
   whole batch to the backend in one call (App. B prompt, output capped at K = 128 tokens, or verdict-logit
   mode P(YES)), and combines R^s with the exact-match verifier R^m.

An unparseable discriminator output makes that slice ``invalid``: it is left out of R^s (the mean runs
over valid slices) and is never counted as NO; a response is invalid only when none of its slices is valid.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rewardkit.answers import AnswerChecker, default_checker, extract_answer
from rewardkit.backends.base import ChatRequest, JudgeBackend, VerdictRequest, cost_of
from rewardkit.prompts.gar import VERDICT_CHOICES, VERDICT_PREFIX, discriminator_messages
from rewardkit.scoring import BaseScorer
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verdicts import parse_yes_no

TokenCounter = Callable[[Sequence[str]], list[int]]  # batched, like JudgeBackend.count_tokens

DEFAULT_SLICE_TOKENS = 320  # L (sec. 3)
DEFAULT_MIN_TOKENS = 80  # our choice: App. D.1 says only that slices must not be "excessively short"
DEFAULT_JUDGE_TOKENS = 128  # K (sec. 3)


def whitespace_tokens(texts: Sequence[str]) -> list[int]:
    """Whitespace word counts: a tokenizer-free stand-in for tests and for backends without a tokenizer."""
    return [len(t.split()) for t in texts]


# ------------------------------------------------------------------------------ protected blocks

_OPENERS = re.compile(
    r"```|\$\$|\\\[|\\begin\s*\{(?P<env>[^{}]+)\}|\\boxed\s*\{|\\\(|(?<!\\)\$"
)


# pandoc's rule for inline $...$: the closing $ follows a non-space, is not part of $$ and is not
# followed by a digit (so "costs $5 and $6" protects nothing)
_INLINE_CLOSE = re.compile(r"(?<![\s\\$])\$(?![\d$])")


def _brace_pairs(text: str) -> dict[int, int]:
    """Position of every ``{`` -> just past its matching ``}`` (escaped ``\\{``/``\\}`` skipped); one pass."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i + 1
        i += 1
    return pairs


def _env_end(text: str, i: int, env: str) -> int | None:
    """Index just past the ``\\end{env}`` matching a ``\\begin{env}`` that ends at ``i`` (nesting aware)."""
    pat = re.compile(r"\\(begin|end)\s*\{" + re.escape(env) + r"\}")
    depth = 1
    for m in pat.finditer(text, i):
        depth += 1 if m.group(1) == "begin" else -1
        if depth == 0:
            return m.end()
    return None


def protected_spans(text: str) -> list[tuple[int, int]]:
    """Half-open ``(start, end)`` spans no slice boundary may fall strictly inside.

    Fenced code, ``$$..$$``, ``\\[..\\]``, ``\\begin{X}..\\end{X}``, ``\\boxed{..}``, ``\\(..\\)`` and inline
    ``$..$`` (closed within the same paragraph). An unclosed fence runs to the end of the text; other
    unclosed openers protect nothing (a lone ``$`` is usually a price).
    """
    spans: list[tuple[int, int]] = []
    closers: list[int] | None = None
    braces: dict[int, int] | None = None
    paras: list[int] = []
    i = 0
    while True:
        m = _OPENERS.search(text, i)
        if m is None:
            return spans
        tok, s = m.group(0), m.start()
        end: int | None
        if tok == "```":
            j = text.find("```", m.end())
            end = len(text) if j < 0 else j + 3
        elif tok == "$$":
            j = text.find("$$", m.end())
            end = None if j < 0 else j + 2
        elif tok == "\\[":
            j = text.find("\\]", m.end())
            end = None if j < 0 else j + 2
        elif tok == "\\(":
            j = text.find("\\)", m.end())
            end = None if j < 0 else j + 2
        elif m.group("env") is not None:
            end = _env_end(text, m.end(), m.group("env"))
        elif tok.startswith("\\boxed"):
            if braces is None:
                braces = _brace_pairs(text)
            end = braces.get(m.end() - 1)
        else:  # inline $...$ (pandoc's rule), closed before the next blank line
            if closers is None:  # every candidate closer and blank line, found once (linear time)
                closers = [c.start() for c in _INLINE_CLOSE.finditer(text)]
                paras = [c.start() for c in re.finditer("\n\n", text)]
            k = bisect.bisect_left(closers, m.end())
            para = bisect.bisect_left(paras, m.end())
            stop = paras[para] if para < len(paras) else len(text)
            opens_math = not text[m.end() : m.end() + 1].isspace()
            end = closers[k] + 1 if opens_math and k < len(closers) and closers[k] < stop else None
        if end is None:
            i = m.end()
            continue
        spans.append((s, end))
        i = end


def _inside(pos: int, spans: Sequence[tuple[int, int]]) -> bool:
    """Is a cut at ``pos`` strictly inside one of the (sorted, disjoint) spans?"""
    lo, hi = 0, len(spans)
    while lo < hi:  # last span starting before pos
        mid = (lo + hi) // 2
        if spans[mid][0] < pos:
            lo = mid + 1
        else:
            hi = mid
    return lo > 0 and spans[lo - 1][0] < pos < spans[lo - 1][1]


# ---------------------------------------------------------------------------------------- slicing

#: discourse cues that start a new segment when they open a sentence (App. D.1: "Wait", "Since",
#: "Therefore", ...; the issue adds "Alternatively", "So", "But")
DISCOURSE_CUES = (
    "Wait", "Alternatively", "Therefore", "So", "But", "Since", "However", "Thus", "Hence", "Hmm",
    "Now", "Next", "Then", "Finally", "Actually", "Let me", "Let's", "Okay", "OK",
)
#: cues that, at the start of a line, mark a clear new beginning (a restart / a new line of attack)
NEW_BEGINNING_CUES = (
    "Wait", "Alternatively", "Hmm", "But wait", "Let me", "Let's", "Another", "Now", "Next", "Okay",
    "OK", "Actually", "Finally", "Step", "#",
)

_CUE_ALT = "|".join(re.escape(c) for c in DISCOURSE_CUES)
_LINE_BREAKS = re.compile(r"\n(?:[ \t]*\n)*")
_CUE_MIDLINE = re.compile(r"(?<=[.!?])[ \t]+(?=(?:" + _CUE_ALT + r")\b)")
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_WHITESPACE = re.compile(r"\s+")
_NEW_BEGINNING = re.compile(
    r"[ \t]*(?:\*\*)?(?:" + "|".join(re.escape(c) for c in NEW_BEGINNING_CUES) + r")(?:\b|(?<=#))"
)


@dataclass(frozen=True)
class Slice:
    """One slice of a trace: ``text == trace[start:end]``; ``tokens`` is its summed segment count."""

    text: str
    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class _Atom:
    start: int
    end: int
    tokens: int
    new: bool  # a clear new beginning: the slice being built may close before this atom


def _cut_positions(text: str, lo: int, hi: int, pattern: re.Pattern, spans) -> list[int]:
    """Cut positions (match ends) strictly inside ``(lo, hi)`` and outside protected spans."""
    return [p for m in pattern.finditer(text, lo, hi) if lo < (p := m.end()) < hi and not _inside(p, spans)]


def _split(lo: int, hi: int, cuts: Sequence[int]) -> list[tuple[int, int]]:
    bounds = [lo, *sorted(set(cuts)), hi]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _segments(text: str, spans) -> list[tuple[int, int, bool]]:
    """Delimiter segments ``(start, end, new_beginning)``: cut after line breaks and before cues that open
    a sentence mid-line."""
    n = len(text)
    cuts: dict[int, bool] = {}
    for m in _LINE_BREAKS.finditer(text):
        p = m.end()
        if 0 < p < n and not _inside(p, spans):
            # a line opening with a restart cue is a clear new beginning; a bare paragraph break is not
            # (the paper's Table 2 slice 1 spans several paragraphs, one opening with "Therefore")
            cuts[p] = bool(_NEW_BEGINNING.match(text, p))
    for p in _cut_positions(text, 0, n, _CUE_MIDLINE, spans):
        cuts.setdefault(p, False)
    return [(a, b, cuts.get(a, False)) for a, b in _split(0, n, list(cuts))]


def _refine(
    text: str, pieces: list[tuple[int, int, bool]], limit: int, count: TokenCounter, spans,
    levels: Sequence[re.Pattern],
) -> list[_Atom]:
    """Count tokens of the pieces (one batched call) and split pieces over ``limit`` at finer levels."""
    counts = list(count([text[a:b] for a, b, _ in pieces])) if pieces else []
    if len(counts) != len(pieces):
        raise ValueError(f"token counter returned {len(counts)} counts for {len(pieces)} texts")
    out: list[_Atom] = []
    for (a, b, new), t in zip(pieces, counts, strict=True):
        if t <= limit or not levels:
            out.append(_Atom(a, b, int(t), new))
            continue
        sub = _split(a, b, _cut_positions(text, a, b, levels[0], spans))
        if len(sub) == 1:  # nothing to cut at this level: try the next
            out.extend(_refine(text, [(a, b, new)], limit, count, spans, levels[1:]))
            continue
        sub3 = [(s, e, new and s == a) for s, e in sub]
        out.extend(_refine(text, sub3, limit, count, spans, levels[1:]))
    return out


def _pack(text: str, atoms: Sequence[_Atom], limit: int, min_tokens: int | None) -> list[Slice]:
    """Greedy merge: close the slice before an atom that would overflow ``limit`` tokens, or before a
    clear new beginning once the slice holds ``min_tokens`` (``None``: never close early)."""
    out: list[Slice] = []
    start, tok = None, 0
    for a in atoms:
        if start is not None and tok > 0 and (
            tok + a.tokens > limit or (min_tokens is not None and a.new and tok >= min_tokens)
        ):
            out.append(Slice(text[start : a.start], start, a.start, tok))
            start, tok = None, 0
        if start is None:
            start = a.start
        tok += a.tokens
    if start is not None:
        out.append(Slice(text[start:], start, len(text), tok))
    return out


def slice_text(
    text: str,
    max_tokens: int = DEFAULT_SLICE_TOKENS,
    count_tokens: TokenCounter = whitespace_tokens,
    min_tokens: int = DEFAULT_MIN_TOKENS,
) -> list[Slice]:
    """GAR slicing (sec. 3, App. D.1): delimiter segments merged up to a clear new beginning or L tokens.

    A segment longer than ``max_tokens`` is split at sentence ends, then at whitespace; a single protected
    block longer than L stays whole (never cut inside it). Token counts are summed per segment, so for
    sub-additive counters (whitespace, most BPE tokenizers) a multi-segment slice stays within L.
    """
    if max_tokens < 1:
        raise ValueError(f"slice_text: max_tokens must be >= 1, got {max_tokens}")
    if not text:
        return []
    spans = protected_spans(text)
    atoms = _refine(text, _segments(text, spans), max_tokens, count_tokens, spans, (_SENTENCE_END, _WHITESPACE))
    return _pack(text, atoms, max_tokens, min_tokens)


def fixed_windows(
    text: str, max_tokens: int = DEFAULT_SLICE_TOKENS, count_tokens: TokenCounter = whitespace_tokens
) -> list[Slice]:
    """App. D.1 ablation: pure fixed-length windows of ~L tokens, word-aligned, ignoring delimiters
    (protected blocks are still never cut)."""
    if max_tokens < 1:
        raise ValueError(f"fixed_windows: max_tokens must be >= 1, got {max_tokens}")
    if not text:
        return []
    spans = protected_spans(text)
    words = [(a, b, False) for a, b in _split(0, len(text), _cut_positions(text, 0, len(text), _WHITESPACE, spans))]
    atoms = _refine(text, words, max_tokens, count_tokens, spans, ())
    return _pack(text, atoms, max_tokens, None)


Segmentation = Literal["delimiters", "fixed"]


def make_slices(
    text: str,
    segmentation: Segmentation = "delimiters",
    max_tokens: int = DEFAULT_SLICE_TOKENS,
    count_tokens: TokenCounter = whitespace_tokens,
    min_tokens: int = DEFAULT_MIN_TOKENS,
) -> list[Slice]:
    """Dispatch to ``slice_text`` (the paper's method) or ``fixed_windows`` (the ablation)."""
    if segmentation == "delimiters":
        return slice_text(text, max_tokens, count_tokens, min_tokens)
    if segmentation == "fixed":
        return fixed_windows(text, max_tokens, count_tokens)
    raise ValueError(f"unknown segmentation {segmentation!r}; use 'delimiters' or 'fixed'")


# ---------------------------------------------------------------------------------------- rewards


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


# ------------------------------------------------------------------------------------- the scorer


@dataclass
class SliceJudgment:
    """The discriminator's judgment of one slice: verdict, P(YES) in logit mode, raw output, status."""

    status: Status
    verdict: str | None = None  # "YES" / "NO"
    p_yes: float | None = None  # verdict-logit mode
    output: str = ""  # generate mode: analysis, **YES**/**NO**, rationale
    message: str | None = None
    cost: Cost = field(default_factory=Cost)

    @property
    def rationale(self) -> str:
        """The text after the first **YES**/**NO**, the verdict (the App. B rationale follows it)."""
        parts = re.split(r"\*\*\s*(?:YES|NO)\s*\*\*", self.output, maxsplit=1, flags=re.IGNORECASE)
        return parts[-1].strip() if len(parts) > 1 else ""

    def score(self, soft: bool = False, threshold: float = 0.5) -> float | None:
        """r^s in {0, 1} (or P(YES) when ``soft`` in logit mode); None when the slice is not valid."""
        if self.status is not Status.OK:
            return None
        if self.p_yes is not None:
            return self.p_yes if soft else float(self.p_yes >= threshold)
        return 1.0 if self.verdict == "YES" else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "verdict": self.verdict, "p_yes": self.p_yes,
                "output": self.output, "rationale": self.rationale, "message": self.message}


@dataclass(frozen=True)
class SliceItem:
    """One slice to judge: the problem, the slice text and optional earlier reasoning as context."""

    problem: str
    text: str
    context: str = ""


class SliceScorer(BaseScorer):
    """GAR reasoner reward: R^rea = lambda1 * R^m + lambda2 * R^s with R^s the discriminator's mean slice score.

    Options:
        backend: judge backend (a JudgeBackend, or a load_backend spec such as "smollm2")
        mode: "generate" (App. B analysis, **YES**/**NO**, rationale; capped at judge_tokens) or "logit" (P(YES))
        slice_tokens: slice token budget L (counted with the backend's tokenizer)
        min_slice_tokens: a slice closes at a clear new beginning only once it holds this many tokens
        segmentation: "delimiters" (the paper's slicing) or "fixed" (fixed-length windows ablation)
        judge_tokens: K, the cap on the discriminator's output tokens in generate mode
        temperature: discriminator sampling temperature in generate mode
        lambda1: weight of the exact-match reward R^m (0 turns the verifier off)
        lambda2: weight of the slice reward R^s
        partial: judge only the first partial_slices slices and drop R^m (paper Table 5)
        partial_slices: n, the number of slices judged in partial-trace mode
        soft: in logit mode use r^s = P(YES) instead of 1[P(YES) >= threshold]
        threshold: P(YES) at or above which a slice counts as YES in logit mode
        context: show the discriminator the trace's earlier slices as context
    """

    name = "slices"

    def __init__(
        self,
        backend: JudgeBackend | str | None = None,
        mode: Literal["generate", "logit"] = "generate",
        slice_tokens: int = DEFAULT_SLICE_TOKENS,
        min_slice_tokens: int = DEFAULT_MIN_TOKENS,
        segmentation: Literal["delimiters", "fixed"] = "delimiters",
        judge_tokens: int = DEFAULT_JUDGE_TOKENS,
        temperature: float = 0.0,
        lambda1: float = 1.0,
        lambda2: float = 1.0,
        partial: bool = False,
        partial_slices: int = 3,
        soft: bool = False,
        threshold: float = 0.5,
        context: bool = False,
        checker: AnswerChecker | None = None,
    ):
        if mode not in ("generate", "logit"):
            raise ValueError(f"SliceScorer: mode must be 'generate' or 'logit', got {mode!r}")
        if segmentation not in ("delimiters", "fixed"):
            raise ValueError(f"SliceScorer: segmentation must be 'delimiters' or 'fixed', got {segmentation!r}")
        if lambda1 < 0 or lambda2 < 0:
            raise ValueError(f"SliceScorer: lambda1, lambda2 must be >= 0, got {lambda1}, {lambda2}")
        if partial and partial_slices < 1:
            raise ValueError(f"SliceScorer: partial_slices must be >= 1, got {partial_slices}")
        self._backend = backend
        self.mode = mode
        self.slice_tokens = slice_tokens
        self.min_slice_tokens = min_slice_tokens
        self.segmentation = segmentation
        self.judge_tokens = judge_tokens
        self.temperature = temperature
        self.lambda1 = lambda1
        self.lambda2 = lambda2
        self.partial = partial
        self.partial_slices = partial_slices
        self.soft = soft
        self.threshold = threshold
        self.context = context
        self.checker = checker

    # -- model I/O
    @property
    def backend(self) -> JudgeBackend:
        """The judge backend, loaded on first use when given as a spec string (or None: the default)."""
        if not isinstance(self._backend, JudgeBackend):
            from rewardkit.backends import load_backend

            self._backend = load_backend(self._backend) if self._backend else load_backend()
        return self._backend

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """The discriminator's token counts (whitespace words when the backend has no tokenizer)."""
        try:
            return list(self.backend.count_tokens(texts))
        except NotImplementedError:
            return whitespace_tokens(texts)

    def slices(self, text: str) -> list[Slice]:
        """Slice one trace with this scorer's segmentation and budget."""
        return make_slices(text, self.segmentation, self.slice_tokens, self.count_tokens, self.min_slice_tokens)

    def judge(self, items: Sequence[SliceItem]) -> list[SliceJudgment]:
        """Judge every slice with ONE backend call (generate: App. B prompt, K tokens; logit: P(YES))."""
        if not items:
            return []
        msgs = [discriminator_messages(it.problem, it.text, it.context) for it in items]
        out: list[SliceJudgment] = []
        if self.mode == "logit":
            vres = self.backend.verdict_probs(
                [VerdictRequest(m, VERDICT_CHOICES, VERDICT_PREFIX) for m in msgs]
            )
            if len(vres) != len(items):
                raise RuntimeError(f"backend returned {len(vres)} verdicts for {len(items)} slices")
            for r in vres:
                c = cost_of([r])
                if r.status is not Status.OK or len(r.probs) != 2:
                    out.append(SliceJudgment(Status(r.status) if r.status is not Status.OK else Status.ERROR,
                                             message=r.error or f"verdict_probs returned {len(r.probs)} probs", cost=c))
                    continue
                p = float(r.probs[0])
                out.append(SliceJudgment(Status.OK, "YES" if p >= self.threshold else "NO", p, cost=c))
            return out
        reqs = [ChatRequest(m, max_tokens=self.judge_tokens, temperature=self.temperature) for m in msgs]
        comps = self.backend.generate(reqs)
        if len(comps) != len(items):
            raise RuntimeError(f"backend returned {len(comps)} completions for {len(items)} slices")
        for comp in comps:
            c = cost_of([comp])
            if comp.status is not Status.OK:
                out.append(SliceJudgment(comp.status, message=comp.error or f"judge call {comp.status}", cost=c))
                continue
            v = parse_yes_no(comp.text)  # invalid output -> invalid slice, never a NO
            out.append(SliceJudgment(v.status, v.label, None, comp.text, v.message, cost=c))
        return out

    # -- scoring
    def _score(self, groups: list[Group]) -> list[GroupScore]:
        use_m = self.lambda1 > 0 and not self.partial
        # 1. slice every response of every group
        plan: list[list[list[Slice]]] = []
        items: list[SliceItem] = []
        for g in groups:
            per_resp = []
            for r in g.responses:
                sl = self.slices(r)
                if self.partial:
                    sl = sl[: self.partial_slices]
                per_resp.append(sl)
                for j, s in enumerate(sl):
                    ctx = r[: s.start] if self.context and j else ""
                    items.append(SliceItem(g.prompt, s.text, ctx))
            plan.append(per_resp)
        # 2. one backend call for all slices of the batch; one verifier call for all responses
        judgments = iter(self.judge(items))
        pairs = [(g.reference, extract_answer(r)) for g in groups if use_m and g.reference is not None
                 for r in g.responses]
        checks = iter((self.checker or default_checker()).check_many(pairs) if pairs else [])
        # 3. per-response rewards
        out = []
        for g, per_resp in zip(groups, plan, strict=True):
            cost = Cost()
            rewards, statuses, messages = [], [], []
            comp: dict[str, list] = {"exact_match": [], "slice_mean": [], "n_slices": [], "n_valid_slices": []}
            detail = []
            for r_slices in per_resp:
                js = [next(judgments) for _ in r_slices]
                for j in js:
                    cost += j.cost
                scores = [j.score(self.soft, self.threshold) for j in js]
                rs = slice_mean(scores)
                detail.append([{"text": s.text, "start": s.start, "end": s.end, "tokens": s.tokens,
                                "score": sc, **j.to_dict()} for s, j, sc in zip(r_slices, js, scores, strict=True)])
                n_valid = sum(sc is not None for sc in scores)
                comp["n_slices"].append(len(r_slices))
                comp["n_valid_slices"].append(n_valid)
                comp["slice_mean"].append(rs)
                status, msg = Status.OK, None
                if not r_slices:
                    status, msg = Status.INVALID, "empty response: nothing to slice"
                elif n_valid == 0:
                    bad = {j.status for j in js}
                    status = next((s for s in (Status.TIMEOUT, Status.ERROR) if s in bad), Status.INVALID)
                    msg = f"no valid slice verdict out of {len(js)}: " + "; ".join(
                        sorted({j.message or str(j.status) for j in js}))[:500]
                rm = math.nan
                if use_m:
                    if g.reference is None:
                        if status is Status.OK:
                            status, msg = Status.ABSTAIN, "no reference answer for exact match R^m (set lambda1=0)"
                    else:
                        ck = next(checks)
                        cost.verifier_calls += 0 if ck.cached else 1
                        cost.cache_hits += 1 if ck.cached else 0
                        if ck.equivalent is None:
                            if status is Status.OK:
                                status, msg = ck.status, ck.message
                        else:
                            rm = float(ck.equivalent)
                comp["exact_match"].append(rm)
                reward = math.nan
                if status is Status.OK:
                    reward = reasoner_reward(rm if use_m else 0.0, rs, self.lambda1 if use_m else 0.0, self.lambda2)
                rewards.append(reward)
                statuses.append(status)
                messages.append(msg)
            out.append(GroupScore(g.id, np.array(rewards, dtype=np.float64), statuses, comp, cost, messages,
                                  extra={"slices": detail}))
        return out

    # -- discriminator training signal
    def discriminator_objective(
        self, groups: Sequence[Group], lambda3: float = 1.0, lambda4: float = 0.5
    ) -> dict[str, Any]:
        """R^d, R^a and R^dis (sec. 3) for one batch, with ONE backend call for every slice.

        Reference slices come from each group's ``expert`` solution (p_ref), generated slices from its
        responses (p_gen); M_d(x) is P(YES) in logit mode, the hard verdict (clipped) in generate mode.
        R^a uses each response's exact-match correctness against ``group.reference`` (responses whose check
        fails, or groups without a reference, are left out of R^a). Also returns the per-slice terms.
        """
        items, kinds = [], []  # kinds: ("ref", group) or ("gen", group, response)
        for gi, g in enumerate(groups):
            for s in self.slices(g.expert or ""):
                items.append(SliceItem(g.prompt, s.text))
                kinds.append(("ref", gi, -1))
            for ri, r in enumerate(g.responses):
                for s in self.slices(r):
                    items.append(SliceItem(g.prompt, s.text))
                    kinds.append(("gen", gi, ri))
        judged = self.judge(items)
        p = [j.p_yes if j.p_yes is not None else j.score() for j in judged]
        is_ref = [k[0] == "ref" for k in kinds]
        pairs = [(g.reference, extract_answer(r)) for g in groups if g.reference is not None for r in g.responses]
        checks = iter((self.checker or default_checker()).check_many(pairs) if pairs else [])
        correct: dict[tuple[int, int], bool] = {}
        for gi, g in enumerate(groups):
            if g.reference is None:
                continue
            for ri in range(len(g.responses)):
                ck = next(checks)
                if ck.equivalent is not None:
                    correct[(gi, ri)] = ck.equivalent
        by_trace: dict[tuple[int, int], list[float | None]] = {}
        for (kind, gi, ri), pi in zip(kinds, p, strict=True):
            if kind == "gen" and (gi, ri) in correct:
                by_trace.setdefault((gi, ri), []).append(pi)
        keys = list(by_trace)
        r_d = gan_reward([x for x, f in zip(p, is_ref, strict=True) if f], [x for x, f in zip(p, is_ref, strict=True) if not f])
        r_a = alignment_reward([by_trace[k] for k in keys], [correct[k] for k in keys])
        return {
            "R_d": r_d, "R_a": r_a,
            # no correctness label at all: R^a is undefined, so R^dis is too unless lambda4 = 0
            "R_dis": discriminator_reward(r_d, 0.0 if lambda4 == 0 else r_a, lambda3, lambda4),
            "p_real": p, "is_reference": is_ref, "gan_terms": gan_slice_terms(p, is_ref).tolist(),
            "statuses": [j.status.value for j in judged], "cost": Cost.total(j.cost for j in judged),
        }
