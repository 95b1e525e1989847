#!/usr/bin/env bash
# A published corpus judged through Snakemake on a lent GPU machine (no network, at most
# ~10 minutes a command): config/cuda-l1.yaml with the shared material carried in
# .gpu_carry/shared (docs/gpu-machine.md; the corpus file under corpora/cuda-l1/).
#
#   RUN_S=480 LEVELS=1 IDS="[1, 2, 3]" MODES="[eager]" scripts/gpu_corpus.sh
#
# LEVELS / IDS: the slice of tasks (default level 1, all ids); MODES: the baselines
# (default the config's five); CORPUS: the file (default h100.jsonl). Runs for at most
# RUN_S seconds, then stops cleanly (a later call on the same machine resumes); prints the
# call's throughput (benchmarks/study_throughput.py: candidates per hour, builds included,
# device time held per candidate) and the verdicts. DRY=1 only plans (works on a CPU machine
# with ../shared). Writes to $OUT (or ./gpu_out): throughput.txt/json, verdicts.txt, the
# snakemake log's tail and a tarball of the records.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu_out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/ks_corpus}; RESULTS=$WORK/results; mkdir -p "$WORK"
SHARED=${SHARED:-$PWD/.gpu_carry/shared}
[ -d "$SHARED/kernelbench" ] || SHARED=$(cd .. && pwd)/shared
PY=${PYTHON:-python3}
if [ -d .whl ] && ! $PY -c "import snakemake" 2>/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
export PYTHONPATH=/tmp/site:$PWD/src PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# The slice as a second config file (Snakemake reads --config values as strings).
cat > "$WORK/slice.yaml" <<YAML
results: $RESULTS
tasks: {source: local, path: $SHARED/kernelbench, levels: [${LEVELS:-1}], ids: ${IDS:-all}}
models: {cuda-l1: {backend: corpus, format: cuda-l1, path: $SHARED/corpora/cuda-l1/${CORPUS:-h100.jsonl}, baseline: eager}}
YAML
[ -n "${MODES:-}" ] && echo "baseline: {modes: $MODES, timing_trials: 100}" >> "$WORK/slice.yaml"
ARGS=(--configfile config/cuda-l1.yaml "$WORK/slice.yaml")

if [ "${DRY:-0}" = 1 ]; then
  $PY -m snakemake -n "${ARGS[@]}" 2>&1 | grep -A25 "^Job stats"
  exit "${PIPESTATUS[0]}"
fi
GPUS=$($PY -c "import torch; print(torch.cuda.device_count())")
nvidia-smi -L
$PY -m snakemake --unlock "${ARGS[@]}" > /dev/null 2>&1
start=$(date +%s)
# SIGINT at the deadline: Snakemake stops its jobs and exits; the next call redoes them.
timeout -s INT -k 30 "${RUN_S:-480}" $PY -m snakemake --cores "$(nproc)" --resources gpu=$((4 * GPUS)) \
  --keep-going --rerun-incomplete "${ARGS[@]}" >> "$WORK/snakemake.log" 2>&1
rc=$?
echo "snakemake rc=$rc after $(( $(date +%s) - start )) s"
tail -n 40 "$WORK/snakemake.log" > "$OUT/snakemake_tail.log"
$PY benchmarks/study_throughput.py "$RESULTS" --since "$start" --out "$OUT/throughput.json" \
  > "$OUT/throughput.txt" 2>&1; tail -n 6 "$OUT/throughput.txt"
# Each evaluated row: its verdict, the claim's speedup and ours, where its builds ran.
$PY - "$RESULTS" <<'PY' | tee "$OUT/verdicts.txt"
import collections, json, pathlib, sys
rows, counts = [], collections.Counter()
for p in sorted(pathlib.Path(sys.argv[1], "runs").rglob("eval.json")):
    r = json.loads(p.read_text())
    counts[r["category"]] += 1
    builds = r.get("builds") or []
    rows.append(f"{r['cell']['task']:<8} {r['category']:<18} speedup={r.get('speedup')} custom={r.get('custom_kernel')} "
                f"share={(r.get('kernel_evidence') or {}).get('share')} held={r.get('gpu_s')} "
                f"in_hold_s={r.get('build_in_hold_s')} builds={[(b.get('name'), b.get('cached')) for b in builds]} "
                f"flags={r.get('flags')}")
print("\n".join(rows)); print(dict(counts))
PY
tar czf "$OUT/records.tgz" -C "$WORK" --exclude=results/build --exclude=results/.gpu-slots results 2>/dev/null
exit "$rc"
