#!/usr/bin/env bash
# benchmarks/engine_speed.py on a GPU machine (DESIGN.md section 4): the rows benchmarks/results/engine_speed.json
# holds from before the decode width steps became an eighth of the width, 8-64 tokens (a flat 64 before;
# benchmarks/results/engine_speed_width.md),
# re-measured at today's defaults in one run under ~520 s, each part in its own process with its own time limit,
# saved as each finishes; then merged into a copy of the committed results ($OUT/merged/engine_speed.{json,md}) and
# checked: the run ends with a list of any headline key or GRPO step still missing (exit 1), else says none is.
#
#   part (in this order)                                                         measured on an H200    limit
#   B  smollm2-135m: 64 greedy rows (rewardkit, static and dynamic anchors),      217 s (2026-11-27)    240 s
#      512 sampled rows: the two 135M rows under 1.0x at width 64 (0.99x, 0.993x)
#   E  llama-1.4b: 64 greedy rows (static and dynamic anchors; 1.02x at 64)      ~100 s estimated       150 s
#   C  llama-1.4b GRPO: 3 train steps, 64 rows x 128 tokens, fp32 weights, bf16   106 s (2026-11-28)    the rest
#      sampler (35.9, 39.9, 4.9 s at width 64): the step times at width 8
#   with ALL=1, in what budget is left: A  llama-1.4b 512 sampled rows and top_k=50 (225 s, 2026-11-27; the
#   sampled row is already at width 8: 1.006x, 2026-11-28), then the 135M GRPO steps (~60 s)
#   merge + check                                                                ~5 s
# Already measured at today's defaults (H200, kept by the merge, each row naming its run): the 1.39B's 512 sampled
# rows; the verdicts of both models (the width bucket is not on their path). Past the budget a part is cut (what
# it finished is saved).
#
# Needs, git-ignored beside the checkout: .cache/tok (the embedded model's tokenizer files), .cache/data/
# math_cot_100.jsonl (the shared rollouts) and .whl/ (math-verify, latex2sympy2_extended, antlr4 4.13.2 wheels
# for Python 3.12). `--prepare` (on the CPU machine, in the checkout the device tool copies) puts those three in
# place. Afterwards, where the files came back, merge the parts into the committed results and check them:
#   PYTHONPATH=. python benchmarks/engine_speed.py --merge FILES_AT/*.json --check --device cuda
# SMOKE=1 runs it all on the CPU with tiny shapes and 2-layer models (a dry run), first measuring the parts the
# GPU results already hold, so its check covers every key.
set -uo pipefail
if [ "${1:-}" = --prepare ]; then
  tok=$(python -c "from rewardkit.backends.embedded import embedded_model_path; print(embedded_model_path('float32'))")
  mkdir -p .cache/tok .cache/data .whl
  cp "$tok"/tokenizer.json "$tok"/tokenizer_config.json "$tok"/chat_template.jinja .cache/tok/
  cp "$(python -c "from rewardkit.evals.data import rollouts_path; print(rollouts_path())")" .cache/data/math_cot_100.jsonl
  (cd .whl && python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 math-verify==0.9.0 \
     latex2sympy2_extended antlr4-python3-runtime==4.13.2)
  du -sh .cache .whl
  exit 0
fi
OUT=${OUT:-/tmp/engine_out}
mkdir -p "$OUT/merged"
DEPS=/tmp/rk-deps
if ! python3 -c "import math_verify" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$DEPS" .whl/*.whl
fi
export PYTHONPATH="$PWD:$DEPS"
if [ "${SMOKE:-0}" = 1 ]; then
  size=(--device cpu --layers 2 --pairs 3 --gen-prompts 2 --samples 2 --rows 2 --new 2 --reps 1); grpo_new=2
  budget=${BUDGET:-1500}; cap_a=600; cap_b=600; cap_e=600
else
  size=(--device cuda --pairs 300 --gen-prompts 64 --samples 8 --rows 64 --new 256 --reps 3); grpo_new=128
  budget=${BUDGET:-520}; cap_a=240; cap_b=240; cap_e=150
fi
common=("${size[@]}" --tokenizer .cache/tok --rollouts .cache/data/math_cot_100.jsonl)
bench() { python3 benchmarks/engine_speed.py "$@" 2>&1 | grep -v "it/s\]"; }
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
SECONDS=0
parts=()
if [ "${SMOKE:-0}" = 1 ]; then  # the parts the committed GPU results hold (a GPU run keeps those)
  bench --arch llama-1.4b --parts verdicts "${common[@]}" --out "$OUT/held_big.json"
  bench --arch smollm2-135m --parts verdicts "${common[@]}" --out "$OUT/held_small.json"
  parts+=("$OUT/held_big.json" "$OUT/held_small.json")
  echo "held parts done at ${SECONDS}s"
  SECONDS=0
fi
left=$((budget - SECONDS - 5)); [ "$left" -gt "$cap_b" ] && left=$cap_b
timeout "$left" python3 benchmarks/engine_speed.py --arch smollm2-135m --parts greedy,sampled "${common[@]}" \
  --out "$OUT/small.json" 2>&1 | grep -v "it/s\]"; echo "B (135M generation) done at ${SECONDS}s"
left=$((budget - SECONDS - 5)); [ "$left" -gt "$cap_e" ] && left=$cap_e
if [ "$left" -ge 60 ]; then
  timeout "$left" python3 benchmarks/engine_speed.py --arch llama-1.4b --parts greedy "${common[@]}" \
    --out "$OUT/big_greedy.json" 2>&1 | grep -v "it/s\]"; echo "E (1.39B greedy) done at ${SECONDS}s"
fi
left=$((budget - SECONDS - 5))
if [ "$left" -ge 60 ]; then
  timeout "$left" python3 benchmarks/engine_speed.py --arch llama-1.4b --parts grpo --grpo-new "$grpo_new" \
    "${common[@]}" --out "$OUT/grpo.json" 2>&1 | grep -v "it/s\]"; echo "C (1.39B GRPO) done at ${SECONDS}s"
fi
if [ "${ALL:-0}" = 1 ] || [ "${SMOKE:-0}" = 1 ]; then
  left=$((budget - SECONDS - 5)); [ "$left" -gt "$cap_a" ] && left=$cap_a
  if [ "$left" -ge 60 ]; then
    timeout "$left" python3 benchmarks/engine_speed.py --arch llama-1.4b --parts sampled,topk50 "${common[@]}" \
      --out "$OUT/big.json" 2>&1 | grep -v "it/s\]"; echo "A (1.39B sampled) done at ${SECONDS}s"
  fi
  left=$((budget - SECONDS - 5))
  if [ "$left" -ge 60 ]; then
    timeout "$left" python3 benchmarks/engine_speed.py --arch smollm2-135m --parts grpo --grpo-new "$grpo_new" \
      "${common[@]}" --out "$OUT/small_grpo.json" 2>&1 | grep -v "it/s\]"; echo "135M GRPO done at ${SECONDS}s"
  fi
fi
for f in "$OUT/small.json" "$OUT/big_greedy.json" "$OUT/grpo.json" "$OUT/big.json" "$OUT/small_grpo.json"; do [ -f "$f" ] && parts+=("$f"); done
if [ "${SMOKE:-0}" = 1 ]; then rm -f "$OUT/merged/engine_speed.json"; else
  cp benchmarks/results/engine_speed.json "$OUT/merged/engine_speed.json"; fi
python3 benchmarks/engine_speed.py --merge "${parts[@]}" --out "$OUT/merged/engine_speed.json" --check "${size[@]:0:2}"
rc=$?
echo "all done at ${SECONDS}s"
exit $rc
