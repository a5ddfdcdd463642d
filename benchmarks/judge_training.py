"""Judges that learn, on held-out problems (issue 23): GAR's slice discriminator and RARO's critic.

Stages (each resumable, each merging its results into benchmarks/results/judge_training.json and
re-rendering judge_training.md / .png; trained weights go to runs/judges/, never into git):

    python benchmarks/judge_training.py samples     # the embedded model's own answers for the critic pairs
    python benchmarks/judge_training.py gar         # before, GAR stage-1 SFT with early stopping, after
    python benchmarks/judge_training.py critic      # before, RARO critic training on R_crit, after
    python benchmarks/judge_training.py headline    # headline judge rows, untrained vs trained, 10 mixed groups

Every split is by problem (``rewardkit.evals.splits``); the headline's mixed-group problems are pinned to
the held-out split of both judges.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, machine, rel_path, relativize  # noqa: E402
from rewardkit.evals.data import data_path, rollouts_path  # noqa: E402
from rewardkit.evals.splits import problem_key  # noqa: E402

WORK = ROOT / "runs" / "judges"
NAME = "judge_training"
SEED = 0
SAMPLE_PROBLEMS_MATH500 = 40  # MATH-500 problems (besides the rollouts' 100) that get an embedded-model answer


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------------ data


def rollout_rows() -> list[dict[str, Any]]:
    from rewardkit.evals.critic_pairs import read_jsonl

    return read_jsonl(rollouts_path())


def math500_rows() -> list[dict[str, Any]]:
    from rewardkit.evals.critic_pairs import read_jsonl

    return read_jsonl(data_path("math500", "test.jsonl"))


def mixed_problems() -> list[str]:
    """Problems of the shared rollouts' mixed groups (some but not all 8 answers correct): the headline's judge rows."""
    return [r["problem"] for r in rollout_rows() if 0 < sum(r["correct"]) < len(r["correct"])]


def sample_problems() -> list[Any]:
    """The problems the embedded model answers: the rollouts' 100 and a seeded sample of other MATH-500 ones."""
    import random

    from rewardkit.evals.loaders import Problem
    from rewardkit.evals.splits import problem_key

    roll = rollout_rows()
    seen = {problem_key(r["problem"]) for r in roll}
    rest = [r for r in math500_rows() if problem_key(r["problem"]) not in seen]
    pick = sorted(random.Random(SEED).sample(range(len(rest)), SAMPLE_PROBLEMS_MATH500))
    return [Problem(r["id"], r["problem"], r["answer"]) for r in roll] + \
        [Problem(rest[i]["id"], rest[i]["problem"], rest[i]["answer"]) for i in pick]


def stage_samples(a: argparse.Namespace) -> None:
    """The embedded model's own answers (one per problem, seeded), graded by the verifier."""
    from rewardkit.evals.generate import generate_rollouts

    from rewardkit.backends import load_backend

    out = WORK / "smollm2_samples.jsonl"
    problems = sample_problems()
    log(f"sampling {len(problems)} answers into {rel_path(out)}")
    t0 = time.perf_counter()
    s = generate_rollouts(problems, load_backend("smollm2", dtype="float32", batch_size=20), out, n=1,
                          max_tokens=a.sample_tokens, temperature=0.7, top_p=0.95, seed=SEED, batch_size=20,
                          bench="math", on_batch=lambda n: log(f"  +{n}"))
    log(f"done: {s.generated_now} new, {s.skipped_done} already there, {len(s.failed)} failed, "
        f"{time.perf_counter() - t0:.0f} s")


# ------------------------------------------------------------------------------------- results


def load_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def save_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(relativize(data), indent=1, default=str) + "\n")
    tmp.replace(path)


def load_judge(spec: str) -> Any:
    from rewardkit.backends import load_backend

    return load_backend(spec, dtype="float32", batch_size=8)


# ------------------------------------------------------------------------------ GAR discriminator


def gar_data(a: argparse.Namespace, count_tokens) -> dict[str, Any]:
    """ProcessBench solutions split by problem; the held-out solutions (balanced per split and error/no error);
    balanced labelled training and validation slices."""
    from rewardkit.evals.processbench import load_processbench
    from rewardkit.evals.slice_labels import label_slices
    from rewardkit.evals.splits import balanced_sample, split_by_problem

    rows = [r for s in a.splits for r in load_processbench(s)]
    parts = split_by_problem(rows, lambda r: r.problem, seed=SEED, pinned=mixed_problems())
    test = balanced_sample(parts["test"], lambda r: (r.split, r.label >= 0), SEED, a.heldout_per_split // 2)

    def labelled(sols):
        return [sl for r in sols for sl in label_slices(r, a.slice_tokens, count_tokens) if sl.verdict]

    train = balanced_sample(labelled(parts["train"]), lambda sl: sl.verdict, SEED, a.train_per_label)
    val = balanced_sample(labelled(parts["val"]), lambda sl: sl.verdict, SEED, a.val_per_label)
    return {"test": test, "train": train, "val": val,
            "train_problems": len({problem_key(sl.problem) for sl in train}),
            "val_problems": len({problem_key(sl.problem) for sl in val}),
            "heldout_problems": len({problem_key(r.problem) for r in test})}


def stage_gar(a: argparse.Namespace) -> None:
    """Held-out metrics of the untrained discriminator, stage-1 SFT, held-out metrics of the trained one."""
    from rewardkit.evals.processbench import predictions_to_rows
    from rewardkit.evals.slice_labels import evaluate_discriminator
    from rewardkit.evals.splits import ids_sha256

    judge = load_judge("smollm2")
    d = gar_data(a, judge.count_tokens)
    test = d["test"]
    log(f"GAR: {len(d['train'])} training slices ({d['train_problems']} problems), {len(d['val'])} validation "
        f"slices, {len(test)} held-out solutions ({d['heldout_problems']} problems)")
    before_path = WORK / "gar_before.json"
    before = load_json(before_path)
    if before is None:
        t0 = time.perf_counter()
        rep, preds = evaluate_discriminator(judge, test, a.slice_tokens)
        before = {"report": rep, "seconds": time.perf_counter() - t0, "predictions": predictions_to_rows(preds)}
        save_json(before_path, before)
    log(f"before: {json.dumps(before['report'])}")
    train = train_gar(a, d)
    after_path = WORK / "gar_after.json"
    after = load_json(after_path)
    if after is None:
        t0 = time.perf_counter()
        rep, preds = evaluate_discriminator(load_judge(str(WORK / "gar_discriminator")), test, a.slice_tokens)
        after = {"report": rep, "seconds": time.perf_counter() - t0, "predictions": predictions_to_rows(preds)}
        save_json(after_path, after)
    log(f"after: {json.dumps(after['report'])}")
    section = {"train_problems": d["train_problems"], "val_problems": d["val_problems"],
               "heldout_problems": d["heldout_problems"], "heldout_ids_sha256": ids_sha256(r.id for r in test),
               "heldout_solutions": len(test), "train_examples": len(d["train"]), "val_examples": len(d["val"]),
               "splits": a.splits, "slice_tokens": a.slice_tokens, "before": before["report"],
               "after": after["report"], "training": {k: v for k, v in train.items() if k != "history"},
               "history": train["history"], "eval_seconds": {"before": before["seconds"], "after": after["seconds"]}}
    merge_results("gar_discriminator", section)


# ------------------------------------------------------------------------------------ RARO critic

CRITIC_VIEW = "final"  # the critic compares final answers, as RARO's DeepMath critic does (App. E, Figure 19)


def critic_data(a: argparse.Namespace) -> dict[str, Any]:
    """Expert vs policy pairs (Qwen2.5-Math rollouts, the embedded model's samples), split by problem."""
    from rewardkit.evals.critic_pairs import expert_solutions, policy_pairs, read_jsonl
    from rewardkit.evals.splits import split_by_problem

    rows = rollout_rows()
    experts = expert_solutions(math500_rows(), rows)
    samples = WORK / "smollm2_samples.jsonl"
    if not samples.exists():
        raise SystemExit(f"{rel_path(samples)} is missing: run `python benchmarks/judge_training.py samples` first")
    pairs = policy_pairs(rows, experts, "qwen2.5-math", a.qwen_per_problem, SEED) + \
        policy_pairs(read_jsonl(samples), experts, "smollm2", 1, SEED)
    parts = split_by_problem(pairs, lambda p: p.problem, seed=SEED, pinned=mixed_problems())
    return {**parts, **{f"{k}_problems": len({problem_key(p.problem) for p in v}) for k, v in parts.items()}}


def critic_options(a: argparse.Namespace, mode: str = "generate") -> dict[str, Any]:
    """The critic scorer's options for held-out evaluation: greedy verdicts within the training budget."""
    opts: dict[str, Any] = {"mode": mode, "view": CRITIC_VIEW, "seed": SEED}
    if mode == "generate":
        opts.update(max_tokens=a.critic_tokens, temperature=0.0)
    return opts


def eval_critic(judge: Any, pairs: list[Any], a: argparse.Namespace, path: Path) -> dict[str, Any]:
    """Held-out critic metrics in generate mode (the trained format) and verdict-logit mode, cached in ``path``."""
    from rewardkit.evals.critic_pairs import evaluate_critic

    done = load_json(path) or {}
    for mode in ("generate", "logit"):
        if mode in done:
            continue
        t0 = time.perf_counter()
        rep, rows = evaluate_critic(judge, pairs, **critic_options(a, mode))
        done[mode] = {"report": rep, "seconds": time.perf_counter() - t0, "rows": rows}
        save_json(path, done)
        log(f"  {mode}: accuracy {rep['accuracy']:.3f} tie {rep['tie_rate']:.3f} invalid {rep['invalid_rate']:.3f}")
    return done


def critic_validation(backend: Any, pairs: list[Any], a: argparse.Namespace) -> dict[str, float]:
    """Greedy verdicts on the validation pairs: accuracy, tie rate and mean R_crit (an invalid verdict earns 0)."""
    from rewardkit.evals.critic_pairs import evaluate_critic

    from rewardkit.raro.critic import critic_reward

    rep, rows = evaluate_critic(backend, pairs, **critic_options(a))
    r = [0.0 if x["label"] is None else critic_reward(x["label"]) for x in rows]
    return {"val_accuracy": rep["accuracy"], "val_tie_rate": rep["tie_rate"], "val_invalid_rate": rep["invalid_rate"],
            "val_reward": sum(r) / len(r)}


def train_critic(a: argparse.Namespace, d: dict[str, Any]) -> dict[str, Any]:
    """RARO's critic side alone (``rewardkit.grpo.modes.critic_step``: Algorithm 2 lines 13-17, lambda_pol = 0)
    on the fixed training pairs with App. C.1's trainer settings; the weights of the best validation R_crit
    (greedy verdicts) are kept and saved to runs/judges/raro_critic."""
    import numpy as np
    import torch

    from rewardkit.grpo.modes import RaroShared, critic_step
    from rewardkit.grpo.trainer import Learner, TrainConfig
    from rewardkit.raro.critic import CriticOptions, answer_view
    from rewardkit.raro.replay import CriticExample

    out, path = WORK / "raro_critic", WORK / "critic_train.json"
    done = load_json(path)
    if done is not None and (out / "model.safetensors").exists():
        return done
    cfg = TrainConfig(model="smollm2", out_dir=str(WORK / "critic_run"), lr=a.critic_lr, temperature=1.0,
                      max_new_tokens=a.critic_tokens, seed=SEED, tensorboard=False).resolved(RaroShared.train_settings)
    learner = Learner(cfg)
    trainable = freeze_below(learner.model, a.critic_trainable_layers)
    opts = CriticOptions(max_tokens=a.critic_tokens, view=CRITIC_VIEW, seed=SEED)
    examples = [CriticExample(p.problem, answer_view(p.expert, CRITIC_VIEW), answer_view(p.policy, CRITIC_VIEW))
                for p in d["train"]]
    settings = {k: getattr(cfg, k) for k in ("lr", "temperature", "advantage", "norm", "eps_low", "eps_high", "beta",
                                             "overlong_filter")}
    log(f"critic RL: {len(examples)} training pairs, {a.critic_batch} pairs x {a.critic_samples} samples per step, "
        f"{trainable:,} trainable parameters, {settings}")
    rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    history = [{"step": 0, "seconds": 0.0, **critic_validation(learner.backend, d["val"], a)}]
    log(f"  step 0: {history[-1]}")
    best, best_step = history[0]["val_reward"], 0
    best_state = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
    step = 0
    while step < a.critic_steps and time.perf_counter() - t0 < a.critic_budget:
        batch = [examples[i] for i in rng.choice(len(examples), a.critic_batch, replace=False)]
        learner.model.train()
        m = critic_step(learner, batch, step, samples=a.critic_samples, options=opts)
        learner.model.eval()
        step += 1
        row = {"step": step, "seconds": time.perf_counter() - t0, **m}
        if step % a.critic_eval_every == 0:
            row.update(critic_validation(learner.backend, d["val"], a))
            if row["val_reward"] > best:
                best, best_step = row["val_reward"], step
                best_state = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
        history.append(row)
        log(f"  step {step}: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items() if isinstance(v, float)))
    if step % a.critic_eval_every:  # the last weights get a validation too
        history[-1].update(critic_validation(learner.backend, d["val"], a))
        if history[-1]["val_reward"] > best:
            best, best_step = history[-1]["val_reward"], step
            best_state = {k: v.detach().clone() for k, v in learner.model.state_dict().items()}
    with torch.no_grad():
        learner.model.load_state_dict(best_state)
    learner.model.save_pretrained(out)
    learner.tokenizer.save_pretrained(out)
    done = {"settings": settings, "pairs_per_step": a.critic_batch, "samples_per_pair": a.critic_samples,
            "steps": step, "budget_seconds": a.critic_budget, "seconds": time.perf_counter() - t0,
            "best_step": best_step, "best_val_reward": best, "trainable_layers": a.critic_trainable_layers,
            "trainable_parameters": trainable, "history": history}
    save_json(path, done)
    return done


def stage_critic(a: argparse.Namespace) -> None:
    """Held-out metrics of the untrained critic, RARO critic-side training on R_crit, held-out metrics after."""
    from rewardkit.evals.splits import ids_sha256

    d = critic_data(a)
    test = d["test"]
    log(f"critic: {len(d['train'])} training pairs ({d['train_problems']} problems), {len(d['val'])} validation "
        f"pairs, {len(test)} held-out pairs ({d['test_problems']} problems)")
    judge = load_judge("smollm2")
    before = eval_critic(judge, test, a, WORK / "critic_before.json")
    train = train_critic(a, d)
    after = eval_critic(load_judge(str(WORK / "raro_critic")), test, a, WORK / "critic_after.json")
    section = {"train_problems": d["train_problems"], "val_problems": d["val_problems"],
               "heldout_problems": d["test_problems"], "heldout_ids_sha256": ids_sha256(p.id for p in test),
               "train_pairs": len(d["train"]), "val_pairs": len(d["val"]), "view": CRITIC_VIEW,
               "critic_tokens": a.critic_tokens,
               "before": {**before["generate"]["report"], "logit": before["logit"]["report"]},
               "after": {**after["generate"]["report"], "logit": after["logit"]["report"]},
               "training": {k: v for k, v in train.items() if k != "history"}, "history": train["history"],
               "eval_seconds": {"before": before["generate"]["seconds"] + before["logit"]["seconds"],
                                "after": after["generate"]["seconds"] + after["logit"]["seconds"]}}
    merge_results("raro_critic", section)


def freeze_below(model: Any, trainable_layers: int) -> int:
    """Train only the top ``trainable_layers`` decoder layers and the final norm (0: every parameter), a CPU
    budget measure: backward stops at the lowest trainable layer. Returns the trainable parameter count."""
    if trainable_layers > 0:
        layers = model.model.layers
        model.requires_grad_(False)
        for layer in layers[len(layers) - trainable_layers:]:
            layer.requires_grad_(True)
        model.model.norm.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def train_gar(a: argparse.Namespace, d: dict[str, Any]) -> dict[str, Any]:
    """GAR stage 1 (``rewardkit.grpo.sft.train_discriminator``): SFT on the balanced labelled training slices
    in the analysis-score-rationale format, early stopping on the validation slices; weights to runs/judges/."""
    from rewardkit.evals.slice_labels import sft_example

    from rewardkit.backends.transformers_backend import TransformersBackend
    from rewardkit.grpo.sft import train_discriminator

    out, path = WORK / "gar_discriminator", WORK / "gar_train.json"
    done = load_json(path)
    if done is not None and (out / "model.safetensors").exists():
        return done
    opts = {"lr": a.gar_lr, "batch_size": a.gar_batch, "micro_batch_size": a.gar_micro_batch,
            "max_steps": a.gar_steps, "eval_every": a.gar_eval_every, "patience": a.gar_patience,
            "warmup_fraction": 0.2, "seed": SEED}
    backend = TransformersBackend("smollm2", dtype="float32")  # a fresh copy: these weights are trained
    trainable = freeze_below(backend.model, a.gar_trainable_layers)
    log(f"GAR SFT: {opts}, {trainable:,} trainable parameters")
    t0 = time.perf_counter()
    res = train_discriminator([sft_example(sl) for sl in d["train"]], backend, eval_examples=[sft_example(sl) for sl in d["val"]],
                              out_dir=str(out), **opts)
    done = {"options": opts, "trainable_layers": a.gar_trainable_layers, "trainable_parameters": trainable,
            "seconds": time.perf_counter() - t0, "best_step": res.best_step, "best_eval_loss": res.best_eval_loss,
            "stopped_early": res.stopped_early, "train_examples": res.train_examples,
            "eval_examples": res.eval_examples, "labels": res.labels, "history": res.history}
    save_json(path, done)
    log(f"GAR SFT done in {done['seconds']:.0f} s: best step {res.best_step}, validation loss {res.best_eval_loss:.4f}")
    return done


def merge_results(key: str, section: dict[str, Any]) -> None:
    """Write one judge's section into benchmarks/results/judge_training.json (other sections kept)."""
    path = RESULTS / f"{NAME}.json"
    data = load_json(path) or {"machine": machine()}
    data[key] = {**data.get(key, {}), **section}
    save_json(path, data)


# ------------------------------------------------------------------------------------------ main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["samples", "gar", "critic"])
    ap.add_argument("--sample-tokens", type=int, default=128, help="samples: tokens per embedded-model answer")
    ap.add_argument("--splits", nargs="+", default=["gsm8k", "math"], help="gar: ProcessBench splits")
    ap.add_argument("--slice-tokens", type=int, default=128, help="gar: GAR slice budget L (the paper: 320)")
    ap.add_argument("--heldout-per-split", type=int, default=50, help="gar: held-out solutions per split (half erroneous)")
    ap.add_argument("--train-per-label", type=int, default=400, help="gar: training slices per label (YES, NO)")
    ap.add_argument("--val-per-label", type=int, default=32, help="gar: validation slices per label")
    ap.add_argument("--gar-lr", type=float, default=1e-4, help="gar: SFT learning rate (sec. 4.1: 1e-4)")
    ap.add_argument("--gar-batch", type=int, default=16, help="gar: examples per optimizer step (sec. 4.1: 128)")
    ap.add_argument("--gar-micro-batch", type=int, default=4, help="gar: examples per forward pass")
    ap.add_argument("--gar-steps", type=int, default=40, help="gar: optimizer steps at most (sec. 4.1: 500)")
    ap.add_argument("--gar-eval-every", type=int, default=5, help="gar: steps between validation losses")
    ap.add_argument("--gar-patience", type=int, default=3, help="gar: validations without improvement before stopping")
    ap.add_argument("--gar-trainable-layers", type=int, default=0, help="gar: train only the top N decoder layers (0: all)")
    ap.add_argument("--qwen-per-problem", type=int, default=2, help="critic: Qwen answers per problem (wrong ones first)")
    ap.add_argument("--critic-tokens", type=int, default=96, help="critic: token budget of a verdict (reasoning + verdict)")
    ap.add_argument("--critic-lr", type=float, default=1e-5, help="critic: learning rate (Table 4: 1e-6)")
    ap.add_argument("--critic-batch", type=int, default=4, help="critic: pairs per step")
    ap.add_argument("--critic-samples", type=int, default=4, help="critic: sampled verdicts per pair (Table 4: group size 16)")
    ap.add_argument("--critic-steps", type=int, default=60, help="critic: optimizer steps at most")
    ap.add_argument("--critic-budget", type=float, default=2400, help="critic: seconds of training at most")
    ap.add_argument("--critic-eval-every", type=int, default=5, help="critic: steps between validations")
    ap.add_argument("--critic-trainable-layers", type=int, default=0, help="critic: train only the top N decoder layers (0: all)")
    a = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    {"samples": stage_samples, "gar": stage_gar, "critic": stage_critic}[a.stage](a)


if __name__ == "__main__":
    main()
