"""Nsight Compute metrics for profile(target) on CUDA, when `ncu` is on PATH.

The target's forward runs once under ncu, in its own process group with a time
limit (kernelsweep.runtime.process_group); a few metrics per kernel come back as a
table under the torch.profiler summary. A failure is one line of the
observation, never a failed profile: ncu is often unusable (containers without
counter access)."""

from __future__ import annotations

import csv
import io
import shutil
import sys
from pathlib import Path

from kernelsweep.runtime.process_group import read_tail, run_in_group

METRICS = {
    "gpu__time_duration.sum": "time",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM %peak",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM %peak",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "occupancy %",
    "launch__registers_per_thread": "regs/thread",
}
LAUNCHES = 20
SHOWN = 8
RUNNER = """import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("target", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
torch.manual_seed(0)
model = module.Model(*module.get_init_inputs()).cuda().eval()
inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
with torch.no_grad():
    model(*inputs)
torch.cuda.synchronize()
"""


def available(device: str) -> str | None:
    return shutil.which("ncu") if device == "cuda" else None


def parse_csv(text: str) -> dict[str, dict[str, str]]:
    """ncu --csv output -> {kernel name: {metric: 'value unit'}} (first launch of each kernel),
    plus a 'launches' count; lines before the CSV header (==PROF== notes, program output) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"') and "Metric Name" in ln), None)
    if start is None:
        return {}
    kernels: dict[str, dict[str, str]] = {}
    seen: dict[str, set[str]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        name, launch = (row.get("Kernel Name") or "?"), row.get("ID")
        entry = kernels.setdefault(name, {"launches": "0"})
        ids = seen.setdefault(name, set())
        if launch not in ids:
            ids.add(launch)
            entry["launches"] = str(len(ids))
        metric = row.get("Metric Name")
        if metric in METRICS and METRICS[metric] not in entry:
            entry[METRICS[metric]] = f"{row.get('Metric Value', '')} {row.get('Metric Unit', '')}".strip()
    return kernels


def render(kernels: dict[str, dict[str, str]]) -> str:
    def duration(entry: dict[str, str]) -> float:
        try:
            return float(entry.get("time", "0").split()[0].replace(",", ""))
        except ValueError:
            return 0.0

    ordered = sorted(kernels.items(), key=lambda kv: -duration(kv[1]))[:SHOWN]
    columns = ["launches", *METRICS.values()]
    lines = ["Nsight Compute (first launch of each kernel):", "  kernel | " + " | ".join(columns)]
    for name, entry in ordered:
        lines.append(f"  {name[:60]} | " + " | ".join(entry.get(c, "-") for c in columns))
    return "\n".join(lines)


def profile(ncu: str, target: Path, folder: Path, timeout_s: float) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    runner, log = folder / "ncu_runner.py", folder / "ncu.log"
    runner.write_text(RUNNER, encoding="utf-8")
    argv = [ncu, "--csv", "--clock-control", "none", "--launch-count", str(LAUNCHES), "--metrics",
            ",".join(METRICS), sys.executable, str(runner), str(target)]
    with open(log, "wb") as out:
        done = run_in_group(argv, timeout_s, stdout=out, stderr=out, cwd=folder)
    text = log.read_text(encoding="utf-8", errors="replace")
    kernels = parse_csv(text)
    if kernels:
        return render(kernels)
    status = "timed out" if done.timed_out else f"exit {done.returncode}"
    tail = read_tail(log, 300).strip().splitlines()[-1:] or ["no output"]
    return f"Nsight Compute: no metrics ({status}: {tail[0]})"
