#!/usr/bin/env bash
# benchmarks/engine_speed.py on a GPU machine (DESIGN.md section 4): both architectures, 300 verdict pairs,
# 64 greedy and 512 sampled rows x 256 new tokens, then GRPO train steps; under ~9 minutes on an H200.
# Needs, git-ignored beside the checkout: .cache/tok (the embedded model's tokenizer files), .cache/data/
# math_cot_100.jsonl (the shared rollouts) and .whl/ (math-verify, latex2sympy2_extended, antlr4 4.13.2 wheels
# for Python 3.12). Writes $OUT/engine_speed.{json,md} (1.39B), $OUT/small/ (135M) and $OUT/grpo/.
# SMOKE=1 runs tiny shapes on the CPU (a dry run of this script).
set -uo pipefail
OUT=${OUT:-/tmp/engine_out}
mkdir -p "$OUT"
DEPS=/tmp/rk-deps
if ! python3 -c "import math_verify" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$DEPS" .whl/*.whl
fi
export PYTHONPATH="$PWD:$DEPS"
if [ "${SMOKE:-0}" = 1 ]; then
  size=(--device cpu --pairs 3 --gen-prompts 2 --samples 2 --rows 2 --new 2 --reps 1); grpo_new=2; budget=600
else
  size=(--device cuda --pairs 300 --gen-prompts 64 --samples 8 --rows 64 --new 256 --reps 3); grpo_new=128; budget=540
fi
common=("${size[@]}" --tokenizer .cache/tok --rollouts .cache/data/math_cot_100.jsonl)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv 2>/dev/null
python3 -c "import torch, transformers; print(torch.__version__, transformers.__version__)"
SECONDS=0
timeout 300 python3 benchmarks/engine_speed.py --arch llama-1.4b "${common[@]}" --out "$OUT/engine_speed.json" 2>&1 \
  | grep -v "it/s\]" ; echo "1.39B done at ${SECONDS}s"
left=$((budget - SECONDS - 60))
timeout "$left" python3 benchmarks/engine_speed.py --arch smollm2-135m "${common[@]}" --out "$OUT/small/engine_speed.json" 2>&1 \
  | grep -v "it/s\]" ; echo "135M done at ${SECONDS}s"
left=$((budget - SECONDS))
if [ "$left" -gt 50 ]; then
  timeout "$left" python3 benchmarks/engine_speed.py --skip-engine --grpo smollm2-135m --grpo-new "$grpo_new" "${common[@]}" \
    --out "$OUT/grpo/engine_speed.json" 2>&1 | grep -v "it/s\]"
fi
echo "all done at ${SECONDS}s"
