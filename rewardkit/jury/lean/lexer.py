r"""Lean 4's lexical rules, for the proof gate's text checks: which characters of a Lean source are code, and
which lie inside a comment or a literal.

The character classes are Lean's own (``src/Init/Meta/Defs.lean``: ``isLetterLike``, ``isSubScriptAlnum``,
``isIdFirst``, ``isIdRest``; ``Char.isAlpha``/``isAlphanum``/``isDigit``/``isWhitespace`` are ASCII only in
Lean, so ``ж`` or ``é`` is not a letter the way Python's ``isalnum`` says), and the literal rules follow
``src/Lean/Parser/Basic.lean`` (``tokenFnAux``): a string ``"..."`` with the escapes of ``quotedCharCoreFn``
(``isQuotableCharDefault``: ``\\ \" \' \r \n \t``; ``\xHH``, ``\uHHHH``) and ``stringGapFn``'s gaps (a
backslash, one line break, blanks), a character literal ``'c'`` wherever a token starts with ``'`` not
followed by ``'``, raw strings ``r"..."``/``r#"..."#`` with any number of ``#`` (``isRawStrLitStart`` counts
them without limit; ``rawStrLitFnAux`` closes at the first ``"`` followed by as many), interpolated strings
(``interpolatedStrFn`` in ``src/Lean/Parser/StrInterpolation.lean``: ``\{`` is one more escape, and a ``{``
runs Lean's term parser up to its ``}``, so raw strings, strings and nested interpolations there are tokens
like anywhere else), numbers (``0x``/``0b``/``0o``, ``_`` separators, ``1.5e-3``),
identifiers with ``.`` parts and ``«...»`` escapes, name literals `` `foo ``, ``--`` and nested ``/- -/``
comments (``/--`` and ``/-!`` doc comments nest the same way; ``whitespace`` refuses tabs and a carriage
return without its line feed, so the lexer refuses them too).

What Lean's text alone does not fix is read every way Lean could read it, and a character counts as code if
any reading makes it code:
- the token table (notation of the imported libraries, e.g. Mathlib's ``∑'`` and ``f '' s``): a symbol
  token may run over up to ``_TOKEN_SPAN`` non-blank characters, an identifier may be the prefix of a longer
  token (``Type*``), so a ``'``, ``--`` or ``/-`` glued to a symbol is read both as its start and as part of
  the symbol (``//-`` is ``//`` then ``-`` to Lean, not a comment);
- a character literal that does not close (``∑' x`` without Mathlib) is a lexical error, after which Lean
  resumes at any of the characters it consumed;
- Lean versions before 2024 do not count Latin-1/Latin Extended-A letters (``é``) or ``ⱼ`` as identifier
  characters, so identifiers are also cut there.
Where a reading runs into something that cannot be settled -- an unterminated string, comment, raw string
or ``«`` name, an invalid escape, a malformed character literal after a blank, a tab, a control, format or
space character that starts no token, or inside an interpolation's braces (read in one reading) a comment,
name literal, quote glued to a symbol or identifier that older Lean cuts -- the text is refused
(``LeanLex.refusals``: position and reason); ``{`` in a string that is not ``s!``/``m!``/``f!`` is
listed apart (``ambiguous``), since Lean may read it as an interpolation (``throwError "{x}"``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

# ------------------------------------------------------------------ Lean's character classes (Init/Meta/Defs)


def is_letter_like(c: str) -> bool:
    """Lean's ``isLetterLike`` (current): Greek but λ Π Σ, Coptic, polytonic Greek, the letterlike block,
    mathematical alphanumerics, and (since 2024) Latin-1 Supplement letters but × ÷, and Latin Extended-A."""
    v = ord(c)
    return ((0x3B1 <= v <= 0x3C9 and v != 0x3BB) or (0x391 <= v <= 0x3A9 and v not in (0x3A0, 0x3A3))
            or 0x3CA <= v <= 0x3FB or 0x1F00 <= v <= 0x1FFE or 0x2100 <= v <= 0x214F or 0x1D49C <= v <= 0x1D59F
            or (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7)) or 0x100 <= v <= 0x17F)


def is_sub_script_alnum(c: str) -> bool:
    """Lean's ``isSubScriptAlnum``: numeric and letter subscripts (``ⱼ`` since 2024)."""
    v = ord(c)
    return 0x2080 <= v <= 0x2089 or 0x2090 <= v <= 0x209C or 0x1D62 <= v <= 0x1D6A or v == 0x2C7C


def version_dependent(c: str) -> bool:
    """Identifier characters only for Lean since 2024 (``é``, ``ő``, ``ⱼ``): older Lean cuts an identifier there."""
    v = ord(c)
    return (0xC0 <= v <= 0xFF and v not in (0xD7, 0xF7)) or 0x100 <= v <= 0x17F or v == 0x2C7C


def _ascii_alpha(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z"


def is_id_first(c: str, old: bool = False) -> bool:
    """Lean's ``isIdFirst`` (``old``: as Lean before 2024)."""
    return _ascii_alpha(c) or c == "_" or (is_letter_like(c) and not (old and version_dependent(c)))


def is_id_rest(c: str, old: bool = False) -> bool:
    """Lean's ``isIdRest`` (``old``: as Lean before 2024)."""
    return (_ascii_alpha(c) or "0" <= c <= "9" or c in "_'!?"
            or ((is_letter_like(c) or is_sub_script_alnum(c)) and not (old and version_dependent(c))))


# a regex class of identifier characters every Lean version agrees on (for lookarounds on code text)
ID_REST_CLASS = ("A-Za-z0-9_'!?\u03b1-\u03ba\u03bc-\u03c9\u0391-\u039f\u03a1\u03a2\u03a4-\u03a9\u03ca-\u03fb"
                 "\u1f00-\u1ffe\u2100-\u214f\U0001d49c-\U0001d59f\u2080-\u2089\u2090-\u209c\u1d62-\u1d6a")
_WHITESPACE = " \t\r\n"  # Lean's Char.isWhitespace
_QUOTABLE = "\\\"'rnt"  # isQuotableCharDefault
_HEX = "0123456789abcdefABCDEF"
_SAFE_SINGLE = "()[]{}⟨⟩,"  # tokens that never run on into a longer token
_TOKEN_SPAN = 16  # the longest symbol token considered (Lean's and Mathlib's are shorter)
_NOT_IN_TOKEN = '"`«»\\' + _WHITESPACE  # no token of Lean or Mathlib holds these
_NO_TOKEN_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})  # control, format and space characters
_INTERPOLATED = re.compile(rf"(?<![{ID_REST_CLASS}.])[smf]!\s*\Z")  # s!"..", m!"..", f!"..": braces hold terms


@dataclass(frozen=True)
class LeanLex:
    """A Lean source read as Lean reads it: the text with comments blanked (``no_comments``), with comments
    and literal contents blanked (``code``), the identifier tokens (offset, text) of every reading, the
    offsets of non-interpolated strings holding ``{``, the places the lexer refuses (offset, reason) and the
    offsets where a token starts in some reading (``starts``)."""

    no_comments: str
    code: str
    idents: tuple[tuple[int, str], ...]
    ambiguous: tuple[int, ...]
    refusals: tuple[tuple[int, str], ...]
    starts: tuple[int, ...] = ()


def raw_string_hashes(src: str, i: int) -> int | None:
    """Lean's ``isRawStrLitStart`` at ``i`` (just after an ``r``): the number of ``#`` before a ``"``, with no
    limit, or None when no raw string starts here."""
    j = i
    while j < len(src) and src[j] == "#":
        j += 1
    return j - i if j < len(src) and src[j] == '"' else None


class _Lexer:
    """Every reading of ``src`` from offset 0; see the module docstring."""

    def __init__(self, src: str) -> None:
        self.s, self.n = src, len(src)
        self.is_code = bytearray(self.n)
        self.is_lit = bytearray(self.n)
        self.is_comment = bytearray(self.n)
        self.idents: set[tuple[int, str]] = set()
        self.ambiguous: set[int] = set()
        self.refusals: dict[int, str] = {}
        self.seen: set[int] = set()
        self.starts: set[int] = set()

    # -- marks
    def code(self, a: int, b: int) -> None:
        self.is_code[a:min(b, self.n)] = b"\x01" * (min(b, self.n) - a)

    def lit(self, a: int, b: int) -> None:
        self.is_lit[a:min(b, self.n)] = b"\x01" * (min(b, self.n) - a)

    def refuse(self, at: int, why: str) -> None:
        self.refusals.setdefault(at, why)

    def run(self) -> None:
        todo = [0]
        while todo:
            p = todo.pop()
            if p in self.seen or p > self.n:
                continue
            self.seen.add(p)
            q = self.whitespace(p)
            if q is not None and q < self.n:
                todo.extend(self.token(q))

    # -- whitespace and comments (Lean's ``whitespace``)
    def whitespace(self, i: int) -> int | None:
        s, n = self.s, self.n
        while i < n:
            c = s[i]
            if c == "\t" or (c == "\r" and not s.startswith("\r\n", i)):
                self.refuse(i, "a tab or a lone carriage return outside comments and literals (Lean's whitespace "
                               "refuses them, and its error recovery reads on as commands)")
                return None
            if c in _WHITESPACE:
                i += 1
            elif s.startswith("--", i):
                j = s.find("\n", i)
                j = n if j < 0 else j
                self.is_comment[i:j] = b"\x01" * (j - i)
                i = j
            elif s.startswith("/-", i) and not s.startswith(("/--", "/-!"), i):
                j = self.block_comment(i, i + 2)
                if j is None:
                    return None
                i = j
            else:
                return i
        return i

    def block_comment(self, start: int, i: int) -> int | None:
        """End of the nested comment opened at ``start`` (body from ``i``), or None (refused: unterminated)."""
        s, depth = self.s, 1
        while i < self.n:
            if s.startswith("-/", i):
                depth -= 1
                i += 2
                if depth == 0:
                    self.is_comment[start:i] = b"\x01" * (i - start)
                    return i
            elif s.startswith("/-", i):
                depth += 1
                i += 2
            else:
                i += 1
        self.refuse(start, "unterminated comment (Lean reads the rest of the file as comment)")
        return None

    # -- one token at ``q``: the offsets where the next one may start, in every reading
    def token(self, q: int) -> list[int]:
        s, n, c = self.s, self.n, self.s[q]
        nxt = s[q + 1] if q + 1 < n else ""
        self.starts.add(q)
        if unicodedata.category(c) in _NO_TOKEN_CATEGORIES:
            self.refuse(q, f"U+{ord(c):04X} ({unicodedata.category(c)}), which starts no Lean token and is no Lean "
                           f"whitespace (Lean's error recovery reads on after it)")
            return [q + 1]
        if c == '"':
            return self.string(q)
        if c == "'" and nxt != "'":
            return self.char_lit(q)
        if "0" <= c <= "9":
            return self.number(q)
        if c == "`" and nxt and (is_id_first(nxt) or nxt == "«"):  # a backquote at the end is a symbol
            self.code(q, q + 1)
            return self.ident(q + 1, tokens=False)
        if c == "r" and raw_string_hashes(s, q + 1) is not None:
            return self.raw_string(q)
        if s.startswith(("/--", "/-!"), q):
            j = self.block_comment(q, q + 3)
            if j is None:
                return []
            self.code(q, q + 3)
            self.code(j - 2, j)
            self.is_comment[q + 3:j - 2] = b"\x01" * (j - 2 - q - 3)
            return [j]
        if is_id_first(c) or c == "«":
            return self.ident(q, tokens=True)
        return self.symbol(q)

    def symbol(self, q: int) -> list[int]:
        """A token from the table, of unknown length: every length up to the span over symbol characters (a
        table token holds no blank, quote, backtick, guillemet or backslash, and no letter or digit after its
        symbols, ``#eval`` aside, which the command check finds by its ``#``)."""
        if self.s[q] in _SAFE_SINGLE:
            self.code(q, q + 1)
            return [q + 1]
        end = self._token_run(q + 1, q)
        self.code(q, end)
        return list(range(q + 1, end + 1))

    def _token_run(self, j: int, q: int) -> int:
        """How far a table token starting at ``q`` may run on from ``j``."""
        while j < self.n and j - q < _TOKEN_SPAN and self.s[j] not in _NOT_IN_TOKEN and not (
                is_id_first(self.s[j]) or "0" <= self.s[j] <= "9"):
            j += 1
        return j

    def ident(self, q: int, tokens: bool) -> list[int]:
        """An identifier (``.`` parts, ``«»`` escapes) as current and older Lean cut it; with ``tokens``, also a
        longer table token starting here (``Type*``)."""
        ends = []
        for old in (False, True):
            end, parts = self._ident_end(q, old)
            if end is None:
                return []
            if end == q:  # older Lean: not an identifier character at all
                ends.extend(self.symbol(q))
                continue
            if len(parts) == 1 and not parts[0].startswith("«"):
                self.idents.add((q, parts[0]))
            ends.append(end)
        if tokens:
            j = max(ends)
            run = self._token_run(j, q)
            self.code(j, run)
            ends.extend(range(j + 1, run + 1))
        return ends

    def _ident_end(self, q: int, old: bool) -> tuple[int | None, list[str]]:
        s, n, i, parts = self.s, self.n, q, []
        while True:
            if i < n and s[i] == "«":
                j = s.find("»", i + 1)
                if j < 0:
                    self.refuse(i, "unterminated «» name (Lean reads the rest of the file as a name)")
                    return None, parts
                self.code(i, i + 1)
                self.lit(i + 1, j)
                self.code(j, j + 1)
                parts.append(s[i:j + 1])
                i = j + 1
            elif i < n and is_id_first(s[i], old):
                j = i + 1
                while j < n and is_id_rest(s[j], old):
                    j += 1
                self.code(i, j)
                parts.append(s[i:j])
                i = j
            else:
                return i, parts
            if i + 1 < n and s[i] == "." and (is_id_first(s[i + 1], old) or s[i + 1] == "«"):
                self.code(i, i + 1)
                i += 1
            else:
                return i, parts

    def number(self, q: int) -> list[int]:
        """Lean's ``numberFnAux`` (``_`` separators, scientific literals); older Lean stops at the digits."""
        s, n = self.s, self.n

        def digits(i: int, ok, need: bool) -> tuple[int, bool]:
            while i < n and (s[i] == "_" or ok(s[i])):
                need = s[i] == "_"
                i += 1
            return i, not need

        dec = lambda ch: "0" <= ch <= "9"  # noqa: E731
        ends, good = [], True
        if s[q] == "0" and q + 1 < n and s[q + 1] in "bBoOxX":
            ok = {"b": lambda ch: ch in "01", "o": lambda ch: "0" <= ch <= "7", "x": lambda ch: ch in _HEX}
            i, good = digits(q + 2, ok[s[q + 1].lower()], True)
        else:
            i, good = digits(q + 1, dec, False)
            if good and i < n and s[i] in ".eE":
                if s[i] == ".":
                    i += 1
                    if i < n and dec(s[i]):
                        i, good = digits(i, dec, False)
                if good and i < n and s[i] in "eE":
                    i += 1
                    if i < n and s[i] in "+-":
                        i += 1
                    good = i < n and dec(s[i])
                    if good:
                        i, good = digits(i, dec, False)
        self.code(q, i)
        ends.append(i)
        j = q + 1
        while j < n and dec(s[j]):  # older Lean: the plain digits, then whatever follows
            j += 1
        ends.append(j)
        if not good:  # a lexical error: Lean resumes at any character it consumed
            ends.extend(range(q + 1, i + 1))
        return ends

    def char_lit(self, q: int) -> list[int]:
        """``'c'`` or ``'\\e'``; if it does not close, Lean's error leaves it at any character it consumed."""
        s, n = self.s, self.n
        i = q + 1
        ok = i < n
        if ok and s[i] == "\\":
            i, ok = self.escape(i + 1, in_string=False)
        elif ok:
            i += 1
        if ok and i < n and s[i] == "'":
            self.code(q, q + 1)
            self.lit(q + 1, i)
            self.code(i, i + 1)
            return [i + 1]
        if q == 0 or s[q - 1] in _WHITESPACE + _SAFE_SINGLE:  # no token of the table can hold this quote
            self.refuse(q, "a malformed character literal (Lean's error recovery may read the rest as code)")
        self.code(q, q + 1)
        return list(range(q + 1, min(i + 1, n) + 1))

    def escape(self, i: int, in_string: bool, interpolated: bool = False) -> tuple[int, bool]:
        """After a backslash at ``i - 1``: (offset past the escape, valid)."""
        s, n = self.s, self.n
        if i >= n:
            return i, False
        c = s[i]
        if c in _QUOTABLE or (interpolated and c == "{"):
            return i + 1, True
        for lead, count in (("x", 2), ("u", 4)):
            if c == lead:
                k = i + 1
                while k < i + 1 + count and k < n and s[k] in _HEX:
                    k += 1
                return k, k == i + 1 + count
        if in_string and c in "\r\n":  # Lean's stringGapFn: one line break (CR only before LF), then blanks
            k, seen_newline, after_cr = i, False, False
            while k < n:
                ch = s[k]
                if ch == "\n":
                    if seen_newline:
                        return k, False
                    seen_newline, after_cr = True, False
                elif ch == "\r":
                    after_cr = True
                elif after_cr or ch not in _WHITESPACE:
                    return k, seen_newline and not after_cr
                k += 1
            return k, seen_newline and not after_cr
        return i, False

    def string(self, q: int) -> list[int]:
        s, n = self.s, self.n
        interpolated = bool(_INTERPOLATED.search(s, max(0, q - 16), q))
        self.code(q, q + 1)
        i = q + 1
        while i < n:
            c = s[i]
            if c == "\\":
                j, ok = self.escape(i + 1, in_string=True, interpolated=interpolated)
                if not ok:
                    self.refuse(i, "invalid escape in a string literal (Lean's error recovery may read the rest as code)")
                    return []
                self.lit(i, j)
                i = j
            elif c == '"':
                self.code(i, i + 1)
                return [i + 1]
            elif c == "{" and interpolated:
                j = self.interpolation(i)
                if j is None:
                    return []
                i = j
            else:
                if c == "{":
                    self.ambiguous.add(q)
                self.lit(i, i + 1)
                i += 1
        self.refuse(q, "unterminated string literal (Lean reads the rest of the file as a string)")
        return []

    def interpolation(self, i: int) -> int | None:
        """The ``{...}`` of an interpolated string, ``{`` at ``i``: Lean runs its term parser there and then wants
        a ``}`` (``interpolatedStrFn``), so the inside is tokens like any code. Read in one reading: strings
        (nested interpolations too), raw strings of any ``#`` count, character literals after a blank or a
        bracket, numbers, identifiers, ``{``/``}`` nesting; what one reading cannot settle there (a comment, a
        name literal, a quote glued to a symbol, an identifier that older Lean cuts) is refused. The offset
        past the closing ``}``, or None (refused)."""
        s, n, depth, j = self.s, self.n, 0, i

        def refuse(at: int, what: str) -> None:
            self.refuse(at, f"{what} inside an interpolated string's {{...}} (not settled in one reading; refused)")

        while j < n:
            c = s[j]
            if c in " \n" or s.startswith("\r\n", j):
                j += 1
                continue
            if c in "\t\r`«»\\" or s.startswith(("--", "/-"), j):
                refuse(j, "a tab, carriage return, comment, backslash or name literal")
                return None
            self.starts.add(j)
            if c in "{}":
                depth += 1 if c == "{" else -1
                self.code(j, j + 1)
                j += 1
                if depth == 0:
                    return j
            elif c == '"' or (c == "r" and raw_string_hashes(s, j + 1) is not None):
                ends = self.string(j) if c == '"' else self.raw_string(j)
                if len(ends) != 1:
                    return None
                j = ends[0]
            elif c == "'":
                if s[j - 1] not in _WHITESPACE + _SAFE_SINGLE or j + 1 >= n or s[j + 1] == "'":
                    refuse(j, "a quote glued to a symbol (a token such as ∑' or a character literal)")
                    return None
                ends = self.char_lit(j)
                if len(ends) != 1:
                    refuse(j, "an unterminated character literal")
                    return None
                j = ends[0]
            elif "0" <= c <= "9":
                ends = self.number(j)
                if len(ends) > 2:
                    refuse(j, "a malformed number")
                    return None
                j = ends[0]
            elif is_id_first(c):
                end, parts = self._ident_end(j, old=False)
                if end is None or any(version_dependent(ch) for ch in s[j:end]):
                    refuse(j, "an identifier older Lean reads differently")
                    return None
                if len(parts) == 1:
                    self.idents.add((j, parts[0]))
                j = end
            else:
                self.code(j, j + 1)
                j += 1
        self.refuse(i, "unterminated interpolation in a string literal")
        return None

    def raw_string(self, q: int) -> list[int]:
        """Lean's ``rawStrLitFnAux``: ``r``, n ``#``, ``"``, then anything up to the first ``"`` followed by n
        ``#`` (no escapes)."""
        hashes = raw_string_hashes(self.s, q + 1) or 0
        close = '"' + "#" * hashes
        j = self.s.find(close, q + 2 + hashes)
        if j < 0:
            self.refuse(q, "unterminated raw string literal (Lean reads the rest of the file as a string)")
            return []
        self.code(q, q + 2 + hashes)
        self.lit(q + 2 + hashes, j)
        self.code(j, j + len(close))
        return [j + len(close)]


@functools.lru_cache(maxsize=256)
def lex(src: str) -> LeanLex:
    """Read ``src`` as Lean 4 does (every reading the token table and Lean's version allow)."""
    lx = _Lexer(src)
    lx.run()
    no_comments, code = list(src), list(src)
    for k, ch in enumerate(src):
        if ch == "\n" or lx.is_code[k]:
            continue
        if lx.is_lit[k] or lx.is_comment[k]:
            code[k] = " "
            if not lx.is_lit[k]:
                no_comments[k] = " "
    return LeanLex("".join(no_comments), "".join(code), tuple(sorted(lx.idents)), tuple(sorted(lx.ambiguous)),
                   tuple(sorted(lx.refusals.items())), tuple(sorted(lx.starts)))


def place(src: str, offset: int, first_line: int = 1, first_column: int = 0) -> str:
    """``line L, column C`` of ``offset`` (1-based line counting ``src``'s first as ``first_line``, 0-based column;
    ``src``'s first line starts at column ``first_column``)."""
    line_start = src.rfind("\n", 0, offset) + 1
    column = offset - line_start + (first_column if line_start == 0 else 0)
    return f"line {src.count(chr(10), 0, offset) + first_line}, column {column}"
