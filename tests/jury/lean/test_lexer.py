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
from rewardkit.jury.lean.lexer import is_id_first, is_id_rest, lex

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
