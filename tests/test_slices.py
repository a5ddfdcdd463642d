"""GAR slicing, slice rewards and the SliceScorer (paper sec. 3, App. B and D)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.backends.base import (
    ChatRequest,
    Completion,
    JudgeBackend,
    VerdictRequest,
    VerdictResult,
)
from rewardkit.slices import (
    SliceScorer,
    alignment_reward,
    alignment_terms,
    discriminator_reward,
    fixed_windows,
    gan_reward,
    gan_slice_terms,
    make_slices,
    reasoner_reward,
    slice_mean,
    slice_text,
    whitespace_tokens,
)
from rewardkit.types import Group, Status

# ------------------------------------------------------------------------------------ strategies

_WORDS = st.sampled_from(["x", "the", "value", "is", "3.", "so", "we", "get", "$5", "a+b", "(1)", "Wait,",
                          "Therefore", "So", "But", "Alternatively,", "done.", "Hmm.", "Let", "me"])
_SEPS = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", ".\n", ". So ", ".\n\nWait, ", "\nAlternatively, ",
                         ". But ", "\n\n\n", "\t"])
_INNER = st.lists(st.sampled_from(["a", "+", "b", " ", "\n", "\n\n", ".", " Wait, ", " So ", "x_1", "=", "2"]),
                  min_size=1, max_size=40).map("".join)


@st.composite
def _block(draw) -> str:
    """A well-formed protected block whose inside holds spaces, line breaks, full stops and cues."""
    inner = draw(_INNER)
    kind = draw(st.sampled_from(["$$", "\\[", "env", "boxed", "code"]))
    if kind == "$$":
        return f"$${inner}$$"
    if kind == "\\[":
        return f"\\[{inner}\\]"
    if kind == "env":
        env = draw(st.sampled_from(["align", "align*", "cases", "pmatrix"]))
        return f"\\begin{{{env}}}{inner}\\end{{{env}}}"
    if kind == "boxed":
        return "\\boxed{" + inner.replace("\n", " ") + " {\\frac{1}{2}}}"
    return f"```python\n{inner}\n```"


@st.composite
def traces(draw) -> tuple[str, list[tuple[int, int]]]:
    """A reasoning trace and the (start, end) of every block planted in it (ground truth for the tests)."""
    parts: list[str] = []
    blocks: list[tuple[int, int]] = []
    pos = 0
    for _ in range(draw(st.integers(1, 40))):
        if draw(st.integers(0, 4)) == 0:
            b = draw(_block())
            blocks.append((pos, pos + len(b)))
            piece = b
        else:
            piece = draw(_WORDS)
        sep = draw(_SEPS)
        parts.append(piece + sep)
        pos += len(piece) + len(sep)
    return "".join(parts), blocks


def _boundaries(slices) -> list[int]:
    return [s.start for s in slices[1:]]


def _assert_exact_cover(text: str, slices) -> None:
    assert "".join(s.text for s in slices) == text
    assert all(s.text == text[s.start : s.end] for s in slices)
    assert all(a.end == b.start for a, b in zip(slices, slices[1:], strict=False))
    if text:
        assert slices[0].start == 0 and slices[-1].end == len(text)


# ------------------------------------------------------------------------------------ slicing props


@settings(max_examples=300, deadline=None)
@given(traces(), st.integers(1, 60), st.integers(0, 40))
def test_slices_concatenate_to_text_and_never_cut_inside_blocks(trace, budget, min_tokens):
    text, blocks = trace
    slices = slice_text(text, budget, whitespace_tokens, min_tokens)
    _assert_exact_cover(text, slices)
    for cut in _boundaries(slices):
        assert not any(a < cut < b for a, b in blocks), (cut, text)


@settings(max_examples=300, deadline=None)
@given(traces(), st.integers(1, 60), st.integers(0, 40))
def test_slices_respect_budget_unless_one_block_is_longer(trace, budget, min_tokens):
    text, blocks = trace
    for s in slice_text(text, budget, whitespace_tokens, min_tokens):
        n = len(s.text.split())
        if n > budget:
            # only an uncuttable block may exceed L, and then alone: the slice is that block with at most
            # unbroken characters glued on each side (e.g. a full stop) and trailing whitespace
            assert any(
                s.start <= a and b <= s.end and not any(c.isspace() for c in text[s.start : a])
                and not any(c.isspace() for c in text[b : s.end].rstrip())
                for a, b in blocks
            ), s.text


@settings(max_examples=200, deadline=None)
@given(traces(), st.integers(1, 60))
def test_fixed_windows_cover_text_are_full_and_never_cut_blocks(trace, budget):
    text, blocks = trace
    wins = fixed_windows(text, budget, whitespace_tokens)
    _assert_exact_cover(text, wins)
    for cut in _boundaries(wins):
        assert not any(a < cut < b for a, b in blocks)
    for w, nxt in zip(wins, wins[1:], strict=False):
        n = len(w.text.split())
        # greedy windows are full: a window closes short of L only when the next item is a whole block
        assert n == budget or any(nxt.start == a for a, _ in blocks) or n > budget


@settings(max_examples=100, deadline=None)
@given(traces())
def test_huge_budget_and_min_gives_one_slice(trace):
    text, _ = trace
    slices = slice_text(text, 10**9, whitespace_tokens, 10**9)
    assert [s.text for s in slices] == [text]


def test_empty_text_has_no_slices_and_bad_budget_raises():
    assert slice_text("") == [] and fixed_windows("") == []
    with pytest.raises(ValueError, match="max_tokens"):
        slice_text("a b", 0)
    with pytest.raises(ValueError, match="segmentation"):
        make_slices("a b", "llm")  # type: ignore[arg-type]


# The paper's Table 2, slice 1 (a slice its slicer produced), as R1-style paragraphs.
TABLE2_SLICE1 = (
    "Given $n = (a - b)(a + b)$, and both $a - b$ and $a + b$ are either both even or both odd.\n\n"
    "If $n$ is odd, then both $a - b$ and $a + b$ are odd, and their product is $n$. So, any odd number can be "
    "expressed as such.\n\n"
    "If $n$ is even, then both $a - b$ and $a + b$ must be even, so $n$ must be divisible by 4. Let's write "
    "$n = 4k$, where $k$ is a positive integer. Then, $a - b = 2m$ and $a + b = 2n$, where $m \\times n = k$. "
    "Thus, $a = m + n$ and $b = n - m$. For $b$ to be positive, $n > m$, and both $m$ and $n$ must be positive "
    "integers.\n\n"
    "Therefore, for $n$ to be a wise number, if $n$ is odd, it's automatically a wise number. If $n$ is even, it "
    "must be divisible by 4, and $n/4$ must be expressible as a product of two positive integers $m$ and $n$ "
    "where $n > m$. Wait, but $n/4$ just needs to have at least one pair of factors where $m < n$, which is true "
    "as long as $n/4 \\geq 1$, which is always true since $n$ is positive"
)


def test_paper_table2_slice_stays_one_slice_at_L320():
    # ~200 words, several paragraphs, "Therefore" and a mid-line "Wait": one slice in the paper
    assert len(TABLE2_SLICE1.split()) < 320
    assert [s.text for s in slice_text(TABLE2_SLICE1, 320)] == [TABLE2_SLICE1]


def test_small_budget_cuts_only_at_delimiters_and_keeps_inline_math():
    slices = slice_text(TABLE2_SLICE1, 40, min_tokens=0)
    assert len(slices) > 3
    _assert_exact_cover(TABLE2_SLICE1, slices)
    for s in slices[1:]:
        prev = TABLE2_SLICE1[: s.start]
        # every cut follows a line break or a sentence end (no mid-sentence cut is needed at L=40)
        assert prev.endswith("\n") or prev.rstrip().endswith((".", "?", "!", ":", ";")), prev[-40:]
        assert s.text.count("$") % 2 == 0


def test_restart_cue_at_line_start_opens_a_new_slice():
    a = " ".join(["the first part of the argument"] * 4) + ".\n"  # 24 words
    b = "Wait, that is wrong, the sum should be 5.\n"
    c = "So the total is 5."
    text = a + b + c
    slices = slice_text(text, 320, min_tokens=10)
    assert [s.text for s in slices] == [a, b + c]  # "Wait" restarts; "So" continues
    # below min_tokens the restart does not close the slice
    assert [s.text for s in slice_text(text, 320, min_tokens=30)] == [text]
    # a paragraph break alone is no new beginning
    t2 = a + "\n" + "Then the total is 5."
    assert len(slice_text(t2, 320, min_tokens=10)) == 1


def test_fixed_windows_ignore_delimiters():
    text = "one two three.\n\nWait, four five six seven"
    assert [w.text for w in fixed_windows(text, 3)] == ["one two three.\n\n", "Wait, four five ", "six seven"]
