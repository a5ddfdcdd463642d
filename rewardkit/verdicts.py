"""Judge-output parsing: ``\\boxed{A|B|Tie}``, ``**YES**``/``**NO**``, ``\\boxed{1|0.5|0}``, ``Answer 1/2/tie``,
``<consistency>Correct</consistency>`` and ``True``/``False``.

The last verdict in the text wins. Anything else is ``Status.INVALID`` with a message: an unparseable
judge output is never turned into a tie or a 0. Parsers never raise on any string.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewardkit.types import Status


@dataclass(frozen=True)
class Verdict:
    label: str | None  # canonical choice (e.g. "A", "Tie", "YES", "1", "0.5") or None when invalid
    status: Status = Status.OK
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


def _invalid(what: str, text: str) -> Verdict:
    tail = text[-120:].replace("\n", " ") if text else "<empty>"
    return Verdict(None, Status.INVALID, f"no {what} verdict found in judge output (ends: {tail!r})")


_BOXED = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def boxed_contents(text: str, max_len: int | None = None) -> list[str]:
    """Contents of every ``\\boxed{...}`` in order, with nested braces balanced (unclosed ones skipped).

    One linear pass matches the braces first, so adversarial inputs (thousands of unclosed ``\\boxed{``)
    cost O(len(text)), not O(len(text)^2). The pass starts at the first ``\\boxed{`` (a brace's match
    depends only on what follows it) and visits brace characters only. Contents longer than ``max_len``
    are skipped without copying.
    """
    first = _BOXED.search(text)
    if first is None:
        return []
    close: dict[int, int] = {}  # index of "{" -> index of its matching "}"
    stack: list[int] = []
    for b in _BRACE.finditer(text, first.end() - 1):
        i = b.start()
        if text[i] == "{":
            stack.append(i)
        elif stack:
            close[stack.pop()] = i
    out = []
    for m in _BOXED.finditer(text):
        j = close.get(m.end() - 1)
        if j is not None and (max_len is None or j - m.end() <= max_len):
            out.append(text[m.end() : j])
    return out


_MAX_VERDICT = 64  # a boxed verdict is a short token; longer boxed spans cannot be one


def _canon_boxed(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"^\\(?:text|textbf|mathrm|mathbf)\s*\{(.*)\}$", r"\1", s).strip()
    return s


def parse_boxed_choice(text: str, choices: Sequence[str] = ("A", "B", "Tie")) -> Verdict:
    """The last ``\\boxed{X}`` whose X is one of ``choices`` (case-insensitive); the paper's tournament format."""
    canon = {c.lower(): c for c in choices}
    for content in reversed(boxed_contents(text, _MAX_VERDICT)):
        c = canon.get(_canon_boxed(content).lower())
        if c is not None:
            return Verdict(c)
    return _invalid("boxed " + "/".join(choices), text)


_SCORE_CANON = {"1": "1", "1.0": "1", "0.5": "0.5", ".5": "0.5", "1/2": "0.5", "\\frac{1}{2}": "0.5", "0": "0", "0.0": "0"}


def parse_boxed_score(text: str) -> Verdict:
    """Pointwise rubric score: the last ``\\boxed{1}``, ``\\boxed{0.5}`` or ``\\boxed{0}``."""
    for content in reversed(boxed_contents(text, _MAX_VERDICT)):
        c = _SCORE_CANON.get(_canon_boxed(content).replace(" ", ""))
        if c is not None:
            return Verdict(c)
    return _invalid("boxed 1/0.5/0", text)


# a lookahead finds overlapping hits, so in "**YES**NO**" the later NO wins
_YES_NO = re.compile(r"(?=\*\*[ \t]*(YES|NO)[ \t]*\*\*)", re.IGNORECASE)


def parse_yes_no(text: str) -> Verdict:
    """GAR discriminator: the last ``**YES**`` or ``**NO**``."""
    hits = _YES_NO.findall(text)
    if not hits:
        return _invalid("**YES**/**NO**", text)
    return Verdict(hits[-1].upper())


_ANSWER_CHOICE = re.compile(r"\banswer[\s_.]*([12])\b|\b(tie)\b", re.IGNORECASE)


def _last_hit(pattern: re.Pattern, text: str, what: str) -> Verdict:
    """The last match of a one-group pattern, capitalised; else invalid."""
    hits = pattern.findall(text or "")
    return Verdict(hits[-1].capitalize()) if hits else _invalid(what, text or "")


_CONSISTENCY = re.compile(r"<consistency>\s*\[?\s*(correct|incorrect)\s*\]?\s*</consistency>", re.I)
_TRUE_FALSE = re.compile(r"\b(true|false)\b", re.I)


def parse_consistency(text: str) -> Verdict:
    """JURY-RL C.5 consistency checker: ``<consistency>Correct|Incorrect</consistency>`` (last wins)."""
    return _last_hit(_CONSISTENCY, text, "<consistency>")


def parse_true_false(text: str) -> Verdict:
    """JURY-RL App. D judge: the last ``True``/``False`` in the text."""
    return _last_hit(_TRUE_FALSE, text, "True/False")


def parse_answer_choice(text: str) -> Verdict:
    """RARO critic: ``Answer 1``, ``Answer 2`` or ``tie`` after the reasoning (after ``</think>`` if present)."""
    tail = text.rsplit("</think>", 1)[1] if "</think>" in text else text
    hits = _ANSWER_CHOICE.findall(tail)
    if not hits:
        return _invalid("Answer 1/Answer 2/tie", text)
    num, tie = hits[-1]
    return Verdict("tie" if tie else num)


PARSERS = {
    "ab_tie": parse_boxed_choice,
    "score": parse_boxed_score,
    "yes_no": parse_yes_no,
    "answer_choice": parse_answer_choice,
}
