import json

import pytest

from rewardkit.io import BadRecord, InputError, read_groups
from rewardkit.jobs import load_groups


def write(tmp_path, name, lines):
    p = tmp_path / name
    p.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode()) + b"\n" for ln in lines))
    return p


GOOD = json.dumps({"id": "a", "problem": "1+1", "answer": "2", "responses": ["2", "3"], "correct": [True, False]})


def test_reads_shared_rollouts_as_is(rollouts_path):
    groups = [g for g in read_groups(rollouts_path)]
    assert len(groups) == 100 and sum(len(g) for g in groups) == 800
    g = groups[0]
    assert g.id == "math_cot_100-000" and g.reference == "420" and g.expert.startswith("Notice")
    assert g.labels == [True] * 8 and g.metadata["level"] == 3 and "preds" in g.metadata


@pytest.mark.parametrize(
    "line, field, msg",
    [
        ('{"problem": "p", "responses": [', None, "malformed JSON"),
        ('{"problem": "p"}', "responses", "missing"),
        ('{"problem": "p", "responses": []}', "responses", "empty response list"),
        ('{"problem": "p", "responses": ["a", 3]}', "responses[1]", "expected a string"),
        ('{"responses": ["a"]}', "prompt", "missing"),
        ('{"problem": "p", "responses": ["a"], "correct": [true, false]}', "correct", "2 labels for 1 responses"),
        ('[1, 2]', None, "expected a JSON object"),
    ],
)
def test_bad_records_name_file_line_and_field(tmp_path, line, field, msg):
    p = write(tmp_path, "in.jsonl", [GOOD, line])
    with pytest.raises(InputError) as e:
        list(read_groups(p))
    assert e.value.line == 2 and e.value.field == field and msg in str(e.value)
    assert str(e.value).startswith(f"{p}:2:")


def test_non_utf8_byte_is_reported(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, b'{"problem": "caf\xe9", "responses": ["x"]}'])
    with pytest.raises(InputError, match=r"in.jsonl:2: not valid UTF-8"):
        list(read_groups(p))


def test_skip_bad_keeps_going(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, "{oops", b"\xff\xfe", json.dumps({"id": "b", "prompt": "q", "responses": ["r"]})])
    items = list(read_groups(p, skip_bad=True))
    assert [type(i).__name__ for i in items] == ["Group", "BadRecord", "BadRecord", "Group"]
    assert [i.line for i in items if isinstance(i, BadRecord)] == [2, 3]


def test_flat_jsonl_groups_by_key(tmp_path):
    rows = [{"group_id": "q1", "prompt": "P1", "answer": "1", "response": "r1", "correct": True},
            {"group_id": "q2", "prompt": "P2", "response": "s1"},
            {"group_id": "q1", "prompt": "P1", "answer": "1", "response": "r2", "correct": False}]
    p = write(tmp_path, "flat.jsonl", [json.dumps(r) for r in rows])
    g1, g2 = read_groups(p)
    assert (g1.id, g1.responses, g1.labels, g1.reference) == ("q1", ["r1", "r2"], [True, False], "1")
    assert (g2.id, g2.responses, g2.labels) == ("q2", ["s1"], None)


def test_parquet_and_saved_dataset(tmp_path, rollouts_path):
    import datasets

    rows = [json.loads(x) for x in rollouts_path.open()][:5]
    ds = datasets.Dataset.from_list(rows)
    ds.to_parquet(str(tmp_path / "r.parquet"))
    ds.save_to_disk(str(tmp_path / "ds"))
    for src in (tmp_path / "r.parquet", tmp_path / "ds"):
        groups = list(read_groups(src))
        assert [g.id for g in groups] == [r["id"] for r in rows]
        assert groups[3].responses == rows[3]["responses"] and groups[3].labels == rows[3]["correct"]


def test_duplicate_ids_are_an_error(tmp_path):
    p = write(tmp_path, "in.jsonl", [GOOD, GOOD])
    with pytest.raises(InputError, match="duplicate group id 'a'"):
        load_groups(p)
