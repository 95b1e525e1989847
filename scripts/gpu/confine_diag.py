"""Which step of the confinement does the GPU driver refuse? Runs cuInit and
a device count inside the launcher once per variant (each leaving one step
out) and prints the CUDA result code. Diagnostic for new machines:
    PYTHONPATH=src python3 scripts/gpu/confine_diag.py"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from kernelsweep.evaluator import confine  # noqa: E402

PROBE = ("import ctypes; c = ctypes.CDLL('libcuda.so.1'); n = ctypes.c_int(-1); r = c.cuInit(0); "
         "r2 = c.cuDeviceGetCount(ctypes.byref(n)); print('cuInit', r, 'count', r2, n.value)")
VARIANTS = [[], ["dev"], ["readonly"], ["proc"], ["user"], ["caps"], ["readonly", "dev"]]

plain = subprocess.run([sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, timeout=60)
print(json.dumps({"without": "unconfined", "rc": plain.returncode, "out": plain.stdout.strip()}))
for without in VARIANTS:
    with tempfile.TemporaryDirectory() as tmp:
        r, w = os.pipe()
        spec = dict(confine.worker_spec(private=Path(tmp), readable=[], writable=[], hide=[], memory_limit=None),
                    pid_fd=w, cwd=tmp, without=without)
        proc = subprocess.run(confine.launcher_argv(spec, [sys.executable, "-I", "-c", PROBE]), pass_fds=[w],
                              capture_output=True, text=True, timeout=60)
        os.close(w)
        os.close(r)
        print(json.dumps({"without": without, "rc": proc.returncode, "out": proc.stdout.strip(),
                          "err": proc.stderr.strip()[-300:]}))
