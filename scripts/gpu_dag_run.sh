#!/usr/bin/env bash
# The whole DAG on CUDA, on a GPU machine without network (the lent H200s):
#   scripts/gpu_dag_run.sh dag     hand-written CUDA candidates for four KernelBench tasks through
#                                  profile, baseline, compile, evaluate, select, final and report,
#                                  with --resources gpu=<GPUs on the machine>
#   scripts/gpu_dag_run.sh timing  the same candidates timed again alone on GPU 0 and, with two
#                                  GPUs, beside a transformers generation load on GPU 0 (timed on GPU 1);
#                                  TIMING_DEADLINE=S starts no evaluation after S seconds
# Needs: torch with CUDA, nvcc; snakemake and jsonschema as wheels in .whl/ (see docs/gpu-machine.md);
# KernelBench level-2 files 9, 12, 29, 76 under .gpu_carry/kernelbench/level2/.
# Writes summaries and a tarball of the results to $OUT (or ./gpu_out).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
WORK=/tmp/ks_gpu; RESULTS=$WORK/results
if [ -d .whl ] && ! python3 -c "import snakemake" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
GPUS=$(python3 -c "import torch; print(torch.cuda.device_count())")
nvidia-smi -L

case "${1:-dag}" in
dag)
  python3 scripts/gpu/handwritten_candidates.py .gpu_carry/replay
  start=$(date +%s)
  python3 -m snakemake --cores "$(nproc)" --resources gpu="$GPUS" --configfile scripts/gpu/gpu_check.yaml \
    --config results=$RESULTS 2>&1 | tail -n 60 > "$OUT/snakemake_dag.log"
  echo "dag: $(( $(date +%s) - start )) s wall, exit ${PIPESTATUS[0]}" | tee -a "$OUT/snakemake_dag.log"
  tail -n 25 "$OUT/snakemake_dag.log"
  python3 scripts/gpu/analyze_gpu_run.py $RESULTS --out "$OUT/summary_dag.json"
  # a no-op rerun must do nothing
  python3 -m snakemake -n --configfile scripts/gpu/gpu_check.yaml --config results=$RESULTS 2>&1 | tail -n 2
  ;;
timing)
  cells=$(python3 - <<'PY'
import json, glob
for p in sorted(glob.glob("/tmp/ks_gpu/results/runs/*/*/*/*/s*/t*/c*/eval.json")):
    e = json.load(open(p))
    if (e.get("runtime_ms") or {}).get("samples"):
        print(p[len("/tmp/ks_gpu/results/runs/"):-len("/eval.json")])
PY
)
  evaluate() {  # device out_dir cell
    local task; task=$(echo "$3" | cut -d/ -f4)  # precision/model/method/task/…
    TORCH_CUDA_ARCH_LIST=9.0 CUDA_VISIBLE_DEVICES=$1 python3 -m kernelsweep eval $RESULTS/tasks/$task.py $RESULTS/runs/$3/candidate.py \
      --device cuda --trials 5 --timing-trials 100 --warmup 10 --build-dir $RESULTS/build \
      --out "$2/$(echo "$3" | sed 's|/|__|g').json" > /dev/null
  }
  mkdir -p $WORK/alone $WORK/loaded
  # TIMING_DEADLINE (s): stop starting evaluations after it, so the summary is still written
  deadline=$(( $(date +%s) + ${TIMING_DEADLINE:-100000} ))
  for cell in $cells; do [ "$(date +%s)" -lt $deadline ] && evaluate 0 $WORK/alone "$cell"; done
  if [ "$GPUS" -ge 2 ]; then
    python3 scripts/gpu/random_model.py /tmp/randmodel
    rm -f /tmp/stop_load
    CUDA_VISIBLE_DEVICES=0 python3 scripts/gpu/generation_load.py /tmp/randmodel /tmp/stop_load "$OUT/generation_load.json" > $WORK/genload.log 2>&1 &
    until grep -q "^call 1" $WORK/genload.log 2>/dev/null || ! kill -0 $! 2>/dev/null; do sleep 2; done
    for cell in $cells; do [ "$(date +%s)" -lt $deadline ] && evaluate 1 $WORK/loaded "$cell"; done
    touch /tmp/stop_load; wait
    tail -n 3 $WORK/genload.log
  fi
  python3 scripts/gpu/analyze_gpu_run.py $RESULTS --alone $WORK/alone --loaded $WORK/loaded --out "$OUT/summary_timing.json"
  ;;
esac
tar czf "$OUT/results.tgz" -C $WORK --exclude=results/build --exclude=results/.gpu-slots . 2>/dev/null
ls -la "$OUT"
