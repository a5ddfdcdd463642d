"""How a judge's verdict is read (docs/verdicts.md): ``VerdictForm``, one per judge prompt, declared beside its
template in ``rewardkit/prompts/<paper>.py``, and the token readers the forms are built from. The named parsers,
one per paper prompt, are in ``rewardkit.verdicts``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from rewardkit.types import Status


@dataclass(frozen=True)
class Verdict:
    label: str | None  # canonical choice (e.g. "A", "Tie", "YES", "1", "0.5") or None when invalid
    status: Status = Status.OK
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


def _invalid(what: str, text: str, why: str) -> Verdict:
    """An invalid verdict whose message says why (``{what}``: the form's name) and shows the output's last 120
    characters on one line."""
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


# ------------------------------------------------------------------------ how a verdict is read
_THINK_END = "</think>"
_TAG = re.compile(r"</?[A-Za-z][\w.-]*(?:\s[^<>]*)?/?>")
# formatting around a verdict: emphasis, quotes, math delimiters, \text{}; before it also headings, quotes, bullets
_EMPHASIS = re.compile(r"\*+|_+|~+|`+|[\"'“”‘’]|\\[()\[\]]|\$+|\\(?:text|textbf|mathrm|mathbf)\s*\{|[{}]")
_FORMAT = re.compile(_EMPHASIS.pattern + r"|^\s*#+|^\s*>|^\s*[-+•]\s")
_PARENTHETICAL = re.compile(r"\([^()]*\)|（[^（）]*）")
# where the clause bound to a verdict begins: after sentence punctuation before a space (not the point of 0.5), or
# a comma before a conjunction that starts a new clause ("B is wrong, so \boxed{A}"; "Worse answer, \boxed{B}" is one)
_CLAUSE_END = re.compile(r"[.!?;](?=\s|$)|[。！？；]|[,，]\s*(?=(?:so|thus|therefore|hence|but|and so|which means|"
                         r"meaning|making|overall|in conclusion|all in all|por lo tanto|así que|所以|因此)\b)",
                         re.IGNORECASE)
# a subordinate clause before the verdict's own, ended by its comma: its words are about something else
_SUBORDINATE = re.compile(r"\s*(?:since|because|as|while|whereas|given(?: that)?|although|though|after|considering|"
                          r"comparing|unlike|puesto que|ya que|mientras|由于|因为|虽然)\b[^,，]*[,，]", re.IGNORECASE)
_QUESTION_BOUND = re.compile(r"[?？]\s*(?:[^\s:：?？]{1,20}(?:\s[^\s:：?？]{1,20}){0,3}\s*[:：])?\s*$")
# words that turn a clause against its verdict (counted: "no errors" is two, so it stays positive) ...
_NEGATORS = (r"not|never|no|none|neither|nor|without|less|fewer|lower|n't|cannot|"
             r"sin|nunca|nicht|kein\w*|pas|jamais")
_FAULTS = (r"worse|worst|los(?:e|es|er|ers|ing|t)|incorrect\w*|wrong\w*|flaw\w*|fault\w*|errors?|erroneous|mistakes?|"
           r"mistaken|reject\w*|inferior|weak\w*|bad|invalid|fail\w*|poor\w*|eliminat\w*|discard\w*|penali[sz]\w*|"
           r"downgrad\w*|exclud\w*|disqualif\w*|lack\w*|omit\w*|miss(?:es|ing)?|incomplete|inaccurate|unsound|"
           r"unjustified|inadequate|insufficient|"
           r"peor|err[oó]ne[ao]s?|mal[ao]?s?|perdedor[ao]?s?|falsch|schlecht\w*|pire|mauvaise?s?")
_CJK_NEGATORS, _CJK_FAULTS = "不没無无非未", "错錯差劣输輸误誤"
_POLAR = re.compile(rf"\b(?:(?P<neg>{_NEGATORS})|(?P<fault>{_FAULTS}))\b|(?P<cjk_neg>[{_CJK_NEGATORS}])|"
                    rf"(?P<cjk_fault>[{_CJK_FAULTS}]+)", re.IGNORECASE)  # 错误: one word
# ... and words that make it uncertain or relative to something else, whatever their number
_HEDGES = re.compile(r"\b(?:probably|maybe|perhaps|possibly|might|could|likely|unlikely|guess|unsure|uncertain|"
                     r"think|believe|suppose|assume|if|whether|unless|either|than|over|versus|vs|against|except|unlike|instead|rather|"
                     r"not really|not sure|not certain|quizás|tal vez|peut-être|vielleicht)\b|可能|也许|或许|[?？]",
                     re.IGNORECASE)
# what may follow a verdict on its line without changing it: "Answer 2 is better.", "\boxed{A} is correct"
POSITIVE_TAIL = re.compile(
    r"(?:(?:is|was|seems|appears|looks|would be|should be|remains)\s+)?(?:(?:clearly|definitely|slightly|much|far|"
    r"overall|the|a|my)\s+)*(?:better|best|superior|stronger|preferred|preferable|correct|right|winner|wins|choice|"
    r"verdict|answer|judgment|judgement|more\s+\w+)(?:\s+(?:one|answer|response|choice|solution|overall|here|"
    r"verdict))?\s*[.!]*", re.IGNORECASE)
# what parts GAR's verdict from its explanation: punctuation, a dash, a tag, a line break, or a new sentence
_SEPARATOR = re.compile(r"\s*(?:[.,;:!(\[—–-]|<|$)|\s+[A-Z\u3000-\u9fff]")
_EXPLANATION_BEGUN = re.compile(r"(?:\s*(?:[.,;:!(\[—–-]|<|\n)|\s+(?=[A-Z\u3000-\u9fff]))[\s\S]*?\w")
_PHRASE = re.compile(r"\s+(?:errors?|issues?|problems?|mistakes?|flaws?|concerns?|gaps?|doubt|way)\b", re.IGNORECASE)
_SENTENCE = re.compile(r".{0,300}?(?:[.!?。！？](?=\s|$)|$)", re.DOTALL)  # a first sentence, at most 300 characters
# what takes a verdict back when it follows it: a reversal or a hedge
_TAKEN_BACK = re.compile(r"\b(?:actually|wait|however|but|although|though|reconsider\w*|second thought|correction|"
                         r"instead|rather|might|maybe|perhaps|possibly|could|unsure|not sure|on reflection)\b",
                         re.IGNORECASE)

# a clause that makes a box the problem's answer, not a verdict: "The correct answer is \boxed{1}" (a score of 1?),
# "The reference answer is \boxed{B}" (a multiple-choice problem's B, or Response B?)
PROBLEM_ANSWER = re.compile(r"\b(?:correct|reference|right|expected|exact|true|ground[- ]truth)\s+(?:final\s+)?answer\b|"
                            r"\banswer\s+(?:to|of)\s+the\s+(?:problem|question)\b|\bthe\s+(?:final\s+)?answer\s+is\b|"
                            r"\b(?:probability|value|result|sum|total|product|number|count|area|length|solution)\s+"
                            r"(?:is|equals|of)\b|(?:=|\\approx)\s*$", re.IGNORECASE)

# the tournament's box after "the answer is" names a response ("Which response is better?"); only the reference's
# answer is the problem's
REFERENCE_ANSWER = re.compile(r"\b(?:reference|ground[- ]truth|expected)\s+(?:final\s+)?answer\b|"
                              r"\banswer\s+(?:to|of)\s+the\s+(?:problem|question)\b", re.IGNORECASE)

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


def think_unclosed(text: str) -> bool:
    """Whether a ``<think>`` block was opened and never closed: reasoning cut off (verdicts and answers alike)."""
    return "<think>" in text and text.rfind("<think>") > text.rfind(_THINK_END)


def _cut_off(text: str, finish_reason: str | None) -> str | None:
    """Why the output is a truncation (None when it is not): the backend stopped it for length, or a
    ``<think>`` block was opened and never closed."""
    if finish_reason == "length":
        return "the judge stopped for length (finish_reason='length'): a cut-off output is no verdict"
    if think_unclosed(text):
        return "the judge's reasoning was cut off (<think> never closed): a cut-off output is no verdict"
    return None


def _against(clause: str) -> str | None:
    """Why ``clause`` (the words bound to a verdict) turns against it or leaves it uncertain (None when it does not):
    a hedge or comparison, or an odd number of negations and fault words ("not", "Worse answer",
    "Incorrect answer"; "no errors" is positive)."""
    hedge = _HEDGES.search(clause)
    if hedge:
        return f"it is hedged or compared ({hedge.group(0)!r} in {clause[-60:]!r})"
    polar = [m.group(0) for m in _POLAR.finditer(clause)]
    if len(polar) % 2:
        return f"it is negated or named a loser or a fault ({'/'.join(polar)!r} in {clause[-60:]!r})"
    return None


_NEGATED_FAULT = re.compile(rf"\b(?:{_NEGATORS})\s+(?:\w+\s+)?(?:{_FAULTS})\b|[{_CJK_NEGATORS}][{_CJK_FAULTS}]",
                            re.IGNORECASE)


# a remark that predicates the prompt's praise word of something: "is correct", "looks entirely sound" ("The correct
# answer is 15" names the problem's answer and praises nothing)
_PREDICATE = re.compile(r"\b(?:is|are|was|were|be|been|looks?|seems?|appears?|remains?)\s+(?:\w+\s+)?$", re.IGNORECASE)
# a contrast that lets one part of a remark be right and another wrong: "The first step is correct, but ..."
_CONTRAST = re.compile(r"\b(?:but|however|although|though|yet|while|whereas|except|only|apart from)\b|但|然而",
                       re.IGNORECASE)


def _disagrees(text: str, negative_verdict: bool, polar: re.Pattern | None = None) -> bool:
    """Whether ``text`` (a reason or a remark beside a right/wrong verdict) argues the other way: a fault named after a
    YES / True / 1 ("**YES**, there is an error"), a fault denied beside a NO / False / 0 ("**NO**, no errors"), or,
    with the prompt's ``polar`` words, a NO / False that the remark calls right ("is correct") without a fault, a
    negation or a contrast ("**NO**\n\nThe reasoning is correct.")."""
    if negative_verdict:
        praised = polar is not None and any(_PREDICATE.search(text[:m.start()]) for m in polar.finditer(text))
        return bool(_NEGATED_FAULT.search(text)) or (
            praised and len(_POLAR.findall(text)) % 2 == 0 and not _CONTRAST.search(text))
    return len(_POLAR.findall(text)) % 2 == 1


class VerdictForm:
    """How one prompt asks for its verdict: ``what`` (its name in messages), ``hits`` (every verdict token in a
    text: ``(start, end, label)``), ``place`` (``end``: the final one; ``first``: the first one, later ones must
    agree), ``explained`` (an explanation follows the verdict on its line: GAR), ``mentions`` (words naming a
    verdict that are no token, e.g. a bare "B": they may not follow the verdict), ``polar`` (the verdict says right or
    wrong, YES / NO, True / False: the words of the prompt's own question, so that it may answer a question that
    restates the prompt's, "Is the step sound? **YES**"; text after an end verdict may not argue the other way), ``not_after`` (a clause that makes the token something else: a box
    holding the problem's answer), ``tokens`` (the tokens as the
    prompt writes them) and, for verdict-logit mode, the assistant ``prefix`` and the ``choices`` scored after it."""

    def __init__(self, what: str, hits: Callable[[str], list[Hit]], place: Literal["end", "first"],
                 tokens: Sequence[str], prefix: str = "", choices: Sequence[str] = (), explained: bool = False,
                 mentions: Callable[[str], list[Hit]] | None = None, polar: re.Pattern | None = None,
                 not_after: re.Pattern | None = None):
        self.what, self.hits, self.place, self.explained, self.polar = what, hits, place, explained, polar
        self.not_after = not_after
        self.tokens, self.prefix, self.choices = tuple(tokens), prefix, tuple(choices)
        self.mentions = mentions or hits

    def __repr__(self) -> str:
        return f"VerdictForm({self.what!r}, place={self.place!r})"

    def _pick(self, hits: list[Hit]) -> Hit | None:
        """The verdict token at the prompt's place: the last hit (``end``) or the first (``first``)."""
        return None if not hits else hits[-1] if self.place == "end" else hits[0]

    def verdict_start(self, text: str) -> int | None:
        """Where in ``text`` the verdict token that ``read`` reads starts (its formatting included), or None: the
        place to read the judge's probability of its verdict after its own analysis (GAR's M_d)."""
        body = _after_think(text)
        hit = self._pick(self.hits(body))
        return None if hit is None else len(text) - len(body) + hit[0]

    def read(self, text: str, finish_reason: str | None = None) -> Verdict:
        """The verdict of ``text`` (a judge's whole output) or ``Status.INVALID`` with the reason."""
        # GAR caps its discriminator at K tokens "preserving the verdict and truncating any justification beyond
        # that limit" (Sec. 4.3): there a length stop inside the explanation keeps the verdict
        truncated_explanation = self.explained and finish_reason == "length"
        cut = _cut_off(text, None if truncated_explanation else finish_reason)
        if cut is not None:
            return _invalid(self.what, text, cut)
        body = _after_think(text)
        hits = self.hits(body)
        hit = self._pick(hits)
        if hit is None:
            return _invalid(self.what, text, "no {what} verdict where the prompt asks for one")
        why = self._problem(body, hit)
        if why:
            return _invalid(self.what, text, why)
        label = hit[2]
        if self.place == "end":
            rest = body[_line_end(body, hit[1]):]
            named = {m[2] for m in self.mentions(rest)}
            other = sorted(named - {label})
            if other and label not in named:
                return _invalid(self.what, text, f"the text after the verdict {label} names another verdict "
                                                 f"({'/'.join(other)})")
            back = _TAKEN_BACK.search(_bare(rest))
            if back:
                return _invalid(self.what, text, f"the text after the verdict {label} takes it back or hedges it "
                                                 f"({back.group(0)!r})")
            if self.polar and _disagrees(_bare(rest), label != self.choices[0], self.polar):  # "True\n\nThe answer is incorrect."
                return _invalid(self.what, text, f"the text after the verdict {label} argues the other way")
            earlier = sorted({h[2] for h in hits[:-1] if self._ends_line(body, h)} - {label})
            if earlier:
                return _invalid(self.what, text, f"the verdict {label} follows another verdict "
                                                 f"({'/'.join(earlier)}) that ends an earlier line")
        else:
            later = sorted({h[2] for h in hits if h[1] > hit[1]} - {label})  # also one overlapping its end: **NO** YES**
            if later:
                return _invalid(self.what, text, f"a second verdict ({'/'.join(later)}) after the verdict {label}")
        if truncated_explanation and not _EXPLANATION_BEGUN.match(_TAG.sub("<", _EMPHASIS.sub("", body[hit[1]:]))):
            return _invalid(self.what, text, "the judge stopped for length (finish_reason='length') before its "
                                             "explanation began: the verdict may not be complete")
        return Verdict(label)

    def _problem(self, body: str, hit: Hit) -> str | None:
        """Why the verdict ``hit`` cannot be read for sure on its line (None when it can)."""
        start, end, label = hit
        lead = _PARENTHETICAL.sub(" ", body[body.rfind("\n", 0, start) + 1:start])
        tail = body[end:_line_end(body, end)]
        others = sorted({h[2] for h in self.hits(lead) + self.hits(_PARENTHETICAL.sub(" ", tail))} - {label})
        if others:
            return f"two different verdicts on the verdict's line ({label} and {'/'.join(others)})"
        bare_lead = _bare(lead)
        asked = _QUESTION_BOUND.search(bare_lead)
        if asked:  # a YES / True answers a question only where it is the prompt's own ("Is the step sound? **YES**")
            question = _CLAUSE_END.split(bare_lead[:asked.start()])[-1]
            if not (self.polar and self.polar.search(question)) or _against(question):  # "Is there an error?"
                return f"the verdict answers a question the judge asked itself ({bare_lead[-60:]!r}), not the prompt's"
            bare_lead = bare_lead[asked.start() + 1:]
        clause = _CLAUSE_END.split(bare_lead)[-1]
        while (sub := _SUBORDINATE.match(clause)) is not None:  # "Since B is wrong, the answer is \boxed{A}"
            reason = clause[:sub.end()]
            if self.polar:  # a reason for a right/wrong verdict must agree with it: "Since it errs, False"
                if _disagrees(reason, label != self.choices[0], self.polar) or _HEDGES.search(reason[:-1]):
                    return f"the reason given with the verdict {label} does not agree with it ({reason[-60:]!r})"
            elif not {m[2] for m in self.mentions(reason)} - {label}:
                break  # a reason that names no other verdict may be about this one ("Since it is worse, \boxed{B}")
            clause = clause[sub.end():]
        if self.not_after and self.not_after.search(clause):
            return f"the verdict's clause says the box holds something else ({clause[-60:]!r}), e.g. the problem's answer"
        why = _against(clause)
        if why:
            return f"the verdict's clause does not state it: {why}"
        return self._tail_problem(tail, label, body[end:])

    def _ends_line(self, body: str, hit: Hit) -> bool:
        """The earlier verdict ``hit`` is stated as one: it ends its line and nothing on that line turns it."""
        return not _bare(body[hit[1]:_line_end(body, hit[1])]).rstrip(".!。！ ") and self._problem(body, hit) is None

    def _tail_problem(self, tail: str, label: str, after: str) -> str | None:
        """Why what follows the verdict ``label`` (``tail`` on its line, ``after`` to the end) changes it (None when
        it does not)."""
        flat = _TAG.sub("<", _EMPHASIS.sub("", tail))
        if self.explained:  # GAR: the explanation follows a separator or starts a new sentence ...
            if not _SEPARATOR.match(flat) or _PHRASE.match(flat):  # "**NO** Issues found." is no verdict
                return "the verdict runs on into its sentence (the explanation must follow a separator or start a new sentence)"
            # ... and its first sentence agrees: "**YES**, there is an error" answers another question
            first = _SENTENCE.match(_bare(after).lstrip(".!:;,-—– "))
            if self.polar and first and _disagrees(first.group(0), label != self.choices[0], self.polar):
                return f"the explanation's first sentence argues against the verdict {label} ({first.group(0)[:60]!r})"
            return None
        bare = _bare(tail)
        if not bare.rstrip(".!。！ ") or POSITIVE_TAIL.fullmatch(bare):
            return None
        if _SEPARATOR.match(flat) and not bare.startswith(("?", "？")):
            other = {m[2] for m in self.mentions(tail)} - {label}
            hedge = _HEDGES.search(bare)
            against = (f"it is hedged ({hedge.group(0)!r})" if hedge else
                       "it argues the other way" if _disagrees(bare, label != self.choices[0], self.polar) else None
                       ) if self.polar else _against(bare)
            why = (against or (f"it names another verdict ({'/'.join(sorted(other))})" if other else None)
                   or (f"it takes the verdict back ({back.group(0)!r})" if (back := _TAKEN_BACK.search(bare)) else None))
            return f"what follows the verdict on its line does not agree with it: {why}" if why else None
        return f"the verdict line goes on after the verdict ({bare[:40]!r})"


def _line_end(body: str, at: int) -> int:
    end = body.find("\n", at)
    return len(body) if end < 0 else end


# ---------------------------------------------------------------------------------------- verdict tokens
_MAX_VERDICT = 64  # a boxed verdict is a short token; longer boxed spans cannot be one


def _canon_boxed(s: str) -> str:
    s = s.strip().strip("$").strip()
    s = re.sub(r"^\\(?:text|textbf|mathrm|mathbf)\s*\{(.*)\}$", r"\1", s).strip()
    return s


def box_hits(canon: Callable[[str], str | None]) -> Callable[[str], list[Hit]]:
    """Boxed verdicts: every short ``\\boxed{...}`` whose content ``canon`` maps to a label."""
    def hits(body: str) -> list[Hit]:
        return [(s, e, label) for s, e, c in boxed_spans(body, _MAX_VERDICT)
                if (label := canon(_canon_boxed(c))) is not None]
    return hits


def word_hits(pattern: re.Pattern, canon: Callable[[re.Match], str | None]) -> Callable[[str], list[Hit]]:
    """Written verdicts: every match of ``pattern`` that ``canon`` labels; one written inside a ``\\boxed{}``
    (``\\boxed{True}``, ``\\boxed{\\text{Answer 1}}``) spans its box, which is formatting around it."""
    def hits(body: str) -> list[Hit]:
        # a zero-width match (a lookahead, for overlapping hits) holds its text in group 1
        found = [(*(m.span(1) if m.end() == m.start() else m.span()), label) for m in pattern.finditer(body)
                 if (label := canon(m)) is not None]
        boxes = {} if not found else {(at, at + len(inner)): (s, e)  # the box's content starts at e - 1 - len(c)
                                      for s, e, c in boxed_spans(body, _MAX_VERDICT)
                                      if (inner := _canon_boxed(c)) and (at := e - 1 - len(c) + c.find(inner)) >= 0}
        return [(*boxes.get((s, e), (s, e)), label) for s, e, label in found]
    return hits


def choice_canon(choices: Sequence[str]) -> Callable[[str], str | None]:
    """A boxed choice's label: its content, case and spaces ignored, a leading "Response" allowed."""
    canon = {c.lower().replace(" ", ""): c for c in choices}
    return lambda c: canon.get(re.sub(r"^response", "", c.lower().replace(" ", "")))


def choice_mentions(choices: Sequence[str]) -> Callable[[str], list[Hit]]:
    """Every boxed choice and every bare one ("B", "Response B", "tie") in a text."""
    boxed = box_hits(choice_canon(choices))
    canon = {c.lower(): c for c in choices}
    words = re.compile("|".join(rf"(?<![\w\\])(?:{re.escape(c)})(?!\w)" for c in choices
                                if len(c) > 1) + "|" + "|".join(rf"(?<![\w\\]){re.escape(c)}(?!\w)"
                                                                 for c in choices if len(c) == 1))
    letters = word_hits(words, lambda m: canon.get(m.group(0).lower()) if len(m.group(0)) > 1 or
                        m.group(0).isupper() else None)
    return lambda body: boxed(body) + letters(body)


_DECIMAL = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_HALF = re.compile(r"(?:\\[dt]?frac\s*\{\s*1\s*\}\s*\{\s*2\s*\}|1\s*/\s*2)")


def score_label(content: str) -> str | None:
    """``"1"``, ``"0.5"`` or ``"0"`` for a box holding a number equal to one of them (``0.50``, ``1.00``,
    ``\\frac{1}{2}``); None for anything else."""
    c = content.strip()
    if _HALF.fullmatch(c):
        return "0.5"
    if not _DECIMAL.fullmatch(c):
        return None
    return {Fraction(1): "1", Fraction(1, 2): "0.5", Fraction(0): "0"}.get(Fraction(c))
