"""GAR slicing, slice rewards and the SliceScorer (paper sec. 3, App. B and D)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.answers import Check
from rewardkit.backends.base import Completion, VerdictResult
from rewardkit.gar.rewards import (
    alignment_reward,
    alignment_terms,
    discriminator_reward,
    gan_reward,
    gan_slice_terms,
    reasoner_reward,
    slice_mean,
)
from rewardkit.gar.slices import DiscriminatorOptions, SliceJudgment, SliceOptions, SliceScorer
from rewardkit.gar.slicing import fixed_windows, make_slices, protected_spans, slice_text, whitespace_tokens
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Cost, Group, Status
from rewardkit.verdicts import boxed_contents

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


@pytest.mark.parametrize("text, spans", [
    ("costs $5 and $6 now", []),  # prices are not math (pandoc's rule)
    ("so $x+1$ is $y$.", ["$x+1$", "$y$"]),
    ("$5 $$\n\n$$ ", ["$$\n\n$$"]),
    ("$a\n\nb$ $c$", ["$c$"]),  # inline math does not cross a blank line
    ("\\begin{align}\\begin{align}x\\end{align}\\end{align} y", ["\\begin{align}\\begin{align}x\\end{align}\\end{align}"]),
    ("\\boxed{\\frac{1}{2}} and \\boxed{3", ["\\boxed{\\frac{1}{2}}"]),  # unclosed boxed protects nothing
    ("```py\nx = 1\n\ny = 2", ["```py\nx = 1\n\ny = 2"]),  # unclosed fence runs to the end
])
def test_protected_spans_examples(text, spans):
    assert [text[a:b] for a, b in protected_spans(text)] == spans


def test_empty_text_has_no_slices_and_bad_budget_raises():
    assert slice_text("") == [] and fixed_windows("") == []
    with pytest.raises(ValueError, match="max_tokens"):
        slice_text("a b", 0)
    with pytest.raises(ValueError, match="segmentation"):
        make_slices("a b", "llm")  # type: ignore[arg-type]


@pytest.mark.parametrize("short_call", range(1, 7))
def test_a_token_counter_that_loses_a_text_is_named_at_every_count(short_call):
    """The six batched counts of this text: its pieces, their sentences, their words (refining pieces over L),
    the packed slices, the prefixes of the one a superadditive count puts over L, the rest. A counter that
    drops a text's count at any of them is a ValueError naming it; before, all but the first three failed as a
    bare ``zip()`` error inside the packing."""
    calls = []

    def squares(texts):  # words squared: a joined slice counts more than its pieces, so prefixes are counted
        calls.append(len(texts))
        counts = [len(t.split()) ** 2 for t in texts]
        return counts[:-1] if len(calls) == short_call else counts

    with pytest.raises(ValueError, match=r"token counter .*squares.* returned (\d+) counts for (\d+) texts") as e:
        slice_text("a b c d. e f\n\ng h", 4, squares)
    assert len(calls) == short_call and str(e.value).endswith(f"returned {calls[-1] - 1} counts for {calls[-1]} texts")


def test_a_token_counter_is_named_by_its_qualified_name_or_else_by_its_repr():
    def short(texts):
        return [1] * (len(texts) - 1)

    class Counter:  # a callable object has no __qualname__ of its own: its repr names it
        def __call__(self, texts):
            return [1] * (len(texts) - 1)

        def __repr__(self):
            return "Counter(tokenizer='gpt2')"

    with pytest.raises(ValueError) as e:
        slice_text("a b. c d", 1, short)
    assert str(e.value).startswith("token counter 'test_a_token_counter_is_named_by_its_qualified_name_or_else_by_its_"
                                   "repr.<locals>.short' returned 0 counts for 1 texts"), e.value
    with pytest.raises(ValueError) as e:
        slice_text("a b. c d", 1, Counter())
    assert str(e.value).startswith("token counter Counter(tokenizer='gpt2') returned 0 counts for 1 texts"), e.value


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


# ------------------------------------------------------------------------------------ rewards


def test_slice_mean_skips_invalid_slices_never_counts_them_as_no():
    assert slice_mean([1, 0, None, 1]) == pytest.approx(2 / 3)
    assert slice_mean([1.0, None]) == 1.0  # an invalid slice counted as NO would give 0.5
    assert math.isnan(slice_mean([None, None])) and math.isnan(slice_mean([]))


def test_reasoner_reward_paper_defaults():
    assert reasoner_reward(1.0, 0.5) == 1.5  # lambda1 = lambda2 = 1 (sec. 4.1)
    assert reasoner_reward(0.0, 0.25, lambda1=2.0, lambda2=4.0) == 1.0
    with pytest.raises(ValueError, match="lambdas"):
        reasoner_reward(1.0, 1.0, lambda1=-1.0)


def test_gan_reward_known_values():
    # Goodfellow et al.: at D = 1/2 everywhere the value is -log 4
    assert gan_reward([0.5, 0.5], [0.5]) == pytest.approx(-math.log(4))
    assert gan_reward([1.0], [0.0]) == pytest.approx(0.0, abs=1e-5)  # perfect discriminator
    assert gan_reward([0.8], [0.4]) == pytest.approx(math.log(0.8) + math.log(0.6))
    assert math.isfinite(gan_reward([0.0], [1.0]))  # hard verdicts are clipped, not -inf
    assert gan_reward([0.9, None], [0.1, float("nan")]) == pytest.approx(2 * math.log(0.9))
    with pytest.raises(ValueError, match="reference and generated"):
        gan_reward([], [0.3])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8), st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8))
def test_gan_reward_symmetry_and_per_slice_terms(p_ref, p_gen):
    # relabelling real <-> generated and flipping D leaves the objective unchanged
    assert gan_reward(p_ref, p_gen) == pytest.approx(gan_reward([1 - p for p in p_gen], [1 - p for p in p_ref]))
    # R^d <= 0, and raising D on a reference slice raises it
    assert gan_reward(p_ref, p_gen) < 0
    assert gan_reward([min(p_ref[0] + 0.005, 0.999), *p_ref[1:]], p_gen) > gan_reward(p_ref, p_gen)
    terms = gan_slice_terms(p_ref + p_gen, [True] * len(p_ref) + [False] * len(p_gen))
    assert terms[: len(p_ref)].mean() + terms[len(p_ref) :].mean() == pytest.approx(gan_reward(p_ref, p_gen))


def test_alignment_reward_agreement_with_answer_correctness():
    assert alignment_reward([[1, 1, 0]], [True]) == pytest.approx(2 / 3)
    assert alignment_reward([[1, 1, 0]], [False]) == pytest.approx(1 / 3)
    # pooled over the slices of all traces: agreements 1, 0 | 1
    assert alignment_reward([[1, 0], [0]], [True, False]) == pytest.approx(2 / 3)
    assert np.allclose(alignment_terms([0.8, None], True)[:1], [0.8]) and math.isnan(alignment_terms([None], True)[0])
    assert math.isnan(alignment_reward([[None]], [True]))


def test_discriminator_reward_paper_defaults():
    assert discriminator_reward(-1.0, 0.5) == pytest.approx(-0.75)  # lambda3 = 1, lambda4 = 0.5
    with pytest.raises(ValueError):
        discriminator_reward(0.0, 0.0, lambda4=-0.1)


# ------------------------------------------------------------------------------------ scorer


def _slice(prompt: str) -> str:
    return prompt.split("Reasoning to evaluate:", 1)[1].rsplit("Analyze this", 1)[0]


def _rule_reply(prompt: str):
    s = _slice(prompt)
    if "SLOW" in s:
        return Status.TIMEOUT
    if "GARBLE" in s:
        return "I cannot tell."
    v = "NO" if "ERR" in s else "YES"
    return f"Checks the step.\n**{v}** Because {v.lower()}."


def _rule_probs(prompt: str, choices):
    assert tuple(choices) == ("YES", "NO")
    p = 0.2 if "ERR" in _slice(prompt) else 0.9
    return [p, 1 - p]


def RuleJudge() -> ScriptedJudge:  # noqa: N802 - reads like the class it replaces
    """Scripted discriminator: a slice is sound unless it says ERR; GARBLE gives unparseable output, SLOW
    a timeout; whitespace tokens."""
    return ScriptedJudge(_rule_reply, _rule_probs, model_id="rule-judge", completion_tokens=8)


def _lines(*lines: str) -> str:
    """One slice per line: every line opens with the restart cue "Next"."""
    return "".join(f"Next {ln}\n" for ln in lines)


def _scorer(judge, **kw) -> SliceScorer:
    return SliceScorer(judge=judge, slice_tokens=50, min_slice_tokens=1, **kw)


def test_scorer_rewards_one_backend_call_and_rationales():
    judge = RuleJudge()
    groups = [
        Group("g1", "What is 2+3?", [_lines("2+3=5.", "so \\boxed{5}"), _lines("2+3=4 ERR.", "so \\boxed{4}")],
              reference="5"),
        Group("g2", "What is 1+1?", [_lines("one", "two", "three", "\\boxed{2}")], reference="2"),
    ]
    out = _scorer(judge)(groups)
    assert judge.generate_batches == [8]  # every slice of every trace, one call
    assert out[0].rewards.tolist() == [2.0, 0.5]  # 1 + 1 and 0 + 1/2
    assert out[1].rewards.tolist() == [2.0]
    assert out[0].components["exact_match"] == [1.0, 0.0]
    assert out[0].components["n_slices"] == [2, 2]
    s = out[0].extra["slices"][1]
    assert [x["verdict"] for x in s] == ["NO", "YES"]
    assert s[0]["verdict"] == "NO" and s[0]["rationale"] == "Because no." and "ERR" in s[0]["text"]
    assert out[0].cost.judge_calls == 4 and out[0].cost.completion_tokens == 32
    assert out[1].cost.judge_calls == 4
    row = out[0].to_row()
    assert row["slices"][0][0]["status"] == "ok"


def test_scorer_invalid_and_timeout_slices_are_masked_not_no():
    judge = RuleJudge()
    g = Group("g", "p", [_lines("fine", "GARBLE", "\\boxed{1}"), _lines("GARBLE a", "GARBLE b"),
                         _lines("SLOW a", "SLOW b"), ""], reference="1")
    out = _scorer(judge, lambda1=0.0)([g])[0]
    assert out.rewards[0] == 1.0  # mean over the two valid YES slices, the garbled one left out
    assert out.statuses == [Status.OK, Status.INVALID, Status.TIMEOUT, Status.INVALID]
    assert np.isnan(out.rewards[1:]).all()
    assert "no valid slice verdict" in out.messages[1] and "empty response" in out.messages[3]
    assert out.extra["slices"][0][1]["status"] == "invalid"


def test_scorer_partial_mode_judges_first_n_and_drops_exact_match():
    judge = RuleJudge()
    g = Group("g", "p", [_lines("a", "b", "c", "d ERR", "\\boxed{99}")], reference="1")
    out = _scorer(judge, partial=True, partial_slices=3)([g])[0]
    assert judge.generate_batches == [3]
    assert out.rewards.tolist() == [1.0]  # R^s of the first 3 slices only; no R^m for partial traces
    assert out.components["n_slices"] == [3]


def test_scorer_without_reference_abstains_unless_verifier_off():
    g = Group("g", "p", [_lines("a", "b ERR")])
    out = _scorer(RuleJudge())([g])[0]
    assert out.statuses == [Status.ABSTAIN] and np.isnan(out.rewards[0])
    assert out.messages == ["no reference answer for exact match R^m (set lambda1=0)"]
    out = _scorer(RuleJudge(), lambda1=0.0, lambda2=2.0)([g])[0]
    assert out.statuses == [Status.OK] and out.rewards.tolist() == [1.0]


def test_scorer_logit_mode_hard_and_soft_scores():
    judge = RuleJudge()
    g = Group("g", "p", [_lines("a", "b ERR")])
    hard = _scorer(judge, mode="logit", lambda1=0.0)([g])[0]
    soft = _scorer(judge, mode="logit", lambda1=0.0, soft=True)([g])[0]
    assert judge.verdict_batches == [2, 2] and judge.generate_batches == []
    assert hard.rewards.tolist() == [0.5]
    assert soft.rewards[0] == pytest.approx((0.9 + 0.2) / 2)
    assert [x["p_yes"] for x in soft.extra["slices"][0]] == pytest.approx([0.9, 0.2])


def test_scorer_registry_options_and_fixed_segmentation():
    from rewardkit.scoring import get_scorer, scorer_options

    names = {o.name for o in scorer_options("slices")}
    assert {"mode", "slice_tokens", "lambda1", "lambda2", "partial", "partial_slices", "max_tokens"} <= names
    judge = RuleJudge()
    sc = get_scorer("slices", judge=judge, mode="logit", slice_tokens="3", segmentation="fixed", lambda1="0")
    out = sc([Group("g", "p", ["a b c d e f g"])])[0]
    assert out.components["n_slices"] == [3] and judge.verdict_batches == [3]


# ------------------------------------------------------------------------------------ scorer: options, verdicts, failures


@pytest.mark.parametrize(("cls", "fields", "message"), [
    (DiscriminatorOptions, {"lambda2": -1.0}, "option 'lambda1'/'lambda2': must be >= 0, got 1.0, -1.0"),
    (DiscriminatorOptions, {"lambda1": -0.5}, "option 'lambda1'/'lambda2': must be >= 0, got -0.5, 1.0"),
    (DiscriminatorOptions, {"max_tokens": 0}, "option 'max_tokens': must be >= 1, got 0"),
    (DiscriminatorOptions, {"temperature": -0.1}, "option 'temperature': must be >= 0, got -0.1"),
    (DiscriminatorOptions, {"threshold": 1.5}, "option 'threshold': must lie in [0, 1], got 1.5"),
    (DiscriminatorOptions, {"threshold": -0.1}, "option 'threshold': must lie in [0, 1], got -0.1"),
    (SliceOptions, {"lambda2": -2.0}, "option 'lambda1'/'lambda2': must be >= 0, got 1.0, -2.0"),
    (SliceOptions, {"partial": True, "partial_slices": 0}, "option 'partial_slices': must be >= 1, got 0"),
    (SliceOptions, {"slice_tokens": 0}, "option 'slice_tokens': must be >= 1, got 0"),
    (SliceOptions, {"min_slice_tokens": -1}, "option 'min_slice_tokens': must be >= 0, got -1"),
])
def test_discriminator_options_refuse_out_of_range_values_with_exact_messages(cls, fields, message):
    with pytest.raises(ValueError) as e:
        cls(**fields)
    assert str(e.value) == message


@pytest.mark.parametrize("fields", [
    {"lambda1": 0.0, "lambda2": 0.0},  # sec. 3: lambda1, lambda2 >= 0
    {"lambda2": 0.5},
    {"max_tokens": 1},
    {"temperature": 0.0},
    {"threshold": 0.0},
    {"threshold": 1.0},
    {"partial": True, "partial_slices": 1},
    {"partial": False, "partial_slices": 0},  # n is read only in partial-trace mode
    {"slice_tokens": 1},
    {"min_slice_tokens": 0},
])
def test_slice_options_accept_the_edges_of_their_ranges(fields):
    o = SliceOptions(**fields)
    assert {k: getattr(o, k) for k in fields} == fields


def test_slice_judgment_score_is_the_hard_verdict_at_threshold_one_half_by_default():
    assert SliceJudgment(Status.OK, "YES", 0.7).score() == 1.0  # 1[P(YES) >= 0.5], not P(YES)
    assert SliceJudgment(Status.OK, "YES", 0.7).score(soft=True) == 0.7
    assert SliceJudgment(Status.OK, "YES", 0.5).score() == 1.0  # at the threshold: YES
    assert SliceJudgment(Status.OK, "NO", 0.75).score(threshold=0.75) == 1.0
    assert SliceJudgment(Status.OK, "NO", 0.74).score(threshold=0.75) == 0.0
    assert SliceJudgment(Status.OK, "YES").score() == 1.0 and SliceJudgment(Status.OK, "NO").score(soft=True) == 0.0
    assert SliceJudgment(Status.INVALID, message="why").score() is None


def test_slice_judgment_to_dict_names_every_field():
    j = SliceJudgment(Status.INVALID, output="Hmm. **YES** fine", message="why")
    assert j.to_dict() == {"status": "invalid", "verdict": None, "p_yes": None, "output": "Hmm. **YES** fine",
                           "rationale": "fine", "message": "why"}


def test_scorer_slice_details_components_lambda2_and_costs():
    judge = RuleJudge()
    out = _scorer(judge, lambda1=0.0, lambda2=2.0)([Group("g7", "p", [_lines("fine", "GARBLE", "x ERR")])])[0]
    assert out.group_id == "g7"
    assert out.rewards.tolist() == [1.0]  # lambda2 * R^s = 2 * (1 + 0) / 2, the garbled slice left out
    assert out.components["n_slices"] == [3] and out.components["n_valid_slices"] == [2]
    assert out.components["slice_mean"] == [0.5]
    assert len(out.components["exact_match"]) == 1 and math.isnan(out.components["exact_match"][0])  # R^m off
    first, garbled, _ = out.extra["slices"][0]
    assert first == {"text": "Next fine\n", "start": 0, "end": 10, "tokens": 2, "score": 1.0, "status": "ok",
                     "verdict": "YES", "p_yes": None, "output": "Checks the step.\n**YES** Because yes.",
                     "rationale": "Because yes.", "message": None}
    assert garbled == {"text": "Next GARBLE\n", "start": 10, "end": 22, "tokens": 2, "score": None,
                       "status": "invalid", "verdict": None, "p_yes": None, "output": "I cannot tell.",
                       "rationale": "", "message": "no **YES**/**NO** verdict where the prompt asks for one in judge "
                                                   "output (ends: 'I cannot tell.')"}
    assert out.cost == Cost(judge_calls=3, prompt_tokens=30, completion_tokens=24, seconds=out.cost.seconds)


def test_generate_requests_carry_the_cap_K_and_the_temperature():
    judge = RuleJudge()
    _scorer(judge, lambda1=0.0)([Group("g", "p", [_lines("a", "b")])])
    assert [(r.max_tokens, r.temperature) for r in judge.requests] == [(128, 0.0)] * 2  # K = 128 (sec. 3)
    judge = RuleJudge()
    _scorer(judge, lambda1=0.0, max_tokens=64, temperature=0.7)([Group("g", "p", [_lines("a", "b")])])
    assert [(r.max_tokens, r.temperature) for r in judge.requests] == [(64, 0.7)] * 2


def test_context_shows_the_trace_before_each_slice_only_when_asked():
    g = Group("g", "p", [_lines("a", "b", "c")])
    judge = RuleJudge()
    _scorer(judge, lambda1=0.0, context=True)([g])
    assert judge.prompts == [
        "Problem:\np\n\nReasoning to evaluate:\nNext a",  # the first slice has nothing before it
        "Problem:\np\n\nEarlier reasoning (context only, do not judge it):\nNext a\n\nReasoning to evaluate:\nNext b",
        "Problem:\np\n\nEarlier reasoning (context only, do not judge it):\nNext a\nNext b\n\n"
        "Reasoning to evaluate:\nNext c",
    ]
    judge = RuleJudge()
    _scorer(judge, lambda1=0.0)([g])
    assert judge.prompts == [f"Problem:\np\n\nReasoning to evaluate:\nNext {x}" for x in "abc"]


def test_logit_mode_verdicts_and_hard_scores_follow_the_threshold():
    g = Group("g", "p", [_lines("a", "b ERR")])  # P(YES) = 0.9 and 0.2
    for threshold, verdicts, reward in [(0.5, ["YES", "NO"], 0.5), (0.9, ["YES", "NO"], 0.5),
                                        (0.95, ["NO", "NO"], 0.0), (0.2, ["YES", "YES"], 1.0)]:
        judge = RuleJudge()
        out = _scorer(judge, mode="logit", lambda1=0.0, threshold=threshold)([g])[0]
        assert [x["verdict"] for x in out.extra["slices"][0]] == verdicts, threshold
        assert [x["score"] for x in out.extra["slices"][0]] == [float(v == "YES") for v in verdicts], threshold
        assert out.rewards.tolist() == [reward], threshold
    # P(YES) = M_d(x) is read after the assistant turn opens with "**": the next token is YES or NO (App. B)
    assert all(r.assistant_prefix == "**" and tuple(r.choices) == ("YES", "NO") for r in judge.requests)
    soft = _scorer(RuleJudge(), mode="logit", lambda1=0.0, threshold=0.95, soft=True)([g])[0]
    assert soft.rewards[0] == pytest.approx((0.9 + 0.2) / 2)  # soft r^s ignores the threshold
    assert [x["verdict"] for x in soft.extra["slices"][0]] == ["NO", "NO"]


def _failing_probs(prompt, choices):
    s = _slice(prompt)
    if "SLOW" in s:
        return Status.TIMEOUT  # ScriptedJudge: error text "scripted timeout", no tokens
    if "THREE" in s:
        return VerdictResult(np.array([0.1, 0.3, 0.6]), prompt_tokens=7)  # ok, but not one P per verdict
    if "SILENT" in s:
        return VerdictResult(np.array([]), Status.ERROR)  # a failure without an error text
    return _rule_probs(prompt, choices)


def test_logit_mode_failed_or_malformed_verdicts_are_typed_masked_and_still_cost_a_call():
    judge = ScriptedJudge(probs=_failing_probs)
    g = Group("g", "p", [_lines("SLOW a", "fine"), _lines("THREE a", "fine"), _lines("SILENT a"), _lines("SLOW b")])
    out = _scorer(judge, mode="logit", lambda1=0.0)([g])[0]
    assert judge.verdict_batches == [6]
    assert out.statuses == [Status.OK, Status.OK, Status.ERROR, Status.TIMEOUT]
    assert out.rewards[:2].tolist() == [1.0, 1.0] and np.isnan(out.rewards[2:]).all()  # masked, never a NO
    # a failed call without an error text is named by its status (as in generate mode), not as a count of probs
    assert out.messages == [None, None, "no valid slice verdict out of 1: judge call error",
                            "no valid slice verdict out of 1: scripted timeout"]
    assert [[(x["status"], x["message"], x["score"]) for x in r] for r in out.extra["slices"]] == [
        [("timeout", "scripted timeout", None), ("ok", None, 1.0)],
        [("error", "verdict_probs returned 3 probs", None), ("ok", None, 1.0)],
        [("error", "judge call error", None)],
        [("timeout", "scripted timeout", None)],
    ]
    assert out.components["n_valid_slices"] == [1, 1, 0, 0]
    assert (out.cost.judge_calls, out.cost.prompt_tokens) == (6, 10 + 7 + 10)  # a failed call is still a call


def _failing_reply(prompt):
    s = _slice(prompt)
    if "BROKEN" in s:
        return Completion([], Status.ERROR)  # a failure without an error text
    if "LONG" in s:
        return Completion([], Status.TIMEOUT, error="x" * 600)
    if "CUT" in s:  # the K-token cap stopped it right after the verdict
        return Completion(["Looks right.\n**YES**"], finish_reasons=["length"], prompt_tokens=10, completion_tokens=128)
    if "CAPPED" in s:  # the cap cut the rationale: the verdict stands (sec. 4.3)
        return Completion(["Adds.\n**NO** The step adds instead of"], finish_reasons=["length"], prompt_tokens=10,
                          completion_tokens=128)
    return _rule_reply(prompt)


def test_generate_mode_failures_give_typed_statuses_and_every_reason():
    judge = ScriptedJudge(_failing_reply, completion_tokens=8)
    garbled = "no **YES**/**NO** verdict where the prompt asks for one in judge output (ends: 'I cannot tell.')"
    g = Group("g", "p", [_lines("SLOW a", "GARBLE b"), _lines("BROKEN a", "SLOW b"), _lines("BROKEN a", "GARBLE b"),
                         _lines("LONG a"), _lines("CUT a"), _lines("CAPPED a"), ""])
    out = _scorer(judge, lambda1=0.0)([g])[0]
    assert out.statuses == [Status.TIMEOUT, Status.TIMEOUT, Status.ERROR, Status.TIMEOUT, Status.INVALID,
                            Status.OK, Status.INVALID]  # a timeout is named first, then an error
    assert out.rewards[5] == 0.0 and np.isnan(np.delete(out.rewards, 5)).all()
    assert out.messages == [
        f"no valid slice verdict out of 2: {garbled}; scripted timeout",
        "no valid slice verdict out of 2: judge call error; scripted timeout",
        f"no valid slice verdict out of 2: judge call error; {garbled}",
        "no valid slice verdict out of 1: " + "x" * 500,  # the reasons are cut at 500 characters
        "no valid slice verdict out of 1: the judge stopped for length (finish_reason='length') before its "
        "explanation began: the verdict may not be complete in judge output (ends: 'Looks right. **YES**')",
        None,
        "empty response: nothing to slice",
    ]
    assert out.extra["slices"][5][0]["verdict"] == "NO" and out.components["n_slices"] == [2, 2, 2, 1, 1, 1, 0]
    # 9 calls, failed ones included; tokens: two garbled replies (10 + 8 each) and two capped ones (10 + 128)
    assert (out.cost.judge_calls, out.cost.prompt_tokens, out.cost.completion_tokens) == (9, 40, 2 * 8 + 2 * 128)


class _Checker:
    """An answer checker whose checks are scripted per (reference, answer)."""

    def __init__(self, checks: dict[tuple[str, str], Check]):
        self.checks = checks

    def check_many(self, pairs):
        return [self.checks[p] for p in pairs]


_TIMED_OUT = Check(None, Status.TIMEOUT, "math-verify exceeded 5s")


def test_scorer_uses_the_given_checker_and_a_failed_check_is_that_responses_status():
    # the scripted checker calls 4 right (a checker the user chose decides R^m) and times out on 7
    checker = _Checker({("5", "5"): Check(True), ("5", "4"): Check(True), ("5", "7"): _TIMED_OUT})
    g = Group("g", "2+3?", [_lines("so \\boxed{5}"), _lines("so \\boxed{4}"), _lines("so \\boxed{7}"),
                            _lines("GARBLE \\boxed{7}")], reference="5")
    out = _scorer(RuleJudge(), checker=checker)([g])[0]
    assert out.statuses == [Status.OK, Status.OK, Status.TIMEOUT, Status.INVALID]
    assert out.rewards[:2].tolist() == [2.0, 2.0] and np.isnan(out.rewards[2:]).all()  # 1 * R^m + 1 * R^s
    assert out.messages[:3] == [None, None, "math-verify exceeded 5s"]
    assert out.messages[3].startswith("no valid slice verdict out of 1: no **YES**/**NO**")  # the judge's reason first
    assert out.components["exact_match"][:2] == [1.0, 1.0] and np.isnan(out.components["exact_match"][2:]).all()
    assert (out.cost.verifier_calls, out.cost.judge_calls) == (4, 4)  # the verifier's checks are counted too


def test_discriminator_objective_fields_and_lambda_weights():
    judge = RuleJudge()
    g = Group("g", "2+3?", [_lines("ok \\boxed{5}"), _lines("ERR \\boxed{4}")], reference="5",
              expert=_lines("x", "y"))
    obj = _scorer(judge, mode="logit").discriminator_objective([g], lambda3=2.0, lambda4=1.0)
    r_d = math.log(0.9) + (math.log(0.1) + math.log(0.8)) / 2
    r_a = (0.9 + (1 - 0.2)) / 2
    assert set(obj) == {"R_d", "R_a", "R_dis", "p_real", "is_reference", "gan_terms", "statuses", "cost"}
    assert obj["R_dis"] == pytest.approx(2.0 * r_d + 1.0 * r_a)  # R^dis = lambda3 R^d + lambda4 R^a
    assert obj["p_real"] == pytest.approx([0.9, 0.9, 0.9, 0.2])
    assert obj["gan_terms"] == pytest.approx([math.log(0.9), math.log(0.9), math.log(0.1), math.log(0.8)])
    assert obj["statuses"] == ["ok"] * 4 and obj["cost"] == Cost(judge_calls=4, prompt_tokens=40)


def test_discriminator_objective_generate_mode_reads_hard_verdicts():
    judge = RuleJudge()
    g = Group("g", "2+3?", [_lines("ok \\boxed{5}"), _lines("ERR \\boxed{4}")], reference="5",
              expert=_lines("x", "y"))
    obj = _scorer(judge).discriminator_objective([g])
    assert judge.generate_batches == [4] and obj["p_real"] == [1.0, 1.0, 1.0, 0.0]  # M_d(x): YES = 1, NO = 0
    eps = 1e-6  # hard verdicts clipped to [eps, 1 - eps]
    r_d = math.log(1 - eps) + (math.log(eps) + math.log(1 - eps)) / 2
    assert obj["R_d"] == pytest.approx(r_d) and obj["R_a"] == 1.0  # both traces' verdicts agree with correctness
    assert obj["R_dis"] == pytest.approx(r_d + 0.5)
    assert obj["cost"] == Cost(judge_calls=4, prompt_tokens=40, completion_tokens=32)


def test_discriminator_objective_needs_reference_slices():
    g = Group("g", "p", [_lines("a"), _lines("b ERR")], reference="5")  # no expert solution
    with pytest.raises(ValueError) as e:
        _scorer(RuleJudge(), mode="logit").discriminator_objective([g])
    assert str(e.value) == "gan_reward needs reference and generated slices (0 ref, 2 gen valid)"


def test_discriminator_objective_alignment_uses_the_given_checker_and_skips_unchecked_traces():
    checker = _Checker({("5", "5"): _TIMED_OUT, ("5", "4"): Check(False)})
    g = Group("g", "2+3?", [_lines("ok \\boxed{5}"), _lines("ERR \\boxed{4}")], reference="5", expert=_lines("x"))
    obj = _scorer(RuleJudge(), mode="logit", checker=checker).discriminator_objective([g])
    assert obj["R_a"] == pytest.approx(1 - 0.2)  # only the checked (wrong) trace: its slice's P(YES) = 0.2



# ------------------------------------------------------------------------------------ real model


@pytest.mark.model
def test_real_model_logit_mode_end_to_end(judge_backend):
    g = Group("g", "What is 2+3?", ["2+3=5.\nSo the answer is \\boxed{5}.", "2+3=6, so \\boxed{6}"], reference="5")
    sc = SliceScorer(judge=judge_backend, mode="logit", slice_tokens=8, min_slice_tokens=0)
    out = sc([g])[0]
    n = sum(out.components["n_slices"])
    assert n >= 3 and out.cost.judge_calls == n  # one uncached forward pass per slice (cache_hits also counts the verifier)
    assert out.statuses == [Status.OK, Status.OK]
    assert out.components["exact_match"] == [1.0, 0.0]
    assert all(0.0 <= r <= 2.0 for r in out.rewards)
    for resp, sl in zip(g.responses, out.extra["slices"], strict=True):
        assert "".join(x["text"] for x in sl) == resp  # slices cover the trace exactly
        assert all(0.0 <= x["p_yes"] <= 1.0 and x["verdict"] in ("YES", "NO") for x in sl)
    # budget counted with the discriminator's own tokenizer
    assert all(x["tokens"] == judge_backend.count_tokens([x["text"]])[0] or len(sl) > 1
               for sl in out.extra["slices"] for x in sl)


@pytest.mark.model
def test_real_model_generate_mode_caps_output_and_keeps_it(judge_backend):
    g = Group("g", "What is 2+3?", ["2+3=5, so the answer is \\boxed{5}."], reference="5")
    out = SliceScorer(judge=judge_backend, max_tokens=12, lambda1=0.0)([g])[0]
    (sl,) = out.extra["slices"][0]
    assert out.cost.completion_tokens <= 12 and sl["output"]
    assert sl["status"] in ("ok", "invalid")
    if sl["status"] == "invalid":  # SmolLM2 often writes no **YES**/**NO**: masked, never a NO
        assert out.statuses == [Status.INVALID] and np.isnan(out.rewards[0])
    else:
        assert out.rewards[0] == (1.0 if sl["verdict"] == "YES" else 0.0)


def test_discriminator_objective_one_call_and_hand_values():
    judge = RuleJudge()
    g = Group("g", "2+3?", [_lines("ok \\boxed{5}"), _lines("ERR \\boxed{4}")], reference="5",
              expert=_lines("x", "y"))
    obj = _scorer(judge, mode="logit").discriminator_objective([g])
    assert judge.verdict_batches == [4]  # 2 reference + 2 generated slices, one call
    assert obj["is_reference"] == [True, True, False, False]
    r_d = math.log(0.9) + (math.log(0.1) + math.log(0.8)) / 2  # E_ref log D + E_gen log(1 - D)
    r_a = (0.9 + (1 - 0.2)) / 2  # correct trace agrees with 0.9, wrong trace with 1 - 0.2
    assert obj["R_d"] == pytest.approx(r_d) and obj["R_a"] == pytest.approx(r_a)
    assert obj["R_dis"] == pytest.approx(r_d + 0.5 * r_a)
    no_ref = Group("h", "p", [_lines("a")], expert=_lines("x"))
    obj = _scorer(RuleJudge(), mode="logit").discriminator_objective([no_ref])
    assert math.isnan(obj["R_a"]) and math.isnan(obj["R_dis"])
    assert _scorer(RuleJudge(), mode="logit").discriminator_objective([no_ref], lambda4=0.0)["R_dis"] == obj["R_d"]


# ------------------------------------------------------------------------------------ real traces


def _rollouts(path, n=None):
    import json

    rows = [json.loads(line) for line in open(path)]
    return [r for row in rows for r in row["responses"]][:n]


def test_real_rollouts_slice_exactly_and_keep_displays_whole(rollouts_path):
    traces_ = _rollouts(rollouts_path)
    assert len(traces_) == 800
    n_multi = 0
    for t in traces_:
        slices = slice_text(t, 64, whitespace_tokens, 16)
        _assert_exact_cover(t, slices)
        n_multi += len(slices) > 1
        whole = [t.count("\\[") == t.count("\\]"), t.count("\\(") == t.count("\\)"),
                 len(boxed_contents(t)) == t.count("\\boxed{")]
        for s in slices:  # displays, inline \(..\) and boxed answers are never split across slices
            assert not whole[0] or s.text.count("\\[") == s.text.count("\\]"), s.text
            assert not whole[1] or s.text.count("\\(") == s.text.count("\\)"), s.text
            assert not whole[2] or len(boxed_contents(s.text)) == s.text.count("\\boxed{"), s.text
    assert n_multi > 400  # most real traces are longer than 64 words


@pytest.mark.model
def test_real_tokenizer_budget_on_real_rollouts(judge_backend, rollouts_path):
    for t in _rollouts(rollouts_path, 40):
        slices = slice_text(t, 96, judge_backend.count_tokens, 24)
        _assert_exact_cover(t, slices)
        for s in slices:
            assert s.tokens <= 96 or s.text.count("\\[") >= 1 or s.text.count("$$") >= 2, s.text


def test_slices_on_real_traces_come_out_near_L(rollouts_path):
    """GAR merges delimiter pieces up to L = 320 and finds slices of ~320-560 tokens best, shorter ones
    clearly worse (App. D.2): with rewardkit's 3/4 L new-beginning threshold (the paper gives none) the median
    slice on the shared rollouts (a trace's last excluded) holds >= 3/4 L."""
    import json

    import numpy as np

    rows = [json.loads(line) for line in rollouts_path.read_text().splitlines()]
    closed = [s.tokens for r in rows for t in r["responses"] for s in slice_text(t, 320, whitespace_tokens)[:-1]]
    assert len(closed) > 50
    assert np.median(closed) >= 0.75 * 320 and max(closed) <= 320


def test_L_holds_on_the_real_token_count_of_every_slice(rollouts_path):
    """L = 320 is checked on each slice's own token count with the discriminator's tokenizer (SmolLM2). It used to
    be checked on summed segment counts, and ~3% of slices on the shared rollouts came out over L after
    re-tokenising (up to 330; 12 of these 200 traces). Only a single protected block longer than L may exceed."""
    import json

    from transformers import AutoTokenizer

    from rewardkit.backends.embedded import embedded_model_path

    tok = AutoTokenizer.from_pretrained(str(embedded_model_path()))

    def count(texts):
        return [len(ids) for ids in tok(list(texts), add_special_tokens=False)["input_ids"]]

    rows = [json.loads(line) for line in rollouts_path.read_text().splitlines()][:25]
    n = 0
    for t in (t for r in rows for t in r["responses"]):
        slices = slice_text(t, 320, count)
        _assert_exact_cover(t, slices)
        for s, real in zip(slices, count([s.text for s in slices]), strict=True):
            n += 1
            assert s.tokens == real
            assert real <= 320 or any(a <= s.start and s.end <= b for a, b in protected_spans(t)), (real, s.text)
    assert n > 300


# ------------------------------------------------------------------------------------ hand-worked slice boundaries
# Token counters for hand-working: whitespace words, characters (a real tokenizer counts a line break too), and
# squared words (a tokenizer whose count of a joined text exceeds the sum of its pieces' counts).


def _chars(texts):
    return [len(t) for t in texts]


def _squared_words(texts):
    return [len(t.split()) ** 2 for t in texts]


def _texts(slices) -> list[str]:
    return [s.text for s in slices]


def test_brace_pairs_match_nested_and_skip_escaped_braces():
    from rewardkit.gar.slicing import _brace_pairs

    assert _brace_pairs("{a}") == {0: 3}
    assert _brace_pairs("{a{b}c}") == {0: 7, 2: 5}
    assert _brace_pairs("{\\}}") == {0: 4}  # "\}" is a literal brace, not the closer
    assert _brace_pairs("\\{x}") == {}  # "\{" opens nothing; the stray "}" closes nothing


@pytest.mark.parametrize("text, spans", [
    ("\\boxed{x\\}} y", ["\\boxed{x\\}}"]),  # an escaped brace inside \boxed neither closes it nor hides its closer
    ("\\boxed{a{b}c} d", ["\\boxed{a{b}c}"]),  # nested braces: the box closes at its own brace
    ("```py\nx\n``` after", ["```py\nx\n```"]),  # the span ends right after the closing fence
    ("\\[x\\] y", ["\\[x\\]"]),
    ("\\(x\\) y", ["\\(x\\)"]),
    ("$$ x", []),  # unclosed openers protect nothing
    ("\\[ x", []),
    ("\\( x", []),
    ("\\begin{cases}a\\\\b\\end{cases} c", ["\\begin{cases}a\\\\b\\end{cases}"]),
])
def test_protected_spans_end_exactly_at_the_closer(text, spans):
    assert [text[a:b] for a, b in protected_spans(text)] == spans


def test_a_line_break_right_before_a_block_is_a_cut():
    # segments "a b\n" (2) and "\[x\]" (1): 2 + 1 > L = 2, so they are two slices; the cut at the block's start is
    # outside the block
    assert _texts(slice_text("a b\n\\[x\\]", 2, min_tokens=2)) == ["a b\n", "\\[x\\]"]


def test_one_block_longer_than_L_stays_whole_and_alone():
    block = "\\begin{align}a &= b \\\\ c &= d + e\\end{align}"  # 7 whitespace words
    text = "x y\n" + block + "\nz"
    assert _texts(slice_text(text, 3, min_tokens=3)) == ["x y\n", block + "\n", "z"]
    assert _texts(fixed_windows(text, 3)) == ["x y\n", block + "\n", "z"]


def test_a_slice_closes_at_a_new_beginning_once_it_holds_min_tokens():
    # "a\n" holds 1 token: with min_tokens = 1 the restart "Wait" closes it (the threshold itself is enough)
    assert _texts(slice_text("a\nWait b", 320, min_tokens=1)) == ["a\n", "Wait b"]
    assert _texts(slice_text("a\nWait b", 320, min_tokens=2)) == ["a\nWait b"]
    # the slice's count is the sum over all its segments (1 + 1 = 2), not the last segment's alone
    assert _texts(slice_text("a\nb\nWait c", 320, min_tokens=2)) == ["a\nb\n", "Wait c"]


def test_default_min_tokens_is_three_quarters_of_L():
    # L = 8: a new beginning closes the slice once it holds 6 tokens (3/4 L), not before
    assert _texts(slice_text("a b c d e f\nWait g", 8)) == ["a b c d e f\n", "Wait g"]
    assert _texts(slice_text("a b c d e\nWait g", 8)) == ["a b c d e\nWait g"]


def test_a_blank_start_is_never_a_slice_of_its_own():
    # the leading "\n\n" holds no token: a new beginning does not close an empty slice, even with min_tokens = 0
    assert _texts(slice_text("\n\nWait, a b", 320, min_tokens=0)) == ["\n\nWait, a b"]


def test_a_leading_line_break_is_a_segment():
    # characters as tokens: "\n" holds 1, so the restart after it closes the slice (min_tokens = 1)
    assert _texts(slice_text("\nWait ab", 100, _chars, 1)) == ["\n", "Wait ab"]


def test_a_segment_of_exactly_L_tokens_is_not_split():
    # "x\n" (1) + "a b" (2 = L) overflow L, so "a b" opens the second slice whole
    assert _texts(slice_text("x\na b", 2, min_tokens=2)) == ["x\n", "a b"]


def test_midline_cue_cuts_a_segment_but_is_no_new_beginning():
    # "x\n" (1), "a b. " (2), "So c" (2) with L = 4: the cut before "So" lets "a b. " join the first slice
    assert _texts(slice_text("x\na b. So c", 4, min_tokens=1)) == ["x\na b. ", "So c"]
    # a cue opening a sentence mid-line is not a clear new beginning: nothing closes early
    assert _texts(slice_text("a b. So c", 320, min_tokens=1)) == ["a b. So c"]


def test_split_long_segment_keeps_the_new_beginning_on_its_first_piece_only():
    # "a. b. c. d." (4 > L = 3) is split at sentence ends; its pieces are no new beginnings
    assert _texts(slice_text("x\na. b. c. d.", 3, min_tokens=1)) == ["x\na. b. ", "c. d."]
    # a long segment opening with "Wait": its first piece restarts, the later pieces do not
    assert _texts(slice_text("x\nWait a. b. c.", 3, min_tokens=1)) == ["x\n", "Wait a. b. ", "c."]


def test_fit_holds_L_on_the_real_count_of_the_joined_text():
    # squared words: "a ", "b ", "c" count 1 each (sum 3 <= L = 4) but "a b c" counts 9; the longest prefix that
    # fits is "a b " (4 <= 4), then "c"
    assert [(s.text, s.tokens) for s in slice_text("a b c", 4, _squared_words, 4)] == [("a b ", 4), ("c", 1)]


def test_counter_is_never_asked_about_an_empty_text():
    seen: list[str] = []

    def recording(texts):
        seen.extend(texts)
        return _squared_words(texts)

    # L = 3: "a b c" (9) is fitted to "a " then "b c" (4) to "b " and "c"
    assert _texts(slice_text("a b c", 3, recording, 3)) == ["a ", "b ", "c"]
    assert "" not in seen


def test_counter_that_loses_counts_is_refused_not_zipped_short():
    def drops_two_word_texts(texts):  # a backend that silently skips some inputs
        return [len(t.split()) ** 2 for t in texts if len(t.split()) != 2]

    # the segments "a\n" and "b" count fine; the slice "a\nb" (two words) gets no count
    with pytest.raises(ValueError):
        slice_text("a\nb", 10, drops_two_word_texts, 10)
    # the words of "a b c" count fine; the slice counts 9 > 3 and its prefix "a b " gets no count
    with pytest.raises(ValueError):
        slice_text("a b c", 3, drops_two_word_texts, 3)


def test_fixed_windows_leading_whitespace_is_its_own_word():
    # characters as tokens: " " (1), "ab " (3), "cd" (2) with L = 3
    assert _texts(fixed_windows(" ab cd", 3, _chars)) == [" ", "ab ", "cd"]


def test_make_slices_defaults_to_delimiters_and_passes_the_counter_on():
    # the paper's delimiter slicing by default: the mid-line cue cut as in the test above
    assert _texts(make_slices("x\na b. So c", max_tokens=4, min_tokens=1)) == ["x\na b. ", "So c"]
    assert _texts(make_slices(" ab cd", "fixed", 3, _chars)) == [" ", "ab ", "cd"]
