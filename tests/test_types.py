import json
import math

import numpy as np
import pytest
import torch

from rewardkit.types import Cost, Group, GroupScore, Status, to_tensors


def test_non_ok_responses_never_carry_a_reward():
    s = GroupScore("g", [1.0, 0.0, 0.5], [Status.OK, Status.INVALID, "timeout"])
    assert s.rewards[0] == 1.0 and math.isnan(s.rewards[1]) and math.isnan(s.rewards[2])
    assert s.mask.tolist() == [True, False, False]
    row = json.loads(json.dumps(s.to_row()))
    assert row["rewards"] == [1.0, None, None]
    assert row["statuses"] == ["ok", "invalid", "timeout"]


def test_a_non_ok_response_has_no_component_value_in_its_row():
    """Before: the row kept what the scorer computed (a lone-surrogate response: `verifier: 0.0`, status error)."""
    statuses = [Status.OK, Status.ERROR, Status.ABSTAIN, Status.INVALID, Status.TIMEOUT]
    s = GroupScore("g", [1.0, 0.0, 0.0, 0.0, 0.0], statuses,
                   components={"verifier": np.array([1.0, 0.0, 0.0, 1.0, 0.0]), "label": ["a", "b", "c", "d", "e"],
                               "routed": [True] * 5, "votes": [[1, 2]] * 5})
    row = json.loads(json.dumps(s.to_row(), allow_nan=False))
    assert row["components"] == {"verifier": [1.0, None, None, None, None], "label": ["a", None, None, None, None],
                                 "routed": [True, None, None, None, None], "votes": [[1, 2], None, None, None, None]}
    assert s.components["verifier"].tolist() == [1.0, 0.0, 0.0, 1.0, 0.0]  # in memory, the scorer's own values


def test_ok_without_reward_is_rejected():
    with pytest.raises(ValueError, match="ok but have no reward"):
        GroupScore("g", [np.nan], [Status.OK])


def test_ok_with_an_infinite_reward_is_rejected():
    # a GRPO advantage of a group holding +inf is inf - inf = nan for that response and -inf/nan for the rest
    with pytest.raises(ValueError, match=r"'g': responses \[1\] are ok but their reward is infinite"):
        GroupScore("g", [0.5, np.inf, 1.0], [Status.OK] * 3)
    with pytest.raises(ValueError, match=r"responses \[0\] are ok"):
        GroupScore("g", [-np.inf], [Status.OK])
    s = GroupScore("g", [0.5, np.inf], [Status.OK, Status.ERROR])  # not ok: no reward at all, as for any value
    assert s.rewards[0] == 0.5 and math.isnan(s.rewards[1])


def test_group_validates_labels():
    with pytest.raises(ValueError, match="2 labels for 1 responses"):
        Group("g", "p", ["a"], labels=[True, False])


def test_cost_adds_fieldwise():
    c = Cost(judge_calls=2, prompt_tokens=10) + Cost(judge_calls=1, cache_hits=3, seconds=0.5)
    assert (c.judge_calls, c.prompt_tokens, c.cache_hits, c.seconds) == (3, 10, 3, 0.5)
    assert Cost.total([Cost(verifier_calls=1)] * 4).verifier_calls == 4


def test_to_tensors_masks_failures():
    a = GroupScore("a", [1.0, 0.0], ["ok", "ok"])
    b = GroupScore("b", [0.25, 0.0], ["ok", "error"])
    r, m = to_tensors([a, b], dtype=torch.float64)
    assert r.shape == (2, 2) and r.dtype == torch.float64
    assert m.tolist() == [[True, True], [True, False]]
    assert r[1, 0].item() == 0.25


def test_extra_fields_cannot_shadow_standard_ones():
    s = GroupScore("g", [1.0], ["ok"], extra={"rewards": 1})
    with pytest.raises(ValueError, match="overwrite"):
        s.to_row()


def test_a_string_is_not_a_list_of_responses():
    # before: Group("a", "q", "\\boxed{4}") silently became 9 one-character responses
    with pytest.raises(TypeError, match=r"responses must be a list of strings, got a str \(one response\? pass \[response\]\)"):
        Group("a", "q", "\\boxed{4}", reference="4")
    with pytest.raises(TypeError, match=r"responses\[1\] must be a string, got a int"):
        Group("a", "q", ["x", 4])
    with pytest.raises(TypeError, match="prompt must be a string, got a list"):
        Group("a", ["q"], ["x"])


def test_references_are_read_as_the_cli_reads_them():
    # before: reference=4 raised AttributeError deep inside the verifier
    assert Group("a", "q", ["x"], reference=4).reference == "4"
    assert Group("a", "q", ["x"], reference=2.50).reference == "2.5"
    assert Group("a", "q", ["x"], reference=1e3).reference == "1000"
    assert Group(7, "q", ["x"]).id == "7"
    with pytest.raises(TypeError, match="reference: expected a string or a number, got a boolean"):
        Group("a", "q", ["x"], reference=True)
    with pytest.raises(ValueError, match="reference: expected a string or a finite number, got nan"):
        Group("a", "q", ["x"], reference=float("nan"))
    with pytest.raises(TypeError, match=r"reference: expected a string, a number or a list of them, got a dict"):
        Group("a", "q", ["x"], reference={"gt": "4"})


def test_a_list_of_references_means_any_of_them_is_right():
    from rewardkit import get_scorer

    g = Group("a", "Half of 1?", [r"\boxed{0.5}", r"\boxed{1/2}", r"\boxed{2}"], reference=["1/2", 0.5, "1/2"])
    assert g.reference == ("1/2", "0.5") and g.references == ("1/2", "0.5")  # distinct, in order, as text
    assert Group("b", "q", ["x"], reference=["4"]).reference == "4"  # a list of one is that one
    assert get_scorer("verifier").score([g])[0].rewards.tolist() == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="an empty list of references"):
        Group("a", "q", ["x"], reference=[])
