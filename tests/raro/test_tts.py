"""Test-time scaling: Algorithm 3 tournament, BT selection, prompt judges (with a test double) and baselines."""

from __future__ import annotations

import json
import re
from itertools import combinations

import numpy as np
import pytest
from rewardkit.evals.tts import accuracy_table, evaluate_tts, majority_pick, plot_accuracy
from scipy import stats

from rewardkit.raro.tts import (
    CachedJudge,
    Pairing,
    PromptJudge,
    TTSOptions,
    bt_select,
    decide,
    round_robin,
    single_elimination,
)
from rewardkit.runtime.inputs import group_from_record
from rewardkit.testing import ScriptedJudge
from rewardkit.types import Group


class StrengthJudge:
    """Deterministic pairwise judge: the candidate with the higher latent strength gets every vote."""

    def __init__(self, strengths: dict[tuple[int, int], float], invalid: set[tuple[int, int, int]] = frozenset()):
        self.s = strengths
        self.invalid = invalid
        self.batches: list[list[Pairing]] = []

    def __call__(self, matches, k):
        self.batches.append(list(matches))
        out = []
        for m in matches:
            if (m.problem, m.a, m.b) in self.invalid:
                out.append([None] * k)
                continue
            sa, sb = self.s[(m.problem, m.a)], self.s[(m.problem, m.b)]
            out.append(["A" if sa > sb else "B" if sb > sa else "tie"] * k)
        return out


# ---------------------------------------------------------------------------------------- decide


def test_decide_paper_rule_is_algorithm_3_line_8():
    assert decide(["A", "A", "A", "B"], 4) == (True, "ok")
    assert decide(["A", "A", "B", "B"], 4) == (False, "split")  # v_A = K/2 is not > K/2: y_B advances
    assert decide(["B", "B", "B", "tie"], 4) == (False, "ok")
    assert decide(["tie"] * 4, 4) == (False, "split")
    assert decide(["A", "A", None, None], 4) == (False, "split")


def test_all_invalid_votes_keep_the_earlier_candidate_and_say_so():
    for rule in ("paper", "plurality"):
        assert decide([None] * 4, 4, rule) == (True, "invalid")


def test_decide_plurality():
    assert decide(["A", "tie", None, "tie"], 4, "plurality") == (True, "ok")
    assert decide(["B", "A", "B", None], 4, "plurality") == (False, "ok")
    assert decide(["B", "A", "tie", "tie"], 4, "plurality") == (True, "split")
    with pytest.raises(ValueError):
        decide(["A"], 1, "coin")


# ---------------------------------------------------------------------------------------- Algorithm 3


@pytest.mark.parametrize("n", range(1, 18))
def test_a_perfect_judge_crowns_the_strongest_for_any_pool_size(n):
    rng = np.random.default_rng(n)
    s = rng.permutation(n)
    judge = StrengthJudge({(0, i): float(s[i]) for i in range(n)})
    (sel,) = single_elimination([list(range(n))], judge, k=4)
    assert sel.winner == int(np.argmax(s))
    assert len(sel.matches) == n - 1  # single elimination: every match eliminates exactly one
    assert len(judge.batches) == int(np.ceil(np.log2(n))) if n > 1 else judge.batches == []


def test_bracket_pairs_in_order_with_a_bye_for_the_odd_one():
    # strengths make the lower index win, so the bracket is easy to read off
    judge = StrengthJudge({(0, i): -i for i in range(5)})
    (sel,) = single_elimination([[0, 1, 2, 3, 4]], judge, k=3)
    got = [(r.round, r.match.a, r.match.b, r.winner) for r in sel.matches]
    assert got == [(0, 0, 1, 0), (0, 2, 3, 2), (1, 0, 2, 0), (2, 0, 4, 0)]


def test_rounds_are_batched_across_problems():
    s = {(0, i): i for i in range(8)} | {(1, i): -i for i in range(3)} | {(2, 0): 0}
    judge = StrengthJudge(s)
    sels = single_elimination([list(range(8)), [0, 1, 2], [0]], judge, k=2)
    assert [x.winner for x in sels] == [7, 0, 0]
    assert [len(b) for b in judge.batches] == [4 + 1, 2 + 1, 1]  # one judge call per round


def test_invalid_match_is_recorded_not_hidden():
    judge = StrengthJudge({(0, 0): 0, (0, 1): 5}, invalid={(0, 0, 1)})
    (sel,) = single_elimination([[0, 1]], judge, k=4)
    assert sel.winner == 0 and sel.matches[0].status == "invalid"


# ---------------------------------------------------------------------------------------- Bradley-Terry


def test_bt_on_votes_recovers_known_strengths():
    """Votes simulated from known BT strengths, turned into soft matches, recover the strengths."""
    from rewardkit.arena.ranking import bradley_terry
    from rewardkit.raro.tts import PairingResult, vote_matches

    true = np.array([0.0, 0.7, 1.5, -0.8])
    rng = np.random.default_rng(0)
    results = []
    for i, j in combinations(range(4), 2):
        p = 1 / (1 + np.exp(-(true[i] - true[j])))
        votes = ["A" if x else "B" for x in rng.random(3000) < p]
        results.append(PairingResult(Pairing(0, i, j), votes, i, "ok", 0))
    results.append(PairingResult(Pairing(0, 0, 1), [None, "tie"], 0, "ok", 0))
    data = vote_matches(results, [0, 1, 2, 3])
    assert data.shape == (6 * 3000 + 1, 3) and data[-1].tolist() == [0, 1, 0.5]  # invalid votes dropped
    est = bradley_terry(4, data, l2=1e-6, mirror=False)
    np.testing.assert_allclose(est - est.mean(), true - true.mean(), atol=0.08)


def test_bt_select_round_robin_picks_the_copeland_winner_with_a_perfect_judge():
    s = {(0, i): v for i, v in enumerate([3, 9, 1, 4, 7])}
    judge = StrengthJudge(s)
    (sel,) = bt_select([[0, 1, 2, 3, 4]], judge, k=2, schedule="round_robin")
    assert sel.winner == 1 and len(sel.matches) == 10
    assert np.argsort(sel.scores).tolist() == [2, 0, 3, 4, 1]


def test_bt_on_tournament_matches_agrees_with_the_bracket_winner():
    rng = np.random.default_rng(3)
    for trial in range(20):
        n = int(rng.integers(2, 10))
        s = {(0, i): float(x) for i, x in enumerate(rng.permutation(n))}
        (t,) = single_elimination([list(range(n))], StrengthJudge(s), 4)
        (b,) = bt_select([list(range(n))], StrengthJudge(s), 4, schedule="tournament")
        assert b.winner == t.winner, trial


def test_round_robin_is_one_batch():
    judge = StrengthJudge({(p, i): i for p in range(2) for i in range(4)})
    res = round_robin([[0, 1, 2, 3], [0, 1]], judge, 1)
    assert len(judge.batches) == 1 and [len(r) for r in res] == [6, 1]


# ---------------------------------------------------------------------------------------- prompt judges

_A1 = re.compile(r"<answer_1>\n(.*?)\n</answer_1>", re.S)
_A2 = re.compile(r"<answer_2>\n(.*?)\n</answer_2>", re.S)
_RA = re.compile(r"\[RESPONSE A\]\n+(.*?)\n+\[RESPONSE B\]\n+(.*?)\n+Which", re.S)


def PickRight(biased: bool = False) -> ScriptedJudge:  # noqa: N802 - reads like the class it replaces
    """Scripted pairwise judge: prefers the answer that equals '42' (or always the first shown when biased)."""

    def first_better(text):
        m = _A1.search(text)
        a, b = (m.group(1), _A2.search(text).group(1)) if m else _RA.search(text).groups()
        if biased:
            return True
        a_right, b_right = ("\\boxed{42}" in x or x.strip() == "42" for x in (a, b))  # any answer view
        if a_right == b_right:
            return None
        return a_right

    def reply(text):
        f = first_better(text)
        if "[RESPONSE A]" in text:
            return "\\boxed{Tie}" if f is None else ("\\boxed{A}" if f else "\\boxed{B}")
        return "tie" if f is None else ("Answer 1" if f else "Answer 2")

    def probs(text, choices):
        f = first_better(text)
        return [0.0, 0.0, 1.0] if f is None else [1.0, 0.0, 0.0] if f else [0.0, 1.0, 0.0]

    return ScriptedJudge(reply, probs, model_id="pick-right", prompt_tokens=5, completion_tokens=2)


def _problem(right_at: int, n: int = 8):
    return [f"The answer is \\boxed{{{42 if i == right_at else 40 + i % 2}}}" for i in range(n)]


@pytest.mark.parametrize("judge_kind", ["critic", "tournament"])
@pytest.mark.parametrize("mode", ["generate", "logit"])
@pytest.mark.parametrize("order", ["fixed", "alternate"])
def test_prompt_judge_maps_votes_back_through_swaps(judge_kind, mode, order):
    cands = [_problem(r) for r in (0, 5, 7)]
    backend = PickRight()
    judge = PromptJudge(backend, ["q"] * 3, cands, prompt=judge_kind, mode=mode, order=order)
    sels = single_elimination([list(range(8))] * 3, judge, k=4)
    assert [s.winner for s in sels] == [0, 5, 7]
    assert len(backend.batches) == 3  # one backend call per round, all problems together
    per_match = 1 if order == "fixed" else 2
    assert backend.batches[0][1] == 3 * 4 * (per_match if mode == "logit" or order == "alternate" else 1)


def test_alternating_order_neutralises_a_position_biased_judge():
    cands = [_problem(3)]
    fixed = PromptJudge(PickRight(biased=True), ["q"], cands, mode="generate", order="fixed")
    alt = PromptJudge(PickRight(biased=True), ["q"], cands, mode="generate", order="alternate")
    assert fixed([Pairing(0, 2, 3)], 4) == [["A"] * 4]
    assert alt([Pairing(0, 2, 3)], 4) == [["A", "B", "A", "B"]]  # each orientation votes for what it shows first


def test_prompt_judge_votes_nothing_for_a_sample_cut_off_for_length():
    """Of the K samples of one match, the one that stopped for length is no vote (it used to be read)."""
    from rewardkit.backends.base import Completion

    backend = ScriptedJudge(lambda text: Completion(["Answer 1", "Answer 1"], finish_reasons=["stop", "length"]))
    judge = PromptJudge(backend, ["q"], [_problem(3)], mode="generate", order="fixed")
    assert judge([Pairing(0, 2, 3)], 2) == [["A", None]]


def test_prompt_judge_keeps_every_generated_output_with_the_vote_read_from_it():
    """A generate-mode run keeps each judge text beside its vote, with the candidates in the order shown, so a run's
    verdicts can be re-read and checked later (the TTS results files hold them)."""
    judge = PromptJudge(PickRight(biased=True), ["q"], [_problem(3)], mode="generate", order="alternate")
    assert judge([Pairing(0, 2, 3)], 2) == [["A", "B"]]
    assert [(o["shown"], o["text"], o["vote"]) for o in judge.outputs] == [([2, 3], "Answer 1", "A"),
                                                                              ([3, 2], "Answer 1", "B")]
    logit = PromptJudge(PickRight(), ["q"], [_problem(3)], mode="logit")
    logit([Pairing(0, 2, 3)], 2)
    assert logit.outputs == []  # logit mode writes no text


def test_cached_judge_shares_matches_across_n():
    backend = PickRight()
    judge = CachedJudge(PromptJudge(backend, ["q"], [_problem(6)], mode="logit"))
    single_elimination([[0, 1, 2, 3]], judge, 4)
    before = len(backend.batches)
    (sel,) = single_elimination([list(range(8))], judge, 4)
    assert sel.winner == 6 and judge.hits == 3  # the N=4 bracket is the left half of the N=8 one
    assert len(backend.batches) - before == 3


# ---------------------------------------------------------------------------------------- evaluation


def _load(path, n=None):
    rows = [json.loads(line) for line in path.read_text().splitlines()][:n]
    return [group_from_record(r) for r in rows]


class LabelJudge:
    """Perfect referee built from the correctness labels (a correct answer beats a wrong one; else tie)."""

    def __init__(self, problems):
        self.p = problems
        self.matches = 0

    def __call__(self, matches, k):
        self.matches += len(matches)
        out = []
        for m in matches:
            la, lb = self.p[m.problem].labels[m.a], self.p[m.problem].labels[m.b]
            out.append(["A" if la > lb else "B" if lb > la else "tie"] * k)
        return out


def test_on_real_rollouts_a_perfect_judge_reaches_pass_at_n_and_baselines_are_right(rollouts_path):
    problems = _load(rollouts_path)
    res = evaluate_tts(problems, [1, 2, 4, 8], LabelJudge(problems), k=2, rule="plurality")
    acc = {(r["method"], r["n"]): r["accuracy"] for r in res["rows"]}
    assert acc[("oracle", 8)] == 0.96  # README: 4 of 100 problems have no correct sample
    assert acc[("random", 8)] == pytest.approx(728 / 800)  # README: 728/800 responses correct
    for n in (1, 2, 4, 8):
        assert acc[("tournament", n)] == acc[("oracle", n)]
        assert acc[("random", n)] <= acc[("oracle", n)]
    for m in ("majority", "random", "oracle", "rm", "tournament"):
        assert acc[(m, 1)] == acc[("random", 1)]  # N = 1: every method returns the first sample


def test_skip_uniform_changes_no_accuracy_and_saves_matches(rollouts_path):
    problems = _load(rollouts_path, 40)
    full, skip = LabelJudge(problems), LabelJudge(problems)
    a = evaluate_tts(problems, [4, 8], full, k=1, methods=("tournament",), skip_uniform=False)
    b = evaluate_tts(problems, [4, 8], skip, k=1, methods=("tournament",), skip_uniform=True)
    assert a["rows"] == b["rows"]
    assert skip.matches < full.matches / 3 and b["skipped_uniform"][8] > 0


def test_majority_pick_ties_go_to_the_first_seen_cluster():
    assert majority_pick([], [0, 1, 1, 0, 2]) == 0
    assert majority_pick([], [0, 1, 1, 2]) == 1
    assert majority_pick([], [None, None]) == 0
    assert majority_pick(["1/2", "0.5", "3"]) == 0  # math-verify clusters 1/2 with 0.5


def test_table_and_plot(tmp_path):
    rows = [{"n": n, "method": m, "accuracy": a} for n in (1, 2) for m, a in (("oracle", 0.5 * n), ("tournament", 0.4))]
    t = accuracy_table(rows)
    assert t.splitlines()[0] == "| method | N=1 | N=2 |"
    assert "| tournament | 40.0 | 40.0 |" in t and "| oracle | 50.0 | 100.0 |" in t
    p = tmp_path / "x.png"
    plot_accuracy(rows, str(p))
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_binomial_sanity_of_random_baseline_expectation():
    # random choice's reported accuracy is its exact expectation; a simulation agrees with it
    problems = [Group("a", "q", ["a"] * 4, labels=[True, False, False, True]),
                Group("b", "q", ["a"] * 4, labels=[False] * 3 + [True])]
    res = evaluate_tts(problems, [4], None, extract=lambda s: None)
    acc = {r["method"]: r["accuracy"] for r in res["rows"]}
    rng = np.random.default_rng(0)
    sims = [np.mean([p.labels[rng.integers(4)] for p in problems]) for _ in range(4000)]
    assert stats.ttest_1samp(sims, acc["random"]).pvalue > 1e-3 and acc["random"] == 0.375


@pytest.mark.model
def test_real_model_tournament_mechanics(judge_backend):
    cands = [["\\boxed{42}", "\\boxed{41}"], ["\\boxed{7}", "\\boxed{8}"], ["\\boxed{1}"]]
    judge = PromptJudge(judge_backend, ["What is 6*7?", "What is 3+4?", "1?"], cands, mode="logit", order="fixed")
    sels = single_elimination([[0, 1], [0, 1], [0]], judge, k=4)
    assert [len(s.matches) for s in sels] == [1, 1, 0] and sels[2].winner == 0
    assert judge.calls == 1  # one round, both matches in one backend call
    assert judge.cost.judge_calls + judge.cost.cache_hits == 2  # fixed order: one forward pass per match
    for s in sels[:2]:
        (r,) = s.matches
        assert len(r.votes) == 4 and set(r.votes) <= {"A", "B", "tie"}
        assert r.winner == (r.match.a if decide(r.votes, 4)[0] else r.match.b)


def test_cli_tts_writes_table_json_and_plot(tmp_path, monkeypatch):
    import typer
    from rewardkit.cli.tts import tts
    from typer.testing import CliRunner

    import rewardkit.backends

    rows = [
        {"id": "p0", "problem": "6*7?", "answer": "42", "correct": [False, False, True, False],
         "responses": ["\\boxed{40}", "\\boxed{41}", "\\boxed{42}", "\\boxed{41}"]},
        {"id": "p1", "problem": "6*7?", "answer": "42", "correct": [True, True, True, True],
         "responses": ["\\boxed{42}"] * 4},
    ]
    data = tmp_path / "r.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    backend = PickRight()
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: backend)
    app = typer.Typer()
    app.command()(tts)
    out = tmp_path / "res" / "tts"
    res = CliRunner().invoke(app, [str(data), "--n", "1,2,4", "--k", "2", "--mode", "logit", "--methods",
                                   "tournament,bt", "--order", "alternate", "--view", "final", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "| tournament | 50.0 | 50.0 | 100.0 |" in res.output  # the double judge finds 42 once it is in the pool
    assert "| oracle | 50.0 | 50.0 | 100.0 |" in res.output
    saved = json.loads((tmp_path / "res" / "tts.json").read_text())
    assert saved["skipped_uniform"] == {"1": 0, "2": 2, "4": 1}  # N=1 pools need no judge anyway
    assert (tmp_path / "res" / "tts.png").exists() and "## Command" in (tmp_path / "res" / "tts.md").read_text()
    bad = CliRunner().invoke(app, [str(data), "--n", "1,x"])
    assert bad.exit_code != 0


def test_cli_tts_refuses_a_judge_that_cannot_answer_before_any_match(tmp_path):
    """Before: `rewardkit tts --judge http://HOST/v1` with no server there printed a full accuracy table (exit 0):
    every match had no valid vote, so the order fallback kept the first candidate, and only OUT.md said so."""
    import socket

    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "r.jsonl"
    data.write_text(json.dumps({"problem": "q", "responses": ["\\boxed{1}", "\\boxed{2}"], "correct": [True, False]}))
    r = CliRunner().invoke(app, ["tts", str(data), "--judge", f"http://127.0.0.1:{port}/v1", "--n", "2",
                                 "--out", str(tmp_path / "res" / "tts")])
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.startswith(f"error: judge http://127.0.0.1:{port}/v1: GET http://127.0.0.1:{port}/v1/models failed")
    assert r.stderr.count("\n") == 1 and not (tmp_path / "res").exists()


def test_cli_tts_says_when_matches_had_no_valid_vote(tmp_path, monkeypatch):
    """Before: a judge that answered without a verdict (or failed per request) gave a table whose tournament row was
    the order fallback's pick, and only OUT.md's match statuses said so: nothing on the terminal."""
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    import rewardkit.backends

    rows = [{"id": f"p{i}", "problem": "6*7?", "responses": ["\\boxed{41}", "\\boxed{42}"], "correct": [False, True]}
            for i in range(3)]
    data = tmp_path / "r.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    mute = ScriptedJudge("I cannot decide.")  # no verdict in any reply
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: mute)
    r = CliRunner().invoke(app, ["tts", str(data), "--n", "1,2", "--mode", "generate", "--k", "2"])
    assert r.exit_code == 0, r.output
    assert "| tournament | 0.0 | 0.0 |" in r.stdout  # the earlier (wrong) candidate kept in all 3 matches
    assert r.stderr.splitlines()[-1] == ("warning: N=2: 3 of 3 tournament matches had no valid vote (the judge "
                                         "failed or wrote no verdict); the earlier candidate was kept")
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: PickRight())
    good = CliRunner().invoke(app, ["tts", str(data), "--n", "2", "--mode", "logit", "--k", "2"])
    assert good.exit_code == 0 and "| tournament | 100.0 |" in good.stdout and "warning" not in good.stderr


def test_an_n_above_a_problems_responses_is_refused_before_the_judge_loads(tmp_path, monkeypatch):
    """Before: `rewardkit tts --n 4,16` on 8 responses per problem printed an N=16 column computed on pools of 8
    (the pool was the first min(N, responses)), exit 0."""
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    import rewardkit.backends

    problems = [Group("a", "q", ["x"] * 8, labels=[True] * 8), Group("b", "q", ["x"] * 4, labels=[False] * 4)]
    with pytest.raises(ValueError, match=r"^N=8 is larger than the 4 responses of problem 'b'$"):
        evaluate_tts(problems, [4, 8])
    assert [r["n"] for r in evaluate_tts(problems, [1, 4])["rows"]] == [1, 1, 1, 4, 4, 4]
    data = tmp_path / "r.jsonl"
    data.write_text("".join(json.dumps({"id": g.id, "problem": g.prompt, "responses": g.responses,
                                        "correct": g.labels}) + "\n" for g in problems))

    def no_load(spec):
        raise AssertionError("the judge was loaded")

    monkeypatch.setattr(rewardkit.backends, "load_backend", no_load)
    r = CliRunner().invoke(app, ["tts", str(data), "--n", "2,8"])
    assert r.exit_code == 2 and r.stderr == "error: --n: N=8 is larger than the 4 responses of problem 'b'\n", r.output
    r = CliRunner().invoke(app, ["tts", str(data), "--n", ""])  # before: a table without columns
    assert r.exit_code == 2 and r.stderr == "error: --n: no pool size N given (e.g. 1,2,4,8)\n", r.output


def test_cli_tts_reads_the_users_own_column_names_with_field(tmp_path, monkeypatch):
    """Before: the reader's hint said 'name yours with --field responses=COLUMN', and tts had no --field."""
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    import rewardkit.backends

    data = tmp_path / "own.jsonl"
    data.write_text(json.dumps({"q": "6*7?", "outs": ["\\boxed{41}", "\\boxed{42}"], "ok": [False, True]}) + "\n")
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: PickRight())
    r = CliRunner().invoke(app, ["tts", str(data), "--n", "2", "--mode", "logit", "--k", "2", "--field", "prompt=q",
                                 "--field", "responses=outs", "--field", "correct=ok"])
    assert r.exit_code == 0 and "| tournament | 100.0 |" in r.stdout, r.output


def test_load_rollouts_refuses_a_file_without_groups(tmp_path):
    """Before: an empty file (or a FIFO nobody wrote to) loaded the judge, then printed a table of '-'."""
    from rewardkit.evals.tts import load_rollouts

    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match=r"^.*empty.jsonl: no groups$"):
        load_rollouts(str(tmp_path / "empty.jsonl"))


@pytest.mark.parametrize("limit", [0, -1])
def test_load_rollouts_refuses_a_limit_below_one(tmp_path, limit):
    """Before: `rewardkit tts --limit 0` (or -1) judged one problem and printed its table as if asked."""
    from rewardkit.evals.tts import load_rollouts

    from rewardkit.runtime.jobs import JobError

    p = tmp_path / "r.jsonl"
    p.write_text("".join(json.dumps({"id": i, "problem": "q", "responses": ["a"], "correct": [True]}) + "\n"
                         for i in "abc"))
    assert len(load_rollouts(str(p), 2)) == 2
    with pytest.raises(JobError, match=f"--limit must be a positive integer, got {limit}"):
        load_rollouts(str(p), limit)


def test_load_rollouts_names_the_bad_line(tmp_path):
    from rewardkit.evals.tts import load_rollouts

    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"problem": "q", "responses": ["a"], "correct": [True]}) + "\n"
                 + json.dumps({"problem": "q", "responses": ["a", "b"], "correct": [True]}) + "\n")
    with pytest.raises(ValueError, match=r"r.jsonl:2: .*2 responses"):
        load_rollouts(str(p))
    p.write_text(json.dumps({"problem": "q", "responses": ["a"]}))
    with pytest.raises(ValueError, match=r"r.jsonl: group 'r-1': .*'correct'"):
        load_rollouts(str(p))


def test_one_set_of_defaults_the_papers():
    """Issues 19 and 21: PromptJudge, run_tts/evaluate_tts and `rewardkit tts` read one TTSOptions whose
    defaults are RARO Algorithm 3's setting (the critic reasons before its verdict: generate mode, a
    2048-token budget; K = 4 votes in the printed order; single elimination). PromptJudge's own defaults
    used to be logit / alternate / 256 tokens, and evaluate_tts's methods tournament + bt."""
    o = TTSOptions()
    assert (o.prompt, o.mode, o.max_tokens, o.k, o.order, o.rule, o.methods, o.view) == (
        "critic", "generate", 2048, 4, "fixed", "paper", ("tournament",), "answer")
    backend = PickRight()
    judge = PromptJudge(backend, ["q"], [_problem(1)])  # no options given
    assert judge([Pairing(0, 0, 1)], 4) == [["B"] * 4]
    (req,) = backend.requests  # one request, one orientation, K samples of the critic's reasoning
    assert backend.batches == [("generate", 1)] and (req.n, req.max_tokens) == (4, 2048)
    counted = LabelJudge([Group("g", "q", ["a", "b"], labels=[False, True])])
    res = evaluate_tts(counted.p, [2], counted)
    assert {r["method"] for r in res["rows"]} >= {"tournament"} and "bt" not in {r["method"] for r in res["rows"]}


def test_the_cli_reads_its_options_from_ttsoptions(tmp_path, monkeypatch):
    """`rewardkit tts` has one flag per TTSOptions field, typed and checked by the class."""
    from dataclasses import fields

    import rewardkit.evals.tts as ev
    from rewardkit.cli.app import app
    from typer.main import get_command
    from typer.testing import CliRunner

    import rewardkit.backends

    flags = {o for p in get_command(app).commands["tts"].params for o in p.opts}
    assert {"--" + f.name.replace("_", "-") for f in fields(TTSOptions)} <= flags
    seen: list[TTSOptions] = []

    def run_tts(problems, backend, ns, options):
        seen.append(options)
        raise SystemExit(0)  # stop before any judging

    monkeypatch.setattr(ev, "run_tts", run_tts)
    monkeypatch.setattr(rewardkit.backends, "load_backend", lambda spec: PickRight())  # no model is loaded
    data = tmp_path / "r.jsonl"
    data.write_text(json.dumps({"problem": "q", "responses": ["a", "b"], "correct": [True, False]}))
    judge = ["--judge", "http://127.0.0.1:9/v1?model=m", "--n", "1,2"]  # two responses: N up to 2
    CliRunner().invoke(app, ["tts", str(data), *judge])
    CliRunner().invoke(app, ["tts", str(data), *judge, "--mode", "logit", "--methods", "tournament,bt",
                             "--no-skip-uniform", "--k", "2"])
    assert seen == [TTSOptions(), TTSOptions(mode="logit", methods=("tournament", "bt"), skip_uniform=False, k=2)]
    bad = CliRunner().invoke(app, ["tts", str(data), "--mode", "logits"])
    assert bad.exit_code == 2 and "option 'mode': must be one of auto, generate, logit, got 'logits'" in bad.output


# ---------------------------------------------------------------------------------------- issue 39: mutation gaps


class ListedVotes:
    """Pairwise judge that gives each match the votes listed for its (a, b); records every call's matches and k."""

    def __init__(self, votes: dict[tuple[int, int], list], drop_last: bool = False):
        self.votes, self.drop_last = votes, drop_last
        self.calls: list[tuple[list[Pairing], int]] = []

    def __call__(self, matches, k):
        self.calls.append((list(matches), k))
        out = [list(self.votes[(m.a, m.b)]) for m in matches]
        return out[:-1] if self.drop_last else out


def test_round_robin_decides_each_pair_by_plurality_with_k_4_by_default():
    """Every pair once, in round 0, by the plurality rule (a 2-2 split keeps the earlier candidate, one valid B vote
    wins outright), with K = 4 votes unless told."""
    judge = ListedVotes({(0, 1): ["A", "A", "B", "tie"], (0, 2): ["A", "B", "B", "A"], (1, 2): ["B", None, None, None]})
    (res,) = round_robin([[0, 1, 2]], judge)
    assert judge.calls[0][1] == 4
    assert [(r.match.a, r.match.b, r.winner, r.status, r.round) for r in res] == [
        (0, 1, 0, "ok", 0), (0, 2, 0, "split", 0), (1, 2, 2, "ok", 0)]


def test_pools_of_one_call_no_judge():
    judge = ListedVotes({})
    assert round_robin([[5], [7]], judge) == [[], []] and judge.calls == []
    (sel,) = bt_select([[5]], judge)
    assert sel.winner == 5 and sel.scores == [0.0] and judge.calls == []


def test_a_judge_returning_too_few_vote_lists_is_an_error():
    votes = {(0, 1): ["A"] * 4, (0, 2): ["A"] * 4, (1, 2): ["A"] * 4}
    with pytest.raises(ValueError):
        round_robin([[0, 1, 2]], ListedVotes(votes, drop_last=True))
    with pytest.raises(ValueError):
        CachedJudge(ListedVotes(votes, drop_last=True))([Pairing(0, 0, 1), Pairing(0, 1, 2)], 4)


def test_bt_select_defaults_to_the_tournaments_matches_k_4_and_the_documented_fit():
    """By default BT is fit on the single-elimination matches (N - 1 of them), K = 4 votes each, with
    ``bradley_terry(..., l2=0.02, mirror=False)`` on the votes (its docstring)."""
    from rewardkit.arena.ranking import bradley_terry
    from rewardkit.raro.tts import vote_matches

    votes = {(0, 1): ["A", "A", "A", "B"], (2, 3): ["B", "B", "tie", "A"], (0, 3): ["A", "tie", "B", "A"]}
    judge = ListedVotes(votes)
    (sel,) = bt_select([[0, 1, 2, 3]], judge)
    assert [k for _, k in judge.calls] == [4, 4] and len(sel.matches) == 3
    fit = bradley_terry(4, vote_matches(sel.matches, [0, 1, 2, 3]), l2=0.02, mirror=False)
    np.testing.assert_allclose(sel.scores, fit)
    assert sel.winner == int(np.argmax(fit))
    rr_judge = ListedVotes({(0, 1): ["B"] * 2, (0, 2): ["B"] * 2, (1, 2): ["A"] * 2})
    (rr,) = bt_select([[0, 1, 2]], rr_judge, 2, schedule="round_robin")
    assert rr.winner == 1 and len(rr.matches) == 3 and rr_judge.calls[0][1] == 2


def test_bt_select_picks_the_stronger_candidate_however_small_its_lead():
    """One match, 1.5 of 4 votes to A (B, B, tie, A): B is the stronger, though by less than one unit of strength."""
    (sel,) = bt_select([[0, 1]], ListedVotes({(0, 1): ["B", "B", "tie", "A"]}))
    assert sel.winner == 1 and 0 < sel.scores[1] - sel.scores[0] < 1


def test_bt_select_on_the_tournament_plays_its_bracket_by_the_given_rule():
    """A 2-2 split sends B on under the paper's rule and A under plurality, so the second round differs."""
    votes = {(0, 1): ["A", "A", "B", "B"], (0, 2): ["A"] * 4, (1, 2): ["A"] * 4}
    paper = ListedVotes(votes)
    bt_select([[0, 1, 2]], paper)
    plural = ListedVotes(votes)
    bt_select([[0, 1, 2]], plural, rule="plurality")
    assert [(m.a, m.b) for m in paper.calls[1][0]] == [(1, 2)]
    assert [(m.a, m.b) for m in plural.calls[1][0]] == [(0, 2)]


def test_tournament_prompt_judge_sends_the_question_and_reads_every_verdict():
    """Reasoning Arena App. D prompt as the one user message, with the question, the pair and the reference (when
    given); \\boxed{A}/{B}/{Tie} read as A/B/tie, an unreadable or cut-off output as no vote."""
    from rewardkit.backends.base import Completion

    replies = iter(["\\boxed{A}", "\\boxed{B}", "\\boxed{Tie}", "no verdict here"])
    backend = ScriptedJudge(lambda text: next(replies))
    pair = [["The answer is \\boxed{40}", "So \\boxed{41}"]]
    judge = PromptJudge(backend, ["What is 6*7?"], pair, TTSOptions(prompt="tournament"), references=["42"],
                        mode="generate")
    assert [judge([Pairing(0, 0, 1)], 1)[0][0] for _ in range(4)] == ["A", "B", "tie", None]
    (msg,) = backend.requests[0].messages
    assert msg["role"] == "user" and "What is 6*7?" in msg["content"] and "42" in msg["content"]
    no_ref = ScriptedJudge("\\boxed{A}")
    PromptJudge(no_ref, ["What is 6*7?"], [_problem(3)], prompt="tournament", mode="generate")([Pairing(0, 2, 3)], 1)
    assert "(not provided)" in no_ref.prompts[0]  # a selector sees no label
    cut = ScriptedJudge(lambda text: Completion(["\\boxed{B}"], finish_reasons=["length"]))
    assert PromptJudge(cut, ["q"], [_problem(3)], prompt="tournament", mode="generate")([Pairing(0, 2, 3)], 1) == [[None]]


def test_critic_prompt_judge_reads_tie():
    judge = PromptJudge(ScriptedJudge("After comparing both:\ntie"), ["q"], [_problem(3)], mode="generate")
    assert judge([Pairing(0, 2, 3)], 2) == [["tie", "tie"]]


def test_prompt_judge_shows_the_view_it_is_given_and_names_itself_in_errors():
    cands = [["<think>secret</think>The answer is \\boxed{41}", "<think>hidden</think>So \\boxed{42}"]]
    for view, seen, unseen in (("full", ["secret", "hidden"], []), ("final", ["41", "42"], ["The answer is", "So"])):
        backend = ScriptedJudge("tie")
        PromptJudge(backend, ["q"], cands, view=view, mode="generate")([Pairing(0, 0, 1)], 1)
        assert all(x in backend.prompts[0] for x in seen) and not any(x in backend.prompts[0] for x in unseen)
    with pytest.raises(TypeError, match="^PromptJudge: expected TTSOptions"):
        PromptJudge(ScriptedJudge("tie"), ["q"], cands, "critic")


def test_prompt_judge_sends_its_templates_prompt_and_scores_each_prompts_own_verdicts():
    """The critic prompt of the chosen template; in logit mode the critic's verdicts 1/2/tie after its prefix, the
    tournament's A/B/Tie after "\\boxed{"; ``mode="auto"`` follows the backend's default mode."""
    from rewardkit.prompts.raro import VERDICT_CHOICES, VERDICT_PREFIX
    from rewardkit.raro.critic import critic_messages

    backend = ScriptedJudge("tie")
    PromptJudge(backend, ["q"], [["x", "y"]], template="general", mode="generate")([Pairing(0, 0, 1)], 1)
    assert backend.requests[0].messages == critic_messages("q", "x", "y", "general")
    assert critic_messages("q", "x", "y", "general") != critic_messages("q", "x", "y", "math")
    for prompt, choices, prefix in (("critic", VERDICT_CHOICES, VERDICT_PREFIX), ("tournament", ("A", "B", "Tie"),
                                                                                  "\\boxed{")):
        backend = PickRight()
        backend.default_mode = "logit"
        PromptJudge(backend, ["q"], [_problem(3)], prompt=prompt, mode="auto")([Pairing(0, 2, 3)], 2)
        (req,) = backend.requests
        assert (tuple(req.choices), req.assistant_prefix) == (tuple(choices), prefix)
        # the verdict drawn is the one scored: B when only the second answer is right, tie when neither is
        judge = PromptJudge(PickRight(), ["q"], [_problem(3)], prompt=prompt, mode="logit")
        assert judge([Pairing(0, 2, 3), Pairing(0, 0, 1)], 2) == [["B", "B"], ["tie", "tie"]]


def test_prompt_judge_counts_one_backend_call_per_round_and_asks_no_empty_orientation():
    """``calls`` counts backend calls (one per tournament round); with K = 1 and ``order="alternate"`` the swapped
    orientation has no vote to draw, so no request is made for it."""
    backend = PickRight()
    judge = PromptJudge(backend, ["q"], [_problem(7)], mode="generate", order="alternate")
    (sel,) = single_elimination([list(range(8))], judge, k=1)
    assert sel.winner == 7 and judge.calls == 3 == len(backend.batches)
    assert len(backend.requests) == 4 + 2 + 1 and all(r.n == 1 for r in backend.requests)


def test_prompt_judge_requests_carry_the_options_and_a_seed_per_round():
    """Generate mode: every request has the budget and temperature of the options and one seed per round, the same
    for the same ``seed`` option, another for another round or another ``seed``."""

    def seeds(seed):
        backend = PickRight()
        judge = PromptJudge(backend, ["q"], [_problem(7)], mode="generate", max_tokens=123, temperature=0.7, seed=seed)
        single_elimination([list(range(8))], judge, k=2)
        assert {(r.max_tokens, r.temperature) for r in backend.requests} == {(123, 0.7)}
        return [r.seed for r in backend.requests]

    a = seeds(0)
    assert None not in a and a == seeds(0) and a != seeds(1)
    assert len(set(a[:4])) == 1 and len({a[0], a[4], a[6]}) == 3  # rounds of 4, 2 and 1 matches


def test_logit_votes_are_drawn_with_the_seed_from_the_renormalised_probabilities():
    """Logit mode draws the K votes from the verdict probabilities, renormalised, with a seeded generator: the same
    seed gives the same votes; a verdict of probability 0 is never drawn."""

    def votes(seed):
        backend = ScriptedJudge(probs=[2.0, 1.0, 0.0])  # unnormalised scores: 2/3 A, 1/3 B
        return PromptJudge(backend, ["q"], [_problem(3)], mode="logit", seed=seed)([Pairing(0, 2, 3)], 60)[0]

    first = votes(0)
    assert first == votes(0) and set(first) == {"A", "B"} and 25 <= first.count("A") <= 55


def test_prompt_judge_gives_a_failed_request_no_votes_and_reads_the_others():
    """A request the backend failed gives its match K invalid votes; the other matches of the batch are read. A
    backend returning fewer results than requests is an error, not a silent truncation."""
    from rewardkit.types import Status

    def probs(text, choices):
        return Status.ERROR if "\\boxed{40}" in text else [1.0, 0.0, 0.0]

    cands = [["\\boxed{40}", "\\boxed{41}", "\\boxed{42}", "\\boxed{43}"]]
    judge = PromptJudge(ScriptedJudge(probs=probs), ["q"], cands, mode="logit")
    assert judge([Pairing(0, 0, 1), Pairing(0, 2, 3)], 2) == [[None, None], ["A", "A"]]

    class Short(ScriptedJudge):
        def generate(self, requests):
            return super().generate(requests)[:-1]

        def verdict_probs(self, requests):
            return super().verdict_probs(requests)[:-1]

    for mode, call in (("generate", "generate"), ("logit", "verdict_probs")):
        short = PromptJudge(Short("Answer 1", [1.0, 0.0, 0.0]), ["q"], cands, mode=mode)
        with pytest.raises(RuntimeError, match=rf"judge backend Short\.{call} returned 1 results for 2 requests"):
            short([Pairing(0, 0, 1), Pairing(0, 2, 3)], 1)


def test_prompt_judge_keeps_each_outputs_problem_and_finish_reason_and_adds_up_its_cost():
    from rewardkit.backends.base import Completion

    backend = ScriptedJudge(lambda text: Completion(["Answer 2"], finish_reasons=["stop"], prompt_tokens=7,
                                                    completion_tokens=3))
    judge = PromptJudge(backend, ["q0", "q1"], [_problem(3), _problem(2)], mode="generate")
    judge([Pairing(1, 2, 3)], 1)
    judge([Pairing(0, 2, 3)], 1)
    assert [(o["problem"], o["finish_reason"], o["vote"]) for o in judge.outputs] == [(1, "stop", "B"),
                                                                                      (0, "stop", "B")]
    assert (judge.cost.prompt_tokens, judge.cost.completion_tokens) == (14, 6)


def test_votes_come_back_in_the_documented_order():
    """``fixed``: the K votes in the order sampled; ``alternate``: even votes from the pair as given, odd ones from the
    swapped pair mapped back (a swapped Answer 1 is B, a tie stays a tie)."""
    fixed = PromptJudge(ScriptedJudge(["Answer 1", "Answer 2", "tie", "Answer 1"]), ["q"], [_problem(3)],
                        mode="generate", order="fixed")
    assert fixed([Pairing(0, 2, 3)], 4) == [["A", "B", "tie", "A"]]
    alt = PromptJudge(ScriptedJudge(["Answer 1", "tie", "Answer 2"]), ["q"], [_problem(3)], mode="generate",
                      order="alternate")
    assert alt([Pairing(0, 2, 3)], 6) == [["A", "B", "tie", "tie", "B", "A"]]


def test_single_elimination_uses_k_4_by_default():
    judge = ListedVotes({(0, 1): ["B"] * 4})
    (sel,) = single_elimination([[0, 1]], judge)
    assert judge.calls[0][1] == 4 and sel.winner == 1


@pytest.mark.parametrize("bad", [{"k": 0}, {"max_tokens": 0}, {"temperature": -0.1}])
def test_tts_options_refuse_out_of_range_values(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        TTSOptions(**bad)
