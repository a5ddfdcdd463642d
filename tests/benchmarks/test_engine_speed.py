"""benchmarks/engine_speed.py's merge of partial GPU runs and its check of the headline keys (no model runs)."""

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import engine_speed  # noqa: E402

COMMITTED = json.loads((ROOT / "benchmarks" / "results" / "engine_speed.json").read_text())
RUN = {"command": "PYTHONPATH=. python benchmarks/engine_speed.py --arch llama-1.4b --parts sampled,topk50",
       "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "transformers": "5.17.0", "python": "3.12.3",
       "machine": "x86_64", "cpus": 16, "date": "2026-11-28 09:00 UTC"}


def generation(rows: int, sampled: bool, ours: float, static: float, dynamic: float | None = None) -> dict:
    """A generation part as engine_speed.generation_bench records it (rates in tokens/s)."""
    rates = {"rewardkit": ours, "generate_static": static, **({"generate_dynamic": dynamic} if dynamic else {})}
    part = {"rows": rows, "new_tokens": 256, "sampled": sampled, "first_call_s": 40.0, "tokens_per_s": rates,
            "times_s": {k: [rows * 256 / v] for k, v in rates.items()}, "warm_s": {k: 1.0 for k in rates},
            "same_rows_anchor": "generate_static", "ratio_same_rows": round(ours / static, 3), "peak_gib": 9.0,
            "placement": "cuda, bfloat16", "run": RUN}
    if dynamic:
        part["ratio_vs_dynamic"] = round(ours / dynamic, 3)
    return part


def grpo() -> dict:
    return {"steps": [{"step_seconds": 50.0, "sample_seconds": 45.0}, {"step_seconds": 4.0, "sample_seconds": 2.0}],
            "rows_per_step": 64, "new_tokens": 128, "parameters": 1385780736, "weights": "torch.float32",
            "sampler": "torch.bfloat16", "static_cache": True, "run": RUN}


def write(path: Path, section: dict, kind: str = "cuda") -> Path:
    path.write_text(json.dumps({kind: {**section, "format": engine_speed.FORMAT}}))
    return path


def test_a_merge_keeps_what_was_measured_and_each_part_names_its_run(tmp_path):
    out = tmp_path / "engine_speed.json"
    out.write_text(json.dumps(COMMITTED))
    before = COMMITTED["cuda"]["models"]["llama-1.4b"]
    new = write(tmp_path / "big.json", {"models": {"llama-1.4b": {
        "sampled": generation(512, True, 30_000.0, 29_000.0),
        "verdicts": {"error": "RuntimeError('CUDA out of memory')", "run": RUN},  # failed: the earlier one stays
        "grpo": grpo()}}})
    engine_speed.merge([str(new)], out)
    got = json.loads(out.read_text())["cuda"]["models"]
    big = got["llama-1.4b"]
    assert big["verdicts"] == before["verdicts"] and big["greedy"] == before["greedy"]
    assert big["verdict_ratio_vs_plain_ids"] == before["verdicts"]["ratio_vs_plain_ids"]
    assert big["generation_ratio_same_rows_512"] == 1.034 and big["sampled"]["run"] == RUN
    assert "--arch llama-1.4b" in big["verdicts"]["run"]["command"] and big["verdicts"]["run"] != RUN
    assert big["grpo"]["steps"][1]["step_seconds"] == 4.0
    assert got["smollm2-135m"] == COMMITTED["cuda"]["models"]["smollm2-135m"]  # not in this run: untouched
    assert "judge_throughput_before_after" in json.loads(out.read_text())["cpu"]  # the other device's section
    md = out.with_suffix(".md").read_text()
    assert RUN["command"] in md and RUN["device"] in md  # the new run listed beside the earlier ones
    assert "| llama-1.4b (1,386M) | tokens/s, 512 rows x 256 new, sampled" in md


def test_the_check_fails_while_a_headline_key_or_grpo_step_is_missing(tmp_path):
    out = tmp_path / "engine_speed.json"
    data = copy.deepcopy(COMMITTED)
    data["cuda"]["models"]["llama-1.4b"].pop("greedy", None)  # a part missing from the output
    out.write_text(json.dumps(data))

    def check(*merge: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "engine_speed.py"), "--check", "--device", "cuda",
               "--out", str(out)] + (["--merge", *map(str, merge)] if merge else [])
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})

    res = check()
    assert res.returncode == 1
    assert "llama-1.4b: generation_ratio_same_rows_64" in res.stdout
    assert "llama-1.4b: generation_ratio_vs_dynamic_64" in res.stdout
    full = {arch: {"greedy": generation(64, False, 6_600.0, 6_500.0, 2_500.0),
                   "sampled": generation(512, True, 30_000.0, 29_000.0), "grpo": grpo()}
            for arch in engine_speed.ARCHS}
    res = check(write(tmp_path / "gen.json", {"models": full}))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "every headline key and the GRPO steps present" in res.stdout
    models = json.loads(out.read_text())["cuda"]["models"]
    assert all(models[a]["verdict_ratio_vs_plain_ids"] is not None for a in engine_speed.ARCHS)  # kept


def test_a_part_merged_from_another_run_names_its_own_placement(tmp_path):
    # the model's placement line is the last run's: a part measured under another placement says so in its
    # own note, and a placement from before the width was named is read as 64 tokens
    out = tmp_path / "engine_speed.json"
    old = "cuda, bfloat16, static KV cache (rows padded to powers of two from 8)"
    new = ("cuda, bfloat16, static KV cache (rows padded to powers of two from 8, prompts to multiples of 8-64 tokens, "
           "an eighth of their width)")
    greedy = {**generation(64, False, 6_600.0, 6_500.0, 2_500.0), "placement": old}
    write(out, {"models": {"llama-1.4b": {"placement": old, "greedy": greedy}}})
    sampled = {**generation(512, True, 30_000.0, 29_000.0), "placement": new}
    engine_speed.merge([str(write(tmp_path / "w8.json", {"models": {"llama-1.4b": {
        "placement": new, "sampled": sampled}}}))], out)
    md = out.with_suffix(".md").read_text()
    assert f"- llama-1.4b placement (the last run merged): {new}" in md
    assert f"- llama-1.4b greedy placement (run 1): {old}" in md  # the earlier run's own placement
    assert "llama-1.4b sampled placement" not in md  # the same as the model's line: not repeated
    assert "names no prompt width padded prompts to multiples of 64 tokens" in md
