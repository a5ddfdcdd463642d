"""Raw judge outputs for the verdict-parser regression table (tests/fixtures/judge_outputs.json).

The embedded judge (SmolLM2-135M-Instruct) answers a handful of each paper's judge prompts
(rewardkit/prompts) on the shared Qwen2.5-Math rollouts; the raw texts are saved with the parser that
reads them. The expected verdicts in the fixture are hand-checked afterwards (``expected`` and ``why``
fields), so a re-run only refreshes ``text`` for new rows and never overwrites a checked label:

    PYTHONPATH=. python benchmarks/judge_outputs.py [GROUPS]  # ~5 min per 6 groups on 2 shared cores

A held-out batch on further groups, at another temperature, is written to a scratch file (never the fixture) to be
checked by hand before its rows join the fixture (issue 34's audit: groups 7-18 at temperature 1.0):

    PYTHONPATH=. python benchmarks/judge_outputs.py 12 --start 6 --temperature 1.0 --out /tmp/batch.json

Each row names its source; rows from other sources (the papers' printed judge outputs, ids ``paper/...``; clear
verdicts hand-written in the forms instruct judges write, ids ``form/...``) are kept as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

from rewardkit.evals.data import rollouts_path

from rewardkit.backends import load_backend
from rewardkit.backends.base import ChatRequest
from rewardkit.prompts import arena, gar, jury, raro

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "judge_outputs.json"
PER_KIND = 6
CUT = 1200  # characters of each rollout shown to the judge (keeps the 135M model's prompts short)


def _groups(n: int, start: int = 0) -> list[dict]:
    rows = [json.loads(line) for line in rollouts_path().open()]
    mixed = [r for r in rows if 0 < sum(r["correct"]) < len(r["correct"])]
    ordered = list({r["id"]: r for r in mixed + rows}.values())  # mixed groups first, each group once
    return ordered[start:start + n]


def _requests(n: int = PER_KIND, start: int = 0) -> list[tuple[str, str, list[dict]]]:
    """(id, parser name, chat messages) for each judge prompt kind on ``n`` groups from the ``start``-th."""
    out = []
    for k, g in enumerate(_groups(n, start), start):
        good = g["responses"][g["correct"].index(True)] if True in g["correct"] else g["responses"][0]
        bad = g["responses"][g["correct"].index(False)] if False in g["correct"] else g["responses"][-1]
        a, b = (good, bad) if k % 2 == 0 else (bad, good)
        a, b, good = a[-CUT:], b[-CUT:], good[-CUT:]
        pid, prob, ref = g["id"], g["problem"], g["answer"]
        user = [{"role": "user", "content": arena.tournament_prompt(prob, ref, a, b)}]
        out.append((f"{pid}/arena.tournament", "ab_tie", user))
        user = [{"role": "user", "content": arena.pointwise_prompt(prob, ref, bad[-CUT:] if k % 2 else good)}]
        out.append((f"{pid}/arena.pointwise", "score", user))
        piece = (bad if k % 2 else good)[:600]
        out.append((f"{pid}/gar.discriminator", "yes_no", gar.discriminator_messages(prob, piece)))
        user = [{"role": "user", "content": raro.critic_user_prompt(prob, a, b)}]
        out.append((f"{pid}/raro.critic", "answer_choice", user))
        user = [{"role": "user", "content": raro.binary_critic_user_prompt(prob, (bad[-CUT:] if k % 2 else good))}]
        out.append((f"{pid}/raro.binary_critic", "expert_policy", user))
        answer = ref if k % 2 == 0 else g["preds"][g["correct"].index(False)] if False in g["correct"] else ref + "1"
        msgs = [{"role": "system", "content": jury.LLM_JUDGE_SYSTEM},
                {"role": "user", "content": jury.LLM_JUDGE_USER.format(problem=prob, answer=answer)}]
        out.append((f"{pid}/jury.llm_judge", "true_false", msgs))
        formal = f"theorem test_problem : (answer : ℚ) = {ref} := by sorry"
        msgs = [{"role": "system", "content": jury.CONSISTENCY_SYSTEM},
                {"role": "user", "content": jury.CONSISTENCY_USER.format(
                    informal_prefix=jury.INFORMAL_QA.format(problem=prob, answer=ref), formal_statement=formal)}]
        out.append((f"{pid}/jury.consistency", "consistency", msgs))
    return out


SOURCE = "SmolLM2-135M-Instruct (benchmarks/judge_outputs.py)"
TEMPERATURE = 0.7


def _source(start: int, temperature: float) -> str:
    """The row's source: the default run's name, or one naming the groups' offset and the temperature."""
    if start == 0 and temperature == TEMPERATURE:
        return SOURCE
    return f"SmolLM2-135M-Instruct (benchmarks/judge_outputs.py --start {start} --temperature {temperature})"


def main(n: int = PER_KIND, start: int = 0, temperature: float = TEMPERATURE, out: Path | None = None) -> None:
    """Generate the outputs not yet checked into the fixture, or (``out``) a fresh batch into a scratch file."""
    table = json.loads(FIXTURE.read_text()) if FIXTURE.exists() else {"source": SOURCE, "outputs": []}
    old = {} if out is not None else {r["id"]: r for r in table["outputs"]}
    reqs = _requests(n, start)
    new = [(i, r) for i, r in enumerate(reqs) if old.get(r[0], {}).get("expected", "?") == "?"]
    judge = load_backend("smollm2")  # only rows not yet checked are generated (same seeds as a full run)
    comps = judge.generate([ChatRequest(m, max_tokens=192, temperature=temperature, seed=i) for i, (_, _, m) in new])
    fresh = {r[0]: c for (_, r), c in zip(new, comps, strict=True)}
    rows = []
    for rid, parser, _ in reqs:
        row = old.get(rid, {"id": rid, "parser": parser, "expected": "?", "why": "", "source": _source(start, temperature)})
        if rid in fresh:
            row["text"] = fresh[rid].text
            row["finish_reason"] = fresh[rid].finish_reason()  # rows from before issue 21 have none recorded
        rows.append(row)
    if out is not None:
        out.write_text(json.dumps({"source": _source(start, temperature), "outputs": rows}, indent=1,
                                  ensure_ascii=False) + "\n")
        return
    asked = {r[0] for r in reqs}
    rows += [r for rid, r in old.items() if rid not in asked]  # rows from other sources, or from a larger run
    FIXTURE.write_text(json.dumps({"source": table["source"], "outputs": rows}, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("groups", type=int, nargs="?", default=PER_KIND)
    ap.add_argument("--start", type=int, default=0, help="skip this many groups (mixed groups come first)")
    ap.add_argument("--temperature", type=float, default=TEMPERATURE)
    ap.add_argument("--out", type=Path, default=None, help="write the batch here instead of merging into the fixture")
    a = ap.parse_args()
    main(a.groups, a.start, a.temperature, a.out)
