"""End to end (issue 34): an OpenAI-compatible judge on 127.0.0.1 (``serve-judge``'s JudgeServer over a scripted
backend) answers every rewardkit judge prompt in the style of the papers' printed judge outputs (Reasoning Arena
App. C, GAR Tables 2 and 10, RARO App. E Figs. 19-20, JURY-RL App. H); behind the real HTTP backend, every judge
scorer reads every verdict on the shared rollouts.
Before issue 34, arena, tournament, slices and holistic read none of them (48 of 48 responses invalid)."""

from __future__ import annotations

import hashlib

import pytest

from rewardkit.backends import load_backend
from rewardkit.backends.server import JudgeServer
from rewardkit.runtime.jobs import load_groups
from rewardkit.scoring import get_scorer
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Status

JUDGE_SCORERS = ["arena", "tournament", "pointwise", "adaptive-pointwise", "slices", "holistic", "critic",
                 "critic-binary", "llm-judge", "llm-judge-rollout"]


def _pick(prompt: str, *options: str) -> str:
    """One of ``options``, fixed by the prompt (a judge that answers the same prompt the same way)."""
    return options[int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(options)]


def paper_style_reply(prompt: str) -> str:
    """A judgment of ``prompt`` (the judge's last message) written as the paper of that prompt prints its judge's
    outputs."""
    if "[RESPONSE A]" in prompt:  # Reasoning Arena App. C: one paragraph ending in the box, or a short last line
        w = _pick(prompt, "A", "B")
        lose = "B" if w == "A" else "A"
        return _pick(prompt + "style",
                     f"Both responses correctly determine the answer. However, Response {w} explicitly states why each "
                     f"step holds, making the reasoning more complete and rigorous. Response {lose}, while correct, omits "
                     f"this explicit justification, leaving a slight gap. Therefore, Response {w} is better.  "
                     f"$\\boxed{{{w}}}$",
                     f"We need to compare the two solution attempts. Both are wrong, but we need to decide which is "
                     f"better based on reasoning quality and final answer closeness.\n\nResponse {lose} gives an "
                     f"unsupported guess, with minimal reasoning. Response {w} attempts to derive a pattern from small "
                     f"cases.\n\nThus {w} is better.  $\\boxed{{{w}}}$")
    if "Based on my evaluation, the final overall score should be" in prompt:  # RLAIF rubric, App. D
        score = _pick(prompt, "1", "0.5", "0")
        return ("Here is my evaluation of the response: the key steps set up the equation and solve it. "
                f"Based on my evaluation, the final overall score should be: $\\boxed{{{score}}}$")
    if "[RESPONSE]" in prompt:  # adaptive pointwise, App. D, in App. C's style
        score = _pick(prompt, "1", "0.5", "0")
        return ("The response sets up the problem and carries out each step; its final answer is compared with the "
                f"reference answer. Therefore, the score is  $\\boxed{{{score}}}$")
    if "Reasoning to evaluate:" in prompt:  # GAR Table 10 (inline) and Table 2 (HTML paragraphs)
        return _pick(prompt,
                     "<p>The reasoning examines the case and <u>correctly concludes the value, leading to a consistent "
                     "result.</u>  **YES**</p> <p>The reasoning is rigorous and accurate. The logic is clear, "
                     "step-by-step.</p>",
                     "<p>The reasoning lists the computation. <u>It then claims a result without verifying it.</u></p> "
                     "<p><b>**NO**</b></p> <p>The reasoning jumps to a conclusion without checking the count.</p>")
    if "<answer_1>" in prompt:  # RARO App. E, Figs. 19 and 20
        w = _pick(prompt, "1", "2")
        return _pick(prompt + "style",
                     f"<think>\n\nLet's evaluate both answers step by step.\n\nSo, the better one is Answer {w}.\n\n"
                     f"</think>\n\nAnswer {w}",
                     f"<think>\n\nTo evaluate these answers, we consider each step.\n\n</think>\n\nFinal Judgment:\n"
                     f"Answer {w}")
    if "<answer>" in prompt:  # RARO binary critic, in Fig. 20's layout
        return f"<think>\n\nThe derivation reads carefully.\n\n</think>\n\nFinal Judgment:\n{_pick(prompt, 'Expert', 'Policy')}"
    if prompt.startswith("Question:"):  # JURY-RL App. H
        return _pick(prompt,
                     "To evaluate whether the given answer is correct for the problem, we need to solve it.\n\n"
                     "This value matches the given answer. Therefore, the given answer is correct.\n\nFinal judgment: True.",
                     "To evaluate whether the given answer is correct for the problem, we need to solve it.\n\n"
                     "This value does not match the given answer. Therefore, the given answer is incorrect.\n\n"
                     "Final judgment: False.")
    raise AssertionError(f"no paper style for this prompt: {prompt[:200]!r}")


@pytest.fixture(scope="module")
def groups(rollouts_path):
    return load_groups(rollouts_path)[0][:2]


@pytest.mark.parametrize("name", JUDGE_SCORERS)
def test_every_judge_scorer_reads_a_judge_that_writes_as_the_papers_print(name, groups):
    judge = ScriptedJudge(reply=paper_style_reply)
    with JudgeServer(judge, port=0, model_name="paper-style") as server:
        scores = get_scorer(name, judge=load_backend(f"{server.url}?model=paper-style"), mode="generate").score(groups)
    assert judge.requests  # every verdict came over HTTP
    statuses = [s for score in scores for s in score.statuses]
    assert len(statuses) == sum(len(g.responses) for g in groups)
    why = [m for score in scores for m in (score.messages or []) if m]
    assert all(s is Status.OK for s in statuses), (name, [s.value for s in statuses], why[:2])


@pytest.mark.parametrize("name", ["arena", "tournament", "slices", "holistic"])
def test_rewardkit_score_reads_the_paper_style_judge(name, rollouts_path, tmp_path):
    """The issue's own run: `rewardkit score ROWS --scorer NAME --judge http://...` in a subprocess, 2 groups of the
    shared rollouts; every response's status is ok (before issue 34: 16 of 16 invalid for these four)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(rollouts_path.read_text().splitlines(keepends=True)[:2]))
    out = tmp_path / "out.jsonl"
    cli = [sys.executable, "-c", "import conftest; from rewardkit.cli.app import main; main()"]  # this checkout's CLI
    with JudgeServer(ScriptedJudge(reply=paper_style_reply), port=0, model_name="paper-style") as server:
        res = subprocess.run([*cli, "score", str(rows), "--scorer", name, "--judge", f"{server.url}?model=paper-style",
                              "-o", "mode=generate", "--out", str(out)], capture_output=True, text=True, timeout=300,
                             cwd=Path(__file__).resolve().parents[1])
    assert res.returncode == 0, res.stderr[-2000:]
    statuses = [s for line in out.read_text().splitlines() for s in json.loads(line)["statuses"]]
    assert len(statuses) == 16 and set(statuses) == {"ok"}, statuses
