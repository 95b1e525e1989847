#!/usr/bin/env bash
# session 8, device call 1: suite (new judge), bench late vs KernelBench, floor
set -u
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site KERNELSWEEP_SHARED=$PWD/.gpu_carry/shared
SUITE_LIMIT=230 OUT=$OUT/suite bash scripts/gpu_eval_suite.sh suite 2>&1 | tail -3
BENCH_MODES=late,kernelbench BENCH_REPLAY=6 BENCH_LIMIT=240 WORKERS=14 OUT=$OUT/bench \
  BENCH_TASKS=L1-001,L1-002,L1-003,L2-001,L2-003,L3-004 bash scripts/gpu_eval_suite.sh bench 2>&1 | tail -22
OUT=$OUT/floor timeout 90 bash scripts/gpu_eval_suite.sh floor 2>&1 | tail -6
