#!/usr/bin/env bash
# Set up (scripts/bootstrap.sh) and run the whole test suite. The SLURM tests
# run when a test cluster is up (see .ci/run and tests/slurm/); the CUDA checks
# run on a GPU machine with scripts/gpu_eval_suite.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export KERNELSWEEP_SHARED=${KERNELSWEEP_SHARED:-$(cd .. && pwd)/shared}
exec .venv/bin/python -m pytest -q -ra --durations=15 "$@"
