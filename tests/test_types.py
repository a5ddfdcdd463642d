import json
import math
import sys

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


# --- Status -------------------------------------------------------------------------------------------------

def test_status_values_are_the_json_words_and_print_plainly():
    assert [s.value for s in Status] == ["ok", "abstain", "invalid", "timeout", "error"]
    assert str(Status.TIMEOUT) == "timeout" and f"{Status.ABSTAIN}" == "abstain"
    assert Status("invalid") is Status.INVALID and Status.ERROR == "error"  # a str enum: equal to its word


# --- Group: every refusal names the group and the field ------------------------------------------------------

def test_group_id_must_be_text_or_an_integer():
    assert Group(0, "q", ["x"]).id == "0"
    assert Group(-3, "q", ["x"]).id == "-3"
    with pytest.raises(TypeError, match=r"^group id must be a string, got a boolean$"):
        Group(True, "q", ["x"])  # a bool is an int to Python, not an id
    with pytest.raises(TypeError, match=r"^group id must be a string, got None$"):
        Group(None, "q", ["x"])
    with pytest.raises(TypeError, match=r"^group id must be a string, got a float$"):
        Group(1.5, "q", ["x"])


def test_group_field_refusals_name_the_group_and_field():
    with pytest.raises(TypeError, match=r"^group 'a': prompt must be a string, got None$"):
        Group("a", None, ["x"])
    with pytest.raises(TypeError, match=r"^group 'a': responses must be a list of strings, got a bytes \(one"):
        Group("a", "q", b"x")
    with pytest.raises(TypeError, match=r"^group 'a': responses must be a list of strings, got a int$"):
        Group("a", "q", 5)
    with pytest.raises(TypeError, match=r"^group 'a': responses\[0\] must be a string, got None$"):
        Group("a", "q", [None, "x"])
    with pytest.raises(TypeError, match=r"^group 'a': responses\[2\] must be a string, got a bytes$"):
        Group("a", "q", ["x", "y", b"z"])
    with pytest.raises(TypeError, match=r"^group 'a': expert must be a string or None, got a int$"):
        Group("a", "q", ["x"], expert=3)
    with pytest.raises(TypeError, match=r"^group 'a': metadata must be a dict, got a list$"):
        Group("a", "q", ["x"], metadata=[("k", 1)])
    with pytest.raises(TypeError, match=r"^group 'a': metadata must be a dict, got None$"):
        Group("a", "q", ["x"], metadata=None)
    with pytest.raises(TypeError, match=r"^group 'a': reference\[1\]: expected a string or a number, got None$"):
        Group("a", "q", ["x"], reference=["4", None])


def test_group_reads_any_sequence_of_responses_as_a_list():
    g = Group("a", "q", ("x", "y"), expert="sol", metadata={"k": 1})
    assert g.responses == ["x", "y"] and isinstance(g.responses, list) and len(g) == 2
    assert g.expert == "sol" and g.metadata == {"k": 1}
    assert Group("a", "q", (r for r in ["p", "q", "r"])).responses == ["p", "q", "r"]
    empty = Group("a", "q", [])
    assert len(empty) == 0 and empty.reference is None and empty.references == ()
    assert empty.expert is None and empty.labels is None and empty.metadata == {}


def test_group_labels_are_booleans_one_per_response():
    g = Group("a", "q", ["x", "y", "z"], labels=[1, 0, np.bool_(True)])
    assert g.labels == [True, False, True] and all(type(x) is bool for x in g.labels)
    assert Group("a", "q", ["x"], labels=[np.bool_(False)]).labels == [False]
    assert Group("a", "q", ["x"], labels=None).labels is None
    # before: a generator was read out by the check, so the labels kept were [] ("0 labels for 2 responses")
    assert Group("a", "q", ["x", "y"], labels=(r == "x" for r in ["x", "y"])).labels == [True, False]
    # bytes are not a list of flags although they iterate as the integers 1 and 0
    for bad in ("10", b"\x01\x00", [2], [0.5], [None], ["True"], 1, [np.array([1, 0])], [[1]]):
        with pytest.raises(TypeError, match=r"^group 'a': labels must be a list of booleans \(one per response\)$"):
            Group("a", "q", ["x"] * (len(bad) if hasattr(bad, "__len__") else 1), labels=bad)
    with pytest.raises(ValueError, match=r"^group 'a': 1 labels for 2 responses$"):
        Group("a", "q", ["x", "y"], labels=[True])


# --- references: one normal form ----------------------------------------------------------------------------

def test_reference_value_normal_form_of_numbers():
    from rewardkit.types import reference_value

    assert reference_value(None) is None and reference_value("4") == "4" and reference_value("") == ""
    assert reference_value(-3) == "-3" and reference_value(np.int64(7)) == "7"
    assert reference_value(4.0) == "4" and reference_value(-2.0) == "-2" and reference_value(0.0) == "0"
    assert reference_value(np.float32(2.5)) == "2.5" and reference_value(np.float64(0.1)) == "0.1"
    # a large float is not an exact integer of that many digits: int(1e23) is 99999999999999991611392
    assert reference_value(1e23) == "1e+23"
    assert reference_value(123456.0) == "123456"
    # digits are kept as an integer up to sys.float_info.dig (15): 16 digits may not be the integer that was meant
    # (float(9007199254740993) is 9007199254740992.0), so from 10**15 on the float is written as Python writes it
    assert sys.float_info.dig == 15
    assert reference_value(float(10**15 - 1)) == "999999999999999" and reference_value(-float(10**15 - 1)) == "-" + "9" * 15
    assert reference_value(float(10**15)) == "1000000000000000.0" and reference_value(-1e15) == "-1000000000000000.0"


def test_reference_value_refusals_say_where_and_what():
    from rewardkit.types import reference_value

    with pytest.raises(ValueError, match=r"^reference: expected a string or a finite number, got inf$"):
        reference_value(float("inf"))
    with pytest.raises(ValueError, match=r"^ref: expected a string or a finite number, got -inf$"):
        reference_value(np.float64(-np.inf), "ref")
    with pytest.raises(TypeError, match=r"^reference: expected a string or a number, got a boolean \(correctness"):
        reference_value(np.bool_(False))
    with pytest.raises(TypeError, match=r"^reference\[1\]: expected a string or a number, got a boolean"):
        reference_value(["4", True])
    with pytest.raises(TypeError, match=r"^reference\[1\]: expected a string or a number, got a list$"):
        reference_value(["a", ["b", "c"]])  # several-of-several has no meaning
    with pytest.raises(TypeError, match=r"^reference\[0\]: expected a string, a number or a list of them, got a dict"):
        reference_value([{"gt": "4"}])
    with pytest.raises(TypeError, match=r"^gold: expected a string, a number or a list of them, got a set$"):
        reference_value({"4"}, "gold")
    for empty in ([], (), np.array([])):
        with pytest.raises(ValueError, match=r"^reference: an empty list of references \(no reference\? pass None\)$"):
            reference_value(empty)


def test_several_references_keep_distinct_entries_in_order():
    from rewardkit.types import as_references, reference_value

    assert reference_value(np.array([1, 2])) == ("1", "2")
    # before: a 0-d array raised a bare "iteration over a 0-d array"
    assert reference_value(np.array(4)) == "4" and reference_value(np.array("1/2")) == "1/2"
    with pytest.raises(TypeError, match=r"^reference: expected a string or a number, got a boolean"):
        reference_value(np.array(True))
    assert reference_value(("b", "a", "b", 3, 3.0)) == ("b", "a", "3")  # 3 and 3.0 read as the same text
    assert reference_value(["x", "x"]) == "x"  # one distinct entry is that one string
    assert as_references(None) == () and as_references(4) == ("4",) and as_references("a") == ("a",)
    assert as_references(["a", "b", "a"]) == ("a", "b") and as_references(("z",)) == ("z",)
    assert Group("a", "q", ["x"], reference="7").references == ("7",)


def test_reference_text_reads_several_as_any_one_of_them():
    from rewardkit.types import reference_text

    assert reference_text(None) is None and reference_text("4") == "4"
    assert reference_text(("1/2", "0.5")) == "any one of these (each is correct): 1/2 | 0.5"


# --- Cost ---------------------------------------------------------------------------------------------------

def test_cost_arithmetic_covers_every_field():
    a = Cost(1, 2, 3, 4, 5, 0.25)
    b = Cost(10, 20, 30, 40, 50, 0.5)
    assert Cost() == Cost(0, 0, 0, 0, 0, 0.0)
    assert a + b == Cost(11, 22, 33, 44, 55, 0.75)
    assert a == Cost(1, 2, 3, 4, 5, 0.25)  # + makes a new Cost
    c = a
    c += b
    assert c is a and a == Cost(11, 22, 33, 44, 55, 0.75) and b == Cost(10, 20, 30, 40, 50, 0.5)
    assert a.to_dict() == {"judge_calls": 11, "prompt_tokens": 22, "completion_tokens": 33, "verifier_calls": 44,
                           "cache_hits": 55, "seconds": 0.75}
    assert Cost.total([]) == Cost()
    assert Cost.total(Cost(prompt_tokens=n) for n in (1, 2, 3)) == Cost(prompt_tokens=6)
    parts = [Cost(judge_calls=1), Cost(judge_calls=2)]
    assert Cost.total(parts) == Cost(judge_calls=3) and parts[0] == Cost(judge_calls=1)  # parts left alone


# --- GroupScore ---------------------------------------------------------------------------------------------

def test_groupscore_normalises_rewards_and_statuses():
    s = GroupScore("g", [1, 0], ["ok", Status.OK])
    assert s.rewards.dtype == np.float64 and s.rewards.tolist() == [1.0, 0.0]
    assert s.statuses == [Status.OK, Status.OK] and all(type(x) is Status for x in s.statuses)
    assert s.mask.dtype == bool and s.mask.tolist() == [True, True]
    assert s.components == {} and s.cost == Cost() and s.messages is None and s.extra == {} and s.stats == {}
    with pytest.raises(ValueError):
        GroupScore("g", [1.0], ["fine"])  # not a status


def test_groupscore_masking_does_not_touch_the_callers_array():
    r = np.array([1.0, 0.5, 0.0])
    s = GroupScore("g", r, ["ok", "error", "ok"])
    assert r.tolist() == [1.0, 0.5, 0.0]  # the scorer's own array keeps its values
    assert s.rewards[0] == 1.0 and math.isnan(s.rewards[1]) and s.rewards[2] == 0.0


def test_groupscore_refusals_name_the_group():
    with pytest.raises(ValueError, match=r"^group 'g': 2 rewards, 3 statuses$"):
        GroupScore("g", [1.0, 0.0], ["ok"] * 3)
    with pytest.raises(ValueError, match=r"^group 'g': responses \[0, 2\] are ok but have no reward$"):
        GroupScore("g", [np.nan, 1.0, np.nan, np.nan], ["ok", "ok", "ok", "error"])
    msg = (r"^group 'g': component 'k' must hold one value per response \(2\); "
           r"put per-group values in GroupScore.stats$")
    for bad in ("ab", b"ab", 1.0, [1.0], [1, 2, 3]):
        with pytest.raises(ValueError, match=msg):
            GroupScore("g", [1.0, 0.0], ["ok", "ok"], components={"k": bad})
    # before: a 0-d array (np.asarray of a per-group value) raised a bare "len() of unsized object"
    with pytest.raises(ValueError, match=msg):
        GroupScore("g", [1.0, 0.0], ["ok", "ok"], components={"k": np.array(2.0)})
    ok = GroupScore("g", [1.0, 0.0], ["ok", "ok"], components={"k": (1, 2), "a": np.zeros(2)})
    assert ok.to_row()["components"] == {"k": [1, 2], "a": [0.0, 0.0]}


def test_to_row_is_plain_json():
    s = GroupScore("g", np.array([0.5, 1.0, 0.0]), ["ok", "ok", "abstain"],
                   components={3: [np.int64(2), np.float32(0.5), np.int64(9)]},
                   cost=Cost(judge_calls=2, seconds=1.5),
                   stats={"n": np.int64(3), "frac": np.float64(np.nan), "flag": np.bool_(True), 7: (1, 2),
                          "arr": np.array([[1, 2], [3, 4]]), "st": Status.TIMEOUT, "none": None, "s": "x"},
                   extra={"verdicts": [{"k": np.float32(0.25)}], "route": Status.ABSTAIN})
    row = s.to_row()
    text = json.dumps(row, allow_nan=False)  # numpy scalars, NaN, enums all made plain
    assert json.loads(text) == row
    assert row["id"] == "g" and row["rewards"] == [0.5, 1.0, None] and type(row["rewards"][0]) is float
    assert row["statuses"] == ["ok", "ok", "abstain"]
    assert row["components"] == {"3": [2, 0.5, None]} and type(row["components"]["3"][0]) is int
    assert row["stats"] == {"n": 3, "frac": None, "flag": True, "7": [1, 2], "arr": [[1, 2], [3, 4]],
                            "st": "timeout", "none": None, "s": "x"}
    assert type(row["stats"]["n"]) is int and type(row["stats"]["flag"]) is bool
    assert row["cost"] == Cost(judge_calls=2, seconds=1.5).to_dict()
    assert row["verdicts"] == [{"k": 0.25}] and row["route"] == "abstain"
    assert "messages" not in row
    assert set(row) == {"id", "rewards", "statuses", "components", "stats", "cost", "verdicts", "route"}


def test_a_logged_infinity_is_null_and_the_row_stays_json():
    # before: -inf stayed a float, so json.dumps wrote `-Infinity` (not JSON) or, with allow_nan=False as
    # `rewardkit score` and the HTTP server write, raised: the whole group became an error over a logged value
    s = GroupScore("g", [1.0, 0.0], ["ok", "ok"], components={"logp": np.array([-np.inf, -0.5])},
                   stats={"max": float("inf"), "lo": np.float32(-np.inf)}, extra={"v": [np.inf, 1.5]})
    row = s.to_row()
    assert json.loads(json.dumps(row, allow_nan=False)) == row
    assert row["components"] == {"logp": [None, -0.5]} and row["stats"] == {"max": None, "lo": None}
    assert row["v"] == [None, 1.5] and row["rewards"] == [1.0, 0.0]


def test_to_row_keeps_messages_only_when_there_is_one():
    assert "messages" not in GroupScore("g", [1.0, 0.0], ["ok"] * 2, messages=[None, None]).to_row()
    assert "messages" not in GroupScore("g", [1.0], ["ok"], messages=[""]).to_row()
    row = GroupScore("g", [1.0, 0.0], ["ok", "error"], messages=(None, "judge died")).to_row()
    assert row["messages"] == [None, "judge died"] and isinstance(row["messages"], list)
    for k in ("id", "statuses", "components", "stats", "cost", "messages"):
        with pytest.raises(ValueError, match=rf"^scorer field '{k}' would overwrite a standard output field$"):
            GroupScore("g", [1.0], ["ok"], messages=["m"], extra={k: 0}).to_row()


def test_rewards_are_one_value_per_response():
    # before: a scalar raised a bare "len() of unsized object"; a [[1.0]] column was kept as a 2-d array
    with pytest.raises(ValueError, match=r"^group 'g': rewards must be one value per response, got shape \(\)$"):
        GroupScore("g", 1.0, ["ok"])
    with pytest.raises(ValueError, match=r"^group 'g': rewards must be one value per response, got shape \(1, 1\)$"):
        GroupScore("g", [[1.0]], ["ok"])


def test_messages_are_one_per_response():
    # before: accepted as given; api rows then read messages[i] past the end, or paired a reason with another response
    msg = r"^group 'g': messages must hold one entry \(or None\) per response \(2\)$"
    for bad in (["judge died"], [None, None, "x"], "ab"):
        with pytest.raises(ValueError, match=msg):
            GroupScore("g", [1.0, np.nan], ["ok", "error"], messages=bad)


def test_failed_group_has_no_reward_and_one_message_per_response():
    s = GroupScore.failed("g", 3, Status.TIMEOUT, "judge timed out", cost=Cost(judge_calls=1), extra={"e": 1})
    assert s.group_id == "g" and np.isnan(s.rewards).all() and len(s.rewards) == 3
    assert s.statuses == [Status.TIMEOUT] * 3 and s.messages == ["judge timed out"] * 3
    assert s.cost == Cost(judge_calls=1) and s.extra == {"e": 1} and not s.mask.any()
    assert GroupScore.failed("h", 0, Status.ERROR, "x").to_row()["rewards"] == []


# --- helpers --------------------------------------------------------------------------------------------------

def test_lone_surrogate_finds_text_utf8_cannot_write():
    from rewardkit.types import lone_surrogate

    assert lone_surrogate("plain ascii and é ∑ 😀") is None
    assert lone_surrogate("ab\ud800c") == 2 and lone_surrogate("\udfff") == 0
    assert lone_surrogate(b"\xff") is None and lone_surrogate(None) is None and lone_surrogate(3) is None


def test_to_tensors_defaults_sizes_and_empty():
    a = GroupScore("a", [1.0, 0.0, 0.5], ["ok", "timeout", "ok"])
    r, m = to_tensors([a])
    assert r.dtype == torch.float32 and r.device.type == "cpu" and m.dtype == torch.bool
    assert r.tolist() == [[1.0, 0.0, 0.5]] and m.tolist() == [[True, False, True]]  # masked: 0 and False
    with pytest.raises(ValueError, match=r"^groups have different sizes \[2, 3\]; use to_tensors per group$"):
        to_tensors([a, GroupScore("b", [1.0, 1.0], ["ok", "ok"]), a])
    r0, m0 = to_tensors([])
    assert tuple(r0.shape) == (0, 0) and tuple(m0.shape) == (0, 0) and m0.dtype == torch.bool
    assert r0.dtype == torch.float32
    rm, mm = to_tensors([a], device="meta")  # both tensors where asked (meta: a device with no data, on any machine)
    assert rm.device.type == "meta" and mm.device.type == "meta" and rm.dtype == torch.float32 and mm.dtype == torch.bool
    rm, mm = to_tensors([a], device="meta", dtype=torch.float16)
    assert rm.device.type == "meta" and rm.dtype == torch.float16 and mm.device.type == "meta"


def test_one_per_item_checks_the_count_and_reads_out_generators():
    from rewardkit.types import one_per_item

    assert one_per_item((x for x in "ab"), [1, 2], "w") == ["a", "b"]
    answer = ["a", "b"]
    assert one_per_item(answer, [1, 2], "w") is answer  # a list answer is checked, not copied
    out = one_per_item(("a", "b"), [1, 2], "w")
    assert out == ["a", "b"] and isinstance(out, list)
    assert one_per_item([], [], "w") == []
    with pytest.raises(RuntimeError, match=r"^checker 'x' returned 1 results for 2 items$"):
        one_per_item(["a"], [1, 2], "checker 'x'")
    with pytest.raises(ValueError, match=r"^counter returned 3 counts for 2 texts$"):
        one_per_item([1, 2, 3], ["s", "t"], "counter", results="counts", of="texts", error=ValueError)


def test_batch_call_makes_one_call_and_none_for_no_item():
    from rewardkit.types import batch_call

    calls = []

    def double(xs):
        calls.append(list(xs))
        return (2 * x for x in xs)

    assert batch_call(double, [], "doubler") == [] and calls == []
    assert batch_call(double, [1, 2, 3], "doubler") == [2, 4, 6] and calls == [[1, 2, 3]]
    with pytest.raises(RuntimeError, match=r"^lossy returned 1 results for 2 items$"):
        batch_call(lambda xs: xs[:1], [1, 2], "lossy")
    with pytest.raises(KeyError, match=r"lossy returned 1 verdicts for 2 claims"):
        batch_call(lambda xs: xs[:1], [1, 2], "lossy", results="verdicts", of="claims", error=KeyError)
