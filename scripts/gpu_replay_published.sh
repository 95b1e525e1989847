#!/usr/bin/env bash
# The README's "Reproduce a published study on one GPU" on a lent GPU machine
# (no network, at most ~10 minutes a command): config/replay-published.yaml with
# the shared material carried in .gpu_carry/shared (docs/gpu-machine.md), in slices.
#
#   RUN_S=540 scripts/gpu_replay_published.sh     # run for at most RUN_S seconds, then stop cleanly
#
# Call it again until it prints "done" (on the same warm machine, or on a fresh one
# with RESUME=<the results.tgz the last call brought back> and that file carried): each call
# unlocks, reruns unfinished jobs (--rerun-incomplete) and keeps every finished
# cell (results in $WORK, outside the repository). Every call appends its wall
# time to $WORK/wall.log; the sum is the run's wall time. DRY=1 only plans
# (works on a CPU machine with ../shared instead of .gpu_carry/shared).
# Writes to $OUT (or ./gpu_out): the progress, the snakemake log's tail, and when
# done REPORT.md, the tables and a tarball of the raw results (no build cache).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/ks_pub}; RESULTS=$WORK/results; mkdir -p "$WORK"
SHARED=${SHARED:-$PWD/.gpu_carry/shared}
[ -d "$SHARED/kernelbench" ] || SHARED=$(cd .. && pwd)/shared
if [ -d .whl ] && ! python3 -c "import snakemake" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
ARGS=(--configfile config/replay-published.yaml --config "results=$RESULTS"
      "tasks={path: $SHARED/kernelbench}" "models={qwen7b: {path: $SHARED/replay/kernelbench-agentic}}")

if [ "${DRY:-0}" = 1 ]; then
  python3 -m snakemake -n "${ARGS[@]}" 2>&1 | tail -n 18
  exit "${PIPESTATUS[0]}"
fi

# A fresh machine: resume from the results an earlier call brought back (RESUME=results.tgz).
if [ -n "${RESUME:-}" ] && [ ! -d "$RESULTS" ]; then
  tar xzf "$RESUME" -C "$WORK" || exit 1
  # Results from before precision was a path part (an older slice) move, nothing recomputed.
  python3 -m kernelsweep relayout --results "$RESULTS" || exit 1
fi
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi -L
python3 -m snakemake --unlock "${ARGS[@]}" > /dev/null 2>&1
start=$(date +%s)
# SIGINT at the deadline: Snakemake stops its jobs and exits; the next call redoes them.
deadline=$(( $(date +%s) + ${RUN_S:-540} ))
until_deadline() {  # snakemake on the given targets (none: the whole study) until the deadline
  local left=$(( deadline - $(date +%s) ))
  [ "$left" -gt 10 ] || return 124
  # targets first: --config takes every word after it
  timeout -s INT -k 30 "$left" python3 -m snakemake "$@" --cores "$(nproc)" --resources gpu=$((4 * GPUS)) \
    --keep-going --rerun-incomplete "${ARGS[@]}" >> "$WORK/snakemake.log" 2>&1
}
rc=0
# FIRST="runs/fp32/qwen7b/zero_shot/L1-007/s0/t0/c0/eval.json ...": these files under the
# results first (within the same deadline), then the whole study.
if [ -n "${FIRST:-}" ]; then
  read -ra first <<< "$FIRST"
  until_deadline "${first[@]/#/$RESULTS/}"; rc=$?
fi
[ "$rc" = 124 ] || { until_deadline; rc=$?; }
echo "$start $(date +%s) rc=$rc" >> "$WORK/wall.log"
tail -n 40 "$WORK/snakemake.log" > "$OUT/snakemake_tail.log"
# This call's throughput through Snakemake, builds included (issue #13: >= 600 candidates per hour).
python3 benchmarks/study_throughput.py "$RESULTS" --since "$start" --out "$OUT/throughput.json" \
  > "$OUT/throughput.txt" 2>&1; tail -n 5 "$OUT/throughput.txt"
count() { find "$RESULTS/runs" -name "$1" 2>/dev/null | wc -l; }
wall=$(awk '{s += $2 - $1} END {print s}' "$WORK/wall.log")
echo "evaluations $(count eval.json)/150, finals $(count final.json)/90, profiles" \
     "$(ls "$RESULTS"/profile/cuda/fp32 2>/dev/null | wc -l)/30, baselines $(ls "$RESULTS"/baseline/cuda/fp32 2>/dev/null | wc -l)/30;" \
     "wall so far ${wall} s over $(wc -l < "$WORK/wall.log") calls; this call rc=$rc" | tee "$OUT/progress.txt"
# Every call brings its results back (no build cache): a later call on a fresh machine resumes from them.
tar czf "$OUT/results.tgz" -C "$WORK" --exclude=results/build --exclude=results/.gpu-slots \
  --exclude=results/report/figures results wall.log 2>/dev/null
# The plan is read whole before grep: under pipefail, grep -q quitting early would
# SIGPIPE snakemake and fail the test, and a finished run would never say "done".
plan=$(python3 -m snakemake -n "${ARGS[@]}" 2>&1)
if [ -f "$RESULTS/report/REPORT.md" ] && grep -q "Nothing to be done" <<< "$plan"; then
  echo "done" | tee -a "$OUT/progress.txt"
  # The whole run over all its calls (the time between calls, a machine starting, not counted).
  python3 benchmarks/study_throughput.py "$RESULTS" --calls "$WORK/wall.log" --out "$OUT/throughput_run.json" \
    > "$OUT/throughput_run.txt" 2>&1; tail -n 5 "$OUT/throughput_run.txt" | tee -a "$OUT/progress.txt"
  cp "$RESULTS/report/REPORT.md" "$OUT/"
  mkdir -p "$OUT/tables" && cp "$RESULTS"/report/tables/*.md "$RESULTS"/report/tables/*.csv "$OUT/tables/" 2>/dev/null
fi
ls -la "$OUT"
