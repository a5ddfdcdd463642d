#!/usr/bin/env bash
# verl's and OpenRLHF's own code in a virtual environment of its own, then the adapter tests that run it, none
# skipped (a skip fails the run).
#
#   scripts/frameworks_env.sh              # build (or reuse) .venv-frameworks/, run the verl and OpenRLHF tests
#   scripts/frameworks_env.sh -k assembler # extra arguments go to pytest
#
# Neither framework installs with its dependencies next to rewardkit (verl 0.9.1 pins transformers<5.11;
# OpenRLHF 0.11.2 needs deepspeed, flash-attn, CUDA and vllm), so their packages go in --no-deps, with the few
# modules the reward path imports (docs/integrations.md lists them and what `pip check` still reports).
# omegaconf 2.3 needs antlr4 4.9.3 while math-verify's LaTeX parser needs 4.13: hence an environment of its
# own, on top of the current one (scripts/venv_inheriting.py: torch, ray, transformers, httpx come from the
# environment PYTHON runs in, a virtual environment included, which `venv --system-site-packages` would skip).
# Environment: FRAMEWORKS_VENV (default .venv-frameworks, git-ignored), PYTHON (default python).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${FRAMEWORKS_VENV:-.venv-frameworks}"
PY="${PYTHON:-python}"
RECIPE="verl==0.9.1 tensordict==0.10.0 codetiming pyvers<0.2 omegaconf<2.4 hydra-core antlr4-python3-runtime==4.9.3 orjson cachetools fastapi opentelemetry-api openrlhf==0.11.2 pylatexenc"
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)

if [ "$(cat "$VENV/.recipe" 2>/dev/null)" != "$RECIPE" ]; then
  rm -rf "$VENV"
  "$PY" scripts/venv_inheriting.py "$VENV"
  # shellcheck disable=SC2086  # the recipe is a list of requirements
  "$VENV/bin/python" -m pip install -q --no-deps $RECIPE
  echo "$RECIPE" > "$VENV/.recipe"
fi
"$VENV/bin/python" -m pip install -q --no-deps -e .  # this checkout, whatever the outer environment holds
# the frameworks must import: say why not (e.g. "No module named 'ray'"), not "not installed"
if ! err=$("$VENV/bin/python" -c "import rewardkit, verl" 2>&1); then
  echo "error: verl does not import in $VENV: $(tail -n 1 <<<"$err")" >&2
  exit 1
fi
"$VENV/bin/python" -c "import rewardkit; from importlib.metadata import version as v
print('verl', v('verl'), '| OpenRLHF', v('openrlhf'), '| rewardkit from', rewardkit.__file__)"
echo "frameworks environment ready in $(( $(date +%s) - start )) s"

"$VENV/bin/python" -m pytest -q --no-skips -p no:cacheprovider tests/integrations/test_verl.py \
  tests/integrations/test_openrlhf.py "$@"
echo "frameworks environment + tests $(( $(date +%s) - start )) s"
