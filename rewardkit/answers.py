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
from rewardkit.verdicts import boxed_spans, response_trunk  # noqa: F401  (response_trunk re-exported)

# math-verify warns on every call when its timeouts are disabled; we enforce deadlines ourselves.
logging.getLogger("math_verify").setLevel(logging.ERROR)
logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
logging.getLogger("math_verify.grader").setLevel(logging.ERROR)

# ------------------------------------------------------------------------------------ extraction

_ANSWER_IS = re.compile(
    r"(?:final answer|the answer)\s*(?:is|:|=)\s*[:\s]*(\$[^$]+\$|\\\([^)]*\\\)|[^\n.]+?)\s*(?:\.\s|\.$|\n|$)",
    re.IGNORECASE,
)
_HASH_ANSWER = re.compile(r"^#+\s*Answer\s*\n+\s*(\S[^\n]*)", re.IGNORECASE | re.MULTILINE)  # PRM800K's format
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")
_THOUSANDS = re.compile(r"-?\d{1,3}(,\d{3})+")
_DECIMAL_COMMA = re.compile(r"-?(?:0,\d+|\d+,(?:\d{1,2}|\d{4,}))")  # "0,5", "3,14": no thousands reading
# math-verify's answer-set rule: up to 6 boxes joined by ",", "and", "or" are one answer (a set)
_BOX_JOIN = re.compile(r"\s*\$*\s*(?:,?\s*(?:and|or)|,)\s*\$*\s*", re.IGNORECASE)
_MAX_SET = 6
# LaTeX environments for a final answer in prose: $$..$$, $..$ (not \$), \(..\), \[..\]
_TAIL = 4000  # characters of a response searched for an unmarked final answer
_LATEX_ENV = re.compile(r"\$\$(.+?)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)


def _plain(num: str) -> str:
    """A number as written in prose: thousands separators dropped, an unambiguous decimal comma made a point."""
    if _THOUSANDS.fullmatch(num):
        return num.replace(",", "")
    if _DECIMAL_COMMA.fullmatch(num):
        return num.replace(",", ".")
    return num


def _final_boxes(text: str) -> str | None:
    """The last ``\\boxed{}``, or the answer set its run of boxes joined by ","/"and"/"or" spells."""
    spans = boxed_spans(text)
    if not spans:
        return None
    run = [spans[-1]]
    for prev in reversed(spans[:-1]):
        if len(run) == _MAX_SET or not _BOX_JOIN.fullmatch(text, prev[1], run[-1][0]):
            break
        run.append(prev)
    parts = unique_in_order(c.strip() for _, _, c in reversed(run))
    return ",".join(parts) if len(parts) > 1 else parts[0]


def _last_math(text: str) -> str | None:
    """The rightmost LaTeX environment or number of a response without a marked answer (math-verify's
    last resort too): an environment's content (its last right-hand side when it is an equation chain),
    else the number."""
    text = text[-_TAIL:]  # bounds the scan (an unclosed "\\(" would make the lazy match quadratic)
    env = max(_LATEX_ENV.finditer(text), key=lambda m: m.end(), default=None)
    num = max(_NUMBER.finditer(text), key=lambda m: m.end(), default=None)
    if env is not None and (num is None or env.end() >= num.end()):
        content = next(g for g in env.groups() if g is not None).strip()
        if "=" in content and not re.search(r"[<>]|\\[lg]e|\\neq", content):
            content = content.rsplit("=", 1)[1].strip()
        if content:
            return content
    return _plain(num.group()) if num is not None else None


def extract_answer(text: str) -> str | None:
    """The final answer of a response, in math-verify's order: the last ``\\boxed{}`` (with nested braces; a
    run of boxes joined by ","/"and"/"or" is one answer set), else PRM800K's "# Answer" line, else "the
    (final) answer is X", else the rightmost LaTeX environment or number; None when there is none."""
    if not text:
        return None
    boxed = _final_boxes(text)
    if boxed is not None:
        return boxed.strip()
    hits = _HASH_ANSWER.findall(text)
    if hits:
        return hits[-1].strip().strip("$").strip()
    hits = _ANSWER_IS.findall(text)
    if hits:
        ans = hits[-1].strip().strip("$").strip()
        ans = re.sub(r"^\\\(|\\\)$", "", ans).strip()
        if ans:
            return _plain(ans)
    return _last_math(text)


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
_INT = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+|[-+]?\d+")
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


def _as_latex(ans: str) -> str:
    s = ans.strip()
    if s.startswith("$") or s.startswith("\\(") or s.startswith("\\["):
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
