"""Countdown / 24-game (RARO App. C.2): a seeded generator of solvable instances and an exact verifier.

An instance is four integers in [1, 50] and the target 24; a solution combines every number exactly once
with ``+ - * /`` and parentheses. The verifier never evaluates untrusted text: it parses the expression
with :func:`ast.parse`, accepts only a whitelist of node types (binary ``+ - * /`` over non-negative
integer literals) and computes the value with :class:`fractions.Fraction`, so ``8 / 3 * 9`` is exactly 24.
"""

from __future__ import annotations

import ast
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from rewardkit.options import Options
from rewardkit.scoring import BaseScorer
from rewardkit.types import Cost, Group, GroupScore, Status
from rewardkit.verdicts import boxed_contents

TARGET = 24
LOW, HIGH = 1, 50
MAX_EXPRESSION_CHARS = 500  # longer "expressions" are rejected before parsing (4 numbers need ~30 chars)

# The policy prompt of RARO App. E ("Countdown Input"), verbatim apart from the placeholders.
PROMPT_TEMPLATE = (
    "Use the four numbers {numbers} to create an expression that equals {target}.\n\n"
    "Remember:\n"
    "- Use each number exactly once\n"
    "- You can only use +, -, *, / and parentheses\n"
    "- The expression must be valid Python code that evaluates to {target}\n\n"
    "Think through different combinations and show your reasoning. Once you find a valid solution, put "
    "your final answer inside \\boxed{{}} tags.\n\n"
    "For example, if the solution is (8 - 2) * 4 + 0, you would write: \\boxed{{(8 - 2) * 4 + 0}}\n\n"
    "The expression inside \\boxed{{}} must be directly evaluable in Python and should equal {target}."
)


@dataclass(frozen=True)
class CountdownInstance:
    """Four numbers, the target, and one exact solution found by exhaustive search."""

    numbers: tuple[int, ...]
    target: int = TARGET
    solution: str = ""

    @property
    def prompt(self) -> str:
        """The paper's policy prompt for this instance."""
        return PROMPT_TEMPLATE.format(numbers=_spoken_list(self.numbers), target=self.target)

    def to_group(self, responses: Sequence[str], id: str | None = None) -> Group:
        """A Group for scorers: the search's solution is both the reference and the expert answer."""
        return Group(
            id=id or "countdown-" + "-".join(map(str, self.numbers)),
            prompt=self.prompt,
            responses=list(responses),
            reference=self.solution,
            expert=self.solution,
            metadata={"task": "countdown", "numbers": list(self.numbers), "target": self.target},
        )


@dataclass(frozen=True)
class CountdownCheck:
    """Verifier result: ``correct`` is None unless ``status`` is ok (a parse failure is not a 'wrong')."""

    correct: bool | None
    status: Status = Status.OK
    value: Fraction | None = None
    expression: str | None = None
    message: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _spoken_list(nums: Sequence[int]) -> str:
    """'5, 33, 40, and 26' as in the paper's prompt."""
    s = [str(n) for n in nums]
    return ", ".join(s[:-1]) + ", and " + s[-1] if len(s) > 2 else " and ".join(s)


# ------------------------------------------------------------------------------------------ solver


def _search(items: tuple[tuple[Fraction, str], ...], target: Fraction) -> str | None:
    """Exhaustive search: combine any two items with + - * / until one remains; return an expression."""
    if len(items) == 1:
        return items[0][1] if items[0][0] == target else None
    n = len(items)
    for i in range(n):
        for j in range(i + 1, n):
            (a, ea), (b, eb) = items[i], items[j]
            rest = tuple(items[k] for k in range(n) if k != i and k != j)
            cands = [(a + b, f"({ea} + {eb})"), (a * b, f"({ea} * {eb})"),
                     (a - b, f"({ea} - {eb})"), (b - a, f"({eb} - {ea})")]
            if b != 0:
                cands.append((a / b, f"({ea} / {eb})"))
            if a != 0:
                cands.append((b / a, f"({eb} / {ea})"))
            for v, e in cands:
                found = _search(rest + ((v, e),), target)
                if found is not None:
                    return found
    return None


@lru_cache(maxsize=65536)
def _solve_sorted(nums: tuple[int, ...], target: int) -> str | None:
    expr = _search(tuple((Fraction(x), str(x)) for x in nums), Fraction(target))
    return None if expr is None else _strip_outer(expr)


def solve(numbers: Sequence[int], target: int = TARGET) -> str | None:
    """One expression using every number exactly once that equals ``target`` exactly, or None."""
    return _solve_sorted(tuple(sorted(int(x) for x in numbers)), int(target))


def _strip_outer(expr: str) -> str:
    """Drop one pair of parentheses that encloses the whole expression."""
    if not (expr.startswith("(") and expr.endswith(")")):
        return expr
    depth = 0
    for i, ch in enumerate(expr):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0 and i < len(expr) - 1:
            return expr
    return expr[1:-1]


def generate(n: int, seed: int = 0, target: int = TARGET, low: int = LOW, high: int = HIGH,
             k: int = 4) -> list[CountdownInstance]:
    """``n`` solvable instances: ``k`` integers drawn uniformly from [low, high], rejected until solvable."""
    if n < 0 or k < 1 or low > high:
        raise ValueError(f"countdown.generate: bad arguments n={n}, k={k}, range=[{low}, {high}]")
    rng = random.Random(seed)
    out: list[CountdownInstance] = []
    draws = 0
    while len(out) < n:
        if draws >= 1000 * max(n, 1):  # a budget of 1000 draws per instance asked
            raise RuntimeError(f"countdown.generate: found only {len(out)} solvable instances in {draws} draws")
        draws += 1
        nums = tuple(rng.randint(low, high) for _ in range(k))
        sol = solve(nums, target)
        if sol is not None:
            out.append(CountdownInstance(nums, target, sol))
    return out


# ---------------------------------------------------------------------------------------- verifier

_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}
_REPLACE = [("\\times", "*"), ("\\cdot", "*"), ("\\div", "/"), ("×", "*"), ("÷", "/"), ("−", "-"),
            ("\\left", ""), ("\\right", ""), ("$", "")]


_BAD_CHARS = re.compile(r"[^0-9+\-*/()\s]")


class _Reject(ValueError):
    """The expression uses something outside the whitelist."""


def _value(node: ast.AST, leaves: list[int]) -> Fraction:
    """Exact value of a whitelisted AST node; integer literals are appended to ``leaves``."""
    if isinstance(node, ast.Expression):
        return _value(node.body, leaves)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left, leaves), _value(node.right, leaves)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if right == 0:
            raise ZeroDivisionError("division by zero")
        return left / right
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        leaves.append(node.value)
        return Fraction(node.value)
    what = type(node.op).__name__ if isinstance(node, (ast.BinOp, ast.UnaryOp)) else type(node).__name__
    if isinstance(node, ast.Constant):
        what = f"literal {node.value!r}"
    raise _Reject(f"{what} is not allowed (only integers, + - * / and parentheses)")


def normalize_expression(text: str) -> str:
    """Map common LaTeX/Unicode operators (\\times, ×, ÷, −) to Python ones and drop ``$``."""
    s = text.strip()
    for a, b in _REPLACE:
        s = s.replace(a, b)
    return s.strip()


def evaluate(expression: str) -> tuple[Fraction, list[int]]:
    """Exact value and the integer literals of a whitelisted arithmetic expression; raises ValueError."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    bad = _BAD_CHARS.search(expression)
    if bad:  # decimal digits only: no names, calls, floats, hex/underscore literals, strings
        raise ValueError(f"character {bad.group()!r} is not allowed (only digits, + - * / and parentheses)")
    try:
        tree = ast.parse(expression, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise ValueError(f"not a valid arithmetic expression: {type(e).__name__}") from None
    leaves: list[int] = []
    try:
        value = _value(tree, leaves)
    except RecursionError:
        raise ValueError("expression nested too deeply") from None
    return value, leaves


def extract_expression(response: str) -> str | None:
    """The content of the last ``\\boxed{...}`` (the paper's answer format), or None."""
    boxed = boxed_contents(response or "")
    return boxed[-1].strip() if boxed else None


def check_expression(expression: str | None, numbers: Sequence[int], target: int = TARGET) -> CountdownCheck:
    """Is ``expression`` a +-*/ combination of exactly ``numbers`` (each once) equal to ``target``?

    A well-formed expression that uses the wrong numbers or has the wrong value is ``correct=False`` with
    status ok; text that is not a whitelisted expression (or divides by zero) is status invalid.
    """
    if expression is None or not expression.strip():
        return CountdownCheck(None, Status.INVALID, message="no expression (no \\boxed{...} answer found)")
    expr = normalize_expression(expression)
    try:
        value, leaves = evaluate(expr)
    except ZeroDivisionError:
        return CountdownCheck(None, Status.INVALID, expression=expr, message="division by zero")
    except ValueError as e:
        return CountdownCheck(None, Status.INVALID, expression=expr, message=str(e))
    want, got = Counter(int(x) for x in numbers), Counter(leaves)
    details = {"numbers_used": sorted(leaves)}
    if got != want:
        missing, extra = sorted((want - got).elements()), sorted((got - want).elements())
        msg = f"numbers must be used exactly once: missing {missing}, extra {extra}"
        return CountdownCheck(False, Status.OK, value, expr, msg, details)
    if value != target:
        return CountdownCheck(False, Status.OK, value, expr, f"evaluates to {value}, not {target}", details)
    return CountdownCheck(True, Status.OK, value, expr, None, details)


def check_response(response: str, instance: CountdownInstance) -> CountdownCheck:
    """Verify the last ``\\boxed{}`` expression of a policy response against an instance."""
    return check_expression(extract_expression(response), instance.numbers, instance.target)


def reward(response: str, instance: CountdownInstance) -> float:
    """Binary verifier reward for RL: 1 for a correct expression, else 0.

    A response with no parseable expression earns 0 too: that is the *policy's* failure to answer, not a
    judge failure, so it is not masked (masking would spare the policy any penalty for malformed answers).
    """
    return 1.0 if check_response(response, instance).correct else 0.0


def score_group(group: Group) -> GroupScore:
    """Verifier rewards of a Countdown group (numbers and target from ``group.metadata``)."""
    try:
        numbers, target = group.metadata["numbers"], group.metadata.get("target", TARGET)
    except KeyError:
        raise ValueError(f"group {group.id!r} is not a Countdown group (metadata has no 'numbers')") from None
    checks = [check_expression(extract_expression(r), numbers, target) for r in group.responses]
    rewards = [1.0 if c.correct else 0.0 for c in checks]
    return GroupScore(group.id, np.asarray(rewards), [Status.OK] * len(checks),
                      components={"unparseable": [c.status is not Status.OK for c in checks]},
                      cost=Cost(verifier_calls=len(checks)), messages=[c.message for c in checks])


@dataclass(frozen=True)
class CountdownOptions(Options):
    """The exact verifier has no settings: numbers and target come from each group (``metadata``)."""


class CountdownScorer(BaseScorer):
    """RARO's Countdown task (App. C.2) as a scorer: the exact verifier's binary reward per response.

    A group reads ``numbers`` (and optionally ``target``, default 24) from its metadata, i.e. from extra
    fields of an input row; a group without them gets status ``error`` with the reason, never a silent 0.
    """

    name = "countdown"
    Options = CountdownOptions
    options: CountdownOptions

    def _score(self, groups: list[Group]) -> list[GroupScore]:
        out = []
        for g in groups:
            try:
                out.append(score_group(g))
            except ValueError as e:
                out.append(GroupScore.failed(g.id, len(g), Status.ERROR, str(e)))
        return out

