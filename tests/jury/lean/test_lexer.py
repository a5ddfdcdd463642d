"""The proof gate reads a submission's text as Lean 4 does (rewardkit.jury.lean.lexer): Lean's identifier
classes, literal and comment rules, and every reading the token table or Lean's version allows; where it
cannot settle a reading it refuses, naming the place. Real Lean files (tests/jury/lean/lean_corpus, see its
SOURCES.md) lex without a refusal and keep every command as code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.jury.lean.check import DEFAULT_HEADER, build_source, forbidden_commands, strip_comments
from rewardkit.jury.lean.lexer import (
    is_id_first,
    is_id_rest,
    is_letter_like,
    is_sub_script_alnum,
    lex,
    place,
    version_dependent,
)

CORPUS = sorted((Path(__file__).parent / "lean_corpus").glob("*.lean"))
STATEMENT = "theorem test_problem (x : ℕ) (h : x + 1 = 2) : x = 1 :="
FORMAL = DEFAULT_HEADER + "\n" + STATEMENT + " by\n  sorry\n"


def test_the_issue_31_submission_is_refused_before_lean_runs():
    """``⅋`` is letter-like to Lean, so ``⅋'`` is an identifier and ``'\\t⏎#eval 'a'`` no character literal:
    the ``#eval`` after the theorem is code and must be refused."""
    sub = (DEFAULT_HEADER + "\n" + STATEMENT + " by\n  omega\nwhere aux (⅋' t : Set ℕ) : Set ℕ := ⅋'\\t\n"
           "#eval 'a' |> fun _ => (IO.FS.writeFile \"/tmp/pwn\" \"x\" : IO Unit)\n")
    source, reasons = build_source(FORMAL, sub)
    assert source is None
    assert len(reasons) == 1 and "#eval" in reasons[0] and "line 11" in reasons[0], reasons


@pytest.mark.parametrize("proof, word", [
    (":= x //- #eval 1 -/ 2", "#eval"),  # `//` is a token: Lean reads `//` then `-`, not a comment
    (":= by\n  exact x <-- #eval 1\n", "#eval"),  # `<-` is a token, so this `--` starts no comment
    (":= 1theorem", "theorem"),  # a number ends at the first non-digit: `1` then the keyword
    (":= by exact .run_cmd", "run_cmd"),  # `.` then a keyword token, which error recovery runs as a command
    (":= by exact жtheorem", "theorem"),  # `ж` is no identifier character to Lean (Char.isAlpha is ASCII)
    (":= by exact étheorem", "theorem"),  # Lean before 2024: `é` is not one either
    (":= by exact '\\q' #eval 1", "#eval"),  # an invalid escape: Lean resumes inside the literal
])
def test_commands_hidden_by_a_misread_token_are_found(proof, word):
    found = forbidden_commands(proof)
    assert any(word in f for f in found), found


@pytest.mark.parametrize("proof, where", [
    (':= by exact "a\\q"\n#eval 1 "', "line 1, column 14"),  # invalid escape: Lean's recovery reads on as code
    (':= by exact "abc', "line 1, column 12"),  # unterminated string
    (":= by exact r#\"abc\"", "line 1, column 12"),  # unterminated raw string
    (":= by exact x /- a /- b -/", "line 1, column 14"),  # nested: still open at the end
    (":= by exact «abc", "line 1, column 12"),
])
def test_what_the_lexer_cannot_settle_is_refused_naming_the_place(proof, where):
    found = forbidden_commands(proof)
    assert found and found[0].startswith(where), found
    source, reasons = build_source(FORMAL, DEFAULT_HEADER + "\n" + STATEMENT + " by\n  omega\n" + proof[3:])
    assert source is None and "cannot tell how Lean reads" in reasons[0] and "line 10" in reasons[0], reasons


@pytest.mark.parametrize("proof", [
    ":= by\n  exact (tsum_congr fun x => by simp) ▸ (∑' x, f x)\n",  # Mathlib's `∑'` token
    ":= by simp [Set.image, f '' s, f ⁻¹' t]\n",  # `''` and `⁻¹'` tokens
    ":= by\n  rw [show g (∏'[L] i, f i) = ∏'[L] i, g (f i) from h]\n",
    ":= by\n  have h' : x' = 'a' := rfl\n  exact ⟨'\\'', \"-- not a comment\", h'⟩\n",
    ":= by\n  omega -- the lemma above: no theorem, def or #eval here\n",
    ":= by\n  exact h.1.append\n",  # a field index, then a name: no `end` keyword
    ":= by\n  exact s!\"{x} and {\"nested\"}\"\n",
    ":= by\n  /- a /- nested -/ comment with def and #eval -/\n  exact x₁ + xⱼ + ℘ + α\n",
])
def test_real_lean_usage_is_not_refused(proof):
    assert forbidden_commands(proof) == []


def test_lean_identifier_classes_are_leans_not_pythons():
    assert [c for c in "αℕ℘϶℮⅋𝒜_" if not is_id_first(c)] == []
    assert [c for c in "λΠΣ×÷жЖ中١∑" if is_id_first(c)] == []  # Lean: λ Π Σ are binders; Char.isAlpha is ASCII
    assert [c for c in "₁ₙᵢ'!?9" if not is_id_rest(c)] == []
    assert not is_id_first("é", old=True) and is_id_first("é")  # Latin-1 letters: identifiers since 2024
    assert lex("⅋'").idents == ((0, "⅋'"),)
    assert (0, "ab") in lex("abжcd").idents and (3, "cd") in lex("abжcd").idents


# Lean's isLetterLike and isSubScriptAlnum (src/Init/Meta/Defs.lean, since 2024 with Latin-1 letters but × ÷, Latin
# Extended-A and ⱼ; before, without), and isIdFirst/isIdRest (ASCII letters and digits, `_`, and `'!?` after the
# first): each range's ends and the code points just outside them. Columns: isIdFirst, isIdFirst before 2024,
# isIdRest, isIdRest before 2024 (T/F).
_CLASS_EDGES = [
    (0x40, "FFFF"), (0x41, "TTTT"), (0x5A, "TTTT"), (0x5B, "FFFF"), (0x60, "FFFF"), (0x61, "TTTT"), (0x7A, "TTTT"),
    (0x7B, "FFFF"), (0x2F, "FFFF"), (0x30, "FFTT"), (0x39, "FFTT"), (0x3A, "FFFF"), (0x5F, "TTTT"), (0x27, "FFTT"),
    (0x21, "FFTT"), (0x3F, "FFTT"), (0x22, "FFFF"),
    (0xBF, "FFFF"), (0xC0, "TFTF"), (0xD6, "TFTF"), (0xD7, "FFFF"), (0xD8, "TFTF"), (0xF6, "TFTF"), (0xF7, "FFFF"),
    (0xF8, "TFTF"), (0xFF, "TFTF"), (0x100, "TFTF"), (0x17F, "TFTF"), (0x180, "FFFF"),
    (0x390, "FFFF"), (0x391, "TTTT"), (0x39F, "TTTT"), (0x3A0, "FFFF"), (0x3A1, "TTTT"), (0x3A2, "TTTT"),
    (0x3A3, "FFFF"), (0x3A4, "TTTT"), (0x3A9, "TTTT"), (0x3AA, "FFFF"), (0x3B0, "FFFF"), (0x3B1, "TTTT"),
    (0x3BA, "TTTT"), (0x3BB, "FFFF"), (0x3BC, "TTTT"), (0x3C9, "TTTT"), (0x3CA, "TTTT"), (0x3FB, "TTTT"),
    (0x3FC, "FFFF"), (0x1EFF, "FFFF"), (0x1F00, "TTTT"), (0x1FFE, "TTTT"), (0x1FFF, "FFFF"), (0x20FF, "FFFF"),
    (0x2100, "TTTT"), (0x214F, "TTTT"), (0x2150, "FFFF"), (0x1D49B, "FFFF"), (0x1D49C, "TTTT"), (0x1D59F, "TTTT"),
    (0x1D5A0, "FFFF"),
    (0x207F, "FFFF"), (0x2080, "FFTT"), (0x2089, "FFTT"), (0x208A, "FFFF"), (0x208F, "FFFF"), (0x2090, "FFTT"),
    (0x209C, "FFTT"), (0x209D, "FFFF"), (0x1D61, "FFFF"), (0x1D62, "FFTT"), (0x1D6A, "FFTT"), (0x1D6B, "FFFF"),
    (0x2C7B, "FFFF"), (0x2C7C, "FFTF"), (0x2C7D, "FFFF"),
]


@pytest.mark.parametrize("code_point, classes", _CLASS_EDGES, ids=lambda v: f"{v:04X}" if isinstance(v, int) else v)
def test_identifier_classes_at_the_edges_of_leans_ranges(code_point, classes):
    c = chr(code_point)
    got = (is_id_first(c), is_id_first(c, old=True), is_id_rest(c), is_id_rest(c, old=True))
    assert "".join("T" if g else "F" for g in got) == classes
    # letter-like or subscript only beyond ASCII; version-dependent where the two Lean versions disagree
    assert is_letter_like(c) == (code_point > 0x7F and classes[0] == "T")
    assert is_sub_script_alnum(c) == (code_point > 0x7F and classes[:3] == "FFT")
    assert version_dependent(c) == (classes[2:] == "TF")


# ------------------------------------------------------------------------------------ real Lean files

_TOP_LEVEL = re.compile(
    r"(theorem|lemma|def|example|instance|structure|inductive|class|namespace|section|end|open|variable|universe|"
    r"attribute|import|abbrev|macro|syntax|elab|@\[|#[a-z_]+|private|protected|noncomputable|partial|unsafe|"
    r"set_option|initialize|alias|deriving|mutual|local|scoped|macro_rules|elab_rules|notation|infix[lr]?|"
    r"prefix|postfix|declare_syntax_cat|public|module|opaque|axiom|export|omit|include)(?![\w'!?])")


def _top_level_lines(src: str) -> set[int]:
    """Lines starting (column 0) with a command word outside a block comment, by a line-based count of
    ``/-`` and ``-/``: right for these files, which open and close their comments on lines of their own."""
    out, depth = set(), 0
    for k, line in enumerate(src.split("\n")):
        if depth == 0 and _TOP_LEVEL.match(line):
            out.add(k)
        depth = max(0, depth + line.count("/-") - line.count("-/"))
    return out


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.name)
def test_a_real_lean_file_lexes_without_refusal_and_keeps_its_commands(path):
    src = path.read_text(encoding="utf-8")
    lx = lex(src)
    assert lx.refusals == (), lx.refusals
    code_lines = {k for k, line in enumerate(lx.code.split("\n")) if _TOP_LEVEL.match(line)}
    assert code_lines == _top_level_lines(src)
    assert len(lx.code) == len(src) and lx.code.count("\n") == src.count("\n")


def test_real_raw_strings_and_char_literals_are_blanked():
    raw = (Path(__file__).parent / "lean_corpus" / "lean4__tests_lean_run_rawStrings.lean").read_text()
    code = lex(raw).code
    assert "need two" not in code and "said the world" not in code and code.count("example") == 13
    casing = (Path(__file__).parent / "lean_corpus" / "batteries__Batteries_Data_Char_AsciiCasing.lean").read_text()
    assert re.findall(r"'[^' ]'", lex(casing).code) == [] and re.findall(r"'[^' ]'", casing)
    mathlib = (Path(__file__).parent / "lean_corpus" / "mathlib4__Topology_Algebra_InfiniteSum_Basic_excerpt.lean")
    text = mathlib.read_text()
    assert "Constant zero function" not in strip_comments(text) and "∏'[L] i" in lex(text).code


# ------------------------------------------------------------------------------------ generated text

_LETTERLIKE = "αβγδεζηθικμνξοπρστυφχψωΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΡΤΥΦΧΨΩϊϋόϐϑϒϕϖϗϘϙϚϛϜϝϞϟϠϡϢϣϤϥϦϧϨϩϪϫϬϭϮϯϰϱϲϳϴϵ϶ϷϸϹϺϻ" \
    "ἀἁἂἃἄἅἆἇἐἑ℀℁ℂ℃℄℅℆ℇ℈℉ℊℋℌℍℎℏℐℑℒℓ℔ℕ№℗℘ℙℚℛℜℝ℞℟℠℡™℣ℤ℥Ω℧ℨ℩KÅℬℭ℮ℯℰℱℲℳℴℵℶℷℸℹ℺℻ℼℽℾℿ⅀⅁⅂⅃⅄ⅅⅆⅇⅈⅉ⅊⅋⅌⅍ⅎ⅏" \
    "𝒜𝒞𝒟𝒢𝒥𝒦𝒩𝒪𝒫𝒬𝒮𝒯𝒰𝒱𝒲𝒳𝒴𝒵𝔄𝔅𝔇𝔈𝔉𝔊𝔍𝔎𝔏𝔐𝔑𝔒𝔓𝔔𝔖𝔗𝔘𝔙𝔚𝔛𝔜𝔸𝔹𝔻𝔼𝔽𝔾𝕀𝕁𝕂𝕃𝕄𝕆𝕊𝕋𝕌𝕍𝕎𝕏𝕐"
_FIRST = st.sampled_from("abcxyzXYZ_" + _LETTERLIKE)
_REST = st.sampled_from("abcxyz09_'!?₀₁₉ₐₑₒₓₔₕₖₗₘₙₚₛₜᵢᵣᵤᵥᵦ" + _LETTERLIKE)
IDENT = st.builds(lambda a, b: a + "".join(b), _FIRST, st.lists(_REST, max_size=6))


@settings(max_examples=300, deadline=None)
@given(ident=IDENT, after=st.sampled_from(["\\t", "\\n", "\\\\", "x", " ", "\\'", "'", "\\u0041"]))
def test_a_quote_after_any_lean_identifier_hides_no_command(ident, after):
    """``IDENT'ESC⏎#eval 'a'``: whatever identifier (Lean's letter-like and subscript characters included)
    comes before the quote, the ``#eval`` on the next line is code."""
    found = forbidden_commands(f":= by\n  exact {ident}'{after}\n#eval 'a' |> id\n")
    assert any("#eval" in f or "cannot" in f or "column" in f for f in found), found


@settings(max_examples=300, deadline=None)
@given(ident=IDENT)
def test_a_generated_lean_identifier_is_one_identifier(ident):
    assert (0, ident) in lex(ident).idents


_TRICKY = st.lists(st.sampled_from(list("ab1 '\"\\-/{}«»`#r!.\n⅋жé∑") + ["//", "<-", "--", "s!\"", "/-", "-/"]),
                   max_size=16).map("".join)


@settings(max_examples=500, deadline=None)
@given(prefix=_TRICKY)
def test_nothing_before_a_command_can_hide_it_when_nothing_after_closes(prefix):
    """No literal or comment opened before ``#eval`` closes after it, so Lean reads the ``#eval`` as code in
    every reading: the gate must find it (or refuse the text)."""
    assert forbidden_commands(":= " + prefix + "\n#eval 1\n")


# ------------------------------------------------------------ a reference model: text built from Lean's grammar
#
# Each generator below builds Lean text from the grammar in src/Lean/Parser/Basic.lean and StrInterpolation.lean
# (written from the grammar, not from rewardkit's lexer) together with what the lexer must make of it: the same
# text with every comment (delimiters included) and every literal's contents blanked, newlines kept. The
# marker `#eval` is put both in code, where the gate must find it, and inside literals and comments, where
# it must not.

MARK = "#eval"
_ESCAPES = ["\\n", "\\t", "\\\\", '\\"', "\\'", "\\r", "\\x4F", "\\xa0", "\\u00e9", "\\u03BB"]  # quotedCharCoreFn
# stringGapFn: a backslash, one line break (CR LF too), then blanks up to the next character, which is no line break
_GAPS = ["\\\nz", "\\\n   z", "\\\r\n  z", "\\\n\t z"]
_TEXT = st.sampled_from(["a", " ", "x y", "#", "'", "-", "/", "}", "»", "«", "`", "\n", MARK, "theorem", "∑'", "é"])


def _blank(text: str) -> str:
    return "".join(c if c == "\n" else " " for c in text)


def _lit(open_: str, body: str, close: str) -> tuple[str, str]:
    return open_ + body + close, open_ + _blank(body) + close


@st.composite
def plain_string(draw) -> tuple[str, str]:
    """``"..."``: characters other than ``"``, ``\\`` and ``{`` (a ``{`` may interpolate), escapes and gaps."""
    parts = draw(st.lists(st.one_of(_TEXT, st.sampled_from(_ESCAPES + _GAPS)), max_size=6))
    return _lit('"', "".join(parts), '"')


@st.composite
def raw_string(draw) -> tuple[str, str]:
    """``r`` n ``#`` ``"`` body ``"`` n ``#``, any n (isRawStrLitStart has no limit): the body holds anything
    but ``"`` followed by n ``#``."""
    n = draw(st.one_of(st.integers(0, 3), st.integers(250, 400)))
    body = "".join(draw(st.lists(st.one_of(_TEXT, st.sampled_from(['"', "\\", "{", '"#', "#" * n, '"' + "#" * (n - 1)])),
                                 max_size=6)))
    close = '"' + "#" * n
    if (body + close).find(close) != len(body):
        body = body.replace('"', "q")
    return _lit("r" + "#" * n + '"', body, close)


@st.composite
def char_literal(draw) -> tuple[str, str]:
    c = draw(st.sampled_from(["a", "#", '"', "{", "λ", "\\'", "\\n", "\\x41", "\\u2200", "\\\\"]))
    return _lit("'", c, "'")


@st.composite
def code_atom(draw) -> tuple[str, str]:
    a = draw(st.sampled_from(["x", "h'", "hx₁", "Nat.succ", "foo_bar", "a'", "42", "0x1F", "3.14", "++", ":=", "=",
                              "(", ")", "<;>", "·", "fun", "=>", "⟨", "⟩", MARK]))
    return a, a


@st.composite
def interpolated(draw, depth: int = 0) -> tuple[str, str]:
    """``s!"..."`` (or ``m!``/``f!``): segments with ``\\{`` as one more escape, and ``{term}`` holding code, strings,
    raw strings, character literals and nested interpolations (interpolatedStrFn)."""
    text = code = draw(st.sampled_from(["s!", "m!", "f!"])) + '"'
    for _ in range(draw(st.integers(0, 3))):
        # a segment ending in a line break would put the term at column 0, which the gate refuses anywhere
        seg = "".join(draw(st.lists(st.one_of(_TEXT, st.sampled_from(_ESCAPES + ["\\{"])), max_size=3))) + "a"
        inner = draw(expression(depth + 1))
        text += seg + "{" + inner[0] + "}"
        code += _blank(seg) + "{" + inner[1] + "}"
    seg = "".join(draw(st.lists(_TEXT, max_size=3)))
    return text + seg + '"', code + _blank(seg) + '"'


@st.composite
def expression(draw, depth: int = 0) -> tuple[str, str]:
    """Code tokens separated by blanks; literals and (below the top) nested interpolations among them."""
    kinds = [code_atom(), plain_string(), raw_string(), char_literal()]
    if depth < 3:
        kinds.append(interpolated(depth))
    items = draw(st.lists(st.one_of(kinds), min_size=1, max_size=4))
    return " ".join(t for t, _ in items), " ".join(c for _, c in items)


@st.composite
def block_comment(draw, depth: int = 0) -> tuple[str, str]:
    """``/- ... -/``, nested (finishCommentBlock counts ``/-`` and ``-/``); the body has no other ``-`` or ``/``."""
    parts = []
    for _ in range(draw(st.integers(0, 3))):
        if depth < 3 and draw(st.booleans()):
            parts.append(draw(block_comment(depth + 1))[0])
        else:
            parts.append(draw(st.sampled_from(["a", " ", "\n", MARK, '"', "'", "{", "r#\"", "theorem", "«"])))
    text = "/-" + " " + "".join(parts) + "-/"
    return text, _blank(text)


@st.composite
def proof_text(draw) -> tuple[str, str]:
    """A proof body: expressions, line comments and nested block comments, every line indented."""
    pieces = draw(st.lists(st.one_of(expression(), block_comment(),
                                     st.builds(lambda t: ("-- " + t + "\n  ", _blank("-- " + t) + "\n  "),
                                               st.sampled_from(["", MARK, "/-", '"', "r#\""]))),
                           min_size=1, max_size=5))
    return ":= by\n  " + " ".join(t for t, _ in pieces), ":= by\n  " + " ".join(c for _, c in pieces)


def _marks(text: str) -> set[str]:
    """``line L, column C`` of each ``#eval`` in ``text`` (the expected code)."""
    out, k = set(), text.find(MARK)
    while k >= 0:
        start = text.rfind("\n", 0, k) + 1
        out.add(f"line {text.count(chr(10), 0, k) + 1}, column {k - start}")
        k = text.find(MARK, k + 1)
    return out


@settings(max_examples=400, deadline=None)
@given(case=proof_text())
def test_the_lexer_agrees_with_a_model_built_from_leans_grammar(case):
    """Nested interpolations, raw strings of any ``#`` count, every escape and string gap, character literals,
    nested comments: the lexer blanks exactly the literal contents and comments, refuses nothing, and the gate
    finds exactly the ``#eval`` markers that stand in code."""
    text, expected = case
    lx = lex(text)
    assert lx.refusals == ()
    assert lx.code == expected
    found = {f.split(":")[0] for f in forbidden_commands(text)}
    assert found == _marks(expected)


@settings(max_examples=200, deadline=None)
@given(case=proof_text(), word=st.from_regex(r"[a-z_][a-z0-9_]{0,12}[?%!]?", fullmatch=True))
def test_any_word_at_column_zero_is_refused_listed_or_not(case, word):
    """After any proof body, a line starting at column 0 is a command position: refused naming the place,
    whatever the word (``frobnicate%``, a command added by the next Mathlib)."""
    text = case[0] + "\n" + word + " foo\n"
    line = text.count("\n")  # the word's line: the last before the final line break
    found = forbidden_commands(text)
    assert any(f.startswith(f"line {line}, column 0: {word!r} stands at column 0") for f in found), found


@pytest.mark.parametrize("bad", [
    '"a\\q"', '"\\x4"', '"\\u12G4"', '"a\\\n\n b"', '"a\\\rb"', "'\\q'", "'ab'", 'r##"a"#', '"{', 's!"{x"',
    "/- /- -/", '"abc',
])
def test_malformed_literals_and_comments_are_refused(bad):
    """What Lean rejects with a lexical error (and then reads on in recovery) is refused, naming the place."""
    found = forbidden_commands(":= by\n  exact " + bad + "\n")
    assert found and found[0].startswith("line 2, column "), found


@pytest.mark.parametrize("hashes", [1, 255, 256, 257, 300, 5000])
def test_raw_strings_of_any_hash_count_hide_nothing_and_are_blanked(hashes):
    """Issue 35: ``r###..."\\"###...`` with more than 256 ``#`` was not read as a raw string; the string read in
    its place blanked the ``#eval`` line after it."""
    raw = "r" + "#" * hashes + '"\\"' + "#" * hashes
    text = f':= by\n  have := {raw}\n  omega\n#eval IO.println "x" -- "\n'
    assert lex(text).code.split("\n")[1] == "  have := r" + "#" * hashes + '" "' + "#" * hashes
    assert any(f.startswith("line 4, column 0: '#eval'") for f in forbidden_commands(text))


# ------------------------------------------------------------ escapes, interpolations and raw strings, exactly
#
# Expected values worked out by hand from src/Lean/Parser/Basic.lean (quotedCharCoreFn, isQuotableCharDefault,
# hexDigitFn, stringGapFn, strLitFnAux, charLitFnAux, rawStrLitFnAux, decimalNumberFn) and
# src/Lean/Parser/StrInterpolation.lean (interpolatedStrFn, isQuotableCharForStrInterpolant), offsets counted in
# the text, reasons as the gate shows them.

INVALID_ESCAPE = "invalid escape in a string literal (Lean's error recovery may read the rest as code)"
MALFORMED_CHAR = "a malformed character literal (Lean's error recovery may read the rest as code)"
UNTERMINATED_STRING = "unterminated string literal (Lean reads the rest of the file as a string)"
IN_BRACES = " inside an interpolated string's {...} (not settled in one reading; refused)"


@pytest.mark.parametrize("text, refusals", [
    # `{` is quotable only in an interpolated string (isQuotableCharForStrInterpolant), never in a character
    # literal (quotedCharFn); error recovery then resumes inside it, where the last `'` after `{` opens another
    ("x := '\\{'", ((5, MALFORMED_CHAR), (8, MALFORMED_CHAR))),
    ('x := "\\{"', ((6, INVALID_ESCAPE),)),  # nor in a plain string
    ('x := s!"\\q"', ((8, INVALID_ESCAPE),)),  # an interpolated string quotes `{` and the default six only
    ('x := "a\\', ((7, INVALID_ESCAPE),)),  # a backslash at the end of the text escapes nothing
    ('x := "\\xG0"', ((6, INVALID_ESCAPE),)),  # hexDigitFn twice: the first is no hex digit
    ('x := "\\x4G"', ((6, INVALID_ESCAPE),)),  # ... the second is none
    ('x := "\\x4', ((6, INVALID_ESCAPE),)),  # ... the text ends after one
    # a gap only in strings (quotedCharCoreFn's inString); Lean resumes inside the literal, at its last `'` too
    ("x := '\\\n'", ((5, MALFORMED_CHAR), (8, MALFORMED_CHAR))),
    # stringGapFn stops at the end of the text: strLitFnAux reports the string unterminated, at its start
    ('x := "a\\\n  ', ((5, UNTERMINATED_STRING),)),
    # a gap starts at a line feed (CR LF is read as LF since lean4#3903); a CR before a blank starts none
    ('x := "a\\\r \n b"', ((7, INVALID_ESCAPE),)),
    # a CR without its LF inside a gap: Lean's stringGapFn would skip it as blank (Char.isWhitespace), the gate
    # refuses it as it does everywhere outside literals (module docstring: one line break, CR only before LF)
    ('x := "a\\\n \r b"', ((7, INVALID_ESCAPE),)),
    ('x := "a\\\n \r', ((7, INVALID_ESCAPE),)),
])
def test_escapes_and_gaps_are_read_as_leans_quoted_char_rules(text, refusals):
    assert lex(text).refusals == refusals


@pytest.mark.parametrize("text, refusals", [
    ('x := s!"{x\ty}"', ((10, "a tab, carriage return, comment, backslash or name literal" + IN_BRACES),)),
    ('x := s!"{x -- c\n}"', ((11, "a tab, carriage return, comment, backslash or name literal" + IN_BRACES),)),
    ('x := s!"{x /- c -/}"', ((11, "a tab, carriage return, comment, backslash or name literal" + IN_BRACES),)),
    # `''` is no character literal (tokenFnAux wants a second character), but Mathlib's image token
    ("x := s!\"{ ''}\"", ((10, "a quote glued to a symbol (a token such as ∑' or a character literal)" + IN_BRACES),)),
    ("x := s!\"{ '", ((10, "a quote glued to a symbol (a token such as ∑' or a character literal)" + IN_BRACES),)),
    ("x := s!\"{+'a'}\"", ((10, "a quote glued to a symbol (a token such as ∑' or a character literal)" + IN_BRACES),)),
    ("x := s!\"{ 'a", ((10, MALFORMED_CHAR),)),  # charLitFnAux: no closing quote
    ('x := s!"{1e}"', ((9, "a malformed number" + IN_BRACES),)),  # parseOptExp: missing exponent digits
    ('x := s!"{0x', ((9, "a malformed number" + IN_BRACES),)),  # hexNumberFn: the text ends before a digit
    ('x := s!"{é}"', ((9, "an identifier older Lean reads differently" + IN_BRACES),)),
    ('x := s!"{x', ((8, "unterminated interpolation in a string literal"),)),  # the term parser meets the end
    ('x := r#"abc', ((5, "unterminated raw string literal (Lean reads the rest of the file as a string)"),)),
])
def test_what_an_interpolation_or_raw_string_cannot_settle_is_refused_with_its_reason(text, refusals):
    assert lex(text).refusals == refusals


def test_an_unterminated_name_escape_inside_an_interpolation_is_refused():
    """identFnAux after `a.`: `«` with no `»` is an unterminated identifier escape (at the `«`)."""
    refusals = lex('x := s!"{a.«b}"').refusals
    assert [k for k, _ in refusals] == [9, 11]
    assert dict(refusals)[11] == "unterminated «» name (Lean reads the rest of the file as a name)"


@pytest.mark.parametrize("text, idents, starts", [
    # interpolatedStrFn runs the term parser after `{`: `X` is an identifier token there
    ('s!"{X}"', ((0, "s!"), (4, "X")), (0, 2, 3, 4, 5)),
    ('s!"{0x1F}"', ((0, "s!"),), (0, 2, 3, 4, 8)),  # numberFnAux: `0x1F` is one numeral, no identifier `x1F`
    ('s!"{99}"', ((0, "s!"),), (0, 2, 3, 4, 6)),  # one numeral, not two
    # the term parser's whitespace reads CR LF (LF to Lean since lean4#3903) between tokens
    ('x := s!"{x\r\n  y}"', ((0, "x"), (5, "s!"), (9, "x"), (14, "y")), (0, 2, 3, 5, 7, 8, 9, 14, 15)),
])
def test_the_braces_of_an_interpolated_string_are_read_as_tokens(text, idents, starts):
    lx = lex(text)
    assert (lx.refusals, lx.idents, lx.starts, lx.code) == ((), idents, starts, text)


@pytest.mark.parametrize("text, code", [
    # `<` runs on into `/-`: one reading opens a block comment at `/-`, another reads `<` `/` `-` and then
    # the literal, whose delimiters and interpolation stay code; what no reading makes code is blanked
    ('x </- r"a" -/', 'x </- r" " -/'),
    ('x </- s!"{a + b}" -/', 'x </- s!"{a + b}" -/'),
    ('x </- s!"{a +\r\n b}" -/', 'x </- s!"{a + \n b}" -/'),  # the CR: blank in braces, comment in the other

    # charLitFnAux after a numeral (no table token holds a digit and a quote): unclosed, Lean's error leaves it at
    # any character it consumed; the quote is code only in that reading
    ("x </-1'ab -/", "x </-1'ab -/"),
    ("x </-1'\r\n -/", "x </-1' \n -/"),
    ("x </- 'a' -/", "x </- ' ' -/"),
    ("x </- (a) -/", "x </- (a) -/"),  # brackets are one-character tokens
    ("x </- (\r\n) -/", "x </- ( \n) -/"),
    # `a/` may be a longer token of the table, after which `--` opens a line comment up to the LF
    ("a/-- x -/\r\n", "a/-- x -/ \n"),
    # a table token spans at most 16 characters: a 16-letter name is no prefix of one, a 15-letter name may be
    ("abcdefghijklmno--c", "abcdefghijklmno--c"),
    ("abcdefghijklmnop--c", "abcdefghijklmnop   "),
    ("«a» «b»", "« » « »"),  # each «» escape closes at its own »
    ("x </- «a» -/", "x </- « » -/"),
    ("x </- a.b -/", "x </- a.b -/"),
])
def test_a_character_code_in_one_reading_stays_code_when_another_comments_it(text, code):
    assert lex(text).code == code


@pytest.mark.parametrize("text, code, no_comments", [
    ('"abc" -- c', '"   "     ', '"abc"     '),  # after a literal's closing quote, whitespace: a line comment
    ('"a"-- c', '" "    ', '"a"    '),
    ("'a'-- c", "' '    ", "'a'    "),
    ("/- c -/'a'", "       ' '", "       'a'"),  # a comment ends at its `-/`; the literal follows at once
    ('/- c -/r"a"', '       r" "', '       r"a"'),
])
def test_comments_next_to_literals_are_blanked_and_literals_kept(text, code, no_comments):
    lx = lex(text)
    assert (lx.code, lx.no_comments, lx.refusals) == (code, no_comments, ())


def test_from_an_invalid_escape_on_the_text_stays_code():
    """Lean's error recovery may read on as code after ``\\q``: nothing from the backslash on is blanked."""
    assert lex('"a\\q #eval 1"').code == '" \\q #eval 1"'


@pytest.mark.parametrize("text, starts, idents, refusals", [
    # `r` starts a raw string only before `#`* and `"` (isRawStrLitStart); at the end of the text it is a name
    ("x := r##", (0, 2, 3, 5, 6, 7), ((0, "x"), (5, "r")), ()),
    # takeDigitsFn: `_` then digits is one numeral now; Lean before separators reads `0` then the name `x_FF`
    ("0x_FF", (0, 1), ((1, "x_FF"),), ()),
    # ... a `_` with no digit after it is a lexical error: Lean resumes at any character it consumed
    ("0x_", (0, 1, 2), ((1, "x_"), (2, "_")), ()),
    # `12` then `'ab…` with no closing quote: resumed at `a`, `b` and the character after (charLitFnAux read it)
    ("12'abcd", (0, 2, 3, 4, 5), ((3, "abcd"), (4, "bcd"), (5, "cd")), ()),
    ("'ab", (0, 1, 2), ((1, "ab"), (2, "b")), ((0, MALFORMED_CHAR),)),  # at the start of the text: refused
])
def test_token_starts_after_numerals_raw_string_starts_and_unclosed_quotes(text, starts, idents, refusals):
    lx = lex(text)
    assert (lx.starts, lx.idents, lx.refusals) == (starts, idents, refusals)


@pytest.mark.parametrize("text, starts, idents", [
    # numberFnAux / decimalNumberFn / takeDigitsFn; Lean before `_` separators and scientific literals stops
    # after the plain digits and reads on from there (the second reading)
    ("0", (0,), ()),
    ("1090 x", (0, 5), ((5, "x"),)),  # every decimal digit, 0 and 9 included
    ("99", (0,), ()),
    ("ab 12", (0, 3), ((0, "ab"),)),  # both readings of a numeral after other text end after its digits
    ("1A", (0, 1), ((1, "A"),)),  # a letter ends the numeral
    ("0xg", (0, 1, 2), ((1, "xg"), (2, "g"))),  # `0x` needs a hex digit: an error, resumed at `x` and `g`
    ("0Xg", (0, 1, 2), ((1, "Xg"), (2, "g"))),  # upper-case prefixes too
    ("0b1X", (0, 1, 3), ((1, "b1X"), (3, "X"))),  # binary digits 0 and 1 only
    ("0o078", (0, 1, 4), ((1, "o078"),)),  # octal digits 0 to 7: `8` is the next numeral
    ("0x09afAFg", (0, 1, 8), ((1, "x09afAFg"), (8, "g"))),  # hex digits both cases
    ("1.5 x", (0, 1, 2, 4), ((4, "x"),)),  # scientific `1.5`; older: `1` `.` `5`
    ("1. x", (0, 1, 3), ((3, "x"),)),  # parseOptDot: a dot without digits after it still belongs to the numeral
    ("1e5 x", (0, 1, 4), ((1, "e5"), (4, "x"))),
    ("1E5", (0, 1), ((1, "E5"),)),
    ("1e+5 x", (0, 1, 2, 3, 5), ((1, "e"), (5, "x"))),
    ("1e-x", (0, 1, 2, 3), ((1, "e"), (3, "x"))),  # parseOptExp: missing exponent digits, an error
    ("1eX5", (0, 1, 2), ((1, "eX5"), (2, "X5"))),  # ... resumed at `e` and at the `X` it stopped on
    ("1e-xy", (0, 1, 2, 3), ((1, "e"), (3, "xy"))),
    ("12e", (0, 1, 2), ((2, "e"),)),
    ("ab 1e", (0, 3, 4), ((0, "ab"), (4, "e"))),  # the text ends in the exponent
    ("1.", (0, 1), ()),  # ... after the dot
    ("12.5", (0, 2, 3), ()),  # older Lean: `12`, `.`, `5`
])
def test_numerals_end_where_leans_number_parser_ends_them(text, starts, idents):
    lx = lex(text)
    assert (lx.starts, lx.idents, lx.refusals) == (starts, idents, ())


TAB_OR_CR = ("a tab or a lone carriage return outside comments and literals (Lean's whitespace refuses them, and its "
             "error recovery reads on as commands)")


@pytest.mark.parametrize("text, code, starts, refusals", [
    # Lean's whitespace: `--` runs to the line feed (or the end), `/-` nests; `/--` and `/-!` are doc-comment
    # tokens (kept as code, so the gate sees them) whose body is a nested comment; tabs and a CR without its LF
    # are errors; a space, control or format character that is no Lean whitespace starts no token
    ("x -- c", "x     ", (0,), ()),
    ("x -- c\ny", "x     \ny", (0, 7), ()),
    ("/-- d -/ x", "/--   -/ x", (0, 9), ()),
    ("/-! d -/ x", "/-!   -/ x", (0, 9), ()),
    ("/-- a /- b -/ c -/ x", "/--             -/ x", (0, 19), ()),
    ("/--/ x", "/--/ x", (0,), ((0, "unterminated comment (Lean reads the rest of the file as comment)"),)),
    ("x\r\ny", "x\r\ny", (0, 3), ()),
    ("x\ty", "x\ty", (0,), ((1, TAB_OR_CR),)),
    ("x\ry", "x\ry", (0,), ((1, TAB_OR_CR),)),
    ("x\u00a0y", "x\u00a0y", (0, 1, 2), ((1, "U+00A0 (Zs), which starts no Lean token and is no Lean whitespace "
                                            "(Lean's error recovery reads on after it)"),)),
    ("x\u200by", "x\u200by", (0, 1, 2), ((1, "U+200B (Cf), which starts no Lean token and is no Lean whitespace "
                                            "(Lean's error recovery reads on after it)"),)),
    ("x \u00a0yz", "x \u00a0yz", (0, 2, 3), ((2, "U+00A0 (Zs), which starts no Lean token and is no Lean "
                                               "whitespace (Lean's error recovery reads on after it)"),)),
])
def test_whitespace_comments_and_doc_comments_as_leans_whitespace_reads_them(text, code, starts, refusals):
    lx = lex(text)
    assert (lx.code, lx.starts, lx.refusals) == (code, starts, refusals)


@pytest.mark.parametrize("text, code, idents, refusals", [
    # nameLitAux: identFnAux with no token (so `--` after the name is a comment, not part of a longer token)
    ("`foo-- c", "`foo    ", ((1, "foo"),), ()),
    ("`«a b»-- c", "`«   »    ", (), ()),
    ('`"a"', '`" "', (), ()),  # a backquote before no identifier character: no name literal, the string follows
    ("x </- `a -/", "x </- `a -/", ((0, "x"), (7, "a")), ()),  # the backquote is code in the reading after `</-`
    ("x </- `«a -/", "x </- `     ", ((0, "x"),),
     ((7, "unterminated «» name (Lean reads the rest of the file as a name)"),)),
    # a line comment ends at the next line feed after it, not an earlier or later one
    ("a\nb -- c\nd", "a\nb     \nd", ((0, "a"), (2, "b"), (9, "d")), ()),
    ("x -- c\ny\nz", "x     \ny\nz", ((0, "x"), (7, "y"), (9, "z")), ()),
    ("x -- c\n\r\ny", "x     \n\r\ny", ((0, "x"), (9, "y")), ()),
    # a doc comment anywhere is a token; its body is a nested comment starting right after `/--`
    ("x /-- d -/ y", "x /--   -/ y", ((0, "x"), (11, "y")), ()),
    ("x /--d e-/\r\ny", "x /--   -/\r\ny", ((0, "x"), (12, "y")), ()),
    ("/--/- a -/ -/ x", "/--        -/ x", ((14, "x"),), ()),
    ("/-/- a -/ -/ x", "             x", ((13, "x"),), ()),  # finishCommentBlock: `/-/-` opens two levels
    ("xy /--d e-/\r\nz", "xy /--   -/\r\nz", ((0, "xy"), (13, "z")), ()),
    ("x /--d e-/ ", "x /--   -/ ", ((0, "x"),), ()),
    ("«a b» x", "«   » x", ((6, "x"),), ()),  # identFnAux: a «» escape's contents are blanked like a literal's
    # a name may be the prefix of a longer token of the table (`Type*`): the `--` after it may belong to it
    ("foo--bar", "foo--bar", ((0, "foo"), (5, "bar")), ()),
    ("x ''", "x ''", ((0, "x"),), ()),  # `''` starts no character literal: a token of the table (Mathlib)
    ('r"\\q"', 'r"  "', (), ()),  # rawStrLitFnAux: no escapes in a raw string
])
def test_name_literals_line_comments_and_comment_bodies_end_where_lean_ends_them(text, code, idents, refusals):
    lx = lex(text)
    assert (lx.code, lx.idents, lx.refusals) == (code, idents, refusals)


@pytest.mark.parametrize("text", ["`", "x `", ":= by exact `"])
def test_a_backquote_at_the_end_of_the_text_is_read_not_a_crash(text):
    """tokenFnAux: a backquote before the end of the input starts no name literal (no identifier character
    follows); the lexer read one character past the end there and raised instead of answering."""
    lx = lex(text)
    assert lx.refusals == () and lx.code == text and lx.starts[-1] == len(text) - 1
    assert forbidden_commands(":= by\n  exact x `") == []


@pytest.mark.parametrize("numeral, starts, idents", [
    # inside an interpolation's braces only the current Lean's reading counts, so where the numeral ends shows
    # in the next token's start: decimalNumberFn with parseOptDot and parseOptExp
    ("1e+5", (0, 2, 3, 4, 8), ()),
    ("1E5", (0, 2, 3, 4, 7), ()),
    ("1.5", (0, 2, 3, 4, 7), ()),
    ("1.e3", (0, 2, 3, 4, 8), ()),
    ("1.5E3", (0, 2, 3, 4, 9), ()),
    ("1_000", (0, 2, 3, 4, 9), ()),
    ("1.x", (0, 2, 3, 4, 6, 7), ((6, "x"),)),  # `1.` then the name `x`
    ("1.5X2", (0, 2, 3, 4, 7, 9), ((7, "X2"),)),  # only `e`/`E` starts an exponent
])
def test_a_numeral_in_an_interpolation_ends_where_lean_ends_it(numeral, starts, idents):
    lx = lex('s!"{' + numeral + '}"')
    assert (lx.starts, lx.idents, lx.refusals) == (starts, ((0, "s!"),) + idents, ())


@pytest.mark.parametrize("text, starts, idents", [
    # a table token holds no digit after its symbols: the numeral after `+` starts where the digits start
    ("+12", (0, 1), ()),
    ("+09", (0, 1), ()),
    ("+90", (0, 1), ()),
    # Lean before 2024 cuts identifiers at Latin-1 letters (not isIdFirst/isIdRest there), and reads on from there
    ("étheorem", (0, 1), ((0, "étheorem"), (1, "theorem"))),
    ("abéc d", (0, 2, 3, 5), ((0, "ab"), (0, "abéc"), (2, "éc"), (3, "c"), (5, "d"))),
    # identFnAux: `.` joins parts only before isIdFirst or `«` (isIdCont); a dotted name is no single identifier
    ("a.b", (0,), ()),
    ("a1.b", (0,), ()),
    ("a.", (0, 1), ((0, "a"),)),
    ("a.é", (0, 1, 2), ((0, "a"), (2, "é"))),  # older Lean: `a` `.` `é`
    ("«» x", (0, 3), ((3, "x"),)),  # an empty «» escape closes at once
])
def test_token_runs_and_identifier_cuts_in_every_reading(text, starts, idents):
    lx = lex(text)
    assert (lx.starts, lx.idents, lx.refusals) == (starts, idents, ())


def test_place_counts_lines_and_columns_from_the_text_it_is_given():
    assert place("ab", 1) == "line 1, column 1"
    assert place("\nx", 1) == "line 2, column 0"
    assert place("ab", 1, 10, 7) == "line 10, column 8"  # the first line starts at column 7
    assert place("ab\ncd", 4, 10, 7) == "line 11, column 1"  # later lines at column 0


@pytest.mark.parametrize("text, code, refusals", [
    # finishCommentBlock: `/` then `-` opens one more level, `-` then `/` closes one: `/--/` opens and closes
    ("/- /--/ -/ x", "           x", ()),
    ("x /- a -/\r\n  y", "x        \r\n  y", ()),  # the comment only: the CR LF after it is whitespace, kept
    ("x /- a", "x /- a", ((2, "unterminated comment (Lean reads the rest of the file as comment)"),)),
])
def test_block_comments_nest_and_end_where_lean_ends_them(text, code, refusals):
    lx = lex(text)
    assert (lx.code, lx.refusals) == (code, refusals)


@pytest.mark.parametrize("blanks, interpolated", [(0, True), (14, True), (15, False), (40, False)])
def test_a_string_far_after_its_s_bang_is_listed_ambiguous_not_read_as_text(blanks, interpolated):
    """The look-back for ``s!``/``m!``/``f!`` spans 16 characters: ``s!`` and at most 14 blanks. Lean reads a
    string farther from its ``s!`` as interpolated too (blanks may separate the two tokens); the gate then
    lists its ``{`` as ambiguous and refuses the text, rather than reading the braces as string contents."""
    text = "s!" + " " * blanks + '"{x}"'
    quote = 2 + blanks
    lx = lex(text)
    if interpolated:
        assert (lx.ambiguous, lx.idents) == ((), ((0, "s!"), (quote + 2, "x")))
    else:
        assert (lx.ambiguous, lx.idents) == ((quote,), ((0, "s!"),))
        assert forbidden_commands(text) == [
            f"line 1, column {quote}: '{{' in a string literal that is not s!/m!/f! (Lean may run it as code)"]
