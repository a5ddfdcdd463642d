"""Training prompts from JSONL: the shared GSM8K file reads as is; bad rows name file, line and field."""

from __future__ import annotations

import pytest

from rewardkit.grpo.data import read_prompts
from rewardkit.runtime.inputs import InputError


def test_shared_gsm8k_rows_become_prompt_groups():
    from rewardkit.evals.data import data_path

    try:
        path = data_path("gsm8k", "test.jsonl")
    except FileNotFoundError as e:
        pytest.skip(f"shared data not found: {e}")
    if not path.exists():
        pytest.skip(f"shared data not found at {path}")
    groups = read_prompts(path, limit=3)
    assert len(groups) == 3 and groups[0].id == "gsm8k-test-0000"
    assert groups[0].prompt.startswith("Janet") and groups[0].reference == "18"
    assert groups[0].expert.endswith("#### 18") and groups[0].responses == []


@pytest.mark.parametrize("limit", [0, -1])
def test_a_limit_below_one_is_refused(tmp_path, limit):
    """Before: `rewardkit train --limit 0` (or -1) trained on the first prompt alone, without a word."""
    from rewardkit.runtime.jobs import JobError

    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "a"}\n{"prompt": "b"}\n')
    assert [g.prompt for g in read_prompts(p, limit=1)] == ["a"]
    with pytest.raises(JobError, match=f"--limit must be a positive integer, got {limit}"):
        read_prompts(p, limit=limit)


@pytest.mark.parametrize("line, needle", [
    ("not json", "not JSON"),
    ("[1]", "JSON object"),
    ('{"answer": "3"}', "field 'prompt'"),
    ('{"prompt": "   "}', "field 'prompt'"),
])
def test_bad_rows_name_the_line_and_field(tmp_path, line, needle):
    p = tmp_path / "p.jsonl"
    p.write_text('{"prompt": "ok"}\n' + line + "\n")
    with pytest.raises(InputError, match=needle) as e:
        read_prompts(p)
    assert f"{p}:2" in str(e.value)
