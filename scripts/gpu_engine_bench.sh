#!/usr/bin/env bash
# benchmarks/engine_speed.py on a GPU machine (DESIGN.md section 4): both architectures, 300 verdict pairs,
# 64 greedy and 512 sampled rows x 256 new tokens, then GRPO train steps; under ~9 minutes on an H200.
# Needs, git-ignored beside the checkout: .cache/tok (the embedded model's tokenizer files), .cache/data/
# math_cot_100.jsonl (the shared rollouts) and .whl/ (math-verify, latex2sympy2_extended, antlr4 4.13.2 wheels
# for Python 3.12). Writes $OUT/engine_speed.{json,md} (1.39B), $OUT/small/ (135M) and $OUT/grpo/.
# SMOKE=1 runs tiny shapes on the CPU (a dry run of this script). `--prepare` (on the CPU machine, in the
# checkout the device tool copies) puts those three in place; afterwards merge the parts into the results:
#   PYTHONPATH=. python benchmarks/engine_speed.py --merge FILES_AT/engine_speed.json \
#       FILES_AT/small/engine_speed.json FILES_AT/grpo/engine_speed.json
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
mkdir -p "$OUT"
DEPS=/tmp/rk-deps
if ! python3 -c "import math_verify" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --target "$DEPS" .whl/*.whl
fi
export PYTHONPATH="$PWD:$DEPS"
if [ "${SMOKE:-0}" = 1 ]; then
  size=(--device cpu --pairs 3 --gen-prompts 2 --samples 2 --rows 2 --new 2 --reps 1); grpo_new=2; budget=600
else
  size=(--device cuda --pairs 300 --gen-prompts 64 --samples 8 --rows 64 --new 256 --reps 3); grpo_new=128; budget=${BUDGET:-540}
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
