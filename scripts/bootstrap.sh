#!/usr/bin/env bash
# Create .venv (or reuse it) with kernelsweep and everything the demo and the
# tests need. Idempotent: a second run only checks.
#   TORCH_SPEC   the torch requirement to install when torch is missing
#                (default torch==2.13.0; e.g. "torch --index-url https://download.pytorch.org/whl/cu126")
#   PYTHON       the interpreter to build the venv from (default python3, needs >= 3.11)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

"$PYTHON" - <<'PY' || { echo "kernelsweep needs Python >= 3.11 (set PYTHON=...)" >&2; exit 2; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=".venv/bin/python -m pip --disable-pip-version-check -q"
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing $TORCH_SPEC"
  # shellcheck disable=SC2086
  $PIP install $TORCH_SPEC
fi
stamp=.venv/.kernelsweep-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing kernelsweep and its dependencies"
  $PIP install -e ".[hf,test,slurm]"
  touch "$stamp"
fi
echo "bootstrap: ready ($(.venv/bin/python -c 'import torch, snakemake; print("torch", torch.__version__, "snakemake", snakemake.__version__)'))"
