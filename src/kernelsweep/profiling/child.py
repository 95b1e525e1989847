"""The child process of `kernelsweep profile`: runs third-party reference code,
so it lives in its own process that the parent can kill at the timeout.

    started with taskcode.child_argv("kernelsweep.profiling.child") + [REQUEST.json, RESULT.json]

REQUEST: {"reference", "device", "precision", "warmup", "iters", "seed"}.
RESULT: the raw measurements, or {"status": "error", "error": {...}} naming
the phase that failed. Reference output goes to this process's stdout/stderr,
which the parent keeps as the log.
"""

from __future__ import annotations

import json
import platform
import sys
import time
import traceback
import warnings
from typing import Any

from kernelsweep.runtime import taskcode


class PhaseError(Exception):
    def __init__(self, phase: str, cause: BaseException):
        super().__init__(f"{phase}: {type(cause).__name__}: {cause}")
        self.phase, self.cause = phase, cause


class Phases:
    """Names the step that failed, so the error record says 'forward (warm-up)
    raised ValueError' rather than just a traceback; and adds up each step's
    seconds (`seconds`, by name), which say where a held device's time went."""

    def __init__(self):
        self.name = "start"
        self.seconds: dict[str, float] = {}
        self._since = 0.0

    def __call__(self, name: str) -> "Phases":
        self.name = name
        return self

    def __enter__(self):
        self._since = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        spent = time.perf_counter() - self._since
        self.seconds[self.name] = round(self.seconds.get(self.name, 0.0) + spent, 3)
        if exc is not None and not isinstance(exc, PhaseError):
            raise PhaseError(self.name, exc) from exc
        return False


def load_reference(path: str):
    module = taskcode.load_module(path, "kernelsweep_reference", register=False)
    missing = taskcode.missing_task_names(module)
    if missing:
        raise AttributeError(f"{path} lacks {', '.join(missing)} (KernelBench format: Model, get_inputs, get_init_inputs)")
    return module


def _to_device(obj, device, dtype):
    import torch
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        return obj.to(dtype) if obj.is_floating_point() else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_device(o, device, dtype) for o in obj)
    if isinstance(obj, dict):
        return {k: _to_device(v, device, dtype) for k, v in obj.items()}
    return obj


def _tf32_flags(torch) -> dict[str, bool]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn": bool(torch.backends.cudnn.allow_tf32)}


def _await_go(go: str) -> None:
    """Say "ready" (the model is built on the host) and wait for the parent's
    "go" on the FIFO `go`: it comes once the parent holds the device. Leaves
    if the parent is gone."""
    import os
    import select

    parent = os.getppid()
    fd = os.open(go, os.O_RDONLY | os.O_NONBLOCK)
    with open(os.path.join(os.path.dirname(go), "ready"), "w"):
        pass
    try:
        while True:
            select.select([fd], [], [], 0.2)
            if os.read(fd, 1):
                return
            if os.getppid() != parent:
                raise RuntimeError("the parent process ended before the device was taken")
            time.sleep(0.02)  # no writer yet: a FIFO without one reads as empty at once
    finally:
        os.close(fd)


def measure(request: dict[str, Any]) -> dict[str, Any]:
    phase = Phases()
    with phase("import torch"):
        import torch
        from kernelsweep.profiling.device_peaks import cpu_name
        from kernelsweep.core.metrics import summarize
        from kernelsweep.profiling.counting import count_flops, count_traffic
        from kernelsweep.profiling.events import analyse

    device, warmup, iters = request["device"], int(request["warmup"]), int(request["iters"])
    dtype = getattr(torch, taskcode.DTYPE_NAMES[request["precision"]])
    with phase("device"):
        if device == "cuda" and not torch.cuda.is_available():  # asks the driver, starts no context
            why = ("this torch build has no CUDA support" if torch.version.cuda is None
                   else "no CUDA device is visible to this process")
            raise RuntimeError(f"--device cuda was requested but {why} (torch {torch.__version__})")

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    with phase("import reference"):
        module = load_reference(request["reference"])
    with phase("get_init_inputs / Model(...)"):  # on the host: under the late claim, before the device is ours
        torch.manual_seed(request["seed"])
        model = module.Model(*module.get_init_inputs())
    if request.get("await_go"):
        with phase("waiting for the device"):
            _await_go(request["await_go"])
    with phase("device"):
        device_name = torch.cuda.get_device_name(0) if device == "cuda" else cpu_name()
    with phase("Model(...).to(device)"):
        model = model.to(device)
        if dtype != torch.float32:
            model = model.to(dtype)
    with phase("get_inputs"):  # made on the device, as the evaluator makes them (a GiB input is not copied)
        torch.manual_seed(request["seed"])
        with torch.device(device):
            inputs = _to_device(list(module.get_inputs()), device, dtype)

    def forward():
        with torch.no_grad():
            return model(*inputs)

    with phase("forward (warm-up)"):
        for _ in range(warmup):
            forward()
        sync()

    with phase("forward (timing)"):
        samples_ms = []
        for _ in range(iters):
            sync()
            start = time.perf_counter()
            forward()
            sync()
            samples_ms.append((time.perf_counter() - start) * 1e3)

    with phase("forward (torch.profiler)"):
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
        with profile(activities=activities) as prof:
            for _ in range(iters):
                forward()
            sync()
        ops = analyse(prof.events(), device, iters)

    with phase("forward (FlopCounterMode)"):
        flops = count_flops(forward)
    with phase("forward (byte counting)"):
        traffic = count_traffic(forward, model, inputs)

    return {
        "status": "ok",
        "device_name": device_name,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "cpu_threads": torch.get_num_threads(),
        "tf32": _tf32_flags(torch) if device == "cuda" else None,
        "time_per_forward_ms": {**summarize(samples_ms), "samples": samples_ms},
        "profile": ops,
        "flops": flops,
        "traffic": traffic,
        "phase_s": phase.seconds,
    }


def main(argv: list[str]) -> int:
    from kernelsweep.core.fileio import write_json
    request_path, result_path = argv
    with open(request_path, encoding="utf-8") as f:
        request = json.load(f)
    try:
        result = measure(request)
    except PhaseError as e:
        traceback.print_exception(e.cause, file=sys.stderr)
        result = {"status": "error",
                  "error": {"type": type(e.cause).__name__, "phase": e.phase, "message": str(e)}}
    write_json(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
