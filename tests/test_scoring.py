import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rewardkit.scoring import (
    diversity_stats,
    dr_grpo_advantages,
    get_scorer,
    grpo_advantages,
    reward_diversity,
    rloo_advantages,
    scorer_names,
    scorer_options,
)

rewards = arrays(np.float64, st.tuples(st.integers(1, 5), st.integers(2, 9)),
                 elements=st.integers(0, 100).map(lambda k: k / 100))  # rewards on a 0.01 grid


@given(rewards)
def test_grpo_is_zero_mean_and_unit_scale(r):
    a = grpo_advantages(r)
    assert np.allclose(a.mean(-1), 0, atol=1e-9)
    diverse = r.std(-1) > 1e-3
    assert np.allclose(a[diverse].std(-1), 1, atol=1e-3)
    assert np.all(a[~reward_diversity(r)] == 0)  # eq. 4: non-diverse -> zero advantage


@given(rewards)
def test_dr_grpo_and_rloo_are_zero_mean(r):
    assert np.allclose(dr_grpo_advantages(r).sum(-1), 0, atol=1e-9)
    assert np.allclose(rloo_advantages(r).sum(-1), 0, atol=1e-9)


def test_rloo_hand_example():
    # r = [1, 0, 0, 1]: baseline of response 0 is mean(0, 0, 1) = 1/3, so A_0 = 2/3; A_1 = 0 - 2/3
    a = rloo_advantages(np.array([1.0, 0.0, 0.0, 1.0]))
    assert np.allclose(a, [2 / 3, -2 / 3, -2 / 3, 2 / 3])


def test_grpo_hand_example():
    # r = [1, 0]: mean 1/2, population std 1/2 -> A = [+1, -1] (eq. 2)
    assert np.allclose(grpo_advantages(np.array([1.0, 0.0]), eps=0), [1, -1])


def test_masked_responses_are_left_out():
    r = np.array([[1.0, 0.0, np.nan, 1.0]])
    a = grpo_advantages(r)
    assert a[0, 2] == 0
    assert np.allclose(a[0, [0, 1, 3]], grpo_advantages(np.array([1.0, 0.0, 1.0])))


def test_diversity_counts():
    st_ = diversity_stats([np.ones(4), np.zeros(4), np.array([1, 0, 1, 1.0]), np.array([0.5, 0.5, np.nan, 0.5])])
    assert (st_.groups, st_.non_diverse, st_.all_correct, st_.all_incorrect) == (4, 3, 1, 1)
    assert st_.nonzero_advantage_fraction == pytest.approx(4 / 15)


ESTIMATORS = (grpo_advantages, dr_grpo_advantages, rloo_advantages)


def test_a_mask_leaves_responses_out_as_nan_does():
    # a response masked out (its reward failed) is out of its group's statistics and gets A = 0; a NaN reward is out
    # too, also where the mask keeps it; a trainer's mask of 0/1 floats reads as booleans. By hand: the valid
    # rewards are [1, 0] (mean 1/2, population std 1/2; each one's only peer is the other)
    r = np.array([1.0, 0.0, 7.0, np.nan])
    for mask in ([True, True, False, True], np.array([1.0, 1.0, 0.0, 1.0])):
        assert grpo_advantages(r, mask, eps=0).tolist() == [1.0, -1.0, 0.0, 0.0]
        assert dr_grpo_advantages(r, mask).tolist() == [0.5, -0.5, 0.0, 0.0]
        assert rloo_advantages(r, mask).tolist() == [1.0, -1.0, 0.0, 0.0]
        assert reward_diversity(r, mask).tolist() == [True]
    assert reward_diversity([1.0, 1.0, 0.0], [True, True, False]).tolist() == [False]  # the 0 is masked out
    # unmasked, the 7 counts: Dr. GRPO's mean is 8/3
    assert dr_grpo_advantages(r) == pytest.approx([1 - 8 / 3, -8 / 3, 7 - 8 / 3, 0.0])


def test_a_none_reward_reads_as_nan():
    # TRL's reward functions return None for a sample they do not score: it is left out like a NaN
    assert grpo_advantages([1.0, None, 0.0], eps=0).tolist() == [1.0, 0.0, -1.0]


def test_a_response_with_no_peer_gets_no_advantage():
    # one valid response in its group: GRPO's and Dr. GRPO's mean is the response itself, and RLOO has no other
    # response to be its baseline, so A = 0 and the group is not diverse; beside it a group of two, by hand
    r = np.array([[5.0, np.nan, np.nan], [1.0, 0.0, np.nan]])
    for f in ESTIMATORS:
        assert f(r)[0].tolist() == [0.0, 0.0, 0.0]
    assert grpo_advantages(r)[1] == pytest.approx([1.0, -1.0, 0.0], rel=1e-5)  # std 1/2 (+ eps 1e-6)
    assert dr_grpo_advantages(r)[1].tolist() == [0.5, -0.5, 0.0]
    assert rloo_advantages(r)[1].tolist() == [1.0, -1.0, 0.0]
    assert reward_diversity(r).tolist() == [False, True]


def test_grpo_adds_eps_to_the_std():
    # Reasoning Arena eq. 2: A = (R - mean) / (std + eps); r = [1, 0] has std 1/2, so eps = 1/2 halves A
    assert grpo_advantages(np.array([1.0, 0.0]), eps=0.5).tolist() == [0.5, -0.5]


def test_advantages_keep_the_shape_they_are_given():
    for f in ESTIMATORS:
        assert f(np.array([1.0, 0.0, 1.0])).shape == (3,)
        assert f(np.array([[1.0, 0.0], [0.0, 0.0]])).shape == (2, 2)


def test_diversity_is_the_population_std_above_tol():
    # eq. 3: D(G) = 1[sigma_G > tol]; r = [1, 0] has population std 1/2
    assert reward_diversity(np.array([1.0, 0.0]), tol=0.49).tolist() == [True]
    assert reward_diversity(np.array([1.0, 0.0]), tol=0.5).tolist() == [False]


def test_diversity_stats_count_each_kind_of_group():
    from rewardkit.types import GroupScore, Status

    groups = [np.full(3, np.nan),  # nothing valid: a group, nothing else
              GroupScore("g", [0.0, 0.0], [Status.OK, Status.OK]),  # all incorrect
              np.array([1.0, 0.0, 1.0]),  # diverse: 3 non-zero advantages
              np.array([0.3, 0.3]),  # non-diverse, neither all correct nor all incorrect
              [1.0, 1.0, None],  # all correct (2 valid: None, TRL's unscored sample, reads as NaN)
              np.array([1.0, 1.0]),  # all correct
              np.array([0.0, 1.0])]  # diverse: 2 non-zero advantages
    s = diversity_stats(groups)
    assert (s.groups, s.non_diverse, s.all_correct, s.all_incorrect) == (7, 4, 2, 1)
    assert s.nonzero_advantage_fraction == pytest.approx(5 / 13) and s.non_diverse_fraction == pytest.approx(4 / 7)
    none = diversity_stats([np.full(2, np.nan)])
    assert (none.groups, none.non_diverse, none.nonzero_advantage_fraction) == (1, 0, 0.0)
    assert diversity_stats([]).non_diverse_fraction == 0.0


def test_registry_lists_and_builds_verifier():
    assert "verifier" in scorer_names()
    names = {o.name: o for o in scorer_options("verifier")}
    assert names["timeout"].type == "float" and names["checker"].type == "AnswerChecker | None"
    assert names["timeout"].default == 5.0 and "seconds" in names["timeout"].help
    sc = get_scorer("verifier", timeout="2.5")
    assert sc.checker.timeout == 2.5
    with pytest.raises(TypeError, match="no option"):
        get_scorer("verifier", bogus="1")
    with pytest.raises(KeyError, match="unknown scorer"):
        get_scorer("nope")


def test_a_module_class_that_is_no_scorer_is_one_clear_error(tmp_path, monkeypatch):
    """Before: `--scorer rewardkit.verifier:Nope` and `--scorer json:JSONDecoder` ended in AttributeError tracebacks
    (a programming error's treatment), naming neither the scorer nor what was wrong with it."""
    from rewardkit.cli.app import app
    from typer.testing import CliRunner

    import rewardkit.scoring
    from rewardkit.scoring import register_scorer

    monkeypatch.setattr(rewardkit.scoring, "_REGISTRY", dict(rewardkit.scoring._REGISTRY))  # other tests list them all
    register_scorer("test:nope", "rewardkit.verifier:Nope", "no such class")
    register_scorer("test:json", "json:JSONDecoder", "not a scorer")
    with pytest.raises(ImportError, match=r"^scorer 'test:nope': module 'rewardkit.verifier' has no 'Nope'$"):
        get_scorer("test:nope")
    with pytest.raises(TypeError, match=r"^scorer 'test:json': JSONDecoder is not a rewardkit scorer"):
        get_scorer("test:json")
    for target in ("a:b:c", ":X", "json:"):  # before: "too many values to unpack", "Empty module name", ...
        register_scorer(target, target, "malformed")
        with pytest.raises(ImportError, match=f"^scorer '{target}': expected module:Class, a Python module and a "
                                              "class in it$"):
            get_scorer(target)
    rows = tmp_path / "r.jsonl"
    rows.write_text('{"id": "g", "problem": "1+1?", "answer": "2", "responses": ["2"]}\n')
    r = CliRunner().invoke(app, ["score", str(rows), "--scorer", "json:JSONDecoder", "--out", str(tmp_path / "o.jsonl")])
    assert r.exit_code == 2 and r.stderr == ("error: scorer 'json:JSONDecoder': JSONDecoder is not a rewardkit scorer "
                                             "(it has no Options class; see rewardkit.scoring.BaseScorer)\n"), r.output
