"""Splits by problem: a problem never lands in two splits, whichever data set or row it comes from."""

from __future__ import annotations

import json

import pytest
from rewardkit.evals.data import data_path
from rewardkit.evals.processbench import default_root, load_processbench
from rewardkit.evals.splits import (
    assign_split,
    ids_sha256,
    problem_key,
    problems_of,
    split_by_problem,
)

MATH500 = data_path("math500", "test.jsonl")


@pytest.mark.skipif(not (default_root() / "olympiadbench.jsonl").exists(), reason="ProcessBench data not found")
def test_processbench_split_never_shares_a_problem():
    # olympiadbench holds 1,000 solutions of 561 problems: up to 5 solutions share one problem
    rows = load_processbench("olympiadbench")
    parts = split_by_problem(rows, lambda r: r.problem)
    assert sum(len(v) for v in parts.values()) == len(rows)
    problems = {k: problems_of(v, lambda r: r.problem) for k, v in parts.items()}
    assert not problems["train"] & problems["test"]
    assert not problems["train"] & problems["val"]
    assert not problems["val"] & problems["test"]
    shared = [r for r in rows if sum(x.problem == r.problem for x in rows) > 1]
    assert shared  # the property is tested on problems that really repeat


@pytest.mark.skipif(not MATH500.exists(), reason="shared data not found")
def test_same_problem_same_split_across_data_sets():
    # ProcessBench's MATH split and MATH-500 share 108 problems; each lands in the same split in both
    pb = {problem_key(r.problem) for r in load_processbench("math")}
    m500 = [json.loads(line) for line in MATH500.open()]
    both = [r["problem"] for r in m500 if problem_key(r["problem"]) in pb]
    assert len(both) == 108
    pb_text = {problem_key(r.problem): r.problem for r in load_processbench("math")}
    for p in both:
        assert assign_split(p) == assign_split(pb_text[problem_key(p)])


def test_whitespace_does_not_change_the_problem():
    assert problem_key("  What is\n 1 +  1? ") == "What is 1 + 1?"
    assert assign_split("What is 1 + 1?", seed=3) == assign_split("What is\n1 + 1?  ", seed=3)


def test_pinned_problems_go_to_the_pinned_split():
    items = [f"problem {i}" for i in range(200)]
    free = split_by_problem(items, str)
    moved = free["train"][:5]
    parts = split_by_problem(items, str, pinned=[f" {p} " for p in moved])
    assert set(moved) <= set(parts["test"])
    assert set(parts["train"]) == set(free["train"]) - set(moved)  # the others stay where they were


def test_split_depends_on_the_problem_and_seed_only():
    a = split_by_problem([f"p{i}" for i in range(300)], str, seed=1)
    b = split_by_problem([f"p{i}" for i in reversed(range(300))] + ["extra"], str, seed=1)
    for k in a:
        assert set(a[k]) <= set(b[k])
    c = split_by_problem([f"p{i}" for i in range(300)], str, seed=2)
    assert a != c


def test_fractions_are_roughly_kept():
    parts = split_by_problem([f"q{i}" for i in range(5000)], str, {"train": 0.6, "val": 0.1, "test": 0.3})
    assert abs(len(parts["train"]) / 5000 - 0.6) < 0.03
    assert abs(len(parts["val"]) / 5000 - 0.1) < 0.02


@pytest.mark.parametrize("fractions", [{"train": 0.5, "test": 0.4}, {"train": 1.2, "test": -0.2}, {}])
def test_bad_fractions_are_refused(fractions):
    with pytest.raises(ValueError, match="fractions"):
        assign_split("x", fractions)


def test_unknown_pinned_split_is_refused():
    with pytest.raises(ValueError, match="pinned split"):
        split_by_problem(["a"], str, {"train": 1.0}, pinned=["a"])


def test_ids_sha256_is_order_free_and_set_specific():
    assert ids_sha256(["b", "a"]) == ids_sha256(["a", "b"])
    assert ids_sha256(["a", "b"]) != ids_sha256(["a", "c"])
    # sha256 of "a\nb", checked with `printf 'a\nb' | sha256sum`
    assert ids_sha256(["b", "a"]) == "7e18f737311b2dc3b2f269dd78396b0351f14fb66efa879f768cb23181883c78"
