"""GAR stage 1: the discriminator's SFT data (balanced, split by problem) and training with early stopping."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rewardkit.gar.slices import SliceItem
from rewardkit.grpo.sft import (
    JudgmentExample,
    balanced,
    balanced_sample,
    hold_out_problems,
    judgment_text,
    train_discriminator,
)


def _examples(n: int, yes_every: int = 3) -> list[JudgmentExample]:
    out = []
    for i in range(n):
        ok = i % yes_every != 0
        step = f"{i} + 1 = {i + 1 if ok else i + 2}."
        out.append(JudgmentExample(SliceItem(f"What is {i} + 1?", step), ok,
                                   judgment_text(ok, "The step adds one.", "The sum is right." if ok else "Off by one.")))
    return out


def test_a_target_must_state_its_label_first():
    with pytest.raises(ValueError, match=r"\*\*NO\*\*"):
        JudgmentExample(SliceItem("p", "s"), False, "Looks fine. **YES** it is sound.")
    with pytest.raises(ValueError, match=r"\*\*YES\*\*"):
        JudgmentExample(SliceItem("p", "s"), True, "no verdict written here")
    ok = JudgmentExample(SliceItem("p", "s"), True, judgment_text(True, "Adds 2 and 3.", "Correct sum."))
    assert ok.target == "Adds 2 and 3.\n\n**YES**\n\nCorrect sum."  # analysis, score, rationale (App. B)


def test_targets_in_the_papers_own_format_are_accepted():
    """GAR's printed judgments (Tables 2, 10, 11, verbatim, HTML on one line) are stage-1 targets as they stand:
    Table 10's "... a contradiction.</u>  **YES**</p>" puts the verdict at the end of the analysis's paragraph
    (refused before issue 34, so the paper's own examples could not be SFT targets)."""
    import json
    from pathlib import Path

    rows = json.loads((Path(__file__).parents[1] / "fixtures" / "judge_outputs.json").read_text())["outputs"]
    gar = [r for r in rows if r["id"].startswith("paper/gar-")]
    assert len(gar) == 8
    for r in gar:
        label = r["expected"] == "YES"
        assert JudgmentExample(SliceItem("p", "s"), label, r["text"]).target == r["text"]
        with pytest.raises(ValueError, match=r"must state"):
            JudgmentExample(SliceItem("p", "s"), not label, r["text"])


def test_balancing_keeps_every_minority_example_and_as_many_of_the_majority():
    ex = _examples(30)  # 20 YES, 10 NO
    kept = balanced(ex, seed=1)
    assert sum(e.label for e in kept) == sum(not e.label for e in kept) == 10
    assert {e.item.text for e in ex if not e.label} <= {e.item.text for e in kept}
    assert [e.item.text for e in kept] == [e.item.text for e in ex if e in kept]  # order kept
    assert balanced(ex, seed=1) == kept and balanced(ex, seed=2) != kept  # a seeded draw


def test_the_validation_split_holds_out_whole_problems():
    ex = [JudgmentExample(SliceItem(f"problem {i // 3}", f"slice {i}"), i % 2 == 0, judgment_text(i % 2 == 0))
          for i in range(30)]  # 10 problems x 3 slices
    train, held = hold_out_problems(ex, 0.2, seed=0)
    assert len(held) == 6 and len(train) == 24
    assert not {e.item.problem for e in train} & {e.item.problem for e in held}


@pytest.mark.slow
def test_sft_lowers_the_validation_loss_and_keeps_the_best_weights(tiny_model, tmp_path):
    res = train_discriminator(_examples(24), tiny_model, max_steps=6, batch_size=4, micro_batch_size=2,
                              eval_every=2, patience=3, lr=1e-2, num_threads=1, out_dir=str(tmp_path / "disc"))
    evals = [h["eval_loss"] for h in res.history if "eval_loss" in h]
    assert len(evals) == 4 and res.history[0] == {"step": 0.0, "eval_loss": evals[0]}  # before training, then every 2
    assert res.best_eval_loss == min(evals) < evals[0] and res.best_step > 0
    assert res.labels == {"YES": res.train_examples - res.labels["NO"], "NO": res.labels["NO"]}
    assert (tmp_path / "disc" / "model.safetensors").exists()  # stage 2 loads it: GarJoint(discriminator=...)


@pytest.mark.slow
def test_a_diverging_run_stops_early_and_keeps_the_starting_weights(tiny_model):
    from rewardkit.backends.transformers_backend import TransformersBackend

    backend = TransformersBackend(tiny_model, dtype="float32", num_threads=1)
    before = {k: v.clone() for k, v in backend.model.state_dict().items()}
    res = train_discriminator(_examples(24), backend, max_steps=50, batch_size=2, micro_batch_size=2,
                              eval_every=1, patience=2, lr=50.0, warmup_fraction=0.0, num_threads=1)
    assert res.stopped_early and res.best_step == 0  # lr 50 only made it worse
    assert len([h for h in res.history if "eval_loss" in h]) == 3  # start, then 2 worse validations
    after = backend.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # trained in place, best (initial) weights restored


@pytest.mark.slow
def test_the_same_loop_trains_any_chat_format(tiny_model):
    from rewardkit.grpo.sft import train_sft
    from rewardkit.raro.critic import critic_messages

    rows = [(critic_messages(f"What is {i} + 1?", str(i + 1), str(i + 2)), f"{i + 1} is right.\nAnswer 1")
            for i in range(12)]
    res = train_sft(rows[:8], tiny_model, max_steps=4, batch_size=4, micro_batch_size=2, eval_every=2,
                    lr=1e-2, num_threads=1, eval_examples=rows[8:])
    evals = [h["eval_loss"] for h in res.history if "eval_loss" in h]
    assert res.best_eval_loss == min(evals) < evals[0]
    assert res.labels == {} and (res.train_examples, res.eval_examples) == (8, 4)
    with pytest.raises(ValueError, match="both sets need examples"):
        train_sft(rows, tiny_model, max_steps=1, eval_examples=[])


@pytest.mark.slow
def test_a_time_budget_stops_after_validating_the_last_step(tiny_model):
    res = train_discriminator(_examples(24), tiny_model, max_steps=50, batch_size=2, micro_batch_size=2,
                              eval_every=10, lr=1e-2, num_threads=1, max_seconds=0.0)
    assert [h["step"] for h in res.history] == [0, 1, 1]  # start, the one step, its validation
    assert res.stopped_early and "eval_loss" in res.history[-1]


@given(st.lists(st.sampled_from(["YES", "NO", "NO", "NO"]), min_size=1, max_size=60), st.integers(0, 5))
def test_balanced_sample_is_one_to_one_and_keeps_order(labels, seed):
    items = list(enumerate(labels))
    out = balanced_sample(items, lambda x: x[1], seed)
    n = min(labels.count("YES"), labels.count("NO")) if len(set(labels)) == 2 else len(labels)
    assert sum(x[1] == "YES" for x in out) == (n if "YES" in labels else 0)
    assert sum(x[1] == "NO" for x in out) == (n if "NO" in labels else 0)
    assert out == sorted(out)  # input order kept
