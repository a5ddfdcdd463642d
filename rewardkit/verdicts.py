"""Judge-output parsing: ``\\boxed{A|B|Tie}``, ``**YES**``/``**NO**``, ``\\boxed{1|0.5|0}``, ``Answer 1/2/tie``,
``<consistency>Correct</consistency>`` and ``True``/``False``.

One rule for every parser: the verdict is read only where the judge's prompt asks for it, and only after
``</think>`` when the output has one.

- Reasoning Arena (App. D) "MUST end with exactly one of \\boxed{A}, \\boxed{B}, or \\boxed{Tie}" (and the
  pointwise \\boxed{1|0.5|0}): the final verdict box (boxes holding something else, e.g. an answer, are
  skipped).
- GAR discriminator (App. B) "analyze ... briefly, then respond with **YES** ... or **NO** ... Finally, provide
  a ... explanation": the first ``**YES**``/``**NO**``; the explanation after it may name the other word.
- RARO critic (App. E, responses end ``</think>\\nAnswer 1``) and the JURY judge (App. D, "end your response
  with your final judgment: True or False"): the last non-empty line, after a ``Final judgment:``-style
  label when it has one; the line must begin or end with the verdict.
- JURY consistency checker (App. C.5, "Return exactly one xml object"): every ``<consistency>`` tag.

There, two different verdicts (e.g. the judge echoing "\\boxed{A}, \\boxed{B}, or \\boxed{Tie}" or "**YES** or
**NO**", or "Answer 1 is better than Answer 2"), a negated one ("not \\boxed{B}", "It is not true."), or
none is ``Status.INVALID`` with a message: an unparseable judge output is never turned into a verdict, a
tie or a 0. Parsers never raise on any string.

    >>> parse_boxed_choice(r"B skips a case, A does not. \\boxed{A}").label
    'A'
    >>> parse_yes_no("The step adds instead of multiplying.\\n\\n**NO**\\n\\nIt computes 6 + 7.").label
    'NO'
    >>> parse_answer_choice("<think>...</think>\\nAnswer 2").label, parse_true_false("It checks out.\\nTrue").label
    ('2', 'True')
    >>> parse_expert_policy("Reads like a textbook.\\nExpert").label, parse_boxed_score(r"Half right: \\boxed{1/2}").label
    ('Expert', '0.5')
    >>> parse_consistency("<consistency>Correct</consistency>").label
    'Correct'
    >>> parse_boxed_choice(r"I answer \\boxed{A}, \\boxed{B}, or \\boxed{Tie}").status  # echoed the choices
    <Status.INVALID: 'invalid'>
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
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


def _invalid(what: str, text: str, why: str = "no {what} verdict found") -> Verdict:
    tail = text[-120:].replace("\n", " ") if text else "<empty>"
    return Verdict(None, Status.INVALID, f"{why.format(what=what)} in judge output (ends: {tail!r})")


_BOXED = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def boxed_spans(text: str, max_len: int | None = None) -> list[tuple[int, int, str]]:
    """``(start, end, content)`` of every ``\\boxed{...}`` in order, nested braces balanced, unclosed skipped.

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
            out.append((m.start(), j + 1, text[m.end() : j]))
    return out


def boxed_contents(text: str, max_len: int | None = None) -> list[str]:
    """Contents of every ``\\boxed{...}`` in order (see ``boxed_spans``)."""
    return [c for _, _, c in boxed_spans(text, max_len)]


# ------------------------------------------------------------------------ where the verdict is read
_THINK_END = "</think>"
# hits joined only by punctuation, markup and list words form one cluster ("\boxed{A}, \boxed{B}, or ...")
_JOINER = re.compile(r"(?:[\W_]|\b(?:or|and|nor|either|vs|versus)\b)*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n]")
_CLAUSE_END = re.compile(r"[.;:!?,()\[\]\n]")
_NEGATION = re.compile(r"\b(?:not|never|neither|nor|cannot|rather than|instead of)\b|n[’']t\b", re.IGNORECASE)
_NEGATION_AFTER = re.compile(r"\b(?:not|never|wrong|incorrect)\b|n[’']t\b", re.IGNORECASE)
_WORDS = 3  # a negation this many words before or after a verdict, in its clause, negates it
_WINDOW = 80  # characters looked at on either side of a verdict
# "Final judgment:", "Verdict:", "Final Judgment (1, 2 or tie):" open the verdict in a line
_LABEL = re.compile(r"\b(?:final\s+)?(?:judge?ment|verdict|decision)\b[^:\n]{0,40}:", re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z_]\w*>")

Hit = tuple[int, int, str]  # (start, end, canonical label)


def _after_think(text: str) -> str:
    return text.rsplit(_THINK_END, 1)[1] if _THINK_END in text else text


def response_trunk(text: str) -> str:
    """The response without its reasoning block: the text after the last ``</think>``; a ``<think>`` left
    open (reasoning cut off) leaves only what precedes it; text without think tags is its own trunk."""
    if _THINK_END in text:
        return _after_think(text).strip()
    if "<think>" in text:
        return text.split("<think>", 1)[0].strip()
    return text


def _clusters(text: str, hits: list[Hit]) -> list[list[Hit]]:
    """Consecutive hits in one sentence, or joined only by punctuation and list words, form one cluster:
    "\\boxed{A}, \\boxed{B}, or \\boxed{Tie}", "'**YES**' for high quality or '**NO**' if it is not"."""
    out: list[list[Hit]] = []
    for h in hits:
        if out and (h[0] <= out[-1][-1][1] or _JOINER.fullmatch(text, out[-1][-1][1], h[0])
                    or not _SENTENCE_END.search(text, out[-1][-1][1], h[0])):
            out[-1].append(h)
        else:
            out.append([h])
    return out


def _negated(text: str, start: int, end: int) -> bool:
    """A negation next to the verdict in its clause: "not \\boxed{B}", "It is not true", "Answer 1 is wrong"."""
    before = text[max(0, start - _WINDOW) : start]
    cut = [m.end() for m in _CLAUSE_END.finditer(before)]
    after = text[end : end + _WINDOW]
    stop = _CLAUSE_END.search(after)
    near_before = " ".join(before[cut[-1] if cut else 0 :].split()[-_WORDS:])
    near_after = " ".join(after[: stop.start() if stop else None].split()[:_WORDS])
    return bool(_NEGATION.search(near_before) or _NEGATION_AFTER.search(near_after))


def _decide(text: str, group: list[Hit], what: str, where: str, negation: bool = True) -> Verdict:
    """The one verdict of ``group`` (the hits in the verdict place), or why there is none."""
    labels = {h[2] for h in group}
    if len(labels) > 1:
        why = f"conflicting {{what}} verdicts {'/'.join(sorted(labels))} {where} (the judge must give exactly one)"
        return _invalid(what, text, why)
    if negation and any(_negated(text, s, e) for s, e, _ in group):
        return _invalid(what, text, f"negated {{what}} verdict {where}")
    return Verdict(group[0][2])


def _final_line(text: str) -> str:
    """The verdict line: the last line with a letter or digit after ``</think>``, from its last label on."""
    lines = [ln for ln in _TAG.sub(" ", _after_think(text)).splitlines() if any(ch.isalnum() for ch in ln)]
    if not lines:
        return ""
    labels = list(_LABEL.finditer(lines[-1]))
    return lines[-1][labels[-1].end() :] if labels else lines[-1]


def _line_verdict(text: str, pattern: re.Pattern, canon: Callable[[re.Match], str], what: str) -> Verdict:
    line = _final_line(text)
    hits = [(m.start(), m.end(), canon(m)) for m in pattern.finditer(line)]
    if not hits:
        return _invalid(what, text, "no {what} verdict found on the final line")
    v = _decide(line, hits, what, "on the final line")
    alnum = [i for i, ch in enumerate(line) if ch.isalnum()]
    if v.ok and not any(s == alnum[0] or e == alnum[-1] + 1 for s, e, _ in hits):
        # "Note: Answer 2 has a slip" mentions a verdict word; a verdict line begins or ends with it
        return _invalid(what, text, "the final line neither begins nor ends with a {what} verdict")
    return v


# ---------------------------------------------------------------------------------------- parsers
_MAX_VERDICT = 64  # a boxed verdict is a short token; longer boxed spans cannot be one


def _canon_boxed(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"^\\(?:text|textbf|mathrm|mathbf)\s*\{(.*)\}$", r"\1", s).strip()
    return s


def _final_box(text: str, canon: dict[str, str], what: str) -> Verdict:
    body = _after_think(text)
    hits = [(s, e, canon[k]) for s, e, c in boxed_spans(body, _MAX_VERDICT)
            if (k := _canon_boxed(c).lower().replace(" ", "")) in canon]
    if not hits:
        return _invalid(what, text)
    return _decide(body, _clusters(body, hits)[-1], what, "in the final box")


def parse_boxed_choice(text: str, choices: Sequence[str] = ("A", "B", "Tie")) -> Verdict:
    """The final ``\\boxed{X}`` whose X is one of ``choices`` (case-insensitive); Reasoning Arena App. D."""
    return _final_box(text, {c.lower().replace(" ", ""): c for c in choices}, "boxed " + "/".join(choices))


_SCORE_CANON = {"1": "1", "1.0": "1", "0.5": "0.5", ".5": "0.5", "1/2": "0.5", "\\frac{1}{2}": "0.5", "0": "0", "0.0": "0"}


def parse_boxed_score(text: str) -> Verdict:
    """Pointwise rubric score (App. D): the final ``\\boxed{1}``, ``\\boxed{0.5}`` or ``\\boxed{0}``."""
    return _final_box(text, _SCORE_CANON, "boxed 1/0.5/0")


# a lookahead finds overlapping hits, so "**YES**NO**" holds both words (a conflict)
_YES_NO = re.compile(r"(?=(\*\*[ \t]*(YES|NO)[ \t]*\*\*))", re.IGNORECASE)


def parse_yes_no(text: str) -> Verdict:
    """GAR discriminator (App. B): the first ``**YES**`` or ``**NO**``, which the format puts before the
    explanation (so "**YES** ... no reason to answer **NO**" is YES)."""
    body = _after_think(text)
    hits = [(m.start(1), m.end(1), m.group(2).upper()) for m in _YES_NO.finditer(body)]
    if not hits:
        return _invalid("**YES**/**NO**", text)
    return _decide(body, _clusters(body, hits)[0], "**YES**/**NO**", "in the first verdict")


_ANSWER_CHOICE = re.compile(r"\banswer[\s_.]*([12])\b|\b(tie)\b", re.IGNORECASE)
_CONSISTENCY = re.compile(r"<consistency>\s*\[?\s*(correct|incorrect)\s*\]?\s*</consistency>", re.I)
_TRUE_FALSE = re.compile(r"\b(true|false)\b", re.I)
_EXPERT_POLICY = re.compile(r"\b(expert|policy)\b", re.I)


def parse_answer_choice(text: str) -> Verdict:
    """RARO critic: ``Answer 1``, ``Answer 2`` or ``tie`` on the final line (after ``</think>`` if present)."""
    return _line_verdict(text, _ANSWER_CHOICE, lambda m: m.group(1) or "tie", "Answer 1/Answer 2/tie")


def parse_expert_policy(text: str) -> Verdict:
    """RARO binary critic (Sec. 3.2): ``Expert`` or ``Policy`` on the final line (after ``</think>``)."""
    return _line_verdict(text, _EXPERT_POLICY, lambda m: m.group(1).capitalize(), "Expert/Policy")


def parse_true_false(text: str) -> Verdict:
    """JURY-RL App. D judge: ``True`` or ``False`` on the final line ("end your response with ...")."""
    return _line_verdict(text, _TRUE_FALSE, lambda m: m.group(1).capitalize(), "True/False")


def parse_consistency(text: str) -> Verdict:
    """JURY-RL C.5 consistency checker: ``<consistency>Correct|Incorrect</consistency>``; tags that disagree
    are invalid (the prompt asks for exactly one)."""
    body = _after_think(text)
    hits = [(m.start(), m.end(), m.group(1).capitalize()) for m in _CONSISTENCY.finditer(body)]
    if not hits:
        return _invalid("<consistency>", text)
    return _decide(body, hits, "<consistency>", "in the <consistency> tags", negation=False)


PARSERS = {
    "ab_tie": parse_boxed_choice,
    "score": parse_boxed_score,
    "yes_no": parse_yes_no,
    "answer_choice": parse_answer_choice,
    "true_false": parse_true_false,
    "consistency": parse_consistency,
}
