"""Final-answer extraction, normalisation and equivalence (math-verify, gold first), and answer clusters.

math-verify's own timeouts use SIGALRM, which only works on the main thread, and a timeout there comes
back as a silent False. Here they are switched off and deadlines are ours: on the main thread a check
runs inline under our own interval timer (raising a BaseException math-verify cannot swallow); on any
other thread (servers, async code, trainer callbacks) it runs in a worker process that is killed when it
overruns. A timeout is a TIMEOUT status, never False. Verdicts are cached by (gold, prediction).
"""

from __future__ import annotations

import atexit
import json
import logging
import queue
import re
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from fractions import Fraction

from rewardkit.types import Status
from rewardkit.verdict_forms import boxed_spans, response_trunk, think_unclosed  # noqa: F401  (response_trunk re-exported)

# math-verify warns on every call when its timeouts are disabled; we enforce deadlines ourselves.
logging.getLogger("math_verify").setLevel(logging.ERROR)
logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
logging.getLogger("math_verify.grader").setLevel(logging.ERROR)

# ------------------------------------------------------------------------------------ extraction
# Where a response states its answer, in math-verify's extraction priorities (math_verify/parser.py,
# lazy_latex_regex and lazy_expr_regex), so rewardkit finds what math-verify's default parse finds:
#   1. "final answer is X. I hope ..." (the Minerva format);
#   2. the rightmost of the last run of boxes and "final answer ... is X";
#   3. PRM800K's "# Answer" line (rewardkit's; math-verify has no such anchor);
#   4. "the answer is X" / "final answer: X" (X up to the sentence's end when it is mathematics, else the first
#      LaTeX environment or number within 50 characters, as math-verify's "answer:" anchor reads);
#   5. a response that is one short line of mathematics, whole (rewardkit's); else the rightmost LaTeX
#      environment, bare \frac{a}{b} or number.
# X is a LaTeX environment ($..$, $$..$$, \(..\), \[..\]; a box inside it is read as the box), a bare
# fraction, a number or an arithmetic expression. An equation chain "a = b = c" is read as its last side,
# a single equation is kept whole (math-verify compares equations: 2x+4y-3=0 equals y=-x/2+3/4).

Span = tuple[int, int, str]  # where the answer stands in the response (start, end) and the answer

_HASH_ANSWER = re.compile(r"^#+\s*Answer\s*\n+\s*(\S[^\n]*)", re.IGNORECASE | re.MULTILINE)  # PRM800K's format
# a number as math-verify's expression extractor reads one: thousands grouped by "," or a space
# ("7,425,000", "1 000"), a decimal point or comma, a bare decimal (".4"), an integer fraction; never inside
# a word ("AZYUK2A") or right after a LaTeX command
_NUMBER = re.compile(r"(?<![\w.\\])-?(?:[1-9]\d{0,2}(?:[ \u2009\u202f]\d{3})+(?![\d,])(?:\.\d+)?|\d[\d,]*(?:\.\d+)?(?:/\d+)?|\.\d+)")
_THOUSANDS = re.compile(r"-?[1-9]\d{0,2}([, \u2009\u202f]\d{3})+(?:\.\d+)?")
_DECIMAL_COMMA = re.compile(r"-?(?:0,\d+|\d+,(?:\d{1,2}|\d{4,}))")  # "0,5", "3,14": no thousands reading
# math-verify's arithmetic expression: starts with a digit, holds an operator ("3*4+1", "10/9")
_EXPR = re.compile(r"-?\(?-?\d[\d.\s+\-*×/^()÷]*[+\-*×/^÷][\d.\s+\-*×/^()÷]*\d\)?")
_FRAC = re.compile(r"-?\\[dtc]?frac\{-?\d+(?:[.,]\d+)?\}\{-?\d+(?:[.,]\d+)?\}")
# math-verify's answer-set rule: up to 6 boxes joined by ",", "and", "or" (also as \text{and}, between LaTeX
# spacing and $ signs) are one answer (a set)
_SPACING = r"(?:\s|\$|\\[,;:! ]|\\q?quad\b|~)*"
_BOX_JOIN = re.compile(rf"{_SPACING}(?:,?{_SPACING}(?:\\(?:text|mbox|mathrm)\s*\{{\s*(?:and|or)\s*\}}|and|or)|,){_SPACING}",
                       re.IGNORECASE)
_MAX_SET = 6
_TAIL = 4000  # characters of a response searched for an unmarked final answer
# LaTeX environments, as math-verify's: display $$..$$ and \[..\] may span lines, inline $..$ and \(..\) not
_LATEX_ENV = re.compile(r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<![\\\d])\$([^\n$]+?)(?<!\\)\$|\\\(([^\n]+?)\\\)|\\\[(.+?)\\\]",
                        re.DOTALL)
_FINAL_IS = re.compile(r"final answer is:?\s*", re.IGNORECASE)
_FINAL = re.compile(r"final answer", re.IGNORECASE)
_IS = re.compile(r"\s+is:?\s*")
_I_HOPE = re.compile(r"\.?\s?I hope")
_ANSWER_IS = re.compile(r"(?:final answer|the answer)\s*(?:is|:|=)\s*[:\s]*", re.IGNORECASE)
_SENTENCE = re.compile(r"[^\n]*?(?=\.(?:\s|$)|\n|$)")
# a run of three (two) or more letters that is not a LaTeX command nor a function name: prose, not mathematics
_FUNCTIONS = r"(?!(?:sin|cos|tan|cot|sec|csc|log|ln|exp|sqrt|pi|inf|max|min|gcd|lcm|mod|deg|and|or)\b)"
_WORD = re.compile(rf"(?<![\\A-Za-z]){_FUNCTIONS}[A-Za-z]{{3,}}")
_WORD2 = re.compile(rf"(?<![\\A-Za-z]){_FUNCTIONS}[A-Za-z]{{2,}}")


def _plain(num: str) -> str:
    """A number as written in prose: thousands separators dropped, an unambiguous decimal comma made a point."""
    if _THOUSANDS.fullmatch(num):
        return re.sub(r"[, \u2009\u202f]", "", num)
    if _DECIMAL_COMMA.fullmatch(num):
        return num.replace(",", ".")
    return num


def _last_side(latex: str) -> str:
    """The last side of an equation chain "a = b = c" (math-verify reads a chain it cannot parse so; rewardkit
    always does, so a chain ending in a unit, "V = 20 \\times 2 = 40 \\text{ cubic inches}", reads 40 ...). A
    single equation, one holding "," or ";" ("a=1, b=2"), and "=" inside braces ("\\sum_{k=0}") stay whole."""
    if "," in latex or ";" in latex:
        return latex.strip()
    cuts, depth = [], 0
    for m in re.finditer(r"[{}]|(?<![\\<!>])=", latex):
        depth += {"{": 1, "}": -1}.get(m.group(), 0)
        if m.group() == "=" and depth == 0:
            cuts.append(m.end())
    return latex[cuts[-1]:].strip() if len(cuts) > 1 else latex.strip()


def _enclosing_env(text: str, pos: int) -> tuple[int, int] | None:
    """The LaTeX environment around ``pos`` (``$$..$$``, ``\\[..\\]``, ``\\(..\\)``, inline ``$..$`` on its line),
    innermost first; None outside every environment. Counts delimiters, so it never pairs them wrongly."""
    found = []
    for open_, close in (("\\[", "\\]"), ("\\(", "\\)")):
        i = text.rfind(open_, 0, pos)
        if i >= 0 and i > text.rfind(close, 0, pos) and (j := text.find(close, pos)) >= 0:
            found.append((i, j + 2))
    if (text.count("$$", 0, pos) - text.count("\\$$", 0, pos)) % 2 and (j := text.find("$$", pos)) >= 0:
        found.append((text.rfind("$$", 0, pos), j + 2))
    line = text.rfind("\n", 0, pos) + 1
    if "$" in text[line:pos]:
        singles = [m.start() for m in _SINGLE_DOLLAR.finditer(text, line, pos)]
        if len(singles) % 2 and (j := _SINGLE_DOLLAR.search(text, pos)) and "\n" not in text[pos:j.start()]:
            found.append((singles[-1], j.end()))
    return max(found, default=None)


_SINGLE_DOLLAR = re.compile(r"(?<![\\$])\$(?!\$)")


_RUN_BOXES = 64  # boxes looked at for one answer set (bounds the work on adversarial inputs)


def _box_run(text: str) -> Span | None:
    """The last ``\\boxed{}``, or the answer set its run spells: every box of one LaTeX environment, and boxes
    (or environments holding them) joined by ","/"and"/"or", up to 6 (math-verify's answer-set rule)."""
    spans = boxed_spans(text)
    if not spans:
        return None
    groups: list[tuple[tuple[int, int], list[tuple[int, int, str]]]] = []  # (where, boxes), last first
    for b in reversed(spans[-_RUN_BOXES:]):
        env = _enclosing_env(text, b[0])
        if groups and env is not None and groups[-1][0] == env:
            groups[-1][1].append(b)
            continue
        where = env or (b[0], b[1])
        if groups and (len(groups) == _MAX_SET or not _BOX_JOIN.fullmatch(text, where[1], groups[-1][0][0])):
            break
        groups.append((where, [b]))
    boxes = sorted(b for _, bs in groups for b in bs)
    parts = unique_in_order(c.strip() for _, _, c in boxes)
    start, end = boxes[0][0], boxes[-1][1]
    return (start + text[start:end].index("{") + 1, end - 1, ",".join(parts) if len(parts) > 1 else parts[0])


def _env_answer(text: str, m: re.Match) -> Span | None:
    """The answer a LaTeX environment match holds: its box run if it has one, else its content's last side."""
    g = next(i for i in range(1, 5) if m.group(i) is not None)
    content = m.group(g)
    box = _box_run(content)
    if box is not None:
        return (m.start(g) + box[0], m.start(g) + box[1], box[2].strip())
    answer = _last_side(content)
    if _THOUSANDS.fullmatch(answer):  # "$10,455$": grouped digits, not a pair (a decimal comma stays: "$1,2$")
        answer = _plain(answer)
    return (m.start(g), m.end(g), answer) if answer else None


_LEAD = re.compile(r"\s*(?:\*\*\s*)?")


def _math_at(text: str, pos: int) -> tuple[Span, int] | None:
    """X right at ``pos`` (after spaces and "**"): a LaTeX environment, a box, a bare fraction, an arithmetic
    expression or a number; its span and where its match ends."""
    pos = _LEAD.match(text, pos).end()
    env = _LATEX_ENV.match(text, pos)
    if env is not None:
        got = _env_answer(text, env)
        return (got, env.end()) if got else None
    if text.startswith("\\boxed", pos):
        box = next(iter(boxed_spans(text[pos:pos + _TAIL])), None)
        if box is not None and box[0] == 0:
            return (pos + box[1] - 1 - len(box[2]), pos + box[1] - 1, box[2].strip()), pos + box[1]
    for pattern in (_FRAC, _EXPR, _NUMBER):
        m = pattern.match(text, pos)
        if m is not None:
            return (m.start(), m.end(), _plain(m.group().strip())), m.end()
    return None


def _final_answer_hope(text: str) -> Span | None:
    """Tier 1: the rightmost "final answer is X. I hope"."""
    best = None
    for m in _FINAL_IS.finditer(text):
        got = _math_at(text, m.end())
        if got is not None and _I_HOPE.match(text, got[1]):
            best = got[0]
    return best


def _final_answer_is(text: str) -> Span | None:
    """Part of tier 2: the rightmost "final answer ... is X" (the first " is" within 100 characters that X follows)."""
    best = None
    for m in _FINAL.finditer(text):
        for is_ in _IS.finditer(text, m.end(), min(len(text), m.end() + 100 + 8)):
            if "\n" in text[m.end():is_.start()] or is_.start() - m.end() > 100:
                break
            got = _math_at(text, is_.end())
            if got is not None:
                best = got[0]
                break
    return best


def _answer_anchor(text: str) -> Span | None:
    """Tier 4: after the last "the answer is" / "final answer:", a LaTeX environment there, else the rest of the
    sentence when it is mathematics, else the first environment or number within 50 characters."""
    for m in reversed(list(_ANSWER_IS.finditer(text))):
        at = _LEAD.match(text, m.end()).end()
        env = _LATEX_ENV.match(text, at)
        if env is not None and (got := _env_answer(text, env)) is not None:
            return got
        phrase = _SENTENCE.match(text, at).group().rstrip().rstrip("*").rstrip()
        if phrase and not _WORD.search(phrase):
            return (at, at + len(phrase), _plain(phrase))
        hits = [h for h in (_LATEX_ENV.search(text, at, at + 50), _NUMBER.search(text, at, at + 50)) if h is not None]
        for h in sorted(hits, key=lambda h: h.start()):
            got = _env_answer(text, h) if h.re is _LATEX_ENV else (h.start(), h.end(), _plain(h.group()))
            if got is not None:
                return got
    return None


def _bare_math(text: str) -> Span | None:
    """Tier 5a: a response that is nothing but one short line of mathematics without "=" ("x^2+2x+1",
    "\\frac{1}{3}", "(r+5)^2") is its own answer (rewardkit's; math-verify reads only a number out of it)."""
    s = text.strip().rstrip(".").rstrip()
    if not s or len(s) > 100 or "\n" in s or "=" in s or "$" in s or _WORD2.search(s) or _LATEX_ENV.search(s):
        return None
    start = text.index(s)
    return (start, start + len(s), _plain(s))


def _last_math(text: str) -> Span | None:
    """Tier 5: the rightmost LaTeX environment (its last side when it is an equation chain), bare fraction or
    number of a response without a marked answer (math-verify's last resort too)."""
    offset = max(0, len(text) - _TAIL)  # bounds the scan (an unclosed "\\(" would make the lazy match quadratic)
    tail = text[offset:]
    cands = [max(p.finditer(tail), key=lambda m: m.end(), default=None) for p in (_LATEX_ENV, _FRAC, _NUMBER)]
    env, frac, num = cands
    best = max((m for m in cands if m is not None), key=lambda m: (m.end(), m is env), default=None)
    if best is None:
        return None
    if best is env:
        got = _env_answer(tail, env)
        if got is not None:
            return (offset + got[0], offset + got[1], got[2])
        best = num
    if best is None:
        return None
    return (offset + best.start(), offset + best.end(), _plain(best.group()) if best is num else best.group())


def _has_final_answer(text: str) -> bool:
    """A cheap gate for the "final answer" tiers (most responses have no such phrase)."""
    return "final answer" in text.lower()


# Where a response stops mid-sentence (the policy's token budget ran out: "... Then maybe it's 41 or"): a last
# word or sign that cannot end a sentence
_DANGLING = re.compile(
    r"(?:(?<![\w'])(?:and|or|but|so|then|thus|hence|therefore|because|since|if|maybe|perhaps|probably|the|"
    r"of|to|in|on|at|by|for|from|with|as|than|is|are|was|were|be|it's|its|we|get|gives|equals|plus|minus|times|"
    r"over|let|which|that|where|when|whether|either)|[,=+\-*/^×÷(\[{:<]|\\(?:cdot|times|div|pm|frac|sqrt|left))\s*$", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.!?\n]")


def unfinished(text: str) -> str | None:
    """Why a response reads as reasoning cut off before it concluded (None when it does not): a ``<think>``
    block opened and never closed, or a last sentence that stops on a word or sign no sentence ends with."""
    if think_unclosed(text):
        return "its <think> block is never closed"
    m = _DANGLING.search(text.rstrip()[-200:])
    if m is not None:
        return f"it stops mid-sentence ({text.rstrip()[-40:]!r})"
    return None


def _concluded(text: str, got: Span) -> bool:
    """Whether an unmarked answer (tiers 4-5) concludes something: in a response cut off mid-reasoning, a number
    from a never-closed <think> block or from the unfinished last sentence is a step, not an answer."""
    if think_unclosed(text):
        return False
    if unfinished(text) is None:
        return True
    return _SENTENCE_END.search(text, got[1]) is not None


def extract_answer_span(text: str) -> Span | None:
    """The final answer of a response and where it stands: ``(start, end, answer)`` with ``text[start:end]``
    the characters the answer was read from (a box's content, an environment's, a number); None without one.
    The tiers are math-verify's extraction priorities (see above); an unmarked answer (tiers 4-5) of a response
    cut off mid-reasoning (``unfinished``) is none: "... Then maybe it's 41 or" states no answer."""
    if not text:
        return None
    final = _has_final_answer(text)
    got = _final_answer_hope(text) if final else None
    if got is None:
        tier2 = [s for s in (_box_run(text), _final_answer_is(text) if final else None) if s is not None]
        got = max(tier2, key=lambda s: s[1], default=None)
    if got is None:
        hits = list(_HASH_ANSWER.finditer(text))
        if hits:
            m = hits[-1]
            ans = m.group(1).strip().strip("$").strip()
            got = (m.start(1), m.end(1), ans) if ans else None
    if got is None:
        got = _answer_anchor(text) or _bare_math(text) or _last_math(text)
        if got is not None and not _concluded(text, got):
            return None
    if got is None or not got[2].strip():
        return None
    return (got[0], got[1], got[2].strip())


def extract_answer(text: str) -> str | None:
    """The final answer of a response (see ``extract_answer_span``): the last ``\\boxed{}`` (a run of boxes joined
    by ","/"and"/"or" is one answer set) unless a "final answer is X" follows it, else PRM800K's "# Answer" line,
    else "the answer is X", else the rightmost LaTeX environment or number; None when there is none.

    >>> extract_answer(r"so \\boxed{\\frac{1}{2}} is it"), extract_answer("Final Answer: The largest $n$ is 34.")
    ('\\\\frac{1}{2}', '34')
    """
    got = extract_answer_span(text)
    return got[2] if got is not None else None


_STRIP_CMDS = re.compile(r"\\(?:left|right|displaystyle|!|,|;|:|quad|qquad)")


def normalize_answer(ans: str | None) -> str | None:
    """A light canonical string form (for cache keys and the exact-string fast path), not a full CAS."""
    if ans is None:
        return None
    s = ans.strip().strip("$").strip()
    s = re.sub(r"\\(?:dfrac|tfrac)", r"\\frac", s)
    s = re.sub(r"\\\$|\\(?=\d)", "", s)  # "\$15", and "\15" whose "$" was lost, read 15 (as math-verify does)
    s = re.sub(r"\\text\s*\{\s*\}", "", s)
    s = _STRIP_CMDS.sub("", s)
    s = re.sub(r"\s+", "", s)
    s = s.rstrip(".")
    s = re.sub(r"^\\text\{(.*)\}$", r"\1", s)
    s = re.sub(r"\^\\circ|\^\{\\circ\}", "", s)
    return s


# ----------------------------------------------------------------------------------- equivalence


def _exactly_comparable(a: str, b: str, va: Fraction, vb: Fraction) -> bool:
    """False for a decimal against a non-terminating fraction: math-verify compares those after rounding
    to 6 places (0.333333 equals 1/3 there), so leave them to it."""
    dec_a, dec_b = "." in a, "." in b
    frac_a, frac_b = va.denominator not in (1,) and not dec_a, vb.denominator not in (1,) and not dec_b
    return not ((dec_a and frac_b) or (dec_b and frac_a))

_MAX_DIGITS = 4000
_INT = re.compile(r"[-+]?[1-9]\d{0,2}(?:,\d{3})+|[-+]?\d+")  # "0,111" is a decimal comma
_DEC = re.compile(r"[-+]?\d*\.\d{1,6}")  # math-verify rounds floats to 6 places: stay within that
_FRAC = re.compile(r"([-+]?)\\frac\{(\d+)\}\{(\d+)\}|([-+]?\d+)/(\d+)")


def plain_number(s: str | None) -> Fraction | None:
    """The exact value of an integer, a short decimal or an integer fraction; None for anything else.

    Two plain numbers are equivalent exactly when their values are equal, which is what math-verify
    decides for them too (property-tested), so these pairs skip its LaTeX parser.
    """
    s = normalize_answer(s)
    if not s:
        return None
    if _INT.fullmatch(s):
        digits = s.replace(",", "")
        # Python refuses int() of more than sys.get_int_max_str_digits() (4,300) digits: see _long_int
        return Fraction(int(digits)) if len(digits) <= _MAX_DIGITS else None
    if _DEC.fullmatch(s):
        return Fraction(s)
    m = _FRAC.fullmatch(s)
    if m:
        sign, a, b = (m.group(1), m.group(2), m.group(3)) if m.group(2) else ("", m.group(4), m.group(5))
        if int(b) == 0:
            return None
        v = Fraction(int(a), int(b))
        return -v if sign == "-" else v
    return None


def _long_int(s: str | None) -> str | None:
    """The canonical digits of an integer too long for ``int()`` (sign kept, leading zeros and separators
    dropped), compared as text; None for anything else."""
    s = normalize_answer(s)
    if not s or not _INT.fullmatch(s):
        return None
    sign, digits = ("-", s[1:]) if s[0] == "-" else ("", s.lstrip("+"))
    digits = digits.replace(",", "").lstrip("0") or "0"
    return sign + digits if len(digits) > _MAX_DIGITS and digits != "0" else None


_BOOLEANS = {"true", "false", "yes", "no", "none", "null", "nil", "undefined"}


def reference_problem(gold: str | None) -> str | None:
    """Why a reference answer cannot be checked against (None when it can): empty, not a finite number
    (``NaN``, ``Infinity``, ``1e999``) or a boolean/null word. Such a reference would silently give every
    response 0."""
    if gold is None or not str(gold).strip():
        return "reference answer is empty"
    s = str(gold).strip().strip("$").strip().lower()
    if s in _BOOLEANS:
        return f"reference answer {gold!r} is a boolean/null word, not a math answer"
    if _INT.fullmatch(s):  # any integer is fine, also one too long for float()
        return None
    try:
        value = float(s)
    except (ValueError, OverflowError):
        return None
    if value != value or value in (float("inf"), float("-inf")):
        return f"reference answer {gold!r} is not a finite number"
    return None


def math_verify_equivalent(gold: str, pred: str) -> bool:
    """math-verify with its own (signal) timeouts off; runs in a worker process."""
    from math_verify import parse, verify

    g = parse(_as_latex(gold), parsing_timeout=None)
    p = parse(_as_latex(pred), parsing_timeout=None)
    if not g or not p:
        return False
    return bool(verify(g, p, timeout_seconds=None))


def math_verify_default(gold: str, response: str) -> bool:
    """math-verify's documented use, the baseline rewardkit is held to: both texts parsed as given with the
    default extraction configs, ``verify`` (no timeouts: call it with a deadline). Prepare them first the same
    way for every checker (``latex_answer`` for an answer string; a whole response as it stands)."""
    from math_verify import parse, verify

    g = parse(gold, parsing_timeout=None)
    p = parse(response, parsing_timeout=None)
    return bool(g and p and verify(g, p, timeout_seconds=None))


_HAS_LATEX = re.compile(r"\$.*\$|\\\(.*\\\)|\\\[.*\\\]|\\boxed\{", re.DOTALL)


def latex_answer(answer: str) -> str:
    """An answer string prepared for math-verify's LaTeX parser: in ``$...$`` unless it already holds a LaTeX
    environment or a box. NeMo-Skills' ``math_equal`` prepares both sides so; answer-parity comparisons give
    gold and answer this one preparation for every checker."""
    return answer if _HAS_LATEX.search(answer) else f"${answer}$"


def _as_latex(ans: str) -> str:
    """``ans`` as math-verify parses it: in ``$...$`` unless it opens an environment itself or holds a box. A
    box is math-verify's own extraction target, so a gold written as several boxes with prose between them
    reads as math-verify reads it ("\\boxed{1} no no no \\boxed{2}" is 2), not as the set of its boxes that
    one ``$...$`` around it would make (issue 29). Not ``latex_answer``, which prepares a whole text and keeps
    one holding ``$...$`` anywhere ("so $x \\geq 5$ is the solution"): an answer extracted from a box can hold
    ``$`` pieces of its text mode ("12 $ and $13") and reads right only wrapped. Measured (2026-11-28): either
    rule for both loses a labelled case to math-verify (``tests/test_answers_vs_math_verify.py``) or, as the
    preparation, 12 development cases for both checkers (``benchmarks/answer_parity.py``)."""
    s = ans.strip()
    if s.startswith(("$", "\\(", "\\[")) or "\\boxed" in s:
        return s
    return f"${s}$"


@dataclass(frozen=True)
class Check:
    """The outcome of one (gold, prediction) check."""

    equivalent: bool | None  # None when the check did not finish
    status: Status = Status.OK
    message: str | None = None
    cached: bool = False


class _Deadline(BaseException):
    """Raised by our SIGALRM handler; a BaseException so library ``except Exception`` blocks cannot eat it."""


def _inline_equivalent(gold: str, pred: str, timeout: float) -> bool:
    import math_verify  # noqa: F401  (the first import, sympy's, takes seconds: not part of any check's deadline)

    def on_alarm(signum, frame):  # noqa: ARG001
        raise _Deadline()

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return math_verify_equivalent(gold, pred)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")


class _Worker:
    """One ``rewardkit.answer_worker`` subprocess; killed and replaced when a check overruns."""

    def __init__(self, start_timeout: float = 120.0):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rewardkit.answer_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, bufsize=1,
        )
        if self._read(start_timeout) is None:
            self.kill()
            raise RuntimeError("answer-check worker did not start")

    def _read(self, timeout: float) -> dict | None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        if not line:
            raise BrokenPipeError("answer-check worker exited")
        return json.loads(line)

    def ask(self, gold: str, pred: str, timeout: float) -> dict | None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps([gold, pred]) + "\n")
        self.proc.stdin.flush()
        return self._read(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class AnswerChecker:
    """Batched, cached, deadline-bounded answer equivalence.

    ``check_many`` deduplicates pairs and answers identical normalised strings at once. The rest run
    inline under a SIGALRM deadline on the main thread (``mode="auto"``), or in ``workers`` worker
    processes elsewhere (or always, with ``mode="process"``); a pair that overruns ``timeout`` seconds
    gets ``Status.TIMEOUT`` (a worker that overran is killed and replaced). Thread-safe.
    """

    def __init__(self, timeout: float = 5.0, workers: int = 2, cache_size: int = 200_000,
                 mode: str = "auto"):
        if mode not in ("auto", "inline", "process"):
            raise ValueError(f"mode must be auto, inline or process, not {mode!r}")
        self.timeout = timeout
        self.workers = workers
        self.mode = mode
        self.cache_size = cache_size
        self._cache: dict[tuple[str, str], bool] = {}
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self.calls = 0  # math-verify checks actually run
        self.hits = 0
        atexit.register(self.close)

    def close(self) -> None:
        with self._lock:
            for w in self._all:
                w.kill()
            self._all.clear()
            self._idle = queue.SimpleQueue()

    def _borrow(self) -> _Worker:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            w = _Worker()
            with self._lock:
                self._all.append(w)
            return w

    def _discard(self, w: _Worker) -> None:
        w.kill()
        with self._lock:
            if w in self._all:
                self._all.remove(w)

    # -- checks
    def check(self, gold: str, pred: str | None) -> Check:
        return self.check_many([(gold, pred)])[0]

    def check_many(self, pairs: Sequence[tuple[str, str | None]]) -> list[Check]:
        out: list[Check | None] = [None] * len(pairs)
        todo: dict[tuple[str, str], list[int]] = {}
        for i, (gold, pred) in enumerate(pairs):
            bad = reference_problem(gold)
            if bad is not None:  # every response of the group gets this status, never a silent 0
                out[i] = Check(None, Status.ERROR, f"unusable reference: {bad}")
                continue
            if pred is None:
                out[i] = Check(False, message="no final answer found")
                continue
            key = (gold.strip(), pred.strip())
            with self._lock:
                hit = self._cache.get(key)
            if hit is not None:
                self.hits += 1
                out[i] = Check(hit, cached=True)
                continue
            ng, np_ = normalize_answer(gold), normalize_answer(pred)
            if ng and ng == np_:
                self._remember(key, True)
                out[i] = Check(True)
                continue
            lg, lp = _long_int(gold), _long_int(pred)
            vg, vp = plain_number(gold), plain_number(pred)
            if (lg or vg is not None) and (lp or vp is not None) and (lg or lp):
                # an integer beyond int()'s digit limit: equal digits, never equal to a shorter plain number
                self._remember(key, lg == lp)
                out[i] = Check(lg == lp)
                continue
            if vg is not None and vp is not None and _exactly_comparable(gold, pred, vg, vp):
                self._remember(key, vg == vp)
                out[i] = Check(vg == vp)
                continue
            todo.setdefault(key, []).append(i)
        if todo and self._inline():
            for key, idx in todo.items():
                res = self._check_inline(key)
                for i in idx:
                    out[i] = res
        elif todo:
            keys = list(todo)
            n = max(1, min(self.workers, len(keys)))
            with ThreadPoolExecutor(n) as ex:
                results = list(ex.map(self._check_chunk, [keys[j::n] for j in range(n)]))
            for chunk in results:
                for key, res in chunk.items():
                    for i in todo[key]:
                        out[i] = res
        return out  # type: ignore[return-value]

    def _inline(self) -> bool:
        if self.mode == "inline" and not _on_main_thread():
            raise RuntimeError("inline answer checks need the main thread (SIGALRM); use mode='process'")
        return self.mode == "inline" or (self.mode == "auto" and _on_main_thread())

    def _check_inline(self, k: tuple[str, str]) -> Check:
        try:
            value = _inline_equivalent(k[0], k[1], self.timeout)
        except _Deadline:
            return Check(None, Status.TIMEOUT, f"math-verify exceeded {self.timeout:g}s on gold={k[0]!r} pred={k[1]!r}")
        except Exception as e:  # math-verify raised: report, do not guess
            return Check(None, Status.ERROR, f"math-verify failed on gold={k[0]!r} pred={k[1]!r}: {e!r}")
        self.calls += 1
        self._remember(k, bool(value))
        return Check(bool(value))

    def _check_chunk(self, keys: list[tuple[str, str]]) -> dict[tuple[str, str], Check]:
        res: dict[tuple[str, str], Check] = {}
        w = self._borrow()
        try:
            for k in keys:
                try:
                    reply = w.ask(k[0], k[1], self.timeout)
                except (BrokenPipeError, OSError, ValueError) as e:
                    res[k] = Check(None, Status.ERROR, f"answer-check worker died on gold={k[0]!r} pred={k[1]!r}: {e}")
                    self._discard(w)
                    w = self._borrow()
                    continue
                if reply is None:
                    res[k] = Check(None, Status.TIMEOUT, f"math-verify exceeded {self.timeout:g}s on gold={k[0]!r} pred={k[1]!r}")
                    self._discard(w)
                    w = self._borrow()
                elif "error" in reply:
                    res[k] = Check(None, Status.ERROR, f"math-verify failed on gold={k[0]!r} pred={k[1]!r}: {reply['error']}")
                else:
                    self.calls += 1
                    self._remember(k, bool(reply["ok"]))
                    res[k] = Check(bool(reply["ok"]))
        finally:
            self._idle.put(w)
        return res

    def _remember(self, key: tuple[str, str], value: bool) -> None:
        with self._lock:
            if len(self._cache) >= self.cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = value


_default: AnswerChecker | None = None


def default_checker() -> AnswerChecker:
    """A process-wide checker (shared cache and worker pool)."""
    global _default
    if _default is None:
        _default = AnswerChecker()
    return _default


def equivalent(gold: str, pred: str | None) -> bool | None:
    """Is ``pred`` the same answer as ``gold``? (math-verify, gold first; None on timeout/error)."""
    return default_checker().check(gold, pred).equivalent


# -------------------------------------------------------------------------------------- clusters


def cluster_answers(answers: Sequence[str | None], checker: AnswerChecker | None = None) -> list[int | None]:
    """Group equivalent answers (``1/2`` and ``0.5`` together): cluster id per answer, None for no answer.

    Greedy in order: each answer joins the first earlier cluster whose representative it matches in
    either direction, so cluster ids follow first appearance.
    """
    checker = checker or default_checker()
    reps: list[str] = []
    ids: list[int | None] = []
    for a in answers:
        if a is None:
            ids.append(None)
            continue
        found = None
        if reps:
            checks = checker.check_many([(r, a) for r in reps] + [(a, r) for r in reps])
            k = len(reps)
            for j in range(k):
                if checks[j].equivalent or checks[k + j].equivalent:
                    found = j
                    break
        if found is None:
            reps.append(a)
            found = len(reps) - 1
        ids.append(found)
    return ids


def unique_in_order(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for x in items:
        seen.setdefault(x, None)
    return list(seen)
