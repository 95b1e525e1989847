#!/usr/bin/env bash
# The evaluator's GPU proof on one GPU: the CUDA fixture suite
# (scripts/gpu/run_suite.py), the throughput benchmark
# (benchmarks/eval_throughput.py) and the eager/torch.compile baselines.
# Needs python3 with torch (+ triton for the Triton case), nothing else from
# this package's dependencies. Results go to $OUT (default ./gpu-out):
#   env.log, suite.json, suite.log, throughput.json, throughput.log, baseline.json, logs.tar.gz
# Usage: scripts/gpu_eval_suite.sh [suite] [bench] [baseline]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
parts=${*:-suite bench baseline}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/ks-gpu-XXXXXX)
BENCH=tests/evaluator/fixtures/cuda
status=0

$PY - <<'PYEOF' 2>&1 | tee "$OUT/env.log"
import inspect, os, torch, torch.utils.cpp_extension as c
print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0), "cpus", os.cpu_count())
print("load_inline has no_implicit_headers:", "no_implicit_headers" in inspect.signature(c.load_inline).parameters)
p = torch.cuda.get_device_properties(0)
print("L2", getattr(p, "L2_cache_size", None), "memory clock kHz", getattr(p, "memory_clock_rate", None),
      "bus bits", getattr(p, "memory_bus_width", None), "TORCH_CUDA_ARCH_LIST", os.environ.get("TORCH_CUDA_ARCH_LIST"))
try:
    import triton; print("triton", triton.__version__)
except ImportError:
    print("triton missing")
PYEOF

for part in $parts; do
  case $part in
    suite)
      timeout "${SUITE_LIMIT:-330}" $PY scripts/gpu/run_suite.py --out "$OUT/suite.json" \
          --build-dir "$WORK/build" --log-dir "$WORK/logs" --deadline "${SUITE_DEADLINE:-270}" ${SUITE_ONLY:+--only "$SUITE_ONLY"} \
          2>&1 | tee "$OUT/suite.log" || status=1 ;;
    bench)
      timeout "${BENCH_LIMIT:-260}" $PY benchmarks/eval_throughput.py --device cuda --workers "${WORKERS:-4}" \
          --candidates ${BENCH_CANDIDATES:-$BENCH/bench_add_block128.py $BENCH/bench_add_float4.py} \
          --out "$OUT/throughput.json" 2>&1 | tee "$OUT/throughput.log" || status=1 ;;
    baseline)
      timeout "${BASELINE_LIMIT:-300}" $PY -m kernelsweep baseline tests/evaluator/fixtures/references/vector_add.py \
          --device cuda --modes "${BASELINE_MODES:-eager,inductor-default,inductor-reduce-overhead}" \
          --timing-trials 50 --timeout 120 --log-dir "$WORK/logs/baseline" --out "$OUT/baseline.json" \
          > /dev/null || status=1 ;;
    *) echo "unknown part: $part (suite, bench, baseline)" >&2; status=2 ;;
  esac
done
# Worker logs, trimmed so the archive stays small.
find "$WORK/logs" -name '*.log' -size +256k -exec truncate -s 256k {} + 2>/dev/null
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
exit $status
