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
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, ROOT, machine, rel_path, relativize  # noqa: E402
from rewardkit.evals.data import data_path, rollouts_path  # noqa: E402
from rewardkit.evals.splits import problem_key  # noqa: E402

WORK = ROOT / "runs" / "judges"  # --work: trained weights, caches of every evaluation (outside git)
OUT = RESULTS  # --results: where judge_training.json / .md / .png go
MODEL = "smollm2"  # --model: the judge every run starts from (the embedded SmolLM2-135M-Instruct)
DEVICE, DTYPE = "cpu", "float32"  # --device, --dtype (a GPU run: cuda, bfloat16)
NAME = "judge_training"
SEED = 0
SAMPLE_PROBLEMS_MATH500 = 0  # other MATH-500 problems that get an embedded-model answer (0: the rollouts' 100 only)


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


def sample_problems(n_rollouts: int) -> list[Any]:
    """The problems the embedded model answers: the first ``n_rollouts`` of the rollouts' 100 and a seeded
    sample of other MATH-500 ones."""
    import random

    from rewardkit.evals.loaders import Problem
    from rewardkit.evals.splits import problem_key

    roll = rollout_rows()
    seen = {problem_key(r["problem"]) for r in roll}
    rest = [r for r in math500_rows() if problem_key(r["problem"]) not in seen]
    pick = sorted(random.Random(SEED).sample(range(len(rest)), SAMPLE_PROBLEMS_MATH500))
    return [Problem(r["id"], r["problem"], r["answer"]) for r in roll[:n_rollouts]] + \
        [Problem(rest[i]["id"], rest[i]["problem"], rest[i]["answer"]) for i in pick]


def stage_samples(a: argparse.Namespace) -> None:
    """The embedded model's own answers (one per problem, seeded), graded by the verifier."""
    from rewardkit.evals.generate import generate_rollouts

    from rewardkit.backends import load_backend

    out = WORK / "smollm2_samples.jsonl"
    problems = sample_problems(a.sample_problems)
    log(f"sampling {len(problems)} answers into {rel_path(out)}")
    t0 = time.perf_counter()
    s = generate_rollouts(problems, load_backend(MODEL, dtype=DTYPE, device=DEVICE, batch_size=20), out, n=1,
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

    return load_backend(spec, dtype=DTYPE, device=DEVICE, batch_size=8)


# ------------------------------------------------------------------------------ GAR discriminator


def gar_data(a: argparse.Namespace, count_tokens) -> dict[str, Any]:
    """ProcessBench solutions split by problem; the held-out solutions (balanced per split and error/no error);
    balanced labelled training and validation slices."""
    from rewardkit.evals.processbench import load_processbench
    from rewardkit.evals.slice_labels import label_slices
    from rewardkit.evals.splits import split_by_problem

    from rewardkit.grpo.sft import balanced_sample

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

    judge = load_judge(MODEL)
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
    after_path = WORK / f"gar_after-{a.gar_run}.json"
    after = load_json(after_path)
    if after is None:
        t0 = time.perf_counter()
        rep, preds = evaluate_discriminator(load_judge(str(gar_weights(a))), test, a.slice_tokens)
        after = {"report": rep, "seconds": time.perf_counter() - t0, "predictions": predictions_to_rows(preds)}
        save_json(after_path, after)
    log(f"after: {json.dumps(after['report'])}")
    from rewardkit.evals.processbench import PBPrediction
    from rewardkit.evals.slice_labels import auroc_bootstrap

    ci = auroc_bootstrap([PBPrediction(**r) for r in before["predictions"]],
                         [PBPrediction(**r) for r in after["predictions"]], n_boot=1000, seed=SEED)
    section = {"train_problems": d["train_problems"], "val_problems": d["val_problems"],
               "heldout_problems": d["heldout_problems"], "heldout_ids_sha256": ids_sha256(r.id for r in test),
               "heldout_solutions": len(test), "train_examples": len(d["train"]), "val_examples": len(d["val"]),
               "splits": a.splits, "slice_tokens": a.slice_tokens, "before": before["report"],
               "after": after["report"], "training": {k: v for k, v in train.items() if k != "history"},
               "history": train["history"], "auroc_ci": ci, "run": a.gar_run, "other_runs": other_gar_runs(a),
               "eval_seconds": {"before": before["seconds"], "after": after["seconds"]}}
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


def warm_start_critic(a: argparse.Namespace, d: dict[str, Any]) -> dict[str, Any]:
    """A short SUPERVISED warm start on RARO's verdict format (``rewardkit.grpo.sft.train_sft``): the untrained
    135M model almost never ends on a parseable verdict, so its critic rollouts would all be masked and RL
    would get no signal. Targets restate both final answers, then ``tie`` (policy right) or the expert's
    slot (policy wrong): this is supervised learning on the true verdicts, kept short; RL follows."""
    from rewardkit.evals.critic_pairs import warm_start_rows

    from rewardkit.grpo.sft import train_sft

    out, path = WORK / "raro_critic_warm", WORK / "critic_warm.json"
    done = load_json(path)
    if done is not None and (out / "model.safetensors").exists():
        return done
    if a.critic_warm_pairs == 0:
        return {"model": MODEL, "pairs": 0}
    import numpy as np

    from rewardkit.backends.transformers_backend import TransformersBackend

    rows = warm_start_rows(d["train"], SEED, CRITIC_VIEW)
    pick = sorted(np.random.default_rng(SEED).choice(len(rows), min(a.critic_warm_pairs, len(rows)), replace=False))
    train = [rows[i] for i in pick]
    val = warm_start_rows(d["val"], SEED, CRITIC_VIEW)
    opts = {"lr": a.gar_lr, "batch_size": 8, "micro_batch_size": 4, "max_steps": a.critic_warm_steps,
            "eval_every": 2, "patience": 2, "warmup_fraction": 0.2, "seed": SEED}
    backend = TransformersBackend(MODEL, dtype=DTYPE, device=DEVICE)
    freeze_below(backend.model, a.critic_trainable_layers)
    log(f"critic warm start (supervised): {len(train)} pairs, {len(val)} validation pairs, {opts}")
    t0 = time.perf_counter()
    res = train_sft(train, backend, eval_examples=val, out_dir=str(out), **opts)
    done = {"model": str(out), "pairs": len(train), "val_pairs": len(val), "options": opts,
            "seconds": time.perf_counter() - t0, "best_step": res.best_step, "best_eval_loss": res.best_eval_loss,
            "history": res.history}
    save_json(path, done)
    log(f"warm start done in {done['seconds']:.0f} s: best step {res.best_step}, validation loss {res.best_eval_loss:.4f}")
    return done


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
    warm = warm_start_critic(a, d)
    cfg = TrainConfig(model=warm["model"], out_dir=str(WORK / "critic_run"), lr=a.critic_lr, temperature=1.0,
                      max_new_tokens=a.critic_tokens, seed=SEED, tensorboard=False, device=DEVICE,
                      dtype=DTYPE).resolved(RaroShared.train_settings)
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
    done = {"warm_start": warm, "settings": settings, "pairs_per_step": a.critic_batch, "samples_per_pair": a.critic_samples,
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
    judge = load_judge(MODEL)
    before = eval_critic(judge, test, a, WORK / "critic_before.json")
    train = train_critic(a, d)
    after = eval_critic(load_judge(str(WORK / "raro_critic")), test, a, WORK / "critic_after.json")
    warm = train["warm_start"]
    if warm.get("pairs"):  # the warm start alone on the held-out pairs: what SFT gave, apart from RL
        w = eval_critic(load_judge(warm["model"]), test, a, WORK / "critic_warm_start.json")
        warm = {**warm, "heldout": {**w["generate"]["report"], "logit": w["logit"]["report"]}}
    section = {"train_problems": d["train_problems"], "val_problems": d["val_problems"],
               "heldout_problems": d["test_problems"], "heldout_ids_sha256": ids_sha256(p.id for p in test),
               "train_pairs": len(d["train"]), "val_pairs": len(d["val"]), "view": CRITIC_VIEW,
               "critic_tokens": a.critic_tokens,
               "before": {**before["generate"]["report"], "logit": before["logit"]["report"]},
               "after": {**after["generate"]["report"], "logit": after["logit"]["report"]},
               "training": {**{k: v for k, v in train.items() if k != "history"}, "warm_start": warm},
               "history": train["history"],
               "eval_seconds": {"before": before["generate"]["seconds"] + before["logit"]["seconds"],
                                "after": after["generate"]["seconds"] + after["logit"]["seconds"]}}
    merge_results("raro_critic", section)


def gar_weights(a: argparse.Namespace) -> Path:
    """Where a GAR SFT run (``--gar-run``) keeps its weights."""
    return WORK / f"gar_discriminator-{a.gar_run}"


def other_gar_runs(a: argparse.Namespace) -> list[dict[str, Any]]:
    """Summaries of the other finished GAR SFT runs in WORK (earlier settings), for the record."""
    out = []
    for f in sorted(WORK.glob("gar_train-*.json")):
        run = f.stem.split("-", 1)[1]
        after = load_json(WORK / f"gar_after-{run}.json")
        if run == a.gar_run or after is None:
            continue
        t = load_json(f)
        out.append({"run": run, "steps": t["options"]["max_steps"], "batch_size": t["options"]["batch_size"],
                    "trainable_layers": t["trainable_layers"], "seconds": t["seconds"], "best_step": t["best_step"],
                    "best_eval_loss": t["best_eval_loss"],
                    **{k: after["report"][k] for k in ("auroc", "balanced_accuracy", "f1", "mean_p_yes", "n")}})
    return out


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

    out, path = gar_weights(a), WORK / f"gar_train-{a.gar_run}.json"
    done = load_json(path)
    if done is not None and (out / "model.safetensors").exists():
        return done
    opts = {"lr": a.gar_lr, "batch_size": a.gar_batch, "micro_batch_size": a.gar_micro_batch,
            "max_steps": a.gar_steps, "eval_every": a.gar_eval_every, "patience": a.gar_patience,
            "warmup_fraction": 0.2, "seed": SEED, "max_seconds": a.gar_seconds}
    backend = TransformersBackend(MODEL, dtype=DTYPE, device=DEVICE)  # a fresh copy: these weights are trained
    trainable = freeze_below(backend.model, a.gar_trainable_layers)
    log(f"GAR SFT: {opts}, {trainable:,} trainable parameters")
    t0 = time.perf_counter()
    from rewardkit.evals.splits import assign_split

    def example(sl: Any) -> Any:  # a seeded share of the targets leave the analysis out (see --gar-analysis-share)
        share = {"analysis": a.gar_analysis_share, "verdict-first": 1 - a.gar_analysis_share}
        return sft_example(sl, assign_split(sl.id, share, SEED) == "analysis")

    res = train_discriminator([example(sl) for sl in d["train"]], backend, eval_examples=[example(sl) for sl in d["val"]],
                              out_dir=str(out), **opts)
    done = {"options": opts, "analysis_share": a.gar_analysis_share, "trainable_layers": a.gar_trainable_layers, "trainable_parameters": trainable,
            "seconds": time.perf_counter() - t0, "best_step": res.best_step, "best_eval_loss": res.best_eval_loss,
            "stopped_early": res.stopped_early, "train_examples": res.train_examples,
            "eval_examples": res.eval_examples, "labels": res.labels, "history": res.history}
    save_json(path, done)
    log(f"GAR SFT done in {done['seconds']:.0f} s: best step {res.best_step}, validation loss {res.best_eval_loss:.4f}")
    return done


# ----------------------------------------------------------------------------------- headline rows


HEADLINE_ROWS = ("slices-logit", "holistic-logit", "critic-logit", "critic-generate")


def stage_headline(a: argparse.Namespace) -> None:
    """The headline's judge rows for the trained judges (slices and holistic: the GAR discriminator; critic:
    the RARO critic), each beside the untrained judge with the same options, on every mixed group."""
    from rewardkit.evals.harness import load_rollouts, score_groups, scorer_report
    from rewardkit.evals.headline import headline, mixed_groups

    ids = mixed_groups(rollouts_path())
    trained = {"slices": gar_weights(a), "holistic": gar_weights(a), "critic": WORK / "raro_critic"}
    rows_opts = [("slices", "logit", {"slice_tokens": a.slice_tokens, "lambda1": 0.0}),
                 ("holistic", "logit", {"lambda1": 0.0}),
                 ("critic", "logit", critic_options(a, "logit")),
                 ("critic", "generate", critic_options(a))]
    rows_opts = [r for r in rows_opts if f"{r[0]}-{r[1]}" in a.headline_rows]
    missing = {str(trained[s]) for s, _, _ in rows_opts if not (trained[s] / "model.safetensors").exists()}
    if missing and "trained" in a.headline_judges:
        raise SystemExit(f"trained weights missing ({', '.join(map(rel_path, sorted(missing)))}): run the gar and "
                         "critic stages first")
    reports = []
    groups = load_rollouts(rollouts_path(), ids=ids)
    run = score_groups(groups, "verifier", WORK / "headline" / "verifier")
    rep = scorer_report(groups, run)
    rep.update(label="verifier (reference)", uses_judge=False, options={})
    reports.append(rep)
    for scorer, mode, opts in rows_opts:
        for which in a.headline_judges:
            spec = f"{MODEL if which == 'untrained' else trained[scorer]}?dtype={DTYPE}&device={DEVICE}"
            log(f"headline: {scorer} ({mode}), {which} judge")
            t0 = time.perf_counter()
            data = headline(rollouts_path(), WORK / "headline" / f"{scorer}-{mode}-{which}", scorers=[scorer],
                            judge=spec, judge_groups=ids, logit=mode == "logit", options={scorer: opts})
            (rep,) = data["reports"]
            rep["label"] = f"{scorer} {mode}, {which}" + ("" if which == "untrained" else
                                                          " (GAR stage 1)" if scorer != "critic" else " (RARO)")
            rep["judge"] = "untrained" if which == "untrained" else rel_path(trained[scorer])
            rep["mode"] = mode
            rep["wall_seconds_this_run"] = time.perf_counter() - t0
            reports.append(rep)
            log(f"  AUC {rep['auc']:.3f}, best-of-8 {rep['best_of_8']:.3f}")
    for r in reports:
        r.pop("scores_file", None)
    merge_results("headline", {"groups": ids, "options": {f"{s} ({m})": o for s, m, o in rows_opts},
                               "reports": reports})


def merge_results(key: str, section: dict[str, Any]) -> None:
    """Write one section into benchmarks/results/judge_training.json (other sections kept), then re-render
    the Markdown report and the learning-curve plot from it."""
    path = OUT / f"{NAME}.json"
    data = load_json(path) or {}
    data.update(machine=machine(), model=MODEL)
    data[key] = {**data.get(key, {}), **section, "measured": run_stamp()}
    save_json(path, data)
    data = load_json(path)
    (OUT / f"{NAME}.md").write_text(report_markdown(data))
    plot_curves(data, OUT / f"{NAME}.png")


@functools.lru_cache(maxsize=1)
def run_stamp() -> dict[str, str]:
    """The commit and date a section was measured at (taken once, when the stage starts): the sections of one
    results file may come from different runs."""
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    return {"commit": commit.strip() or "unknown", "date": time.strftime("%Y-%m-%d")}


def _run_line(section: dict[str, Any]) -> list[str]:
    """Which run measured ``section``: its stamp, or a warning that it predates the stamps."""
    r = section.get("measured")
    if r:
        return [f"Measured at commit `{r['commit']}` on {r['date']}.", ""]
    return ["Measured by an earlier run than the stamped sections of this file (before 2026-11-27); where a judge was "
            "re-trained since, its rows here are the earlier weights.", ""]


def _f(x: Any, fmt: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and x != x) else format(x, fmt)


def report_markdown(data: dict[str, Any]) -> str:
    """judge_training.md from judge_training.json."""
    lines = ["# Judges that learn, on held-out problems", "",
             f"Judge: `{data.get('model', MODEL)}` (SmolLM2-135M-Instruct, fp32), trained and evaluated on the project's "
             "shared 2-core CPU. Every split is by problem (`rewardkit.evals.splits`: a problem's split is fixed by a "
             "hash of its text, so it is the same in every data set that holds it); the 10 mixed groups of the shared "
             "rollouts (the headline's judge rows) are pinned to the held-out split of both judges. Trained weights "
             "stay outside git (`runs/judges/`).", ""]
    g = data.get("gar_discriminator")
    if g:
        b, a = g["before"], g.get("after")
        ci = g.get("auroc_ci", {})

        def iv(k: str) -> str:
            return f" [{ci[k][0]:.3f}, {ci[k][1]:.3f}]" if k in ci else ""

        lines += ["## GAR slice discriminator: stage-1 SFT on ProcessBench", "", *_run_line(g),
                  f"ProcessBench splits {', '.join(g['splits'])}; solutions sliced with GAR's slicing at L = "
                  f"{g['slice_tokens']} tokens (the paper: 320; shorter for the CPU). Labels: slices wholly before the "
                  "human-labelled earliest error YES, the slice(s) holding it NO, later slices unused. Training: "
                  f"{g['train_examples']} balanced slices from {g['train_problems']} problems; validation "
                  f"{g['val_examples']} slices from {g['val_problems']} problems (early stopping); held out: "
                  f"{g['heldout_solutions']} solutions of {g['heldout_problems']} problems (balanced per split, half "
                  f"with an error), SHA-256 of their ids `{g['heldout_ids_sha256'][:16]}...`.", "",
                  "P(YES) is the discriminator's verdict-logit mode (`verdict_probs`, prefix `**`). AUROC: P(YES) ranking "
                  "YES over NO slices (95% interval: bootstrap over solutions). Balanced accuracy: P(YES) >= 0.5. F1: "
                  "ProcessBench's (earliest error = first NO slice's first step; harmonic mean of the accuracies on "
                  "erroneous and on correct solutions), pooled over the held-out solutions.", "",
                  "| discriminator | slices (YES/NO) | AUROC | balanced acc. | ProcessBench F1 | acc. erroneous | acc. correct | mean P(YES) |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, r, k in (("untrained", b, "before"), ("stage-1 SFT", a, "after")):
            if r:
                lines.append(f"| {name} | {r['n']} ({r['n_yes']}/{r['n_no']}) | {_f(r['auroc'])}{iv(k)} | "
                             f"{_f(r['balanced_accuracy'])} | {_f(r['f1'])} | {_f(r['error_acc'])} | {_f(r['correct_acc'])} | "
                             f"{_f(r['mean_p_yes'])} |")
        if a and "delta" in ci:
            lines += ["", f"AUROC change: {a['auroc'] - b['auroc']:+.3f}, 95% interval [{ci['delta'][0]:+.3f}, "
                      f"{ci['delta'][1]:+.3f}] (paired bootstrap over the held-out solutions)."]
        t = g.get("training")
        if t:
            o = t["options"]
            lines += ["", f"Training (`rewardkit.grpo.sft.train_discriminator`): AdamW lr {o['lr']}, weight decay 1e-4, "
                      f"{int(o['warmup_fraction'] * 100)}% warm-up then linear decay, batch {o['batch_size']}, at most "
                      f"{o['max_steps']} steps, validation every {o['eval_every']} steps, patience {o['patience']}; "
                      + (f"top {t['trainable_layers']} decoder layers trained ({t['trainable_parameters']:,} parameters); "
                         if t.get("trainable_layers") else f"all {t['trainable_parameters']:,} parameters trained; ")
                      + f"best validation loss {t['best_eval_loss']:.4f} at step {t['best_step']}"
                      + (" (stopped early)" if t["stopped_early"] else "") + f"; {t['seconds'] / 60:.0f} min."]
        lines.append("")
    c = data.get("raro_critic")
    if c:
        lines += ["## RARO critic: critic-side training on R_crit", "", *_run_line(c),
                  f"Pairs: MATH reference solutions (expert) against Qwen2.5-Math rollouts (up to 2 per problem, wrong "
                  f"ones first) and the embedded model's own samples, on the same problems. The critic sees final answers "
                  f"(view `{c['view']}`, as RARO's DeepMath critic, App. E Figure 19) in a seeded order and writes its "
                  f"reasoning, then `Answer 1`, `Answer 2` or `tie` (budget {c['critic_tokens']} tokens, greedy). "
                  f"Training: {c['train_pairs']} pairs from {c['train_problems']} problems; validation {c['val_pairs']} "
                  f"pairs from {c['val_problems']} problems (model selection on mean R_crit); held out: "
                  f"{c['before']['n']} pairs of {c['heldout_problems']} problems, SHA-256 "
                  f"`{c['heldout_ids_sha256'][:16]}...`.", "",
                  "Accuracy: the share of held-out pairs where the critic names the expert answer (an invalid verdict "
                  "counts as not naming it). Where the policy answer is wrong, naming the expert is the right call; "
                  "where it is right, the two final answers are equal and `tie` is the fair one.", "",
                  "| critic | mode | pairs | accuracy | tie rate | invalid | accuracy, policy wrong (n) | tie rate, policy right (n) |",
                  "|---|---|---|---|---|---|---|---|"]
        warm_heldout = c.get("training", {}).get("warm_start", {}).get("heldout")
        for name, r in (("untrained", c["before"]), ("warm start only", warm_heldout), ("trained", c.get("after"))):
            if not r:
                continue
            for mode, rr in (("generate", r), ("logit", r.get("logit"))):
                if rr:
                    lines.append(f"| {name} | {mode} | {rr['n']} | {_f(rr['accuracy'])} | {_f(rr['tie_rate'])} | "
                                 f"{_f(rr['invalid_rate'])} | {_f(rr['policy_wrong']['accuracy'])} ({rr['policy_wrong']['n']}) | "
                                 f"{_f(rr['policy_right']['tie_rate'])} ({rr['policy_right']['n']}) |")
        t = c.get("training")
        if t:
            w, st = t.get("warm_start", {}), t["settings"]
            if w.get("pairs"):
                lines += ["", f"Supervised warm start (`rewardkit.grpo.sft.train_sft`, what it is: SFT on the true "
                          f"verdicts, kept short): {w['pairs']} training pairs, {w['options']['max_steps']} steps of "
                          f"batch {w['options']['batch_size']}, lr {w['options']['lr']}; targets restate both final answers, "
                          "then `tie` (policy right) or the expert's slot (policy wrong); "
                          f"{w['seconds'] / 60:.0f} min."]
            lines += ["", f"RL (`rewardkit.grpo.modes.critic_step`: Algorithm 2's critic rollouts with lambda_pol = 0, "
                      f"R_crit with tau_crit = 0.55): {t['steps']} steps of {t['pairs_per_step']} pairs x "
                      f"{t['samples_per_pair']} sampled verdicts, App. C.1 settings (advantage {st['advantage']}, "
                      f"norm {st['norm']}, clip [{st['eps_low']}, {st['eps_high']}], KL {st['beta']}, over-length "
                      f"filtering {st['overlong_filter']}), lr {st['lr']}, temperature {st['temperature']}; best "
                      f"validation R_crit {t['best_val_reward']:.3f} at step {t['best_step']}; {t['seconds'] / 60:.0f} min."]
        lines.append("")
    h = data.get("headline")
    if h:
        from rewardkit.evals.headline import headline_table

        lines += ["## Headline judge rows, untrained vs trained, on all 10 mixed groups", "", *_run_line(h),
                  f"`rewardkit.evals.headline.headline` on the {len(h['groups'])} mixed groups of the shared rollouts "
                  "(some but not all of the 8 answers correct). Options: " + "; ".join(
                      f"`{k}` {json.dumps(v)}" for k, v in h["options"].items()) + ". `slices` and `holistic` run with "
                  "lambda1 = 0 (no exact-match term) so the row measures the judge alone; with the default lambda1 = 1 "
                  "exact match ranks every mixed group perfectly whatever the judge says.", "",
                  headline_table({"reports": h["reports"]}).rstrip(), ""]
    lines += ["## Learning curves", "", f"![learning curves]({NAME}.png)", "",
              "GAR: training and validation loss (token NLL of the target judgment) per SFT step. Critic: mean R_crit "
              "of the sampled training verdicts (masked ones left out) and validation R_crit per RL step.", "",
              "## Reproduce", "", *[f"    {cmd}" for cmd in commands()], "",
              "A larger judge needs a GPU: see docs/training.md, \"Judges that learn\".", ""]
    return "\n".join(lines)


def commands() -> list[str]:
    """This benchmark's commands as benchmarks/runs.json records them (the flags of the recorded runs)."""
    from rewardkit.evals.tables import load_runs

    return [r.command for r in load_runs(ROOT) if r.name.startswith(f"{NAME}_")]


def plot_curves(data: dict[str, Any], path: Path) -> None:
    """judge_training.png: GAR SFT losses and the critic's R_crit per step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    g = (data.get("gar_discriminator") or {}).get("history") or []
    ax = axes[0]
    tr = [(h["step"], h["loss"]) for h in g if "loss" in h]
    ev = [(h["step"], h["eval_loss"]) for h in g if "eval_loss" in h]
    if tr:
        ax.plot(*zip(*tr), ".-", alpha=0.6, label="training loss")
    if ev:
        ax.plot(*zip(*ev), "o-", label="validation loss")
    ax.set_title("GAR discriminator, stage-1 SFT", fontsize=9)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("target NLL per token")
    ax.legend(fontsize=7)
    c = (data.get("raro_critic") or {}).get("history") or []
    ax = axes[1]
    tr = [(h["step"], h["critic_reward_mean"]) for h in c if h.get("critic_reward_mean") is not None
          and h["critic_reward_mean"] == h["critic_reward_mean"]]
    ev = [(h["step"], h["val_reward"]) for h in c if "val_reward" in h]
    if tr:
        ax.plot(*zip(*tr), ".-", alpha=0.6, label="R_crit of sampled verdicts (valid)")
    if ev:
        ax.plot(*zip(*ev), "o-", label="validation R_crit (greedy)")
    ax.set_title("RARO critic, R_crit (step 0: after the warm start)", fontsize=9)
    ax.set_xlabel("RL step")
    ax.set_ylabel("R_crit")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)


# ------------------------------------------------------------------------------------------ main


# --flag, type, default, help: the numeric options of the stages
NUMERIC_OPTIONS: tuple[tuple[str, type, float, str], ...] = (
    ("--sample-tokens", int, 128, "samples: tokens per embedded-model answer"),
    ("--sample-problems", int, 100, "samples: the first N of the shared rollouts' problems get an embedded-model answer"),
    ("--slice-tokens", int, 128, "gar: GAR slice budget L (the paper: 320)"),
    ("--heldout-per-split", int, 40, "gar: held-out solutions per split (half erroneous)"),
    ("--train-per-label", int, 400, "gar: training slices per label (YES, NO)"),
    ("--val-per-label", int, 16, "gar: validation slices per label"),
    ("--gar-lr", float, 1e-4, "gar: SFT learning rate (sec. 4.1: 1e-4)"),
    ("--gar-batch", int, 8, "gar: examples per optimizer step (sec. 4.1: 128)"),
    ("--gar-micro-batch", int, 4, "gar: examples per forward pass"),
    ("--gar-steps", int, 96, "gar: optimizer steps at most (sec. 4.1: 500)"),
    ("--gar-eval-every", int, 8, "gar: steps between validation losses"),
    ("--gar-seconds", float, 2700, "gar: training budget in seconds (the step past it is validated, then training stops)"),
    ("--gar-patience", int, 3, "gar: validations without improvement before stopping"),
    ("--gar-analysis-share", float, 0.5, "gar: share of SFT targets with the analysis; the rest start at the verdict, so the " "verdict-logit mode (P(YES) right after '**') is in the training distribution"),
    ("--gar-trainable-layers", int, 8, "gar: train only the top N of the 30 decoder layers (0: all)"),
    ("--qwen-per-problem", int, 2, "critic: Qwen answers per problem (wrong ones first)"),
    ("--critic-tokens", int, 96, "critic: token budget of a verdict (reasoning + verdict)"),
    ("--critic-lr", float, 1e-5, "critic: learning rate (Table 4: 1e-6)"),
    ("--critic-batch", int, 4, "critic: pairs per step"),
    ("--critic-samples", int, 4, "critic: sampled verdicts per pair (Table 4: group size 16)"),
    ("--critic-steps", int, 60, "critic: optimizer steps at most"),
    ("--critic-budget", float, 2400, "critic: seconds of training at most"),
    ("--critic-eval-every", int, 5, "critic: steps between validations"),
    ("--critic-warm-pairs", int, 48, "critic: pairs of the supervised warm start (0: none)"),
    ("--critic-warm-steps", int, 6, "critic: optimizer steps of the warm start (batch 8)"),
    ("--critic-trainable-layers", int, 0, "critic: train only the top N decoder layers (0: all)"),
)


def main() -> None:
    global WORK, OUT, MODEL, DEVICE, DTYPE
    run_stamp()  # the commit the stage runs at, before any later commit
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("stage", choices=["samples", "gar", "critic", "headline"])
    for flag, kind, default, text in NUMERIC_OPTIONS:
        ap.add_argument(flag, type=kind, default=default, help=text)
    ap.add_argument("--splits", nargs="+", default=["gsm8k", "math"], help="gar: ProcessBench splits")
    ap.add_argument("--gar-run", default="main", help="gar: name of this SFT run (its weights and results files)")
    ap.add_argument("--headline-rows", nargs="+", default=list(HEADLINE_ROWS), choices=HEADLINE_ROWS, help="headline: the judge rows (scorer-mode) to score")
    ap.add_argument("--headline-judges", nargs="+", default=["untrained", "trained"], choices=["untrained", "trained"], help="headline: which judges (untrained alone fills the cache before the trained weights exist)")
    ap.add_argument("--model", default=MODEL, help="the judge to start from (a model folder or smollm2)")
    ap.add_argument("--device", default=DEVICE, help="torch device (cuda for a GPU run)")
    ap.add_argument("--dtype", default=DTYPE, choices=["float32", "bfloat16"], help="weights' dtype")
    ap.add_argument("--work", type=Path, default=WORK, help="trained weights and evaluation caches (outside git)")
    ap.add_argument("--results", type=Path, default=OUT, help="folder for judge_training.json / .md / .png")
    a = ap.parse_args()
    WORK, OUT, MODEL, DEVICE, DTYPE = a.work.resolve(), a.results.resolve(), a.model, a.device, a.dtype
    WORK.mkdir(parents=True, exist_ok=True)
    {"samples": stage_samples, "gar": stage_gar, "critic": stage_critic, "headline": stage_headline}[a.stage](a)


if __name__ == "__main__":
    main()
