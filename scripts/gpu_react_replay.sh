#!/usr/bin/env bash
# The react agent on a GPU with a replayed CUDA trajectory (issue 12), on a
# machine without network (the lent H200s):
#   scripts/gpu_react_replay.sh [--short]   (--short: one reply, the working kernel submitted at once)
# Needs what scripts/gpu_dag_run.sh needs (torch with CUDA, nvcc, .whl/ wheels,
# .gpu_carry/kernelbench/level2/12_Gemm_Multiply_LeakyReLU.py). Runs the react cell
# of scripts/gpu/react_replay.yaml, then the report; copies the cell's final.json,
# trace and trajectory page, and the report's react section, to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
if [ -d .whl ] && ! python3 -c "import snakemake" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
nvidia-smi -L
python3 scripts/gpu/react_replay.py .gpu_carry/react_replay.jsonl "$@"
CONFIG=scripts/gpu/react_replay.yaml
if [ "${1:-}" = --short ]; then  # one submission, then the cap stops the trajectory
  sed 's/max_steps: 10,/max_steps: 2, max_submissions: 1,/' $CONFIG > /tmp/react_short.yaml; CONFIG=/tmp/react_short.yaml
fi
RESULTS=/tmp/ks_gpu_react/results
CELL=$RESULTS/runs/fp32/scripted/react/L2-012/s0
start=$(date +%s)
# The target first: --configfile takes every argument after it.
python3 -m snakemake "$CELL/final.json" --cores "$(nproc)" --resources gpu=1 \
  --configfile "$CONFIG" > "$OUT/snakemake_react.log" 2>&1
echo "react cell: $(( $(date +%s) - start )) s wall" | tee -a "$OUT/snakemake_react.log"
cp "$CELL/final.json" "$OUT/react_final.json"; cp "$CELL/react/trace.jsonl" "$CELL/react/trace.html" "$OUT/"
cp "$RESULTS/logs/react/scripted/react/L2-012/s0/react.log" "$OUT/" 2>/dev/null
python3 - "$CELL" <<'PY'
import json, sys
cell = sys.argv[1]
final = json.load(open(f"{cell}/final.json"))
r = final["react"]
print("stop:", final["stop_reason"], "| submissions:", r["submission_categories"], "| chosen:", r["chosen_submission"],
      "| guards:", r["guards"], "| result:", final["result"]["category"], "speedup", final["result"]["speedup"],
      "custom_kernel", final["result"]["custom_kernel"])
for line in open(f"{cell}/react/trace.jsonl"):
    rec = json.loads(line)
    if rec["kind"] == "tool":
        print(f"  step {rec['step']} {rec['name']}: ok={rec['ok']} {rec['wall_s']} s | {rec['observation'].splitlines()[0][:100]}")
    elif rec["kind"] in ("guard", "end"):
        print(f"  {rec['kind']} {rec.get('guard', '')} {rec.get('action', rec.get('reason'))}")
PY
