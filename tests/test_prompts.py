"""The prompt registry: paper prompts found by name, placeholders checked."""

from __future__ import annotations

import pytest

from rewardkit.prompts import get_prompt, judge_spec, judge_spec_names, prompt_names, register, render


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


def test_a_registered_override_reaches_every_scorer_prompt():
    from rewardkit.arena.scorers import TournamentScorer
    from rewardkit.gar.slices import SliceScorer
    from rewardkit.prompts import get_prompt, register
    from rewardkit.raro.critic import CriticScorer
    from rewardkit.testing import ScriptedJudge
    from rewardkit.types import Group

    names = ("arena.tournament", "raro.critic_body", "gar.discriminator_user")
    saved = {n: get_prompt(n) for n in names}
    try:
        register("arena.tournament", "OVERRIDE-T {problem} {final_answer} {response_a} {response_b}")
        register("raro.critic_body", "OVERRIDE-C {question} {answer_1} {answer_2}")
        register("gar.discriminator_user", "OVERRIDE-G {problem} {context} {slice}")
        judge = ScriptedJudge(probs=lambda prompt, choices: [1 / len(choices)] * len(choices))
        g = Group("g", "What is 1+1?", ["\\boxed{2}", "\\boxed{3}"], reference="2", expert="\\boxed{2}")
        TournamentScorer(judge=judge, mode="logit").score([g])
        CriticScorer(judge=judge, mode="logit").score([g])
        SliceScorer(judge=judge, mode="logit").score([g])
        for mark in ("OVERRIDE-T", "OVERRIDE-C", "OVERRIDE-G"):
            assert any(mark in p for p in judge.prompts), mark
    finally:
        for n, p in saved.items():
            register(n, p.text, p.source)


def test_every_judge_prompt_declares_its_verdict_form_and_states_its_tokens():
    """A format owned by its prompt (DESIGN.md sec. 6): each judge template has a verdict form, and the
    template (as the judge reads it) names every token of that form."""
    names = judge_spec_names()
    assert set(names) == {"arena.tournament", "arena.pointwise", "arena.rlaif_rubric", "gar.discriminator_system",
                          "jury.llm_judge_system", "jury.consistency_system", "raro.critic_instructions",
                          "raro.binary_critic_instructions"}
    for name in names:
        spec = judge_spec(name)
        shown = spec.template.text.replace("{{", "{").replace("}}", "}")  # as the judge reads it
        assert spec.form.tokens and all(t in shown for t in spec.form.tokens), (name, spec.form.tokens)


def test_a_judge_spec_parses_what_its_template_asks_for_and_keeps_its_form_when_replaced():
    from rewardkit.backends.base import VerdictRequest

    spec = judge_spec("arena.tournament")
    assert "[RESPONSE A]\nx" in spec.render(problem="p", final_answer="1", response_a="x", response_b="y")
    assert spec.parse("Response A is right. Therefore, Response A is better.  $\\boxed{A}$").label == "A"
    req = spec.verdict_request([{"role": "user", "content": "q"}])
    assert isinstance(req, VerdictRequest) and (req.choices, req.assistant_prefix) == (("A", "B", "Tie"),
                                                                                       "Final verdict: \\boxed{")
    saved = get_prompt("arena.tournament")
    try:
        register("arena.tournament", "Mine: {problem} {final_answer} {response_a} {response_b}")
        replaced = judge_spec("arena.tournament")
        assert replaced.render(problem="p", final_answer="1", response_a="x", response_b="y") == "Mine: p 1 x y"
        assert replaced.form is spec.form and replaced.parse("\\boxed{B}").label == "B"
    finally:
        register(saved.name, saved.text, saved.source)
    with pytest.raises(KeyError, match="declares no verdict form"):
        judge_spec("jury.autoformalizer")
    with pytest.raises(ValueError, match="no logit-mode choices"):
        judge_spec("jury.consistency_system").verdict_request([])


def test_gar_discriminator_messages_follow_app_b():
    """GAR App. B prints the discriminator's system prompt and no user turn: the system message is the paper's,
    verbatim, and the user turn (ours) only lays out the problem, the context and the slice; it adds no output
    format of its own (before issue 34 it asked for the verdict "at the start of a line of its own", which the
    paper's own judgments, Table 10, do not do)."""
    from rewardkit.prompts.gar import discriminator_messages

    system, user = discriminator_messages("What is 2 + 3?", "2 + 3 = 5.", context="We add.")
    assert system == {"role": "system", "content": (
        "You are an evaluator responsible for assessing whether a reasoning / thinking process is reasonable, "
        "rigorous, and accurate. Based on these criteria, determine if the analysis is of high quality. First, "
        "analyze the reasoning very briefly, then respond with '**YES**' for high quality or '**NO**' if it is "
        "not. Finally, provide a brief but specific explanation for your judgment. Hint: You can first summarize "
        "the given thinking process to identify the main reasoning chain, then analyze the reasoning chain "
        "sentence by sentence.")}  # GAR App. B, "System prompt for the LLM discriminator"
    assert user["role"] == "user"
    assert all(part in user["content"] for part in ("What is 2 + 3?", "2 + 3 = 5.", "We add."))
    for instruction in ("YES", "NO", "line of its own", "rationale", "Analyze"):
        assert instruction not in user["content"], instruction
