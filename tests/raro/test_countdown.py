"""Countdown / 24-game: generator and exact, eval-free verifier (RARO App. C.2 and App. E examples)."""

import ast
import re
from fractions import Fraction
from itertools import product

import pytest

from rewardkit.raro.countdown import (
    CountdownCheck,
    CountdownInstance,
    _solve_sorted,
    _spoken_list,
    _strip_outer,
    _value,
    check_expression,
    check_response,
    evaluate,
    generate,
    reward,
    score_group,
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
    c = check_expression("$24 \\div (1 - 1) + 0$", (24, 1, 1, 0))
    # the normalised text is kept, so a user sees what was checked
    assert c == CountdownCheck(None, Status.INVALID, expression="24 / (1 - 1) + 0", message="division by zero")


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


def _literals(expr: str) -> list[int]:
    """The integers written in an expression, sorted."""
    return sorted(int(x) for x in re.findall(r"\d+", expr))


def _independent_value(expr: str) -> Fraction:
    """Exact value by Python's own evaluator with every literal made a Fraction (not the module's AST walk);
    only for the solver's own output, checked first to hold nothing but digits, + - * / and parentheses."""
    assert re.fullmatch(r"[0-9+\-*/() ]+", expr), expr
    return eval(re.sub(r"\d+", lambda m: f"Fraction({m.group()})", expr), {"Fraction": Fraction})


def test_solver_agrees_with_independent_brute_force_on_small_numbers():
    """Solvability of every multiset from {1..6}^4 against a brute force over expression shapes."""
    multisets = {tuple(sorted(n)) for n in product(range(1, 7), repeat=4)}
    n_solvable = 0
    for key in sorted(multisets):
        s = solve(key)
        assert (s is not None) == _brute(key), key
        if s is not None:
            assert _literals(s) == list(key) and _independent_value(s) == 24, (key, s)
        n_solvable += s is not None
    assert 0 < n_solvable < len(multisets)


def test_generator_is_seeded_in_range_and_solvable():
    a = generate(20, seed=7)
    b = generate(20, seed=7)
    c = generate(20, seed=8)
    assert a == b and a != c and len(a) == len(c) == 20
    for inst in a:
        assert len(inst.numbers) == 4 and all(1 <= x <= 50 for x in inst.numbers)
        assert inst.target == 24
        assert check_expression(inst.solution, inst.numbers).correct is True
        assert _literals(inst.solution) == sorted(inst.numbers) and _independent_value(inst.solution) == 24


def test_instance_prompt_and_group():
    inst = CountdownInstance((5, 33, 40, 26), solution="(33 + 5) - (40 - 26)")
    assert "Use the four numbers 5, 33, 40, and 26 to create an expression that equals 24." in inst.prompt
    assert "\\boxed{}" in inst.prompt
    g = inst.to_group(["\\boxed{(33 + 5) - (40 - 26)}"])
    assert g.id == "countdown-5-33-40-26"
    assert g.prompt == inst.prompt and g.responses == ["\\boxed{(33 + 5) - (40 - 26)}"]
    assert g.reference == g.expert == "(33 + 5) - (40 - 26)"
    assert g.metadata == {"task": "countdown", "numbers": [5, 33, 40, 26], "target": 24}
    assert inst.to_group([], id="q7").id == "q7"


def test_evaluate_returns_leaves():
    v, leaves = evaluate("(1 + 2) * (3 + 4)")
    assert v == 21 and sorted(leaves) == [1, 2, 3, 4]


def test_score_group_rewards_and_flags():
    inst = CountdownInstance((5, 33, 40, 26), solution="(33 + 5) - (40 - 26)")
    g = inst.to_group(["\\boxed{(33 + 5) - (40 - 26)}", "\\boxed{5 + 33 + 40 + 26}", "no idea", "\\boxed{__import__('os')}"])
    s = score_group(g)
    assert list(s.rewards) == [1.0, 0.0, 0.0, 0.0] and s.mask.all()
    assert s.components["unparseable"] == [False, False, True, True]
    assert s.cost.verifier_calls == 4
    assert s.messages == [None, "evaluates to 104, not 24", "no expression (no \\boxed{...} answer found)",
                          "character '_' is not allowed (only digits, + - * / and parentheses)"]
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


@pytest.mark.parametrize(
    ("nums", "spoken"),
    [([5], "5"), ([5, 33], "5 and 33"), ([5, 33, 40], "5, 33, and 40"), ([5, 33, 40, 26], "5, 33, 40, and 26")],
)
def test_spoken_list(nums, spoken):
    # the four-number form is the paper's prompt (App. E, Figure 15: "5, 33, 40, and 26")
    assert _spoken_list(nums) == spoken


@pytest.mark.parametrize(
    ("expr", "stripped"),
    [
        ("(1 + 2)", "1 + 2"),
        ("((1 + 2))", "(1 + 2)"),  # one pair only
        ("((1 + 2) * 3)", "(1 + 2) * 3"),
        ("(1 + 2) * (3 + 4)", "(1 + 2) * (3 + 4)"),  # the first pair closes before the end: no pair encloses all
        ("1 + 2", "1 + 2"),
        ("24", "24"),
        ("(1 + 2", "(1 + 2"),  # unbalanced: nothing encloses the whole
        ("(1 + 2))", "(1 + 2))"),  # the first '(' closes at the second-last character
    ],
)
def test_strip_outer_drops_only_one_pair_enclosing_the_whole(expr, stripped):
    assert _strip_outer(expr) == stripped


def test_paper_prompt_example_with_a_zero_is_correct():
    # App. E, "Countdown Input": "if the solution is (8 - 2) * 4 + 0, you would write \boxed{(8 - 2) * 4 + 0}"
    c = check_expression("(8 - 2) * 4 + 0", (8, 2, 4, 0))
    assert c == CountdownCheck(True, Status.OK, Fraction(24), "(8 - 2) * 4 + 0", None, {"numbers_used": [0, 2, 4, 8]})


_WHITELIST = "is not allowed (only integers, + - * / and parentheses)"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-4 + 6 * 4 + 4", f"USub {_WHITELIST}"),
        ("+4 * 6 * 1 * 1", f"UAdd {_WHITELIST}"),
        ("2 ** 3 * 3 * 1", f"Pow {_WHITELIST}"),
        ("6 // 1 * 4 * 1", f"FloorDiv {_WHITELIST}"),
        ("(4)(6) * 1 * 1", f"Call {_WHITELIST}"),
        ("() + 24", f"Tuple {_WHITELIST}"),
        ("x + 1", "character 'x' is not allowed (only digits, + - * / and parentheses)"),
        ("4.0 * 6", "character '.' is not allowed (only digits, + - * / and parentheses)"),
        ("1 +", "not a valid arithmetic expression: SyntaxError"),
    ],
)
def test_invalid_expressions_are_invalid_with_the_reason(text, message):
    c = check_expression(text, (4, 6, 1, 1))
    assert c == CountdownCheck(None, Status.INVALID, expression=text, message=message)


@pytest.mark.parametrize("text", [None, "", "   "])
def test_no_expression_is_invalid_with_the_reason(text):
    c = check_expression(text, (4, 6, 1, 1))
    assert c == CountdownCheck(None, Status.INVALID, message="no expression (no \\boxed{...} answer found)")


def test_whitelist_holds_without_the_character_filter():
    """The AST whitelist is a second guard: nodes the character filter already keeps out are refused too."""
    for text, message in [("1.5 + 1", f"literal 1.5 {_WHITELIST}"), ("'a' * 3", f"literal 'a' {_WHITELIST}"),
                          ("x + 1", f"Name {_WHITELIST}"), ("-3", f"USub {_WHITELIST}")]:
        with pytest.raises(ValueError) as e:
            _value(ast.parse(text, mode="eval"), [])
        assert str(e.value) == message
    with pytest.raises(ValueError) as e:  # a negative literal, which ast.parse never makes from text
        _value(ast.Expression(body=ast.Constant(-3)), [])
    assert str(e.value) == f"literal -3 {_WHITELIST}"


def test_check_expression_results_in_full():
    # App. E, Figure 18, the critic's answer 2: uses a 2 that is not given (and not the 10); 20 + 90 - 23 = 87
    assert check_expression("(20 + 45 * 2) - 23", (20, 45, 10, 23)) == CountdownCheck(
        False, Status.OK, Fraction(87), "(20 + 45 * 2) - 23",
        "numbers must be used exactly once: missing [10], extra [2]", {"numbers_used": [2, 20, 23, 45]})
    # the right numbers, the wrong value: 5 + 33 + 40 + 26 = 104
    assert check_expression("5 + 33 + 40 + 26", (5, 33, 40, 26)) == CountdownCheck(
        False, Status.OK, Fraction(104), "5 + 33 + 40 + 26", "evaluates to 104, not 24",
        {"numbers_used": [5, 26, 33, 40]})
    # an exact fraction in the message: 8/3 + 3 + 8 = 41/3
    assert check_expression("8 / 3 + 3 + 8", (3, 3, 8, 8)).message == "evaluates to 41/3, not 24"
    # App. E, Figure 15's answer written with Unicode minus signs: normalised, then right
    assert check_expression("(33 + 5) − (40 − 26)", (5, 33, 40, 26)) == CountdownCheck(
        True, Status.OK, Fraction(24), "(33 + 5) - (40 - 26)", None, {"numbers_used": [5, 26, 33, 40]})


def test_another_target_is_honoured_by_check_response_and_reward():
    inst = CountdownInstance((1, 2, 3, 4), target=10, solution="1 + 2 + 3 + 4")
    assert check_response("\\boxed{1 + 2 + 3 + 4}", inst).correct is True
    assert check_response("\\boxed{1 * 2 * 3 * 4}", inst).message == "evaluates to 24, not 10"
    assert reward("\\boxed{1 + 2 + 3 + 4}", inst) == 1.0 and reward("\\boxed{1 * 2 * 3 * 4}", inst) == 0.0


def test_reward_is_one_for_a_correct_answer():
    inst = CountdownInstance((5, 33, 40, 26))
    assert reward("so \\boxed{(33 + 5) - (40 - 26)}", inst) == 1.0
    assert reward("\\boxed{5 + 33 + 40 + 26}", inst) == 0.0


def test_expression_length_limit_is_500_characters():
    at_limit = "24" + "*1" * 249
    assert len(at_limit) == 500
    assert evaluate(at_limit) == (Fraction(24), [24] + [1] * 249)
    with pytest.raises(ValueError) as e:
        evaluate(at_limit + "1")
    assert str(e.value) == "expression longer than 500 characters"


def test_generate_default_seed_is_zero():
    assert generate(3) == generate(3, seed=0) != generate(3, seed=1)


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [({"n": -1}, "n=-1, k=4, range=[1, 50]"), ({"n": 1, "k": 0}, "n=1, k=0, range=[1, 50]"),
     ({"n": 1, "low": 10, "high": 5}, "n=1, k=4, range=[10, 5]")],
)
def test_generate_bad_arguments_raise_with_the_values(kwargs, shown):
    with pytest.raises(ValueError) as e:
        generate(**kwargs)
    assert str(e.value) == f"countdown.generate: bad arguments {shown}"


def test_generate_edge_arguments():
    assert generate(0) == []
    # one number: the instance is the target itself (24 is drawn from [20, 30] sooner or later)
    assert generate(2, k=1, low=20, high=30) == [CountdownInstance((24,), 24, "24")] * 2
    # an empty-width range: every draw is 6, 6, 6, 6 (6 + 6 + 6 + 6 = 24)
    six = generate(2, low=6, high=6)
    assert [x.numbers for x in six] == [(6, 6, 6, 6)] * 2
    assert all(_literals(x.solution) == [6, 6, 6, 6] and _independent_value(x.solution) == 24 for x in six)


def test_generate_for_another_target():
    out = generate(5, seed=1, target=10)
    assert len(out) == 5
    for inst in out:
        assert inst.target == 10 and all(1 <= x <= 50 for x in inst.numbers)
        assert _literals(inst.solution) == sorted(inst.numbers) and _independent_value(inst.solution) == 10


def test_score_group_reads_the_target_from_metadata():
    inst = CountdownInstance((1, 2, 3, 4), target=10, solution="1 + 2 + 3 + 4")
    s = score_group(inst.to_group(["\\boxed{1 + 2 + 3 + 4}", "\\boxed{4 * 3 * 2 * 1}"]))
    assert list(s.rewards) == [1.0, 0.0] and s.messages == [None, "evaluates to 24, not 10"]
    # no target in the metadata: 24
    plain = score_group(Group("g", "q", ["\\boxed{4 * 6 * 1 * 1}"], metadata={"numbers": [4, 6, 1, 1]}))
    assert list(plain.rewards) == [1.0] and plain.messages == [None]
