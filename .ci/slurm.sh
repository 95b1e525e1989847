#!/usr/bin/env bash
# CI: install SLURM and munge from Debian (once), make sure the executor plugin
# is importable, start the single-node test cluster and check that a GPU job
# schedules. Idempotent. Afterwards:
#   KERNELSWEEP_SLURM=1 python -m pytest -m slurm tests/slurm
#   bash tests/slurm/cluster.sh stop      # the pytest fixture also stops it
# Needs root. PYTHON selects the interpreter (default: python).
# `.ci/slurm.sh install` installs the Debian packages only (no Python needed: .ci/run
# runs it beside scripts/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
export PATH="$PATH:/usr/sbin"

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
    || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    echo "slurm.sh: installing slurm-wlm and munge"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        slurm-wlm slurm-client munge >/dev/null
fi
[ "${1:-}" = install ] && exit 0

if ! "$PY" -c "import snakemake_executor_plugin_slurm" 2>/dev/null; then
    echo "slurm.sh: installing snakemake-executor-plugin-slurm"
    "$PY" -m pip install -q "snakemake-executor-plugin-slurm>=2.8,<3"
fi

bash tests/slurm/cluster.sh start

# Smoke test: a GPU job on the gpu partition sees the fake GRES as device 0.
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
sbatch --wait --quiet --partition=gpu --gpus=1 --time=1 --output="$out" \
    --wrap 'echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"' >/dev/null
if ! grep -qx "CUDA_VISIBLE_DEVICES=0" "$out"; then
    echo "slurm.sh: the GPU smoke job did not get device 0:" >&2
    cat "$out" >&2
    exit 1
fi
echo "slurm.sh: cluster ready (GPU smoke job ok); run the tests with KERNELSWEEP_SLURM=1"
