"""Countdown / 24-game: generator and exact, eval-free verifier (RARO App. C.2 and App. E examples)."""

from fractions import Fraction
from itertools import product

import pytest

from rewardkit.raro.countdown import (
    CountdownInstance,
    _solve_sorted,
    check_expression,
    check_response,
    evaluate,
    generate,
    reward,
    solve,
)
from rewardkit.types import Group, Status


@pytest.fixture(autouse=True)
def fresh_solver_cache():
    """Each test solves afresh: the solver's cache would otherwise carry answers over from earlier tests (or from
    the unmutated code in a mutation run), so a broken search could pass on cached solutions."""
    _solve_sorted.cache_clear()


def test_paper_policy_example_is_correct():
    # App. E, Figure 15: numbers 5, 33, 40, 26 and the policy's boxed answer
    response = "... Final Answer: \\boxed{(33 + 5) - (40 - 26)}\n</think>\n\\boxed{(33 + 5) - (40 - 26)}"
    inst = CountdownInstance((5, 33, 40, 26))
    c = check_response(response, inst)
    assert c.correct is True and c.status is Status.OK and c.value == 24


def test_paper_critic_example_answers():
    # App. E, Figure 18: answer 1 is right, answer 2 uses a 2 that is not given and evaluates to 87
    nums = (20, 45, 10, 23)
    a1 = check_expression("(45 - 23) + (20/10)", nums)
    a2 = check_expression("(20 + 45 * 2) - 23", nums)
    assert a1.correct is True
    assert a2.correct is False and a2.status is Status.OK
    assert a2.value == 87
    assert "missing [10]" in a2.message and "extra [2]" in a2.message


def test_exact_fractions_where_floats_fail():
    # 8 / (3 - 8/3) = 24 exactly; in floating point it is 23.999999999999996
    assert 8 / (3 - 8 / 3) != 24
    c = check_expression("8 / (3 - 8 / 3)", (3, 3, 8, 8))
    assert c.correct is True and c.value == Fraction(24)


def test_each_number_exactly_once():
    nums = (4, 6, 1, 1)
    assert check_expression("4 * 6 * 1 * 1", nums).correct is True
    reuse = check_expression("4 * 6 * 1", nums)  # one 1 unused
    assert reuse.correct is False and "missing [1]" in reuse.message
    twice = check_expression("4 * 6 * (6 - 6 + 1) * 1", nums)  # value 24 but 6 used three times
    assert twice.value == 24 and twice.correct is False


def test_wrong_value_is_false_not_invalid():
    c = check_expression("5 + 33 + 40 + 26", (5, 33, 40, 26))
    assert c.correct is False and c.status is Status.OK and c.value == 104


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo pwned')",
        "2 ** 3 * 3 * 1",
        "-5 + 33 - 40 + 26 + 10",
        "(24)",  # parses, but see the separate test below; here: a name
        "x + 1",
        "4.0 * 6 * 1 * 1",
        "0x18",
        "1_0 + 14",
        "6 // 1 * 4 * 1",
        "[24]",
        "lambda: 24",
        "(" * 400 + "1" + ")" * 400,
        "1 +",
        "",
    ],
)
def test_untrusted_text_is_never_executed_and_is_invalid_or_false(text):
    c = check_expression(text, (4, 6, 1, 1))
    if text == "(24)":
        assert c.correct is False  # well-formed, wrong numbers
    else:
        assert c.status is Status.INVALID and c.correct is None and c.message


def test_division_by_zero_is_invalid():
    c = check_expression("24 / (1 - 1) + 0", (24, 1, 1, 0))
    assert c.status is Status.INVALID and "division by zero" in c.message


def test_latex_operators_are_normalised():
    assert check_expression("$4 \\times 6 \\times (2 \\div 2)$", (4, 6, 2, 2)).correct is True


def test_no_boxed_answer_is_invalid():
    c = check_response("I think it's 24.", CountdownInstance((4, 6, 1, 1)))
    assert c.status is Status.INVALID
    # for RL the policy's missing answer is a wrong answer (0), not a masked judge failure
    assert reward("I think it's 24.", CountdownInstance((4, 6, 1, 1))) == 0.0


def test_solver_known_cases():
    assert solve((1, 1, 1, 1)) is None  # max reachable is 4
    assert solve((3, 3, 8, 8)) is not None  # needs an exact fraction
    assert check_expression(solve((3, 3, 8, 8)), (3, 3, 8, 8)).correct is True


def _ap(op: str, x, y):
    """Apply one operator over exact fractions; None propagates (division by zero)."""
    if x is None or y is None or (op == "/" and y == 0):
        return None
    return {"+": x + y, "-": x - y, "*": x * y}[op] if op != "/" else x / y


def _brute(nums) -> bool:
    """Independent check: every ordering, every operator triple, all five bracketings of a b c d."""
    from itertools import permutations

    for p in set(permutations(nums)):
        a, b, c, d = (Fraction(x) for x in p)
        for f, g, h in product("+-*/", repeat=3):
            shapes = [
                _ap(h, _ap(g, _ap(f, a, b), c), d),
                _ap(h, _ap(f, a, _ap(g, b, c)), d),
                _ap(h, a, _ap(g, _ap(f, b, c), d)),
                _ap(h, a, _ap(f, b, _ap(g, c, d))),
                _ap(g, _ap(f, a, b), _ap(h, c, d)),
            ]
            if any(v == 24 for v in shapes):
                return True
    return False


def test_solver_agrees_with_independent_brute_force_on_small_numbers():
    """Solvability of every multiset from {1..6}^4 against a brute force over expression shapes."""
    multisets = {tuple(sorted(n)) for n in product(range(1, 7), repeat=4)}
    n_solvable = 0
    for key in sorted(multisets):
        s = solve(key)
        assert (s is not None) == _brute(key), key
        n_solvable += s is not None
    assert 0 < n_solvable < len(multisets)


def test_generator_is_seeded_in_range_and_solvable():
    a = generate(20, seed=7)
    b = generate(20, seed=7)
    c = generate(20, seed=8)
    assert a == b and a != c
    for inst in a:
        assert len(inst.numbers) == 4 and all(1 <= x <= 50 for x in inst.numbers)
        assert inst.target == 24
        assert check_expression(inst.solution, inst.numbers).correct is True


def test_instance_prompt_and_group():
    inst = CountdownInstance((5, 33, 40, 26), solution="(33 + 5) - (40 - 26)")
    assert "Use the four numbers 5, 33, 40, and 26 to create an expression that equals 24." in inst.prompt
    assert "\\boxed{}" in inst.prompt
    g = inst.to_group(["\\boxed{(33 + 5) - (40 - 26)}"])
    assert g.expert == inst.solution and g.metadata["numbers"] == [5, 33, 40, 26]


def test_evaluate_returns_leaves():
    v, leaves = evaluate("(1 + 2) * (3 + 4)")
    assert v == 21 and sorted(leaves) == [1, 2, 3, 4]


def test_score_group_rewards_and_flags():
    from rewardkit.raro.countdown import score_group

    inst = CountdownInstance((5, 33, 40, 26), solution="(33 + 5) - (40 - 26)")
    g = inst.to_group(["\\boxed{(33 + 5) - (40 - 26)}", "\\boxed{5 + 33 + 40 + 26}", "no idea", "\\boxed{__import__('os')}"])
    s = score_group(g)
    assert list(s.rewards) == [1.0, 0.0, 0.0, 0.0] and s.mask.all()
    assert s.components["unparseable"] == [False, False, True, True]
    assert s.cost.verifier_calls == 4
    with pytest.raises(ValueError, match="not a Countdown group"):
        score_group(Group("x", "q", ["a"]))


def test_verifier_value_matches_random_expression_trees():
    """Property: for random +-*/ trees over four numbers, the parsed value equals the tree's exact value."""
    import random

    rng = random.Random(0)

    def build(leaves):
        if len(leaves) == 1:
            return str(leaves[0]), Fraction(leaves[0])
        cut = rng.randint(1, len(leaves) - 1)
        (ls, lv), (rs, rv) = build(leaves[:cut]), build(leaves[cut:])
        op = rng.choice("+-*/")
        if op == "/" and rv == 0:
            op = "+"
        val = {"+": lv + rv, "-": lv - rv, "*": lv * rv, "/": lv / rv if rv else None}[op]
        return f"({ls} {op} {rs})", val

    for _ in range(500):
        nums = [rng.randint(1, 50) for _ in range(4)]
        text, val = build(nums)
        c = check_expression(text, nums)
        assert c.status is Status.OK and c.value == val, text
        assert c.correct is (val == 24)


def test_registered_countdown_scorer_reads_rows_from_a_file(tmp_path):
    """The exact verifier as the registered `countdown` scorer, fed by a rollouts file whose rows carry the
    instance's numbers (issue 11); a row without numbers is an error, never a silent 0."""
    import json

    from rewardkit.raro.countdown import generate
    from rewardkit.runtime.jobs import score_file
    from rewardkit.scoring import get_scorer

    inst = generate(3, seed=7)
    rows = [{"id": f"c{i}", "problem": x.prompt, "numbers": list(x.numbers), "target": x.target,
             "responses": [f"so \\boxed{{{x.solution}}}", f"\\boxed{{{'+'.join(map(str, x.numbers))}}}", "no idea"]}
            for i, x in enumerate(inst)]
    rows.append({"id": "bad", "problem": "24?", "responses": ["\\boxed{4*6}"]})
    inp, out = tmp_path / "cd.jsonl", tmp_path / "out.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    score_file(inp, get_scorer("countdown"), out)
    got = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for i, x in enumerate(inst):
        plain_sum_is_24 = sum(x.numbers) == x.target
        assert got[f"c{i}"]["rewards"] == [1.0, 1.0 if plain_sum_is_24 else 0.0, 0.0]
        assert got[f"c{i}"]["statuses"] == ["ok"] * 3 and got[f"c{i}"]["scorer"] == "countdown"
    assert got["bad"]["statuses"] == ["error"] and got["bad"]["rewards"] == [None]
    assert "numbers" in got["bad"]["messages"][0]


def _solver_calls() -> int:
    """How many times the (cached) solver was asked since the fixture cleared its cache."""
    info = _solve_sorted.cache_info()
    return info.hits + info.misses


@pytest.mark.parametrize("n", [1, 2])
def test_generate_gives_up_after_1000_draws_per_instance_and_says_how_many(n):
    # every number is 1: the largest reachable value is 1 + 1 + 1 + 1 = 4, so no draw is ever solvable;
    # each draw is one solver call, so the solver's call count is the number of draws made
    with pytest.raises(RuntimeError) as e:
        generate(n, low=1, high=1)
    assert str(e.value) == f"countdown.generate: found only 0 solvable instances in {1000 * n} draws"
    assert _solver_calls() == 1000 * n
