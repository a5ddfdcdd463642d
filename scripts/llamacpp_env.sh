#!/usr/bin/env bash
# llama.cpp (llama-cpp-python, the `[llamacpp]` extra) in its own virtual environment, then its tests with none
# skipped: the `llamacpp:` backend against transformers on the embedded model, and `python -m llama_cpp.server`
# as a third-party OpenAI-compatible judge for the HTTP backend.
#
#   scripts/llamacpp_env.sh                # build (or reuse) .venv-llamacpp/, run the llama.cpp tests
#   scripts/llamacpp_env.sh --build-only   # only the environment
#
# llama-cpp-python is published on PyPI as source only: pip compiles llama.cpp (CMake, a C++ compiler), minutes
# on 2 cores. The venv sees the main environment's packages (--system-site-packages: rewardkit, torch,
# transformers, pytest, the embedded model), so only llama-cpp-python and its server's packages go in it, and
# they cannot change the main environment. Environment: LLAMACPP_VENV (default .venv-llamacpp), PYTHON.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${LLAMACPP_VENV:-.venv-llamacpp}"
PY="${PYTHON:-python3}"
RECIPE="llama-cpp-python[server]==0.3.36"
# not -march=native: the default native build died with "Illegal instruction" at its first test on a virtual
# machine of this kind (its CPU flags list AVX-512, AVX512-FP16); GGML_NATIVE=OFF builds the portable x86-64-v3
# set (AVX, AVX2, FMA, F16C). --no-cache-dir: a wheel pip cached from a native build is not reused
FLAGS="-DGGML_NATIVE=OFF"
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)

if [ "$(cat "$VENV/.recipe" 2>/dev/null)" != "$RECIPE $FLAGS" ]; then
  rm -rf "$VENV"
  "$PY" -m venv --system-site-packages "$VENV"
  CMAKE_ARGS="$FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" "$VENV/bin/pip" install -q --no-cache-dir "$RECIPE"
  echo "$RECIPE $FLAGS" > "$VENV/.recipe"
fi
"$VENV/bin/python" -c "import llama_cpp, rewardkit; print('llama-cpp-python', llama_cpp.__version__)"
echo "llama.cpp environment ready in $(( $(date +%s) - start )) s"
if [ "${1:-}" = "--build-only" ]; then
  exit 0
fi
tests=$(date +%s)
# the test that checks the message shown WITHOUT llama.cpp is deselected here (it skips where llama.cpp exists)
"$VENV/bin/python" -m pytest -q --no-skips -p no:cacheprovider tests/backends/test_optional.py -k "llamacpp and not missing" "$@"
echo "llama.cpp tests took $(( $(date +%s) - tests )) s; environment + tests $(( $(date +%s) - start )) s"
