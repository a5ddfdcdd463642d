"""GAR discriminator data from ProcessBench: slice labels on hand-checked rows, SFT targets, held-out metrics."""

from __future__ import annotations

import math

import pytest
from rewardkit.evals.processbench import STEP_SEPARATOR, PBPrediction, default_root, load_processbench
from rewardkit.evals.slice_labels import (
    auroc,
    balanced_accuracy,
    discriminator_report,
    first_sentence,
    label_slices,
    last_sentence,
    sft_example,
    sft_target,
)

from rewardkit.gar.slices import SliceScorer
from rewardkit.testing import ScriptedJudge
from rewardkit.verdicts import parse_yes_no

needs_pb = pytest.mark.skipif(not (default_root() / "gsm8k.jsonl").exists(), reason="ProcessBench data not found")


def _row(rid: str):
    return next(r for r in load_processbench(rid.split("-")[0]) if r.id == rid)


# Hand-checked (read slice by slice) at L = 60 whitespace words: which slices hold which steps.
@needs_pb
def test_labels_of_a_solution_with_a_middle_error():
    # gsm8k-4: earliest error at step 2 ("... half of the current rewards"), a 77-word step split over two slices
    sl = label_slices(_row("gsm8k-4"), 60)
    assert [(s.steps, s.verdict) for s in sl] == [((0, 1), "YES"), ((2,), "NO"), ((2, 3), "NO"), ((4,), None)]
    assert sl[0].text.startswith("Firstly, let's break down the problem")
    assert sl[1].text.startswith("The current shopping trip involved spending $43.")
    assert sl[3].text == "Therefore, the customer paid $37 on this shopping trip."
    assert sl[1].error_quote == "The current shopping trip involved spending $43."
    assert sl[0].error_quote == "" and sl[3].error_quote == ""


@needs_pb
def test_labels_of_a_solution_wrong_from_the_first_step():
    # gsm8k-9: label 0, so nothing is YES; the slices after the one(s) holding step 0 are unlabelled
    sl = label_slices(_row("gsm8k-9"), 60)
    assert [s.verdict for s in sl] == ["NO", "NO", None, None]
    assert [s.steps for s in sl] == [(0,), (0, 1), (1, 2), (2, 3)]
    assert sl[0].error_quote == ("To find the percentage discount obtained by Mr. Roger's friend from the original "
                                 "price, let's break down the problem step by step.")


@needs_pb
def test_labels_of_an_error_free_solution():
    sl = label_slices(_row("gsm8k-200"), 60)
    assert [s.verdict for s in sl] == ["YES"] * 4
    assert "".join(s.text for s in sl) == STEP_SEPARATOR.join(_row("gsm8k-200").steps)


@needs_pb
def test_training_slices_are_the_slices_the_scorer_judges():
    judge = ScriptedJudge(probs=[0.5, 0.5])
    scorer = SliceScorer(judge=judge, mode="logit", slice_tokens=60)
    for rid in ("gsm8k-4", "gsm8k-9", "gsm8k-200"):
        ex = _row(rid)
        joined = STEP_SEPARATOR.join(ex.steps)
        assert [s.text for s in label_slices(ex, 60)] == [s.text for s in scorer.slices(joined)]


@needs_pb
def test_sft_target_is_analysis_verdict_rationale():
    sl = label_slices(_row("gsm8k-4"), 60)
    yes, no = sft_target(sl[0]), sft_target(sl[1])
    assert yes.startswith('The reasoning arrives at: "The value of these rewards is 4 * $1 = $4."\n\n**YES**\n\n')
    assert no == ('The reasoning arrives at: "First, we calculate half of the current rewards: $4 / 2 = $2."'
                  '\n\n**NO**\n\nThis step is wrong: "The current shopping trip involved spending $43."')
    assert parse_yes_no(yes).label == "YES" and parse_yes_no(no).label == "NO"  # what the scorer reads back
    assert sft_target(sl[1], analysis=False) == '**NO**\n\nThis step is wrong: "The current shopping trip involved spending $43."'
    with pytest.raises(ValueError, match="after the earliest error"):
        sft_target(sl[3])
    ex = sft_example(sl[1])
    assert ex.label is False and ex.target == no
    assert (ex.item.problem, ex.item.text, ex.item.context) == (sl[1].problem, sl[1].text, "")


def test_sentences():
    assert first_sentence("Mr. Smith has 3 apples. He eats one.") == "Mr. Smith has 3 apples."
    assert first_sentence("\n\nFirst line\nsecond line") == "First line"
    assert first_sentence("one two three four", max_words=2) == "one two ..."
    assert last_sentence("A is 2. So B = 4.\n") == "So B = 4."
    assert last_sentence("x " * 30 + "end.", max_words=3) == "... x x end."
    assert first_sentence("   ") == "" and last_sentence("") == ""


def test_auroc_and_balanced_accuracy_match_scikit_learn_examples():
    # roc_auc_score's docstring example: 0.75; balanced_accuracy_score's: 0.625
    assert auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True]) == pytest.approx(0.75)
    assert balanced_accuracy([0, 1, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0]) == pytest.approx(0.625)
    assert math.isnan(auroc([0.2, 0.3], [True, True]))
    assert math.isnan(balanced_accuracy([True], [True]))


def _pred(i, split, label, pred, steps, p_yes):
    return PBPrediction(i, split, label, pred, steps, ["YES" if p >= 0.5 else "NO" for p in p_yes], p_yes,
                        ["ok"] * len(p_yes))


def test_discriminator_report_by_hand():
    preds = [
        _pred("a", "gsm8k", 1, 1, [[0], [1], [2]], [0.9, 0.2, 0.7]),  # YES 0.9, NO 0.2, after the error
        _pred("b", "gsm8k", -1, -1, [[0], [1]], [0.8, 0.6]),  # YES 0.8, YES 0.6
        _pred("c", "math", 0, -1, [[0], [1]], [0.85, 0.9]),  # NO 0.85 (missed), after the error
    ]
    r = discriminator_report(preds)
    # YES {0.9, 0.8, 0.6} over NO {0.2, 0.85}: 4 of the 6 pairs ordered right
    assert r["auroc"] == pytest.approx(4 / 6)
    # YES recall 3/3, NO recall 1/2
    assert r["balanced_accuracy"] == pytest.approx(0.75)
    # erroneous: a right, c wrong -> 0.5; correct: b right -> 1.0; F1 = 2 * 0.5 * 1 / 1.5
    assert r["f1"] == pytest.approx(2 / 3)
    assert (r["n"], r["n_yes"], r["n_no"], r["n_solutions"]) == (5, 3, 2, 3)
    assert r["per_split_f1"]["gsm8k"] == pytest.approx(1.0) and math.isnan(r["per_split_f1"]["math"])


def test_auroc_bootstrap_properties():
    from rewardkit.evals.slice_labels import auroc_bootstrap

    sep = [_pred(f"s{i}", "math", 1, 1, [[0], [1]], [0.9, 0.1]) for i in range(6)]  # YES 0.9 over NO 0.1
    mixed = [_pred(f"s{i}", "math", 1, 1, [[0], [1]], [0.3 + 0.1 * (i % 3), 0.45]) for i in range(6)]
    same = auroc_bootstrap(sep, sep, n_boot=200)
    assert same["before"] == [1.0, 1.0] and same["delta"] == [0.0, 0.0]
    r = auroc_bootstrap(mixed, sep, n_boot=200)
    # YES slices at 0.3, 0.4, 0.5 against NO slices all at 0.45: a third of the pairs ordered right
    assert r["before"][0] <= 1 / 3 <= r["before"][1] and r["after"] == [1.0, 1.0]
    assert r["delta"][0] > 0  # separating beats mixing in every resample
    with pytest.raises(ValueError, match="same solutions"):
        auroc_bootstrap(sep, sep[::-1])


def test_evaluate_discriminator_end_to_end_with_a_scripted_judge():
    from rewardkit.evals.processbench import PBExample
    from rewardkit.evals.slice_labels import evaluate_discriminator

    steps = ("We add 2 and 3 to get 5.", "Then 5 times 2 is 11 ERRMARK.", "So the answer is 11.")
    bad = PBExample("x-0", "math", "What is (2 + 3) * 2?", steps, 1, False)
    good = PBExample("x-1", "math", "What is (2 + 3) * 2?", (steps[0], "Then 5 times 2 is 10.", "So 10."), -1, True)
    judge = ScriptedJudge(probs=lambda prompt, choices: [0.2, 0.8] if "ERRMARK" in prompt else [0.9, 0.1])
    # at 8 words a slice: bad's three steps stay apart (7, 6, 5 words); good's "Then 5 times 2 is 10." and
    # "So 10." (5 + 2 words) merge
    rep, preds = evaluate_discriminator(judge, [bad, good], slice_tokens=8)
    assert judge.verdict_batches == [5]  # every slice of both solutions in one backend call
    assert [p.prediction for p in preds] == [1, -1]
    assert [p.unit_steps for p in preds] == [[[0], [1], [2]], [[0], [1, 2]]]
    # labelled: bad's step 0 (YES) and step 1 (NO), good's two slices (YES); bad's step 2 comes after the error
    assert (rep["n"], rep["n_yes"], rep["n_no"]) == (4, 3, 1)
    assert rep["auroc"] == 1.0 and rep["balanced_accuracy"] == 1.0 and rep["f1"] == 1.0
