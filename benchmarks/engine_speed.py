"""rewardkit's transformers engine at its defaults against plain transformers, like with like.

Same weights, same rows, same batch size on both sides, one process. Every side is warmed at the exact batch
shape it is timed at, the sides are alternated, and each figure is the best of ``--reps`` (3) timed runs.

- **verdicts**: Reasoning Arena tournament prompts for live-tournament pairs from the shared rollouts (the new
  trace, response 0, against 3 anchors), choices A / B / Tie after ``\\boxed{``. rewardkit: ``verdict_probs``
  of a backend built with nothing but the model, given the messages. Anchors: the plain loop a user writes with
  transformers (length-sorted batches of at most 65,536 tokens, left padding, one forward with
  ``logits_to_keep=1``, the choices' first-token probabilities renormalised) timed (a) from token ids, with
  rendering and tokenising done before the clock starts, and (b) from the messages, rendering and tokenising
  timed. Also: the host time per pair left exposed (wall time minus the device's time inside forward passes,
  from CUDA events; on a CPU every forward synchronised) and the device syncs per call (CUDA sync debug mode).
- **generation**, from token ids on both sides, end-of-sequence suppressed (``min_new_tokens``): greedy, 64 MATH
  problems as chat prompts (64 rows); sampled as GRPO rollouts, 64 problems x 8 samples at temperature 1 (512
  rows). rewardkit: ``sample_tokens`` at defaults (the trainer's rollout path). Anchors: ``model.generate``
  given the same rows in one batch with transformers' static KV cache and compiled decode step
  (``cache_implementation="static"``; the same model object, so the compile of a shape is paid once and the
  static cache keeps the longest length seen, as transformers does across calls), and at 64 rows also
  ``model.generate`` with its default (dynamic) cache. rewardkit's warm-up at each shape is its first call there
  (the compile, reported on its own); the static anchor warms after it and finds the step compiled.
- **topk50** (a diagnostic): rewardkit's sampled rows with ``top_k=50``, transformers' implicit default, warmed
  and best of ``--reps`` right after the sampled part, against its best there.
- **GRPO step** (``grpo``): ``GRPOTrainer.train_step`` wall time on a random-init policy of the architecture,
  float32 weights trained, rollouts sampled from the bf16 copy (on a GPU); the first steps pay the compiles.

``--parts`` picks the parts (each architecture's parts run in one process, saved as each finishes, so a run cut
short keeps what it measured); every part records the run that measured it (command, device, versions, date).
``--merge`` joins partial runs into the results without losing a part measured earlier (a part that failed
does not replace a measured one); ``--check`` lists the headline keys still missing.

Without weights (``--arch``) the model is a random-init one of a stated architecture built from the embedded
tokenizer: speed depends on shapes, not on weight values. Results go to
``benchmarks/results/engine_speed.{json,md}``, a section per device kind, keys per architecture
``verdict_ratio_vs_plain_ids``, ``generation_ratio_same_rows_64``, ``generation_ratio_same_rows_512`` and
``generation_ratio_vs_dynamic_64``.

    PYTHONPATH=. python benchmarks/engine_speed.py --device cpu --arch smollm2-135m --pairs 12 --gen-prompts 4 \\
        --samples 2 --new 8 --rows 8 --before main
    scripts/gpu_engine_bench.sh   # on a GPU machine: the parts the GPU results lack (its header: which, how long)
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import rewardkit  # noqa: E402

if str(ROOT) not in rewardkit.__path__:  # cli/ and evals/ as rewardkit.cli / rewardkit.evals without an install
    rewardkit.__path__.append(str(ROOT))
from _common import RESULTS, machine, write_results  # noqa: E402
from judge_throughput import live_pairs, tournament_template  # noqa: E402

# stated architectures (Llama family, SmolLM2's tokenizer): the embedded 135M model's shapes and a 1.39B one
ARCHS = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, tie_word_embeddings=True),
    "llama-1.4b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2, tie_word_embeddings=True),
}
PLAIN_BATCH_TOKENS = 65_536
FORMAT = 3  # results layout: like-with-like anchors (issue 36), each part naming the run that measured it
PARTS = ("verdicts", "greedy", "sampled", "topk50", "grpo")
ENGINE_PARTS = PARTS[:4]  # measured on one loaded backend; grpo loads its own policy
HEADLINE = ("verdict_ratio_vs_plain_ids", "generation_ratio_same_rows_64", "generation_ratio_same_rows_512",
            "generation_ratio_vs_dynamic_64")


def arch_config(arch: str, layers: int | None) -> dict:
    """``arch``'s shapes, with ``layers`` decoder layers when given (a dry run on a CPU)."""
    return {**ARCHS[arch], **({"num_hidden_layers": layers} if layers else {})}


def build_model(arch: str, tokenizer_dir: str, device: str, out: Path, dtype: str = "auto",
                layers: int | None = None) -> str:
    """A folder with a random-init model of ``arch`` and the tokenizer, saved in bf16 on a GPU (``auto``: what the
    backend loads there; half the bytes to write) else fp32, or in ``dtype``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=8192, rope_theta=100000.0,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **arch_config(arch, layers))
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg)
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    model.to(getattr(torch, dtype))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    del model
    return str(out)


def sync(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_reset(torch) -> None:
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats()


def peak_gib(torch) -> float:
    if torch.cuda.is_available():
        return round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # process peak RSS


def timed(fn) -> tuple[float, object]:
    """(wall seconds of one call, device synchronised before and after, its result)."""
    import torch

    sync(torch)
    t = time.perf_counter()
    out = fn()
    sync(torch)
    return time.perf_counter() - t, out


def alternate(sides: dict, reps: int) -> dict[str, dict]:
    """Each side warmed once (at its own shape), then ``reps`` rounds running the sides in turn: per side the
    best, median and every time, the warm-up's time, and the last result."""
    res = {name: {"warm_s": round(timed(fn)[0], 3), "times": []} for name, fn in sides.items()}
    for _ in range(reps):
        for name, fn in sides.items():
            t, out = timed(fn)
            res[name]["times"].append(round(t, 4))
            res[name]["out"] = out
    for r in res.values():
        r["best_s"], r["median_s"] = min(r["times"]), float(np.median(r["times"]))
    return res


class DeviceTime:
    """Wraps ``model.forward``: the device's seconds inside forward passes (CUDA events, no sync added; on a CPU
    each call's wall time), so a call's wall time minus this is host work the device waited for."""

    def __init__(self, model, torch):
        self.model, self.torch, self.events, self.cpu_s = model, torch, [], 0.0
        inner = model.forward

        def forward(*a, **k):
            if torch.cuda.is_available():
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = inner(*a, **k)
                end.record()
                self.events.append((start, end))
                return out
            t = time.perf_counter()
            out = inner(*a, **k)
            self.cpu_s += time.perf_counter() - t
            return out

        import functools

        model.forward = functools.wraps(inner)(forward)  # keeps the signature rewardkit inspects

    def seconds(self) -> float:
        return self.cpu_s + sum(s.elapsed_time(e) for s, e in self.events) / 1000

    def close(self) -> None:
        del self.model.forward  # back to the class's forward


def exposed_host(fn, model, n: int) -> dict:
    """One extra call of ``fn``: host ms per item the device waited for, and device syncs (CUDA)."""
    import torch

    timer = DeviceTime(model, torch)
    syncs = None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if torch.cuda.is_available():
                torch.cuda.set_sync_debug_mode("warn")
            try:
                wall, _ = timed(fn)
            finally:
                if torch.cuda.is_available():
                    torch.cuda.set_sync_debug_mode("default")
        if torch.cuda.is_available():
            syncs = sum("synchroniz" in str(w.message) for w in caught) - 1  # less timed()'s final synchronize
    finally:
        timer.close()
    return {"forward_calls": len(timer.events) or None, "host_ms_per_item": round(1000 * (wall - timer.seconds()) / n, 3),
            "device_syncs": syncs}


def plain_loop(model, tok, ids: list[list[int]], choice_ids: list[int], device: str):
    """The baseline: what a user writes with plain transformers, from token ids (see the module docstring)."""
    import torch

    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    probs = np.zeros((len(ids), len(choice_ids)))
    batch: list[int] = []

    def run(b: list[int]) -> None:
        enc = tok.pad({"input_ids": [ids[i] for i in b]}, padding=True, return_tensors="pt")  # left padding
        with torch.inference_mode():
            logits = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                           logits_to_keep=1).logits[:, -1].float()
        probs[b] = torch.softmax(logits[:, choice_ids], -1).cpu().numpy()

    for i in order:
        if batch and (len(batch) + 1) * len(ids[i]) > PLAIN_BATCH_TOKENS:
            run(batch)
            batch = []
        batch.append(i)
    if batch:
        run(batch)
    return probs


def verdict_bench(backend, pairs: list[dict], reps: int) -> dict:
    import torch

    from rewardkit.backends import VerdictRequest

    template, prefix = tournament_template()
    msgs = [[{"role": "user", "content": template.format(**{k: v for k, v in p.items() if k != "id"})}] for p in pairs]
    choices = ["A", "B", "Tie"]
    reqs = [VerdictRequest(m, choices, prefix) for m in msgs]
    tok, model, device = backend.tokenizer, backend.model, backend.device
    choice_ids = [tok(c, add_special_tokens=False).input_ids[0] for c in choices]

    def encode():
        texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) + prefix for m in msgs]
        return tok(texts, add_special_tokens=False).input_ids

    ids = encode()
    sides = {"rewardkit": lambda: backend.verdict_probs(reqs),
             "plain_ids": lambda: plain_loop(model, tok, ids, choice_ids, device),
             "plain_messages": lambda: plain_loop(model, tok, encode(), choice_ids, device)}
    peak_reset(torch)
    res = alternate(sides, reps)
    got, want = res["rewardkit"]["out"], res["plain_ids"]["out"]
    assert all(r.status.value == "ok" for r in got), [r.error for r in got if r.status.value != "ok"][:3]
    n = len(reqs)
    rate = {k: round(n / r["best_s"], 2) for k, r in res.items()}
    return {"pairs": n, "mean_prompt_tokens": round(float(np.mean([len(x) for x in ids])), 1),
            "pairs_per_s": rate, "times_s": {k: r["times"] for k, r in res.items()},
            "warm_s": {k: r["warm_s"] for k, r in res.items()},
            "ratio_vs_plain_ids": round(res["plain_ids"]["best_s"] / res["rewardkit"]["best_s"], 3),
            "ratio_vs_plain_messages": round(res["plain_messages"]["best_s"] / res["rewardkit"]["best_s"], 3),
            "max_abs_prob_diff": float(np.abs(np.stack([r.probs for r in got]) - want).max()),
            "peak_gib": peak_gib(torch),
            "exposed_host": {"rewardkit": exposed_host(sides["rewardkit"], model, n),
                             "plain_ids": exposed_host(sides["plain_ids"], model, n)}}


def generation_bench(backend, rows: list[list[int]], new: int, sample: bool, reps: int, dynamic: bool) -> dict:
    """rewardkit's ``sample_tokens`` against ``model.generate`` on the same rows in one batch."""
    import torch

    tok, model, dev = backend.tokenizer, backend.model, backend.device
    knobs = dict(temperature=1.0, top_p=1.0, top_k=0) if sample else {}
    enc = tok.pad({"input_ids": rows}, padding=True, return_tensors="pt")  # left padding
    ids, mask = enc["input_ids"].to(dev), enc["attention_mask"].to(dev)

    def plain(**cache):
        with torch.inference_mode():
            return model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                                  do_sample=sample, pad_token_id=tok.pad_token_id, **knobs, **cache)

    def ours(top_k=None):
        return backend.sample_tokens(rows, max_new_tokens=new, min_new_tokens=new, seed=0 if sample else None,
                                     **(dict(knobs, top_k=top_k) if sample else {}))

    sides = {"rewardkit": ours}
    if dev.startswith("cuda"):
        sides["generate_static"] = lambda: plain(cache_implementation="static")
    if dynamic or not dev.startswith("cuda"):
        sides["generate_dynamic"] = plain
    peak_reset(torch)
    res = alternate(sides, reps)  # rewardkit's warm-up is the first call at this shape: the compile, on a GPU
    made = sum(len(t) for t, _ in res["rewardkit"]["out"])
    assert made == len(rows) * new, (made, len(rows) * new)
    tokens = len(rows) * new
    rate = {k: round(tokens / r["best_s"], 1) for k, r in res.items()}
    anchor = "generate_static" if "generate_static" in sides else "generate_dynamic"
    out = {"rows": len(rows), "new_tokens": new, "sampled": sample, "first_call_s": res["rewardkit"]["warm_s"],
           "tokens_per_s": rate, "times_s": {k: r["times"] for k, r in res.items()},
           "warm_s": {k: r["warm_s"] for k, r in res.items()}, "same_rows_anchor": anchor,
           "ratio_same_rows": round(res[anchor]["best_s"] / res["rewardkit"]["best_s"], 3),
           "peak_gib": peak_gib(torch), "placement": backend.placement.describe()}
    if "generate_dynamic" in res:
        out["ratio_vs_dynamic"] = round(res["generate_dynamic"]["best_s"] / res["rewardkit"]["best_s"], 3)
    return out


def topk50_bench(backend, rows: list[list[int]], new: int, reps: int, sampled: dict | None) -> dict:
    """rewardkit's sampled rows with ``top_k=50`` (transformers' implicit default), warmed at the shape and best of
    ``reps``, against the default (no top-k) best of the sampled part just measured (measured here if it was not)."""
    knobs = dict(max_new_tokens=new, min_new_tokens=new, seed=0, temperature=1.0, top_p=1.0)
    sides = {"top_k_50": lambda: backend.sample_tokens(rows, top_k=50, **knobs)}
    if not sampled or "tokens_per_s" not in sampled:
        sides["default"] = lambda: backend.sample_tokens(rows, **knobs)
    res = alternate(sides, reps)
    tokens = len(rows) * new
    rate = {k: round(tokens / r["best_s"], 1) for k, r in res.items()}
    if "default" not in rate:
        rate["default"] = sampled["tokens_per_s"]["rewardkit"]
    return {"rows": len(rows), "new_tokens": new, "tokens_per_s": rate,
            "times_s": {k: r["times"] for k, r in res.items()}, "warm_s": {k: r["warm_s"] for k, r in res.items()},
            "top_k50_over_default": round(rate["top_k_50"] / rate["default"], 3)}


def grpo_bench(path: str, problems: list[str], steps: int, prompts: int, samples: int, new: int) -> dict:
    """Wall time of ``GRPOTrainer.train_step`` (first step: compile) on ``path`` as the policy."""
    from rewardkit.grpo.toy_rewards import KeywordScorer
    from rewardkit.grpo.trainer import GRPOTrainer, TrainConfig
    from rewardkit.types import Group

    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(model=path, out_dir=out, steps=steps, prompts_per_step=prompts, samples_per_prompt=samples,
                          max_new_tokens=new, beta=0.0, tensorboard=False)
        trainer = GRPOTrainer(cfg, [Group(str(i), p, []) for i, p in enumerate(problems)], KeywordScorer())
        rows = []
        for _ in range(steps):
            r = trainer.train_step()
            trainer.step += 1
            rows.append({k: round(r[k], 2) for k in ("step_seconds", "sample_seconds")})
        pl = trainer.policy.placement
        info = {"steps": rows, "rows_per_step": prompts * samples, "new_tokens": new,
                "parameters": sum(p.numel() for p in trainer.model.parameters()),
                "weights": str(trainer.model.dtype), "sampler": str(trainer.policy.sampler.dtype),
                "static_cache": pl.static_cache}
        del trainer
    return info


def measure(backend, args, parts: list[str], pairs: list[dict], prompt_ids: list[list[int]], row: dict,
            run: dict, saved) -> dict:
    """The engine ``parts`` on one loaded backend into ``row``, each naming ``run`` (``saved()`` after each); a part
    that fails is recorded and the others still run."""
    greedy_rows = prompt_ids[: args.rows]
    sampled_rows = [p for p in prompt_ids for _ in range(args.samples)]
    runners = {"verdicts": lambda: verdict_bench(backend, pairs, args.reps),
               "greedy": lambda: generation_bench(backend, greedy_rows, args.new, False, args.reps, True),
               "sampled": lambda: generation_bench(backend, sampled_rows, args.new, True, args.reps, False),
               "topk50": lambda: topk50_bench(backend, sampled_rows, args.new, args.reps, row.get("sampled"))}
    for part in parts:
        record(row, part, runners[part], run)
        saved()
    return row


def record(row: dict, part: str, run_part, run: dict) -> None:
    """``row[part]`` = what ``run_part()`` measured, or its error, naming ``run``; the headline keys after it."""
    try:
        row[part] = {**run_part(), "run": run}
    except Exception as e:  # noqa: BLE001 - one failed part must not lose the others
        row[part] = {"error": repr(e)[:500], "run": run}
    print(part, json.dumps(row[part]), flush=True)
    row.update(headline(row))


def headline(row: dict) -> dict:
    """The four ratios the issue asks for (None where a part failed or was not run)."""
    v, g, s = row.get("verdicts", {}), row.get("greedy", {}), row.get("sampled", {})
    return dict(zip(HEADLINE, (v.get("ratio_vs_plain_ids"), g.get("ratio_same_rows"), s.get("ratio_same_rows"),
                               g.get("ratio_vs_dynamic")), strict=True))


def _placements(section: dict) -> list[str]:
    """Every placement line a device section records (per architecture and per generation part)."""
    return [p for r in section.get("models", {}).values()
            for p in [r.get("placement")] + [r.get(k, {}).get("placement") for k in ("greedy", "sampled")] if p]


def missing(section: dict | None) -> list[str]:
    """What a device section still lacks: per architecture each headline key and the GRPO step times."""
    models = (section or {}).get("models", {})
    gaps = []
    for arch in ARCHS:
        row = models.get(arch, {})
        gaps += [f"{arch}: {k}" for k, v in headline(row).items() if v is None]
        if not row.get("grpo", {}).get("steps"):
            gaps.append(f"{arch}: grpo")
    return gaps


def before_after(ref: str, rounds: int, problems: int, rollouts: Path) -> dict:
    """``benchmarks/judge_throughput.py`` of commit ``ref`` and of this checkout, alternated ``rounds`` times in
    one run (each its own process, the same load): verdict pairs/s without (b) and with (c) prefix sharing."""
    import os
    import statistics
    import subprocess

    from _common import checkout

    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with checkout(ref) as old, tempfile.TemporaryDirectory() as tmp:
        for k in range(rounds):
            for label, root in (("before", old), ("after", ROOT)):
                out = Path(tmp) / f"{label}{k}"
                subprocess.run([sys.executable, str(root / "benchmarks" / "judge_throughput.py"), "--problems",
                                str(problems), "--gen-pairs", "1", "--max-new", "8", "--rollouts", str(rollouts),
                                "--out", str(out)], check=True, capture_output=True, cwd=root,
                               env={**os.environ, "PYTHONPATH": str(root)})
                r = json.loads(out.with_suffix(".json").read_text())
                runs[label].append({"b": r["b_verdict_logits"]["pairs_per_s"], "c": r["c_prefix_reuse"]["pairs_per_s"]})
    # best of the rounds: on a shared machine a run is only ever slowed by others' load, never sped up
    best = {label: {m: max(x[m] for x in rs) for m in ("b", "c")} for label, rs in runs.items()}
    med = {label: {m: statistics.median(x[m] for x in rs) for m in ("b", "c")} for label, rs in runs.items()}
    return {"ref": ref, "rounds": rounds, "pairs": 3 * problems, "runs": runs, "best_pairs_per_s": best,
            "median_pairs_per_s": med,
            "after_over_before": {m: round(best["after"][m] / best["before"][m], 3) for m in ("b", "c")},
            "after_over_before_median": {m: round(med["after"][m] / med["before"][m], 3) for m in ("b", "c")}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="auto", help="where both run (auto: cuda when torch sees a GPU)")
    ap.add_argument("--arch", action="append", help=f"random-init architecture(s): {', '.join(ARCHS)}")
    ap.add_argument("--parts", default=",".join(ENGINE_PARTS),
                    help=f"comma-separated parts per architecture, in order: {', '.join(PARTS)}; none: no part")
    ap.add_argument("--layers", type=int, help="decoder layers of every --arch (a dry run on a CPU; default: its own)")
    ap.add_argument("--tokenizer", help="tokenizer folder for --arch (default: the embedded model's)")
    ap.add_argument("--rollouts", help="the shared rollouts JSONL (default: ../shared/data/...)")
    ap.add_argument("--pairs", type=int, default=300, help="verdict pairs (3 per problem)")
    ap.add_argument("--reps", type=int, default=3, help="timed runs per side after its warm-up (best reported)")
    ap.add_argument("--gen-prompts", type=int, default=64, help="MATH problems sampled (x --samples rows)")
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--rows", type=int, default=64, help="greedy rows (the first problems)")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--grpo-new", type=int, default=128, help="new tokens per GRPO rollout")
    ap.add_argument("--width-bucket", type=int, help="the coarsest step rewardkit's decode prompts are left-padded "
                                                     "to, not the placement's (8 or less: plain multiples of it; "
                                                     "Placement.decode_width): what the padding costs")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="merge these results files (partial runs) into --out "
                                                                 "(its parts kept unless measured again) and exit")
    ap.add_argument("--check", action="store_true", help="exit 1 naming the headline keys and GRPO steps --out's "
                                                         "--device section lacks (after --merge, or alone)")
    ap.add_argument("--out", help="results JSON (default benchmarks/results/engine_speed.json; merged per device)")
    ap.add_argument("--before", metavar="REF", help="CPU: also run benchmarks/judge_throughput.py at commit REF "
                                                    "and here, alternated (--rounds), in this run")
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    out_path = Path(args.out) if args.out else RESULTS / "engine_speed.json"
    if args.merge or args.check:
        if args.merge:
            merge(args.merge, out_path)
        if args.check:
            kind = "cpu" if args.device == "cpu" else "cuda"
            data = json.loads(out_path.read_text()) if out_path.exists() else {}
            gaps = missing(data.get(kind))
            print(f"{out_path} [{kind}]: " + ("every headline key and the GRPO steps present" if not gaps else
                                              "missing " + "; ".join(gaps)), flush=True)
            raise SystemExit(1 if gaps else 0)
        return
    parts = [] if args.parts == "none" else args.parts.split(",")
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        raise SystemExit(f"--parts: unknown {unknown}; choose from {', '.join(PARTS)}")

    import datetime

    import torch
    import transformers

    from rewardkit.backends.hardware import resolve_device
    from rewardkit.backends.transformers_backend import TransformersBackend

    device = resolve_device(args.device)
    rollouts = Path(args.rollouts) if args.rollouts else None
    if rollouts is None:
        from rewardkit.evals.data import rollouts_path

        rollouts = rollouts_path()
    pairs = live_pairs(rollouts, (args.pairs + 2) // 3)[: args.pairs]
    problems = [json.loads(line)["problem"] for line in rollouts.open()][: args.gen_prompts]
    kind = "cuda" if device.startswith("cuda") else "cpu"
    command = "PYTHONPATH=. python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    if os.environ.get("OUT"):  # the GPU script's output folder, named as the script names it
        command = command.replace(os.environ["OUT"], "$OUT")
    run = {"command": command,
           "device": torch.cuda.get_device_name() if kind == "cuda" else f"CPU ({machine()['cpus']} cores)",
           "torch": torch.__version__, "transformers": transformers.__version__, **machine(),
           "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}
    section: dict = {"models": {}}
    if args.tokenizer:
        tokenizer = args.tokenizer
    else:
        from rewardkit.backends.embedded import embedded_model_path

        tokenizer = str(embedded_model_path("float32"))
    engine = [p for p in parts if p in ENGINE_PARTS]
    with tempfile.TemporaryDirectory() as tmp:
        for arch in (args.arch or ["smollm2-135m"]) if parts else []:
            row = section["models"].setdefault(arch, {"model": f"{arch} (random init: "
                                                               f"{arch_config(arch, args.layers)})"})
            if engine:
                path = build_model(arch, tokenizer, device, Path(tmp) / arch, layers=args.layers)
                backend = TransformersBackend(path)  # only the model: every other setting at its default
                if backend.device != device:
                    raise SystemExit(f"the default device is {backend.device}, expected {device}")
                if args.width_bucket:  # the one setting changed, named in the row's placement
                    backend.placement = dataclasses.replace(backend.placement, width_bucket=args.width_bucket)
                chats = [[{"role": "user", "content": p}] for p in problems]
                prompt_ids = backend.encode_many(backend.render_many(chats))
                row.update({"parameters": sum(p.numel() for p in backend.model.parameters()),
                            "placement": backend.placement.describe(),
                            "mean_prompt_tokens_generation": round(float(np.mean([len(p) for p in prompt_ids])), 1)})
                print(f"{arch}: {row['placement']}", flush=True)
                measure(backend, args, engine, pairs, prompt_ids, row, run, lambda: save(out_path, kind, section))
                backend.close()
                del backend
                gc.collect()
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
            if "grpo" in parts:
                record(row, "grpo", lambda a=arch: grpo_bench(
                    build_model(a, tokenizer, device, Path(tmp) / "policy", "float32", args.layers), problems, 3, 8,
                    args.samples, args.grpo_new), run)
            save(out_path, kind, section)  # after each architecture: a run cut short keeps what it measured
    if args.before:
        section["judge_throughput_before_after"] = {**before_after(args.before, args.rounds,
                                                                   max(1, args.pairs // 3), rollouts), "run": run}
        print(json.dumps(section["judge_throughput_before_after"]), flush=True)
    save(out_path, kind, section)


def merge_section(base: dict | None, new: dict) -> dict:
    """``new``'s parts over ``base``'s: a part measured in ``new`` replaces the earlier one, a part that failed
    there (``error``) does not replace a measured one; the headline keys follow the parts kept."""
    out = {**(base or {}), "models": {a: dict(r) for a, r in (base or {}).get("models", {}).items()}}
    for arch, row in new.get("models", {}).items():
        kept = out["models"].setdefault(arch, {})
        for key, value in row.items():
            if key in PARTS and "error" in value and "error" not in kept.get(key, {"error": ""}):
                print(f"merge: {arch} {key} failed in {value['run']['command']!r}; the earlier one is kept")
                continue
            if key not in HEADLINE:
                kept[key] = value
        kept.update(headline(kept))
    if "judge_throughput_before_after" in new:
        out["judge_throughput_before_after"] = new["judge_throughput_before_after"]
    return out


def merge(paths: list[str], out: Path) -> None:
    """Partial runs' results files merged into ``out`` (its own parts kept unless measured again), per device."""
    data = json.loads(out.read_text()) if out.exists() else {}
    for path in paths:
        for kind, sec in json.loads(Path(path).read_text()).items():
            if kind in ("cuda", "cpu"):
                data[kind] = merge_section(data.get(kind), sec)
    for kind, sec in data.items():
        if kind in ("cuda", "cpu"):
            save(out, kind, sec)


def save(path: Path, kind: str, section: dict) -> None:
    """Merge ``section`` into the results JSON under ``kind`` and rewrite the Markdown beside it."""
    data = json.loads(path.read_text()) if path.exists() else {}
    # sections of an earlier layout are dropped: they compared unlike things or name no run per part
    data = {k: v for k, v in data.items() if k in ("cuda", "cpu") and v.get("format") == FORMAT}
    data[kind] = {**section, "format": FORMAT}
    if path.resolve().parent == RESULTS.resolve():
        write_results(path.stem, data, to_markdown(data))
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=1))
        path.with_suffix(".md").write_text(to_markdown(data))


def _ratio(x) -> str:
    return f"**{x}x**" if x is not None else "-"


def runs_of(section: dict) -> list[dict]:
    """The distinct runs a section's parts name, in the order first named."""
    found: list[dict] = []
    for row in section.get("models", {}).values():
        for part in PARTS:
            r = row.get(part, {}).get("run")
            if r and r not in found:
                found.append(r)
    r = section.get("judge_throughput_before_after", {}).get("run")
    if r and r not in found:
        found.append(r)
    return found


def to_markdown(data: dict) -> str:
    md = ["# Engine speed: rewardkit at defaults vs plain transformers, like with like", "",
          "`benchmarks/engine_speed.py` (workloads and anchors in its docstring). Same weights, same rows, same "
          "batch size on both sides; each side warmed at its exact shape, sides alternated, best of the timed runs "
          "(every time in the JSON). Ratios > 1: rewardkit is faster. Each row names the run that measured it "
          "(partial runs merged by `--merge`).", ""]
    for kind in ("cuda", "cpu"):
        s = data.get(kind)
        if not s:
            continue
        runs = runs_of(s)

        def run_no(part: dict, runs: list[dict] = runs) -> str:
            return str(runs.index(part["run"]) + 1) if part.get("run") in runs else "-"

        md += [f"## {'GPU' if kind == 'cuda' else 'CPU'}", "", "Runs:", ""]
        md += [f"{k}. {r['device']}, torch {r['torch']}, transformers {r['transformers']}, {r['date']}: "
               f"`{r['command']}`" for k, r in enumerate(runs, 1)] + [""]
        gaps = missing(s) if kind == "cuda" else []
        if gaps:
            md += ["Not measured yet: " + "; ".join(gaps) + ".", ""]
        if s["models"]:
            md += ["| model | workload | rewardkit | anchor | anchor's rate | ratio | run |",
                   "|---|---|---:|---|---:|---:|---:|"]
        notes = []
        for arch, r in s["models"].items():
            name = f"{arch} ({r['parameters'] / 1e6:,.0f}M)" if "parameters" in r else arch
            v = r.get("verdicts", {})
            if "error" in v:
                md.append(f"| {name} | verdicts | error: {v['error']} | | | | {run_no(v)} |")
            elif v:
                w = f"verdict pairs/s, {v['pairs']} pairs of {v['mean_prompt_tokens']:.0f} tokens"
                rk = v["pairs_per_s"]["rewardkit"]
                md.append(f"| {name} | {w} | {rk} | plain loop from token ids | {v['pairs_per_s']['plain_ids']} | "
                          f"{_ratio(v['ratio_vs_plain_ids'])} | {run_no(v)} |")
                md.append(f"| {name} | {w} | {rk} | plain loop from messages (render + tokenise timed) | "
                          f"{v['pairs_per_s']['plain_messages']} | {_ratio(v['ratio_vs_plain_messages'])} | "
                          f"{run_no(v)} |")
                h = v["exposed_host"]
                notes.append(f"{arch}: host time per pair the device waited for: rewardkit "
                             f"{h['rewardkit']['host_ms_per_item']} ms, plain loop from ids "
                             f"{h['plain_ids']['host_ms_per_item']} ms; device syncs per call: rewardkit "
                             f"{h['rewardkit']['device_syncs']}, plain {h['plain_ids']['device_syncs']}; "
                             f"max abs probability difference {v['max_abs_prob_diff']:.2g}")
            for part, label in (("greedy", "greedy"), ("sampled", "sampled, temperature 1 (GRPO rollouts)")):
                g = r.get(part, {})
                if "error" in g:
                    md.append(f"| {name} | {part} generation | error: {g['error']} | | | | {run_no(g)} |")
                    continue
                if not g:
                    continue
                w = f"tokens/s, {g['rows']} rows x {g['new_tokens']} new, {label}"
                anchors = [("generate_static", "`model.generate`, same rows in one batch, static cache (compiled)",
                            g.get("ratio_same_rows") if g["same_rows_anchor"] == "generate_static" else None),
                           ("generate_dynamic", "`model.generate`, same rows in one batch, default dynamic cache",
                            g.get("ratio_vs_dynamic", g.get("ratio_same_rows")
                                  if g["same_rows_anchor"] == "generate_dynamic" else None))]
                for key, label_a, ratio in anchors:
                    if key in g["tokens_per_s"]:
                        md.append(f"| {name} | {w} | {g['tokens_per_s']['rewardkit']} | {label_a} | "
                                  f"{g['tokens_per_s'][key]} | {_ratio(ratio)} | {run_no(g)} |")
                notes.append(f"{arch} {part}: first call at this shape (compile on a GPU) {g['first_call_s']} s")
                if g.get("placement") and g["placement"] != r.get("placement"):  # merged from another run
                    notes.append(f"{arch} {part} placement (run {run_no(g)}): {g['placement']}")
            t = r.get("topk50", {})
            if t:
                notes.append(f"{arch} sampled rows with top_k=50 (run {run_no(t)}): " + (
                    f"error: {t['error']}" if "error" in t else
                    f"{t['tokens_per_s']['top_k_50']} tokens/s against {t['tokens_per_s']['default']} without top-k "
                    f"({t['top_k50_over_default']}x)"))
            gr = r.get("grpo", {})
            if gr:
                notes.append(f"GRPO train steps, {arch} policy (run {run_no(gr)}): " + (
                    f"error: {gr['error']}" if "error" in gr else
                    f"{gr['rows_per_step']} rows x {gr['new_tokens']} tokens, weights {gr['weights']}, sampler "
                    f"{gr['sampler']}, static cache {gr['static_cache']}: " + ", ".join(
                        f"{x['step_seconds']} s (sampling {x['sample_seconds']} s)" for x in gr["steps"])
                    + " (the first steps pay the compiles)"))
        for arch, r in s["models"].items():
            if "placement" in r:
                notes.append(f"{arch} placement (the last run merged): {r['placement']}")
        if any("static KV cache" in str(x) and "prompts" not in str(x) for x in _placements(s)):
            notes.append("a placement that names no prompt width padded prompts to multiples of 64 tokens (the "
                         "default until 2026-11-28, when steps of an eighth of the width, 8 to 64 tokens, became "
                         "it; `benchmarks/results/engine_speed_width.md`)")
        ba = s.get("judge_throughput_before_after")
        if ba:
            notes.append(f"`benchmarks/judge_throughput.py` at {ba['ref']} (before) and here (after), alternated "
                         f"{ba['rounds']} times in one run (run {run_no(ba)}), {ba['pairs']} pairs, verdict pairs/s "
                         f"(best): without prefix sharing {ba['best_pairs_per_s']['before']['b']} -> "
                         f"{ba['best_pairs_per_s']['after']['b']} (**{ba['after_over_before']['b']}x**), with "
                         f"{ba['best_pairs_per_s']['before']['c']} -> {ba['best_pairs_per_s']['after']['c']} "
                         f"(**{ba['after_over_before']['c']}x**); medians {ba['after_over_before_median']['b']}x "
                         f"and {ba['after_over_before_median']['c']}x; after / before per round: " + "; ".join(
                             f"{m}: " + ", ".join(f"{x[m] / y[m]:.2f}" for x, y in zip(ba["runs"]["after"],
                                                                                     ba["runs"]["before"], strict=True))
                             for m in ("b", "c")) + " (b: without prefix sharing, c: with it; every run in the JSON)")
        md += [""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(md)


if __name__ == "__main__":
    main()
