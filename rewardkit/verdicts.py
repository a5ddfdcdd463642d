"""Judge-output parsing: ``\\boxed{A|B|Tie}``, ``\\boxed{1|0.5|0}``, ``**YES**``/``**NO**``, ``Answer 1/2/tie``,
``Expert``/``Policy``, ``True``/``False`` and ``<consistency>Correct|Incorrect</consistency>``.

One rule for every parser (docs/verdicts.md): the verdict is read only where the judge's prompt asks for it and
only in the exact form it asks for; anything else on that line, a second verdict anywhere after it, or a
generation that stopped for length is ``Status.INVALID``.

- Where. The end of the response for Reasoning Arena (App. D, "MUST end with exactly one of \\boxed{A}, \\boxed{B},
  or \\boxed{Tie}"; the pointwise and RLAIF scores alike) and the JURY-RL judge (App. D, "end your response with
  your final judgment: True or False"); the last line for the RARO critics ("on the last line, write exactly
  one verdict"; App. E responses end ``</think>\\nAnswer 1``); the first ``**YES**``/``**NO**`` for GAR's
  discriminator (App. B: "analyze ... briefly, then respond with '**YES**' ... or '**NO**' ... Finally, provide a
  ... explanation"); the ``<consistency>`` tag for JURY-RL's consistency checker (App. C.5). Only text after the
  last ``</think>`` is read; a ``<think>`` never closed means the judge was cut off.
- Form. Only the asked-for token, with formatting around it: bold, italics, quotes, ``$``/``\\(`` math,
  HTML tags, a trailing period (inside the formatting too: ``**YES.**``), a ``\\boxed{}`` (``\\text{}`` inside
  it); a boxed score is any number equal to 1, 0.5 or 0 (``\\boxed{0.50}``).
- Before it on its line: nothing, or one label ending in a colon that its prompt uses or a neutral one
  (``NEUTRAL_LABELS``: "Final answer", "Verdict", "Judgment", "Final"; ``LABELS`` lists every parser's). A label
  is accepted because it is on that list, never because it contains some word: "Worse answer:", "Incorrect
  answer:", a question the judge put to itself ("Is there an error in this step? **YES**") or reasoning
  ("A is right. \\boxed{A}") before the verdict on its line make it invalid.
- After it on its line: nothing, except where the prompt asks for an explanation there (GAR), which follows
  a separator (". , ; : - (", a tag, a line break) or starts a new sentence (a capital letter) and is never
  read as the verdict: "**NO** -- Not high quality" is NO, "**YES** is wrong" is no verdict.
- After its line: nothing for a verdict that ends the response (nor may an earlier verdict stated alone on
  its line disagree with it); no other verdict for GAR and the consistency tag.
- A generation that stopped for length (``finish_reason="length"``) is invalid whatever it holds; except for
  GAR, whose paper caps the discriminator at K = 128 tokens "preserving the verdict and truncating any
  justification beyond that limit": there a stop inside the explanation, after the verdict, keeps the verdict.

So a paraphrase ("Response A is better"), a negation ("not \\boxed{B}", "Answer 1 loses."), a hedge ("probably
True", "Answer 2?"), an echo of the instructions ("**YES** or **NO**"), a later note ("True\\n\\nNote: this might
be False") or a truncation is ``Status.INVALID`` with a message saying why: an unparseable judge output is never
turned into a verdict, a tie or a 0. Parsers never raise on any string.

    >>> parse_boxed_choice("B skips a case, A does not.\\nFinal verdict: \\\\boxed{A}").label
    'A'
    >>> parse_yes_no("The step adds instead of multiplying.\\n\\n**NO**\\n\\nIt computes 6 + 7.").label
    'NO'
    >>> parse_answer_choice("<think>...</think>\\nAnswer 2").label, parse_true_false("It checks out.\\nTrue").label
    ('2', 'True')
    >>> parse_expert_policy("Reads like a textbook.\\nExpert").label, parse_boxed_score(r"Final score: \\boxed{0.5}").label
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
from fractions import Fraction

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
    return Verdict(None, Status.INVALID, f"{why.replace('{what}', what)} in judge output (ends: {tail!r})")


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
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
# formatting around a verdict: emphasis, quotes, math delimiters; before it also headings, block quotes, bullets
_EMPHASIS = re.compile(r"\*+|_+|~+|`+|[\"'“”‘’]|\\[()\[\]]|\$+")
_FORMAT = re.compile(_EMPHASIS.pattern + r"|^\s*#+|^\s*>|^\s*[-+•]\s")
_PARENTHETICAL = re.compile(r"\([^()]*\)")
# labels that may stand before any verdict on its line; each form adds the labels its own prompt uses
NEUTRAL_LABELS = ("Final answer", "Verdict", "Judgment", "Final")
# what parts GAR's verdict from its explanation: punctuation, a dash, a tag, a line break, or a new sentence
_SEPARATOR = re.compile(r"\s*(?:[.,;:!(\[—–-]|<|$)|\s+[A-Z]")
_EXPLANATION_BEGUN = re.compile(r"(?:\s*(?:[.,;:!(\[—–-]|<|\n)|\s+(?=[A-Z]))[\s\S]*?\w")

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


def _bare(text: str) -> str:
    """``text`` without formatting and HTML tags, whitespace squeezed."""
    return " ".join(_FORMAT.sub(" ", _TAG.sub(" ", text)).split())


def _cut_off(text: str, finish_reason: str | None) -> str | None:
    """Why the output is a truncation (None when it is not): the backend stopped it for length, or a
    ``<think>`` block was opened and never closed."""
    if finish_reason == "length":
        return "the judge stopped for length (finish_reason='length'): a cut-off output is no verdict"
    if "<think>" in text and text.rfind("<think>") > text.rfind(_THINK_END):
        return "the judge's reasoning was cut off (<think> never closed): a cut-off output is no verdict"
    return None


def _label_key(text: str) -> str:
    """A label as compared: formatting gone, lower case, single spaces, no space before its colon."""
    return _bare(text).lower().replace(" :", ":")


class _Form:
    """How one prompt asks for its verdict: the token pattern (``hits``), where it stands (``place``: ``end`` of
    the response, ``first`` token, or the ``tag``), whether an explanation may follow it on its line, and the
    labels that prompt itself uses for it (``labels``; the ``NEUTRAL_LABELS`` are accepted for every form)."""

    def __init__(self, what: str, hits: Callable[[str], list[Hit]], place: str, explained: bool = False,
                 labels: Sequence[str] = ()):
        self.what, self.hits, self.place, self.explained = what, hits, place, explained
        self.labels = (*NEUTRAL_LABELS, *labels)
        self._label_keys = frozenset(_label_key(f"{label}:") for label in self.labels)

    def read(self, text: str, finish_reason: str | None) -> Verdict:
        # GAR caps its discriminator at K tokens "preserving the verdict and truncating any justification beyond
        # that limit" (App. B / Sec. 4.3): there a length stop inside the explanation keeps the verdict
        truncated_explanation = self.explained and finish_reason == "length"
        cut = _cut_off(text, None if truncated_explanation else finish_reason)
        if cut is not None:
            return _invalid(self.what, text, cut)
        body = _after_think(text)
        hits = self.hits(body)
        if not hits:
            return _invalid(self.what, text, "no {what} verdict where the prompt asks for one")
        hit = hits[-1] if self.place == "end" else hits[0]
        why = self._statement_problem(body, hit)
        if why:
            return _invalid(self.what, text, why)
        label = hit[2]
        if self.place == "end":
            line_end = body.find("\n", hit[1])
            if line_end >= 0 and _bare(body[line_end:]):
                return _invalid(self.what, text, "the response goes on after the verdict line (the verdict must end it)")
            # an earlier verdict stated alone on its line is a verdict too: the final one is a second verdict
            later = sorted({h[2] for h in hits[:-1] if self._statement_problem(body, h) is None} - {label})
            if later:
                return _invalid(self.what, text, f"the verdict {label} follows another verdict ({'/'.join(later)}) "
                                                 "stated alone on its line")
        else:
            later = sorted({h[2] for h in hits if h[0] >= hit[1]} - {label})
            if later:
                return _invalid(self.what, text, f"a second verdict ({'/'.join(later)}) after the verdict {label}")
        if truncated_explanation and not _EXPLANATION_BEGUN.match(_TAG.sub("<", _EMPHASIS.sub("", body[hit[1]:]))):
            return _invalid(self.what, text, "the judge stopped for length (finish_reason='length') before its "
                                             "explanation began: the verdict may not be complete")
        return Verdict(label)

    def _statement_problem(self, body: str, hit: Hit) -> str | None:
        """Why the verdict ``hit`` is not stated alone on its line (None when it is): what precedes it there must
        be nothing or one of the form's labels, what follows it nothing (or, where an explanation is asked for,
        a separator)."""
        start, end, _ = hit
        line_end = body.find("\n", end)
        tail = body[end:len(body) if line_end < 0 else line_end]
        why = self._lead_problem(body[body.rfind("\n", 0, start) + 1:start])
        if why:
            return why
        if self.explained:
            if not _SEPARATOR.match(_TAG.sub("<", _EMPHASIS.sub("", tail))):
                return "the verdict runs on into its sentence (the explanation must follow a separator or start a new sentence)"
        elif _bare(tail) not in ("", "."):
            return f"the verdict line goes on after the verdict ({_bare(tail)[:40]!r})"
        return None

    def _lead_problem(self, lead: str) -> str | None:
        """Why the text before the verdict on its line is neither nothing nor one of the form's labels (a
        question the judge put to itself, a label naming the loser, reasoning, a hedge...)."""
        key = _label_key(lead)
        if not key or key in self._label_keys:
            return None
        shown = _bare(lead)[-40:]
        if self.hits(_PARENTHETICAL.sub(" ", lead)):
            return "another verdict stands on the verdict's line"
        if "?" in key:
            return f"the verdict answers a question the judge asked itself ({shown!r}), not the prompt's"
        return (f"the verdict follows {shown!r} on its line, which is not a label its prompt uses (accepted: "
                f"{', '.join(self.labels)}, each ending in ':')")


# ---------------------------------------------------------------------------------------- parsers
_MAX_VERDICT = 64  # a boxed verdict is a short token; longer boxed spans cannot be one


def _canon_boxed(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"^\\(?:text|textbf|mathrm|mathbf)\s*\{(.*)\}$", r"\1", s).strip()
    return s


def _box_hits(canon: Callable[[str], str | None]) -> Callable[[str], list[Hit]]:
    """Boxed verdicts: every short ``\\boxed{...}`` whose content ``canon`` maps to a label."""
    def hits(body: str) -> list[Hit]:
        return [(s, e, label) for s, e, c in boxed_spans(body, _MAX_VERDICT)
                if (label := canon(_canon_boxed(c))) is not None]
    return hits


def _word_hits(pattern: re.Pattern, canon: Callable[[re.Match], str]) -> Callable[[str], list[Hit]]:
    """Written verdicts: every match of ``pattern``; one written inside a ``\\boxed{}`` (``\\boxed{True}``,
    ``\\boxed{\\text{Answer 1}}``) spans its box, which is formatting around it."""
    def hits(body: str) -> list[Hit]:
        # a zero-width match (a lookahead, for overlapping hits) holds its text in group 1
        found = [(*(m.span(1) if m.end() == m.start() else m.span()), canon(m)) for m in pattern.finditer(body)]
        boxes = {} if not found else {(at, at + len(inner)): (s, e)  # the box's content starts at e - 1 - len(c)
                                      for s, e, c in boxed_spans(body, _MAX_VERDICT)
                                      if (inner := _canon_boxed(c)) and (at := e - 1 - len(c) + c.find(inner)) >= 0}
        return [(*boxes.get((s, e), (s, e)), label) for s, e, label in found]
    return hits


# the tournament prompt asks for "the final verdict" (our logit prefix: "Final verdict: \\boxed{")
_CHOICE_LABELS = ("Final verdict",)


def parse_boxed_choice(text: str, choices: Sequence[str] = ("A", "B", "Tie"), finish_reason: str | None = None) -> Verdict:
    """Reasoning Arena App. D: the response ends with ``\\boxed{X}``, X one of ``choices`` (case-insensitive)."""
    canon = {c.lower().replace(" ", ""): c for c in choices}
    # the tournament prompt asks for "the final verdict" (our logit prefix: "Final verdict: \boxed{")
    return _Form("boxed " + "/".join(choices), _box_hits(lambda c: canon.get(c.lower().replace(" ", ""))), "end",
                 labels=("Final verdict",)).read(text, finish_reason)


_DECIMAL = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_HALF = re.compile(r"(?:\\[dt]?frac\s*\{\s*1\s*\}\s*\{\s*2\s*\}|1\s*/\s*2)")


def _score_label(content: str) -> str | None:
    """``"1"``, ``"0.5"`` or ``"0"`` for a box holding a number equal to one of them (``0.50``, ``1.00``,
    ``\\frac{1}{2}``); None for anything else."""
    c = content.strip()
    if _HALF.fullmatch(c):
        return "0.5"
    if not _DECIMAL.fullmatch(c):
        return None
    return {Fraction(1): "1", Fraction(1, 2): "0.5", Fraction(0): "0"}.get(Fraction(c))


# App. D: the pointwise prompt says "Score it as ...", the RLAIF rubric "conclude with 'Based on my evaluation,
# the final overall score should be:'"; "Final score" and "Final overall score" shorten the rubric's phrase
_SCORE = _Form("boxed 1/0.5/0", _box_hits(_score_label), "end",
               labels=("Score", "Final score", "Final overall score", "the final overall score should be",
                       "Based on my evaluation, the final overall score should be"))


def parse_boxed_score(text: str, finish_reason: str | None = None) -> Verdict:
    """Pointwise rubric score (App. D): the response ends with ``\\boxed{1}``, ``\\boxed{0.5}`` or ``\\boxed{0}``
    (any number equal to one of them: ``\\boxed{0.50}`` is 0.5)."""
    return _SCORE.read(text, finish_reason)


# a lookahead finds overlapping hits, so "**YES**NO**" holds both words (a conflict); a period or "!" may sit
# inside the bold ("**YES.**"). GAR's prompt asks for "your judgment" (a neutral label) and no other.
_YES_NO = _Form("**YES**/**NO**", _word_hits(re.compile(r"(?=(\*\*[ \t]*(YES|NO)[ \t]*[.!]?[ \t]*\*\*))", re.IGNORECASE),
                                             lambda m: m.group(2).upper()), "first", explained=True)


def parse_yes_no(text: str, finish_reason: str | None = None) -> Verdict:
    """GAR discriminator (App. B): the first ``**YES**`` or ``**NO**``, which the format puts before the
    explanation ("**NO** -- Not high quality" is NO); a later, different one is a second verdict."""
    return _YES_NO.read(text, finish_reason)


# RARO: App. E's poetry critic ends "Final Judgment:\nPoem 2"; our logit prefixes are "Final Judgment (1, 2 or
# tie): " and "Final Judgment (Expert or Policy): "; our instructions ask for "one verdict" (a neutral label)
_ANSWER_CHOICE = _Form("Answer 1/Answer 2/tie", _word_hits(re.compile(r"\banswer\s*([12])\b|\b(tie)\b", re.IGNORECASE),
                                                           lambda m: m.group(1) or "tie"), "end",
                       labels=("Final Judgment", "Final Judgment (1, 2 or tie)"))
_EXPERT_POLICY = _Form("Expert/Policy", _word_hits(re.compile(r"\b(expert|policy)\b", re.I),
                                                   lambda m: m.group(1).capitalize()), "end",
                       labels=("Final Judgment", "Final Judgment (Expert or Policy)"))
# JURY-RL App. D: "end your response with your final judgment: True or False"; its example ends "Final judgment: False."
_TRUE_FALSE = _Form("True/False", _word_hits(re.compile(r"\b(true|false)\b", re.I),
                                             lambda m: m.group(1).capitalize()), "end", labels=("Final judgment",))
# JURY-RL App. C.5 puts the tag alone on its line and names no label for it
_CONSISTENCY = _Form("<consistency>", _word_hits(
    re.compile(r"<consistency>\s*\[?\s*(correct|incorrect)\s*\]?\s*</consistency>", re.I),
    lambda m: m.group(1).capitalize()), "tag")


def parse_answer_choice(text: str, finish_reason: str | None = None) -> Verdict:
    """RARO critic: the last line is ``Answer 1``, ``Answer 2`` or ``tie`` (after ``</think>`` if present)."""
    return _ANSWER_CHOICE.read(text, finish_reason)


def parse_expert_policy(text: str, finish_reason: str | None = None) -> Verdict:
    """RARO binary critic (Sec. 3.2): the last line is ``Expert`` or ``Policy`` (after ``</think>``)."""
    return _EXPERT_POLICY.read(text, finish_reason)


def parse_true_false(text: str, finish_reason: str | None = None) -> Verdict:
    """JURY-RL App. D judge: the response ends with ``True`` or ``False`` ("end your response with ...")."""
    return _TRUE_FALSE.read(text, finish_reason)


def parse_consistency(text: str, finish_reason: str | None = None) -> Verdict:
    """JURY-RL C.5 consistency checker: the ``<consistency>Correct|Incorrect</consistency>`` tag; a later tag
    that disagrees is a second verdict (the prompt asks for exactly one)."""
    return _CONSISTENCY.read(text, finish_reason)


# the labels each parser accepts before its verdict on the verdict's line (docs/verdicts.md lists them)
LABELS = {
    "ab_tie": (*NEUTRAL_LABELS, *_CHOICE_LABELS),
    "score": _SCORE.labels,
    "yes_no": _YES_NO.labels,
    "answer_choice": _ANSWER_CHOICE.labels,
    "expert_policy": _EXPERT_POLICY.labels,
    "true_false": _TRUE_FALSE.labels,
    "consistency": _CONSISTENCY.labels,
}

PARSERS = {
    "ab_tie": parse_boxed_choice,
    "score": parse_boxed_score,
    "yes_no": parse_yes_no,
    "answer_choice": parse_answer_choice,
    "expert_policy": parse_expert_policy,
    "true_false": parse_true_false,
    "consistency": parse_consistency,
}
