"""The prompt registry: paper prompts found by name, placeholders checked."""

from __future__ import annotations

import pytest

from rewardkit.prompts import get_prompt, prompt_names, register, render


def test_paper_prompts_are_found_by_name():
    names = prompt_names()
    assert "jury.autoformalizer" in names  # rewardkit/prompts/jury.py, App. C.5
    p = get_prompt("jury.autoformalizer")
    assert p.fields == ("theorem_name", "informal_statement_content")
    text = p.format(theorem_name="t1", informal_statement_content="1+1=2")
    assert "Use the following theorem name: t1" in text and "{" not in text.replace("{{", "")


def test_registered_template_keeps_literal_braces_and_checks_fields():
    register("test.pair", "A: {a}\nB: {b}\nEnd with \\boxed{{A}} or \\boxed{{B}}.")
    assert render("test.pair", a="x", b="y") == "A: x\nB: y\nEnd with \\boxed{A} or \\boxed{B}."
    with pytest.raises(KeyError, match=r"missing \['b'\]"):
        render("test.pair", a="x")
    with pytest.raises(KeyError, match=r"unknown \['c'\]"):
        render("test.pair", a="x", b="y", c="z")
    with pytest.raises(KeyError, match="no prompt named"):
        get_prompt("nope.nothing")
    with pytest.raises(ValueError):
        register("test.bad", "unclosed {brace")
