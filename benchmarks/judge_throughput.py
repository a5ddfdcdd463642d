"""Pairwise judge throughput with the embedded model: (a) generate + parse, (b) verdict logits, (c) + prefix reuse.

Pairs come from the shared rollouts as in a live Reasoning Arena tournament: a new trace (response 0)
meets three anchors (responses 1-3) of the same problem, rendered with the paper's tournament prompt
(App. D). All modes run in one process on the same backend; prefill GFLOP/s is set beside a plain
matmul measured in the same run.

    PYTHONPATH=. python benchmarks/judge_throughput.py --problems 12 --gen-pairs 8 --max-new 512
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
ROLLOUTS = next((d / "shared" / "data" / "math_rollouts_qwen25" / "math_cot_100.jsonl"
                 for d in Path(__file__).resolve().parents if (d / "shared" / "data").is_dir()),
                Path("shared/data/math_rollouts_qwen25/math_cot_100.jsonl"))

# Reasoning Arena, App. D, "Tournament prompt for pairwise preference" (verbatim; literal braces doubled)
TOURNAMENT = (
    "Compare the two solution attempts below and decide which is better.\n\n"
    "[PROBLEM]\n\n{problem}\n\n"
    "[REFERENCE ANSWER]\n\nThe correct answer is: {final_answer}\n\n"
    "[RESPONSE A]\n\n{response_a}\n\n"
    "[RESPONSE B]\n\n{response_b}\n\n"
    "Which response is better? Compare the final answers and reasoning quality. Your response MUST end with "
    "exactly one of: $\\boxed{{A}}$, $\\boxed{{B}}$, or $\\boxed{{Tie}}$.\n\n"
    "Keep your analysis under 500 words to ensure you have space for the final verdict."
)


def tournament_template() -> tuple[str, str]:
    """(prompt, verdict prefix): ``arena.tournament`` from rewardkit.prompts when present, else the copy above."""
    from rewardkit.prompts import get_prompt, prompt_names

    names = prompt_names()
    if "arena.tournament" in names:
        prefix = get_prompt("arena.tournament_verdict_prefix").text if "arena.tournament_verdict_prefix" in names \
            else "\\boxed{"
        return get_prompt("arena.tournament").text, prefix
    return TOURNAMENT, "\\boxed{"


def live_pairs(path: Path, problems: int) -> list[dict]:
    """(new trace = response 0) x (anchors = responses 1..3) for the ``problems`` shortest groups."""
    rows = [json.loads(line) for line in path.open()]
    rows.sort(key=lambda g: len(g["problem"]) + sum(len(r) for r in g["responses"][:4]))
    pairs = []
    for g in rows[:problems]:
        for k in (1, 2, 3):
            pairs.append({"problem": g["problem"], "final_answer": g["answer"], "response_a": g["responses"][0],
                          "response_b": g["responses"][k], "id": f"{g['id']}/0v{k}"})
    return pairs


def matmul_gflops(torch, dtype, n: int = 1024, reps: int = 6) -> float:
    """Best-of-reps GFLOP/s of an n x n matmul: this machine's practical dense-compute limit."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best / 1e9


def prefill_flops(model, lengths: list[int]) -> float:
    """Forward FLOPs of prefilling prompts of these lengths (last-position logits only).

    2 * non-embedding params per token, plus causal attention 2 * layers * d * T^2 (QK^T and AV, half the
    square each), plus one lm_head row per prompt.
    """
    cfg = model.config
    emb = model.get_input_embeddings().weight.numel()
    dense = sum(p.numel() for p in model.parameters()) - emb
    d, layers, vocab = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    return float(sum(2 * dense * t + 2 * layers * d * t * t + 2 * vocab * d for t in lengths))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=12, help="groups; 3 pairs each for (b) and (c)")
    ap.add_argument("--gen-pairs", type=int, default=8, help="pairs for (a), the first of (b)'s pairs")
    ap.add_argument("--max-new", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: on this shared 2-core machine 2 threads spin-wait and run ~10x slower)")
    ap.add_argument("--rollouts", type=Path, default=ROLLOUTS)
    ap.add_argument("--out", type=Path, default=RESULTS / "judge_throughput")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from rewardkit.backends import ChatRequest, VerdictRequest, load_backend
    from rewardkit.verdicts import parse_boxed_choice

    t0 = time.perf_counter()
    backend = load_backend("smollm2", dtype=args.dtype, batch_size=args.batch_size)
    load_s = time.perf_counter() - t0
    template, vprefix = tournament_template()
    pairs = live_pairs(args.rollouts, args.problems)
    msgs = [[{"role": "user", "content": template.format(**{k: p[k] for k in
             ("problem", "final_answer", "response_a", "response_b")})}] for p in pairs]
    choices = ["A", "B", "Tie"]
    vreqs = [VerdictRequest(m, choices, vprefix) for m in msgs]
    lengths = [len(backend.encode(backend.render(m, vprefix))) for m in msgs]
    backend.verdict_probs([VerdictRequest([{"role": "user", "content": "warm up"}], choices)])

    res: dict = {"machine": {"cpu": platform.processor() or platform.machine(), "torch_threads": args.threads,
                             "bf16_native": __import__("rewardkit.backends.hardware",
                                                       fromlist=["x"]).cpu_supports_bf16()},
                 "model": backend.model_id, "load_seconds": round(load_s, 2), "pairs_b_c": len(pairs),
                 "pairs_a": args.gen_pairs, "max_new_tokens": args.max_new, "batch_size": args.batch_size,
                 "prompt_tokens_mean": round(float(np.mean(lengths)), 1), "verdict_prefix": vprefix,
                 "prompt_source": "rewardkit.prompts arena.tournament" if template != TOURNAMENT else "benchmark copy"}

    # reference: dense matmul in the same process, same threads
    res["matmul_gflops"] = {"float32": round(matmul_gflops(torch, torch.float32), 1),
                            "bfloat16": round(matmul_gflops(torch, torch.bfloat16), 1)}

    # (b) verdict logits, length-sorted batches, no prefix reuse
    backend.share_prefix = False
    t = time.perf_counter()
    vb = backend.verdict_probs(vreqs)
    tb = time.perf_counter() - t
    flops = prefill_flops(backend.model, lengths)
    res["b_verdict_logits"] = {"seconds": round(tb, 2), "pairs_per_s": round(len(pairs) / tb, 3),
                               "prefill_tokens_per_s": round(sum(lengths) / tb, 1),
                               "prefill_gflops": round(flops / tb / 1e9, 1),
                               "statuses_ok": sum(v.status.value == "ok" for v in vb)}
    ref = res["matmul_gflops"]["bfloat16" if "bfloat16" in backend.model_id else "float32"]
    res["b_verdict_logits"]["fraction_of_matmul"] = round(flops / tb / 1e9 / ref, 3)

    # (b) in float32 on a third of the pairs: what bf16 buys on this CPU
    if "bfloat16" in backend.model_id:
        fp32 = load_backend("smollm2", dtype="float32", batch_size=args.batch_size, share_prefix=False)
        sub = vreqs[: max(3, len(vreqs) // 3)]
        fp32.verdict_probs(sub[:1])
        t = time.perf_counter()
        v32 = fp32.verdict_probs(sub)
        t32 = time.perf_counter() - t
        toks = sum(lengths[: len(sub)])
        res["b_float32"] = {"pairs": len(sub), "seconds": round(t32, 2), "prefill_tokens_per_s": round(toks / t32, 1),
                            "max_abs_prob_diff_vs_bf16": float(np.max([np.abs(x.probs - y.probs).max()
                                                                       for x, y in zip(v32, vb, strict=False)]))}
        res["b_float32"]["bf16_speedup"] = round(res["b_verdict_logits"]["prefill_tokens_per_s"]
                                                 / res["b_float32"]["prefill_tokens_per_s"], 2)
        fp32.close()

    # (c) the same requests with shared-prefix KV reuse (problem + new trace once, then three anchors)
    backend.share_prefix = True
    t = time.perf_counter()
    vc = backend.verdict_probs(vreqs)
    tc = time.perf_counter() - t
    res["c_prefix_reuse"] = {"seconds": round(tc, 2), "pairs_per_s": round(len(pairs) / tc, 3),
                             "max_abs_prob_diff_vs_b": float(np.max([np.abs(x.probs - y.probs).max()
                                                                     for x, y in zip(vb, vc, strict=True)]))}

    # (a) the paper's way: analysis up to max_new tokens, boxed verdict parsed from the text. SmolLM2
    # usually ends its reply after ~10 tokens without a verdict, so (a) is also run with end-of-sequence
    # suppressed until max_new tokens: the cost of a judge that writes the full analysis, as the paper's do.
    def run_a(min_tokens: int) -> tuple[dict, list]:
        greqs = [ChatRequest(m, max_tokens=args.max_new, temperature=0.0, min_tokens=min_tokens)
                 for m in msgs[: args.gen_pairs]]
        t = time.perf_counter()
        ga = backend.generate(greqs)
        ta = time.perf_counter() - t
        verdicts = [parse_boxed_choice(c.text, choices, c.finish_reason()) for c in ga]
        toks = sum(c.completion_tokens for c in ga)
        return {"seconds": round(ta, 2), "pairs_per_s": round(len(greqs) / ta, 4), "completion_tokens": toks,
                "decode_tokens_per_s": round(toks / ta, 1), "valid_verdicts": sum(v.ok for v in verdicts),
                "invalid_verdicts": sum(not v.ok for v in verdicts), "labels": [v.label for v in verdicts],
                "text_sample": ga[0].text[:300]}, verdicts

    res["a_generate_parse"], va = run_a(0)
    res["a_full_analysis"], vf = run_a(args.max_new)
    agree = [v.label == choices[vb[i % len(va)].best()] for i, v in enumerate(va + vf) if v.ok]
    res["agreement_a_b"] = {"pairs_compared": len(agree), "agree": int(sum(agree)),
                            "rate": round(float(np.mean(agree)), 3) if agree else None,
                            "b_labels": [choices[v.best()] for v in vb[: args.gen_pairs]]}
    res["ratios"] = {
        "b_over_a": round(res["b_verdict_logits"]["pairs_per_s"] / res["a_generate_parse"]["pairs_per_s"], 2),
        "b_over_a_full_analysis": round(res["b_verdict_logits"]["pairs_per_s"]
                                        / res["a_full_analysis"]["pairs_per_s"], 1),
        "c_over_b": round(res["c_prefix_reuse"]["pairs_per_s"] / res["b_verdict_logits"]["pairs_per_s"], 2)}
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        res["a_llamacpp"] = "llama-cpp-python not installed (optional extra)"
    else:  # the engine a local CPU user would pick for (a): batch 1, fast decoding, same GGUF weights
        lc = load_backend("llamacpp:smollm2", n_ctx=4096, n_threads=torch.get_num_threads())
        out = {}
        for name, min_tokens in (("natural_stop", 0), ("full_analysis", args.max_new)):
            greqs = [ChatRequest(m, max_tokens=args.max_new, temperature=0.0, min_tokens=min_tokens)
                     for m in msgs[: args.gen_pairs]]
            t = time.perf_counter()
            gl = lc.generate(greqs)
            tl = time.perf_counter() - t
            toks = sum(c.completion_tokens for c in gl)
            out[name] = {"seconds": round(tl, 2), "pairs_per_s": round(len(greqs) / tl, 4), "completion_tokens": toks,
                         "valid_verdicts": sum(parse_boxed_choice(c.text, choices, c.finish_reason()).ok for c in gl)}
        out["b_over_llamacpp_full_analysis"] = round(res["b_verdict_logits"]["pairs_per_s"]
                                                     / out["full_analysis"]["pairs_per_s"], 1)
        res["a_llamacpp"] = out
        lc.close()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(to_markdown(res))
    print(to_markdown(res))


def _llamacpp_lines(r: dict) -> list[str]:
    lc = r["a_llamacpp"]
    n, f = lc["natural_stop"], lc["full_analysis"]
    return [f"- llama.cpp (a), batch 1, same GGUF weights and threads: natural stop {n['pairs_per_s']} pairs/s "
            f"({n['completion_tokens']} tokens), full {r['max_new_tokens']}-token analysis {f['pairs_per_s']} pairs/s "
            f"({f['completion_tokens']} tokens); (b)/(a' llama.cpp) = **{lc['b_over_llamacpp_full_analysis']}x**."]


def to_markdown(r: dict) -> str:
    a, f, b, c = r["a_generate_parse"], r["a_full_analysis"], r["b_verdict_logits"], r["c_prefix_reuse"]
    ag = r["agreement_a_b"]
    lines = [
        "# Judge throughput (embedded SmolLM2-135M-Instruct, pairwise Reasoning Arena prompt)",
        "",
        f"Model `{r['model']}`, torch threads {r['machine']['torch_threads']}, native bf16: "
        f"{r['machine']['bf16_native']}; {r['pairs_b_c']} live-tournament pairs (new trace vs 3 anchors), "
        f"mean prompt {r['prompt_tokens_mean']} tokens; (a) on the first {r['pairs_a']} pairs, "
        f"up to {r['max_new_tokens']} new tokens, batch {r['batch_size']}. Prompt: {r['prompt_source']}; "
        f"verdict prefix `{r['verdict_prefix']}`.",
        "",
        "| mode | pairs | seconds | pairs/s |",
        "|---|---:|---:|---:|",
        f"| (a) generate + parse `\\boxed{{}}` (model stops when it likes) | {r['pairs_a']} | {a['seconds']} | {a['pairs_per_s']} |",
        f"| (a') generate a full {r['max_new_tokens']}-token analysis + parse | {r['pairs_a']} | {f['seconds']} | {f['pairs_per_s']} |",
        f"| (b) verdict logits, length-sorted batches | {r['pairs_b_c']} | {b['seconds']} | {b['pairs_per_s']} |",
        f"| (c) (b) + shared-prefix KV reuse | {r['pairs_b_c']} | {c['seconds']} | {c['pairs_per_s']} |",
        "",
        f"- (b)/(a') = **{r['ratios']['b_over_a_full_analysis']}x** (target >= 10x); (b)/(a) = "
        f"{r['ratios']['b_over_a']}x; (c)/(b) = **{r['ratios']['c_over_b']}x** (target >= 1.5x); "
        f"max |p(c) - p(b)| = {c['max_abs_prob_diff_vs_b']:.2e} (bf16 rounding differs between the paths).",
        f"- (a): {a['completion_tokens']} tokens decoded in all, {a['valid_verdicts']} valid / "
        f"{a['invalid_verdicts']} invalid verdicts; (a'): {f['completion_tokens']} tokens "
        f"({f['decode_tokens_per_s']} tokens/s batched), {f['valid_verdicts']} valid / {f['invalid_verdicts']} invalid.",
        f"- Agreement (a)/(a') vs argmax (b) where (a) gave a valid verdict: {ag['agree']}/{ag['pairs_compared']} "
        f"(b's labels: {ag['b_labels']}).",
        f"- Prefill (b): {b['prefill_tokens_per_s']} tokens/s = {b['prefill_gflops']} GFLOP/s = "
        f"{b['fraction_of_matmul']:.0%} of a plain matmul in the same run "
        f"(fp32 {r['matmul_gflops']['float32']}, bf16 {r['matmul_gflops']['bfloat16']} GFLOP/s; target >= 50%).",
        *([f"- bf16 vs fp32 (b) on {r['b_float32']['pairs']} pairs: fp32 {r['b_float32']['prefill_tokens_per_s']} "
           f"tokens/s, bf16 is {r['b_float32']['bf16_speedup']}x faster; max |p(bf16) - p(fp32)| = "
           f"{r['b_float32']['max_abs_prob_diff_vs_bf16']:.2e}."] if "b_float32" in r else []),
        *(_llamacpp_lines(r) if isinstance(r["a_llamacpp"], dict) else [f"- llama.cpp (a): {r['a_llamacpp']}."]),
        f"- (a) sample output: {a['text_sample']!r}",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
