#!/usr/bin/env bash
# Create .venv (or reuse it) with kernelsweep and everything the demo and the
# tests need. Idempotent: a second run only checks.
#   TORCH_SPEC   the torch requirement to install when torch is missing
#                (default torch==2.13.0; e.g. "torch --index-url https://download.pytorch.org/whl/cu126")
#   PYTHON       the interpreter to build the venv from (default python3, needs >= 3.11)
#   KERNELSWEEP_NO_UV=1  install with pip only (by default uv installs, pip as the fallback)
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

# uv installs the same packages in ~40 s where pip takes ~90 s on two cores
# (docs/measurements/bootstrap.csv), compiling their bytecode as pip does: the
# confined workers read the venv read-only, and without .pyc files each of them
# would compile torch's modules again on import. uv reads none of pip's configuration:
# pip's environment variables are passed on, and where uv cannot be had or its
# install fails (an index only pip.conf names), pip installs instead.
uv_args=(--python .venv/bin/python)
for link in ${PIP_FIND_LINKS:-}; do uv_args+=(--find-links "$link"); done
[ -n "${PIP_INDEX_URL:-}" ] && uv_args+=(--index-url "$PIP_INDEX_URL")
for url in ${PIP_EXTRA_INDEX_URL:-}; do uv_args+=(--extra-index-url "$url"); done
uv_state=untried  # installing uv is tried once, and only when something is to be installed
have_uv() {
  if [ "$uv_state" = untried ]; then
    uv_state=no
    if [ "${KERNELSWEEP_NO_UV:-0}" != 1 ] && { [ -x .venv/bin/uv ] || $PIP install uv >/dev/null 2>&1; }; then
      uv_state=yes
    fi
  fi
  [ "$uv_state" = yes ]
}
install() {
  if have_uv; then
    .venv/bin/uv pip install -q --compile-bytecode "${uv_args[@]}" "$@" && return 0
    echo "bootstrap: uv could not install $*; pip tries" >&2
  fi
  $PIP install "$@"
}

if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "bootstrap: installing $TORCH_SPEC"
  # shellcheck disable=SC2086
  install $TORCH_SPEC
fi
stamp=.venv/.kernelsweep-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "bootstrap: installing kernelsweep and its dependencies"
  install -e ".[hf,test,slurm]"
  touch "$stamp"
fi
echo "bootstrap: ready ($(.venv/bin/python -c 'import torch, snakemake; print("torch", torch.__version__, "snakemake", snakemake.__version__)'))"
