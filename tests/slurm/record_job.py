"""One step of the tiny SLURM test workflow: derive a value from the inputs and
record where the step ran (SLURM job, partition, visible GPU, timing slot).

    python record_job.py OUT STEP [INPUT ...]

`value` depends only on the step and its inputs' values, so a SLURM run and a
local run must agree on it; `where` tells them apart.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

# THREADS: what Snakemake gave the rule, where the Snakefile passes it on.
WHERE_KEYS = ("SLURM_JOB_ID", "SLURM_JOB_PARTITION", "CUDA_VISIBLE_DEVICES", "KERNELSWEEP_GPU_SLOT", "THREADS")


def main(argv: list[str]) -> int:
    out, step, inputs = Path(argv[0]), argv[1], argv[2:]
    upstream = [json.loads(Path(p).read_text())["value"] for p in inputs]
    digest = hashlib.sha256(json.dumps([step, upstream]).encode()).hexdigest()[:16]
    record = {
        "step": step,
        "value": digest,
        "where": {key: os.environ.get(key) for key in WHERE_KEYS},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
