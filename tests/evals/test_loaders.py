"""Benchmark loaders on the real shared files, a column-mapped file, the hub path offline, and the
LiveCodeBench format (a hand-made fixture: no LiveCodeBench data is available on these machines)."""

import base64
import json
import os
import pickle
import zlib
from pathlib import Path

import pytest
from rewardkit.evals.data import data_path
from rewardkit.evals.loaders import (
    MATH_INSTRUCTION,
    BenchmarkError,
    UnsafePickleError,
    decode_lcb_tests,
    gsm8k_final_answer,
    load_benchmark,
    load_file,
    load_livecodebench,
    safe_unpickle,
)

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "livecodebench_lite.jsonl"


@pytest.mark.parametrize("name,rows,first_answer", [
    ("math500", 500, r"\left( 3, \frac{\pi}{2} \right)"), ("aime24", 30, None), ("aime25", 30, "70"),
    ("amc23", 40, None), ("gsm8k", 1319, None),
])
def test_shared_math_benchmarks(name, rows, first_answer):
    probs = load_benchmark(name)
    assert len(probs) == rows and len({p.id for p in probs}) == rows
    assert all(p.kind == "math" and p.answer and p.question for p in probs)
    if first_answer:
        assert probs[0].answer == first_answer
    msg = probs[0].messages()[0]["content"]
    assert msg.startswith(probs[0].question) and msg.endswith(MATH_INSTRUCTION)


def test_aime_answers_are_integers_and_limit():
    assert all(0 <= int(p.answer) <= 999 for p in load_benchmark("aime24") + load_benchmark("aime25"))
    assert [p.id for p in load_benchmark("aime24", limit=2)] == ["aime2024-I-01", "aime2024-I-02"]


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(limit):
    """Before: limit -1 sliced off the last problem (29 of aime24's 30) and 0 gave none, without a word
    (`rewardkit eval generate ... --limit -1`)."""
    from rewardkit.runtime.jobs import JobError

    with pytest.raises(JobError, match=f"--limit must be a positive integer, got {limit}"):
        load_benchmark("aime24", limit=limit)


def test_gsm8k_answer_after_hashes_matches_the_shared_answer_field():
    rows = [json.loads(line) for line in open(data_path("gsm8k", "test.jsonl"))]
    assert all(gsm8k_final_answer(r["solution"]) == r["answer"] for r in rows)
    assert gsm8k_final_answer("... so 2,125 in total.\n#### 2,125") == "2125"
    with pytest.raises(BenchmarkError, match="no '####'"):
        gsm8k_final_answer("no marker")


def test_humaneval_is_code_with_tests():
    probs = load_benchmark("humaneval")
    assert len(probs) == 164 and probs[0].id == "HumanEval/0" and probs[0].entry_point == "has_close_elements"
    assert "def check(candidate)" in probs[0].tests and probs[0].kind == "code"


def test_any_file_with_a_column_mapping(tmp_path):
    p = tmp_path / "mine.jsonl"
    p.write_text(json.dumps({"qid": "a", "text": "1+1?", "gold": "#### 2"}) + "\n")
    probs = load_file(p, mapping={"id": "qid", "question": "text", "answer": "gold"})
    assert probs[0].id == "a" and probs[0].question == "1+1?" and probs[0].answer == "2"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"id": "x", "problem": "2+2?", "answer": "4"}]), tmp_path / "m.parquet")
    assert load_benchmark(tmp_path / "m.parquet")[0].answer == "4"
    with pytest.raises(BenchmarkError, match=r"mine.jsonl:1: missing field 'answer'"):
        load_file(p, mapping={"question": "text"})


def test_unknown_benchmark_and_hub_offline(monkeypatch):
    with pytest.raises(BenchmarkError, match="unknown benchmark 'math5000'; known: math500"):
        load_benchmark("math5000")
    # offline mode as datasets reads it at call time (the env var is read once, at import): no 23 s of retries
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(BenchmarkError, match="cannot load hub dataset 'no-such-org/no-such-set'"):
        load_benchmark("hub:no-such-org/no-such-set")


def test_livecodebench_fixture_rows_decode_public_and_private():
    probs = load_livecodebench(FIXTURE)
    assert [p.id for p in probs] == ["abc999_a", "9999"]
    assert probs[0].tests["public"] == [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    assert [t["output"] for t in probs[0].tests["private"]] == ["7\n", "0\n"]
    assert probs[1].entry_point == "doubleIt" and probs[1].tests["private"][0]["testtype"] == "functional"


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /tmp/rewardkit-pickle-pwned",))


def test_malicious_pickle_is_refused_and_never_runs(tmp_path):
    marker = Path("/tmp/rewardkit-pickle-pwned")
    marker.unlink(missing_ok=True)
    evil = base64.b64encode(zlib.compress(pickle.dumps(_Boom()))).decode()
    with pytest.raises(UnsafePickleError, match="refused pickle global"):
        decode_lcb_tests(evil)
    assert not marker.exists()
    row = json.loads(FIXTURE.read_text().splitlines()[0]) | {"private_test_cases": evil}
    bad = tmp_path / "evil.jsonl"
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(UnsafePickleError, match="evil.jsonl:1"):
        load_livecodebench(bad)
    assert not marker.exists()
    # plain containers still load
    assert safe_unpickle(pickle.dumps({"a": [1, 2.5, "x", (True, None)]})) == {"a": [1, 2.5, "x", (True, None)]}
    with pytest.raises(ValueError, match="neither JSON nor"):
        decode_lcb_tests("not base64 at all!")
