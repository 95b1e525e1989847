#!/usr/bin/env bash
# Set up (scripts/bootstrap.sh) and run the whole test suite, in two tiers:
#   1. the fast tier, every test not marked `slow` (minutes): a broken basic
#      fails here, and the slow tier is not started;
#   2. the slow tier, the tests marked `slow` (real model, whole studies, the
#      SLURM cluster, the evaluator's confined workers).
# Each tier runs on pytest workers (pytest-xdist, `--dist loadgroup`): one file's
# tests on one worker, all the SLURM cluster's on one (tests/conftest.py), the
# longest groups first (tests/group_seconds.json; scripts/group_seconds.py
# rewrites it from a run's JUnit report). On two cores the fast tier takes three:
# its tests wait on timeouts and children, which a third worker fills (206 s -> 188 s).
# The slow tier keeps two: it keeps both cores busy from start to end, and a third
# worker only crowds the timings its verdicts read (a plain-PyTorch copy of a
# reference was once timed 1.24x faster than it). FAST_WORKERS, SLOW_WORKERS change them.
# With arguments, one pytest run with them instead (e.g. `./scripts/test.sh
# tests/workflow -k killed`). Either way a run that collects no test fails
# (pytest's exit 5), and each pytest run ends with its summary line.
# The SLURM tests run when a test cluster is up (see .ci/run and tests/slurm/);
# the CUDA checks run on a GPU machine with scripts/gpu_eval_suite.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export KERNELSWEEP_SHARED=${KERNELSWEEP_SHARED:-$(cd .. && pwd)/shared}
PYTEST=(.venv/bin/python -m pytest -q -ra --durations=15)
FAST=(-n "${FAST_WORKERS:-3}" --dist loadgroup)
SLOW=(-n "${SLOW_WORKERS:-2}" --dist loadgroup)

if [ $# -gt 0 ]; then
    exec "${PYTEST[@]}" "$@"
fi

# Runs one tier; its exit status, where 5 (no test collected) is a failure too.
tier() {
    local name=$1 rc=0
    shift
    echo "== $name tier: pytest $*"
    SECONDS=0
    "${PYTEST[@]}" "$@" || rc=$?
    echo "== $name tier: exit $rc after $((SECONDS / 60)) min $((SECONDS % 60)) s"
    if [ "$rc" -eq 5 ]; then
        echo "scripts/test.sh: the $name tier collected no test" >&2
    fi
    return "$rc"
}

# The embedded model's checkpoint, which the slow tier's model tests and the SLURM demo
# need, is prepared beside the fast tier (a minute or two on a fresh machine, a no-op once
# cached; the same call and cache as the session fixture in tests/conftest.py, which finds
# it ready) and waited for before the slow tier; a failure here is the fixture's to report.
.venv/bin/python -c 'from kernelsweep.models.embedded import cache_dir, prepare; prepare(cache_dir(), log=lambda m: None)' \
    >/dev/null 2>&1 &
prepare_pid=$!
rc=0
tier fast -m "not slow" "${FAST[@]}" || rc=$?
if [ "$rc" -ne 0 ]; then
    kill "$prepare_pid" 2>/dev/null || true  # no slow tier: its checkpoint is not needed
    exit "$rc"
fi
wait "$prepare_pid" || true
tier slow -m slow "${SLOW[@]}"
