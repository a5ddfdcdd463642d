"""rewardkit's transformers engine at its defaults against the plain transformers code a user would write.

Same weights, same token ids, one process. Two workloads:

- **verdicts**: Reasoning Arena tournament prompts for live-tournament pairs from the shared rollouts (the new
  trace, response 0, against 3 anchors), choices A / B / Tie after ``\\boxed{``. rewardkit: ``verdict_probs``
  of a backend built with nothing but the model (device, dtype, budget and prefix sharing at their defaults).
  Baseline: render the chat template, tokenise in one call, length-sorted batches of at most 65,536 tokens, left
  padding, one forward pass with ``logits_to_keep=1``, the choices' first-token probabilities renormalised.
- **generation**: MATH problems as chat prompts, ``samples`` sampled rows per prompt (temperature 1, as GRPO
  rollouts), ``new`` tokens each with end-of-sequence suppressed. rewardkit: ``generate`` at defaults (rows
  packed by memory). Baseline: ``model.generate`` on batches of 64 rows (its rate measured on the first
  ``--baseline-batches`` batches: a rate, the same for every batch of that size).

Also: the largest probability difference, peak memory, and the host time per request spent outside forward
passes (tokenising, batching, cache handling, reading results), measured in a separate pass with every
forward timed to its end (the device synchronised), so wall time minus forward time is host work.

Without weights (``--arch``) the model is a random-init one of a stated architecture built from the embedded
tokenizer: speed depends on shapes, not on weight values. Results go to
``benchmarks/results/engine_speed.{json,md}``, a section per device kind.

    PYTHONPATH=. python benchmarks/engine_speed.py --device cpu --arch smollm2 --pairs 24 --gen-prompts 4 --samples 4 --new 32
    PYTHONPATH=. python benchmarks/engine_speed.py --device cuda --arch smollm2-135m --arch llama-1.4b --pairs 300 \\
        --gen-prompts 64 --samples 8 --new 256 --tokenizer DIR --rollouts FILE
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import rewardkit  # noqa: E402

if str(ROOT) not in rewardkit.__path__:  # cli/ and evals/ as rewardkit.cli / rewardkit.evals without an install
    rewardkit.__path__.append(str(ROOT))
from _common import RESULTS, machine, write_results  # noqa: E402
from judge_throughput import live_pairs, tournament_template  # noqa: E402

# stated architectures (Llama family, SmolLM2's tokenizer): the embedded 135M model and a 1.39B one
ARCHS = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, tie_word_embeddings=True),
    "llama-1.4b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                       num_key_value_heads=2, tie_word_embeddings=True),
}
PLAIN_BATCH_TOKENS = 65_536
PLAIN_GENERATE_ROWS = 64


def build_model(arch: str, tokenizer_dir: str, device: str, out: Path) -> str:
    """A folder with a random-init model of ``arch`` in bf16 (GPU) / fp32 (CPU) and the tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=8192, rope_theta=100000.0,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      **ARCHS[arch])
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16 if device.startswith("cuda") else torch.float32)
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


class ForwardTimer:
    """Wraps ``model.forward`` so each call runs to its end (device synchronised): total seconds inside."""

    def __init__(self, model, torch):
        self.model, self.torch, self.seconds, self.calls = model, torch, 0.0, 0
        self.inner = model.forward

        @functools.wraps(self.inner)  # keeps the signature rewardkit inspects (its cache keyword)
        def timed(*a, **k):
            t = time.perf_counter()
            out = self.inner(*a, **k)
            sync(torch)
            self.seconds += time.perf_counter() - t
            self.calls += 1
            return out

        model.forward = timed

    def close(self) -> None:
        del self.model.forward  # back to the class's forward


def plain_verdicts(model, tok, texts: list[str], choice_ids: list[int], device: str):
    """The baseline: what a user writes with plain transformers (see the module docstring)."""
    import torch

    ids = tok(texts, add_special_tokens=False).input_ids
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    probs = np.zeros((len(ids), len(choice_ids)))
    batch: list[int] = []

    def run(b: list[int]) -> None:
        enc = tok.pad({"input_ids": [ids[i] for i in b]}, padding=True, return_tensors="pt")  # left padding
        with torch.inference_mode():
            logits = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device),
                           logits_to_keep=1).logits[:, -1].float()
        p = torch.softmax(logits[:, choice_ids], -1).cpu().numpy()
        probs[b] = p

    for i in order:
        if batch and (len(batch) + 1) * len(ids[i]) > PLAIN_BATCH_TOKENS:
            run(batch)
            batch = []
        batch.append(i)
    if batch:
        run(batch)
    return probs


def best_of(fn, reps: int) -> tuple[float, object]:
    """(fastest wall seconds over ``reps`` runs, the last result)."""
    import torch

    best, out = float("inf"), None
    for _ in range(reps):
        sync(torch)
        t = time.perf_counter()
        out = fn()
        sync(torch)
        best = min(best, time.perf_counter() - t)
    return best, out


VARIANTS = ({"batch_tokens": 65_536}, {"batch_tokens": 262_144}, {"share_prefix": True})


def verdict_bench(backend, pairs: list[dict], reps: int, variants: bool = False) -> dict:
    import torch

    from rewardkit.backends import VerdictRequest

    template, prefix = tournament_template()
    msgs = [[{"role": "user", "content": template.format(**{k: v for k, v in p.items() if k != "id"})}] for p in pairs]
    choices = ["A", "B", "Tie"]
    reqs = [VerdictRequest(m, choices, prefix) for m in msgs]
    tok, model = backend.tokenizer, backend.model
    texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) + prefix for m in msgs]
    lengths = [len(x) for x in tok(texts, add_special_tokens=False).input_ids]
    choice_ids = [tok(c, add_special_tokens=False).input_ids[0] for c in choices]
    device = backend.device

    def ours():
        return backend.verdict_probs(reqs)

    def plain():
        texts = [tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False) + prefix for m in msgs]
        return plain_verdicts(model, tok, texts, choice_ids, device)

    ours(), plain()  # warm-up (kernels, allocator)
    peak_reset(torch)
    t_ours, got = best_of(ours, reps)
    mem_ours = peak_gib(torch)
    peak_reset(torch)
    t_plain, want = best_of(plain, reps)
    mem_plain = peak_gib(torch)
    assert all(r.status.value == "ok" for r in got), [r.error for r in got if r.status.value != "ok"][:3]
    diff = float(np.abs(np.stack([r.probs for r in got]) - want).max())
    host = {}
    for name, fn in (("rewardkit", ours), ("plain", plain)):
        timer = ForwardTimer(model, torch)
        try:
            sync(torch)
            t = time.perf_counter()
            fn()
            sync(torch)
            wall = time.perf_counter() - t
        finally:
            timer.close()
        host[name] = {"forward_calls": timer.calls, "host_ms_per_pair": round(1000 * (wall - timer.seconds) / len(reqs), 3)}
    others = []
    for v in VARIANTS if variants else ():  # settings other than the defaults, for the record (one run each)
        before = {k: getattr(backend, k) for k in v}
        try:
            for k, x in v.items():
                setattr(backend, k, x)
            t, _ = best_of(ours, 1)
            others.append({**v, "pairs_per_s": round(len(reqs) / t, 2)})
        except Exception as e:  # noqa: BLE001 - recorded, the defaults' numbers stand
            others.append({**v, "error": repr(e)[:300]})
        finally:
            for k, x in before.items():
                setattr(backend, k, x)
    return {"pairs": len(reqs), "mean_prompt_tokens": round(float(np.mean(lengths)), 1),
            "rewardkit_pairs_per_s": round(len(reqs) / t_ours, 2), "plain_pairs_per_s": round(len(reqs) / t_plain, 2),
            "ratio": round(t_plain / t_ours, 3), "max_abs_prob_diff": diff,
            "peak_gib": {"rewardkit": mem_ours, "plain": mem_plain}, "host": host, "other_settings": others}


def generation_bench(backend, problems: list[str], samples: int, new: int, baseline_batches: int) -> dict:
    import torch

    from rewardkit.backends import ChatRequest

    tok, model = backend.tokenizer, backend.model
    msgs = [[{"role": "user", "content": p}] for p in problems]
    reqs = [ChatRequest(m, max_tokens=new, min_tokens=new, temperature=1.0, n=samples, seed=0) for m in msgs]
    prompt_ids = tok(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False),
                     add_special_tokens=False).input_ids
    rows = [p for p in prompt_ids for _ in range(samples)]
    backend.generate([ChatRequest(msgs[0], max_tokens=4, min_tokens=4)])  # warm-up
    peak_reset(torch)
    t_ours, got = best_of(lambda: backend.generate(reqs), 1)
    mem_ours = peak_gib(torch)
    made = sum(c.completion_tokens for c in got)
    assert made == len(rows) * new, (made, len(rows) * new)

    def plain(b: list[list[int]]):
        enc = tok.pad({"input_ids": b}, padding=True, return_tensors="pt")
        with torch.inference_mode():
            return model.generate(input_ids=enc["input_ids"].to(backend.device),
                                  attention_mask=enc["attention_mask"].to(backend.device), max_new_tokens=new,
                                  min_new_tokens=new, do_sample=True, temperature=1.0, top_p=1.0, top_k=0,
                                  pad_token_id=tok.pad_token_id)

    batches = [rows[i:i + PLAIN_GENERATE_ROWS] for i in range(0, len(rows), PLAIN_GENERATE_ROWS)][:baseline_batches]
    plain([rows[0]])  # warm-up
    peak_reset(torch)
    sync(torch)
    t = time.perf_counter()
    for b in batches:
        plain(b)
    sync(torch)
    t_plain = time.perf_counter() - t
    mem_plain = peak_gib(torch)
    plain_tokens = sum(len(b) for b in batches) * new
    ours_rate, plain_rate = made / t_ours, plain_tokens / t_plain
    return {"prompts": len(problems), "samples_per_prompt": samples, "rows": len(rows), "new_tokens": new,
            "mean_prompt_tokens": round(float(np.mean([len(p) for p in prompt_ids])), 1),
            "rewardkit_tokens_per_s": round(ours_rate, 1), "plain_rows_measured": sum(len(b) for b in batches),
            "plain_tokens_per_s": round(plain_rate, 1), "ratio": round(ours_rate / plain_rate, 3),
            "peak_gib": {"rewardkit": mem_ours, "plain": mem_plain}}


def measure(backend, args, pairs: list[dict], problems: list[str]) -> dict:
    """Both workloads on one loaded backend; a part that fails is recorded and the other still runs."""
    row = {}
    for part, run in (("verdicts", lambda: verdict_bench(backend, pairs, args.reps, args.variants)),
                      ("generation", lambda: generation_bench(backend, problems, args.samples, args.new,
                                                              args.baseline_batches))):
        try:
            row[part] = run()
        except Exception as e:  # noqa: BLE001 - one failed part must not lose the others
            row[part] = {"error": repr(e)[:500]}
        print(part, json.dumps(row[part]), flush=True)
    return row


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
    ap.add_argument("--arch", action="append", help=f"random-init architecture(s): {', '.join(ARCHS)}; or 'smollm2' "
                                                    "for the embedded model's real weights")
    ap.add_argument("--tokenizer", help="tokenizer folder for --arch (default: the embedded model's)")
    ap.add_argument("--rollouts", help="the shared rollouts JSONL (default: ../shared/data/...)")
    ap.add_argument("--pairs", type=int, default=300, help="verdict pairs (3 per problem)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--gen-prompts", type=int, default=64)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--baseline-batches", type=int, default=1)
    ap.add_argument("--variants", action="store_true", help="also time verdicts at other settings (one run each)")
    ap.add_argument("--before", metavar="REF", help="CPU: also run benchmarks/judge_throughput.py at commit REF "
                                                    "and here, alternated (--rounds), in this run")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

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
    section = {"device": torch.cuda.get_device_name() if kind == "cuda" else f"CPU ({machine()['cpus']} cores)",
               "torch": torch.__version__, "transformers": transformers.__version__, **machine(),
               "command": "PYTHONPATH=. python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
               "models": {}}
    for arch in args.arch or ["smollm2"]:
        with tempfile.TemporaryDirectory() as tmp:
            if arch == "smollm2":
                path, label = "smollm2", "SmolLM2-135M-Instruct (real weights)"
            else:
                from rewardkit.backends.embedded import embedded_model_path

                path = build_model(arch, args.tokenizer or str(embedded_model_path("float32")), device, Path(tmp))
                label = f"{arch} (random init: {ARCHS[arch]})"
            backend = TransformersBackend(path)  # only the model: every other setting at its default
            if backend.device != device:
                raise SystemExit(f"the default device is {backend.device}, expected {device}")
            n_params = sum(p.numel() for p in backend.model.parameters())
            row = {"model": label, "parameters": n_params, "placement": backend.placement.describe()}
            print(f"{arch}: {row['placement']}", flush=True)
            row.update(measure(backend, args, pairs, problems))
            section["models"][arch] = row
            backend.close()
            del backend
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    if args.before:
        section["judge_throughput_before_after"] = before_after(args.before, args.rounds, max(1, args.pairs // 3),
                                                                rollouts)
        print(json.dumps(section["judge_throughput_before_after"]), flush=True)
    if args.no_write:
        print(json.dumps(section, indent=1))
        return
    path = RESULTS / "engine_speed.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[kind] = section
    write_results("engine_speed", data, to_markdown(data))


def to_markdown(data: dict) -> str:
    md = ["# Engine speed: rewardkit at defaults vs plain transformers", "",
          "Same weights, same token ids, one process (`benchmarks/engine_speed.py`; workloads in its docstring). "
          "Ratios > 1 mean rewardkit is faster. Host ms/pair: wall time outside forward passes, per verdict "
          "request (a separate pass with each forward synchronised).", ""]
    for kind in ("cuda", "cpu"):
        s = data.get(kind)
        if not s:
            continue
        md += [f"## {s['device']} (torch {s['torch']}, transformers {s['transformers']})", "", f"`{s['command']}`", "",
               "| model | placement at defaults | verdict pairs/s rewardkit | plain loop | ratio | max abs prob diff "
               "| host ms/pair rewardkit | plain | gen tokens/s rewardkit | model.generate (64 rows) | ratio "
               "| peak GiB verdicts rk/plain | peak GiB generation rk/plain |",
               "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
        notes = []
        for arch, r in s["models"].items():
            v, g = r["verdicts"], r["generation"]
            if "error" in v or "error" in g:
                md.append(f"| {arch} | {r['placement']} | error: {v.get('error') or g.get('error')} |")
                continue
            if v.get("other_settings"):
                notes.append(f"{arch}, verdict pairs/s at other settings (one run each): " + "; ".join(
                    ", ".join(f"{k}={x}" for k, x in o.items() if k not in ("pairs_per_s", "error"))
                    + f": {o.get('pairs_per_s', o.get('error'))}" for o in v["other_settings"]))
            md.append(f"| {arch} ({r['parameters'] / 1e6:,.0f}M) | {r['placement']} | {v['rewardkit_pairs_per_s']} | "
                      f"{v['plain_pairs_per_s']} | **{v['ratio']}x** | {v['max_abs_prob_diff']:.2g} | "
                      f"{v['host']['rewardkit']['host_ms_per_pair']} | {v['host']['plain']['host_ms_per_pair']} | "
                      f"{g['rewardkit_tokens_per_s']} | {g['plain_tokens_per_s']} | **{g['ratio']}x** | "
                      f"{v['peak_gib']['rewardkit']}/{v['peak_gib']['plain']} | "
                      f"{g['peak_gib']['rewardkit']}/{g['peak_gib']['plain']} |")
        ba = s.get("judge_throughput_before_after")
        if ba:
            notes.append(f"`benchmarks/judge_throughput.py` at {ba['ref']} (before) and here (after), alternated "
                         f"{ba['rounds']} times in this run, {ba['pairs']} pairs, best verdict pairs/s: without "
                         f"prefix sharing {ba['best_pairs_per_s']['before']['b']} -> "
                         f"{ba['best_pairs_per_s']['after']['b']} (**{ba['after_over_before']['b']}x**), with "
                         f"{ba['best_pairs_per_s']['before']['c']} -> {ba['best_pairs_per_s']['after']['c']} "
                         f"(**{ba['after_over_before']['c']}x**); medians {ba['after_over_before_median']['b']}x "
                         f"and {ba['after_over_before_median']['c']}x (every round in the JSON)")
        md += [""] + [f"- {n}" for n in notes]
        ok = [r for r in s["models"].values() if "error" not in r["verdicts"] and "error" not in r["generation"]]
        if not ok:
            continue
        v, g = ok[0]["verdicts"], ok[0]["generation"]
        md += ["", f"Verdicts: {v['pairs']} live-tournament pairs, mean prompt {v['mean_prompt_tokens']} tokens. "
                   f"Generation: {g['prompts']} prompts x {g['samples_per_prompt']} samples = {g['rows']} rows x "
                   f"{g['new_tokens']} new tokens (mean prompt {g['mean_prompt_tokens']} tokens); the model.generate "
                   f"rate from {g['plain_rows_measured']} rows in batches of 64. Peak memory: GPU allocated "
                   "(CUDA) or the process's peak RSS so far (CPU).", ""]
    return "\n".join(md)


if __name__ == "__main__":
    main()
