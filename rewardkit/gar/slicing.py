"""GAR slicing (sec. 3, App. D.1): cut a reasoning trace into slices the discriminator judges one by one.

A trace is cut at delimiters (line and paragraph breaks, discourse cues such as "Wait", "Alternatively",
"Therefore", "So", "But") into segments, and adjacent segments are merged until a clear new beginning or
the token budget L (default 320, counted with the discriminator's tokenizer on each slice's own text) is
reached. When a clear new beginning closes a slice is rewardkit's choice (the paper gives none): once the
slice holds 3/4 L (``DEFAULT_MIN_FRACTION``). Cuts never fall
inside ``$$..$$``, ``\\[..\\]``, ``\\begin{..}..\\end{..}``, ``\\boxed{..}``, inline math or fenced code, and
the slices concatenate back to the exact text. ``fixed_windows`` is the App. D.1 "pure fixed-length token
windows" ablation. Pure functions: no model.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rewardkit.backends.base import whitespace_tokens  # noqa: F401  (re-exported: the slicers' default)
from rewardkit.types import batch_call

TokenCounter = Callable[[Sequence[str]], list[int]]  # batched, like JudgeBackend.count_tokens

DEFAULT_SLICE_TOKENS = 320  # L (sec. 3)
# rewardkit's threshold, not the paper's: a clear new beginning closes a slice only once it holds 3/4 of L.
# The paper says segments are merged "until a clear new beginning or the token budget L" (sec. 3.1) without
# a minimum, and finds slices of ~320-560 tokens best, shorter ones clearly worse (App. D.2, Table 9); 3/4 L
# keeps slices near L on real traces (an earlier 80-token threshold gave slices of about L/3).
DEFAULT_MIN_FRACTION = 0.75


def default_min_tokens(max_tokens: int) -> int:
    """rewardkit's early-close threshold for budget L: ``DEFAULT_MIN_FRACTION * L`` tokens."""
    return int(round(DEFAULT_MIN_FRACTION * max_tokens))



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
    """One slice of a trace: ``text == trace[start:end]``; ``tokens`` is the token count of ``text`` itself."""

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


def _counts(count: TokenCounter, texts: list[str]) -> list[int]:
    """One batched token count, one per text (``types.batch_call``): a ValueError naming the counter, not a zip
    error deep in the packing."""
    return batch_call(count, texts, f"token counter {getattr(count, '__qualname__', count)!r}", results="counts",
                      of="texts", error=ValueError)


def _refine(
    text: str, pieces: list[tuple[int, int, bool]], limit: int, count: TokenCounter, spans,
    levels: Sequence[re.Pattern],
) -> list[_Atom]:
    """Count tokens of the pieces (one batched call) and split pieces over ``limit`` at finer levels."""
    counts = _counts(count, [text[a:b] for a, b, _ in pieces])
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


def _pack(text: str, atoms: Sequence[_Atom], limit: int, min_tokens: int | None, count: TokenCounter) -> list[Slice]:
    """Greedy merge: close the slice before an atom that would overflow ``limit`` tokens, or before a
    clear new beginning once the slice holds ``min_tokens`` (``None``: never close early); then hold every
    slice to ``limit`` on its real token count (``_fit``)."""
    groups: list[tuple[int, int]] = []  # atom index ranges [i, j)
    first, tok = None, 0
    for k, a in enumerate(atoms):
        if first is not None and tok > 0 and (
            tok + a.tokens > limit or (min_tokens is not None and a.new and tok >= min_tokens)
        ):
            groups.append((first, k))
            first, tok = None, 0
        if first is None:
            first = k
        tok += a.tokens
    if first is not None:
        groups.append((first, len(atoms)))
    return _fit(text, atoms, groups, limit, count)


def _fit(text: str, atoms: Sequence[_Atom], groups: list[tuple[int, int]], limit: int,
         count: TokenCounter) -> list[Slice]:
    """Enforce L on each slice's real token count: a tokenizer does not count a joined text as the sum of its
    pieces (tokens merge or split at the joins), so a slice whose own count exceeds ``limit`` keeps its longest
    prefix of atoms that fits and the rest is fitted again. One batched count per round; a single atom over
    ``limit`` (a protected block longer than L) stays whole."""
    def span(i: int, j: int) -> str:
        return text[atoms[i].start : atoms[j - 1].end]

    done: dict[tuple[int, int], int] = {}
    todo = groups
    while todo:
        counts = _counts(count, [span(i, j) for i, j in todo])
        over = []
        for (i, j), t in zip(todo, counts, strict=True):
            if t <= limit or j - i == 1:
                done[(i, j)] = int(t)
            else:
                over.append((i, j))
        prefixes = [(i, k) for i, j in over for k in range(i + 1, j)]
        fits = dict(zip(prefixes, _counts(count, [span(i, k) for i, k in prefixes]), strict=True))
        todo = []
        for i, j in over:
            k = max((k for k in range(i + 1, j) if fits[(i, k)] <= limit), default=i + 1)
            done[(i, k)] = int(fits[(i, k)])
            todo.append((k, j))
    bounds = sorted(done)
    return [Slice(span(i, j), atoms[i].start, atoms[j - 1].end, done[(i, j)]) for i, j in bounds]


def slice_text(
    text: str,
    max_tokens: int = DEFAULT_SLICE_TOKENS,
    count_tokens: TokenCounter = whitespace_tokens,
    min_tokens: int | None = None,
) -> list[Slice]:
    """GAR slicing (sec. 3, App. D.1): delimiter segments merged up to a clear new beginning or L tokens.

    A clear new beginning closes the slice only once it holds ``min_tokens`` (default 3/4 of L, rewardkit's
    threshold, see ``DEFAULT_MIN_FRACTION``; ``min_tokens=max_tokens`` packs up to L whatever the cues).

    A segment longer than ``max_tokens`` is split at sentence ends, then at whitespace; a single protected
    block longer than L stays whole (never cut inside it). Every other slice holds at most L tokens counted
    on its own text (not the sum of its segments' counts, which a tokenizer does not add up to).
    """
    if max_tokens < 1:
        raise ValueError(f"slice_text: max_tokens must be >= 1, got {max_tokens}")
    if not text:
        return []
    spans = protected_spans(text)
    atoms = _refine(text, _segments(text, spans), max_tokens, count_tokens, spans, (_SENTENCE_END, _WHITESPACE))
    return _pack(text, atoms, max_tokens, default_min_tokens(max_tokens) if min_tokens is None else min_tokens,
                 count_tokens)


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
    return _pack(text, atoms, max_tokens, None, count_tokens)


Segmentation = Literal["delimiters", "fixed"]


def make_slices(
    text: str,
    segmentation: Segmentation = "delimiters",
    max_tokens: int = DEFAULT_SLICE_TOKENS,
    count_tokens: TokenCounter = whitespace_tokens,
    min_tokens: int | None = None,
) -> list[Slice]:
    """Dispatch to ``slice_text`` (the paper's method) or ``fixed_windows`` (the ablation)."""
    if segmentation == "delimiters":
        return slice_text(text, max_tokens, count_tokens, min_tokens)
    if segmentation == "fixed":
        return fixed_windows(text, max_tokens, count_tokens)
    raise ValueError(f"unknown segmentation {segmentation!r}; use 'delimiters' or 'fixed'")
