#!/usr/bin/env bash
# The evaluator's GPU proof on one GPU: the CUDA fixture suite
# (tests/evaluator/test_categories_cuda.py), the throughput benchmark
# (benchmarks/eval_throughput.py), the baselines (eager, torch.compile, CUDA graphs, cuDNN
# benchmark mode) and their run-to-run agreement (benchmarks/baseline_agreement.py).
# Needs python3 with torch (+ triton for the Triton case), nothing else from
# this package's dependencies. Results go to $OUT (default ./gpu-out):
#   env.log, suite.xml (JUnit), suite.log, throughput.json, throughput.log, baseline.json, baseline.log,
#   logs.tar.gz, floor.log, adversarial.log, precision.log, agreement.log, agreement.json
# BENCH_TASKS: the replay tasks the bench takes, e.g. L2-001,L3-004 (default: the first BENCH_REPLAY).
# AGREEMENT_REFS: reference files for agreement (default: the fixtures and a convolution); it
#   stops starting references at 4/5 of AGREEMENT_LIMIT and counts those both runs timed.
# SUITE_ONLY: a pytest -k expression over the suite's case ids, e.g. "hung_kernel or healthy_after_hang".
# Usage: scripts/gpu_eval_suite.sh [suite] [bench] [baseline] [agreement] [floor] [adversarial] [precision] [tmpclone]
#   (default: suite bench baseline floor). bench compares with KernelBench's
#   evaluator on the same candidates (needs its pydantic wheels; see docs/gpu-machine.md).
set -uo pipefail
cd "$(dirname "$0")/.."
parts=${*:-suite bench baseline floor}
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
      mkdir -p "$WORK/logs"; KERNELSWEEP_TEST_BUILD_DIR="$WORK/build" timeout "${SUITE_LIMIT:-330}" $PY -m pytest -q -p no:cacheprovider \
          tests/evaluator/test_categories_cuda.py -rA --basetemp "$WORK/logs/suite" --junitxml "$OUT/suite.xml" ${SUITE_ONLY:+-k "$SUITE_ONLY"} \
          2>&1 | tee "$OUT/suite.log" || status=1 ;;
    bench)
      timeout "${BENCH_LIMIT:-300}" $PY benchmarks/eval_throughput.py --device cuda --workers "${WORKERS:-8}" \
          --modes "${BENCH_MODES:-pool,late,kernelbench}" --pairs-from-replay zero_shot --limit "${BENCH_REPLAY:-9}" ${BENCH_TASKS:+--replay-tasks "$BENCH_TASKS"} \
          --candidates ${BENCH_CANDIDATES:-$BENCH/bench_add_block128.py $BENCH/bench_add_float4.py} \
          --work "$WORK" --out "$OUT/throughput.json" 2>&1 | tee "$OUT/throughput.log" || status=1
      tar czf "$OUT/bench-logs.tar.gz" -C "$WORK" --wildcards 'ks-bench-*/logs' 2>/dev/null ;;
    floor)
      timeout 120 $PY benchmarks/timing_floor.py 2>&1 | tee "$OUT/floor.log" || status=1 ;;
    adversarial)
      timeout "${ADV_LIMIT:-500}" $PY -m pytest -q -p no:cacheprovider tests/evaluator/test_adversarial_cuda.py -rA \
          2>&1 | tee "$OUT/adversarial.log" || status=1 ;;
    precision)
      KERNELSWEEP_TEST_BUILD_DIR="$WORK/build" timeout "${PRECISION_LIMIT:-300}" $PY -m pytest -q -p no:cacheprovider \
          tests/evaluator/test_precision_cuda.py -rA 2>&1 | tee "$OUT/precision.log" || status=1 ;;
    baseline)
      timeout "${BASELINE_LIMIT:-300}" $PY -m kernelsweep baseline tests/evaluator/fixtures/references/vector_add.py \
          --device cuda --modes "${BASELINE_MODES:-eager,inductor-default,inductor-reduce-overhead,cuda-graph,cudnn-benchmark}" \
          --timing-trials 50 --timeout 120 --log-dir "$WORK/logs/baseline" --out "$OUT/baseline.json" \
          > /dev/null || status=1
      # Every mode timed; each but eager and cudnn-benchmark beside eager (paired_eager_ms), with vs_eager's interval.
      $PY - "$OUT/baseline.json" <<'PYEOF' 2>&1 | tee "$OUT/baseline.log" || status=1
import json, sys
from kernelsweep.evaluator import settings
modes = json.load(open(sys.argv[1]))["modes"]
bad = []
for mode, e in modes.items():
    v = e.get("vs_eager") or {}
    print(mode, e["status"], e.get("error") or "", "median", (e.get("runtime_ms") or {}).get("median"),
          "vs_eager", v.get("speedup"), v.get("speedup_ci"), v.get("verdict"), "paired", v.get("paired"))
    paired = e.get("paired_eager_ms") is not None
    if e["status"] != "ok" or paired != (mode not in settings.UNPAIRED_MODES) or (mode != "eager" and not v.get("speedup_ci")):
        bad.append(mode)
sys.exit(f"baseline: not as expected: {bad}" if bad else 0)
PYEOF
      timeout "${BASELINE_TEST_LIMIT:-420}" $PY -m pytest -q -p no:cacheprovider tests/evaluator/test_baseline_cuda.py -rA \
          2>&1 | tee -a "$OUT/baseline.log" || status=1 ;;
    agreement)
      # Two runs of the baseline stage on the same references: how many decisions disagree
      # (max-autotune left out by default: minutes of autotuning per reference and run).
      timeout "${AGREEMENT_LIMIT:-900}" $PY benchmarks/baseline_agreement.py --device cuda \
          --modes "${AGREEMENT_MODES:-eager,inductor-default,inductor-reduce-overhead,cuda-graph,cudnn-benchmark}" \
          --timing-trials "${AGREEMENT_TRIALS:-50}" --work "$WORK/agreement" --json "$OUT/agreement.json" \
          --budget-s $(( ${AGREEMENT_LIMIT:-900} * 4 / 5 )) ${AGREEMENT_REFS:+--references $AGREEMENT_REFS} \
          2>&1 | tee "$OUT/agreement.log" || status=1 ;;
    tmpclone)
      # A checkout and its venv under /tmp, the path with spaces (hidden from every worker but
      # for what the interpreter needs): the confinement check, then a CUDA build judged from there.
      clone="/tmp/ks gpu clone"; rm -rf "$clone"; mkdir -p "$clone"
      cp -r src "$clone/src"; cp -r tests "$clone/tests"
      # The image's python is a venv itself: the clone's venv reaches its packages through a link in the clone.
      ln -s "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" "$clone/packages"
      $PY -m venv --without-pip "$clone/.venv" && printf '%s\n' "$clone/src" "$clone/packages" \
        > "$("$clone/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/checkout.pth"
      (cd "$clone" && env -u PYTHONPATH .venv/bin/python -m kernelsweep confinement --device cuda \
        && env -u PYTHONPATH timeout 300 .venv/bin/python -m kernelsweep eval --device cuda --trials 2 --timing-trials 20 \
             --build-dir "$clone/build" tests/evaluator/fixtures/references/vector_add.py tests/evaluator/fixtures/cuda/cuda_add.py \
             > "$OUT/tmpclone.json") 2>&1 | tee "$OUT/tmpclone.log" || status=1
      $PY -c "import json,sys; r=json.load(open(sys.argv[1])); print('tmpclone:', r['category'], r['provenance']['confinement'], 'custom_kernel', r['custom_kernel'])" "$OUT/tmpclone.json" 2>&1 | tee -a "$OUT/tmpclone.log" || status=1 ;;
    *) echo "unknown part: $part (suite, bench, baseline, agreement, floor, adversarial, precision, tmpclone)" >&2; status=2 ;;
  esac
done
# Worker logs, trimmed so the archive stays small.
find "$WORK/logs" -name '*.log' -size +256k -exec truncate -s 256k {} + 2>/dev/null
tar -czf "$OUT/logs.tar.gz" -C "$WORK" logs 2>/dev/null
exit $status
