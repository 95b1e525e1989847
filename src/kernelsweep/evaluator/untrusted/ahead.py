"""Worker: build ahead what a candidate builds only when it is constructed or
called. Many candidates call load_inline/load in `__init__` or on the first
`forward`, not at import, so the compile worker never sees those builds and the
compiler would run inside the evaluation, with the device held.

This worker imports the candidate and the reference, then constructs ModelNew
from the reference's init inputs and calls it once on the reference's inputs,
all on PyTorch's meta device: shapes without data, no GPU, no arithmetic. That
runs the candidate's own Python down to its build calls, which the build hooks
send to the same content-keyed cache the evaluation reads. On the CUDA target
`torch.cuda.is_available()` answers True here (the GPUs are only hidden from
this worker), and every meta tensor answers `is_cuda` True: candidates
commonly build only behind one of these tests (CUDA-L1's L1-047 behind
`x.is_cuda`).

It decides nothing. What stops it after (or before) the builds — a kernel that
meta tensors cannot feed, a crash, the run limit — is no one's verdict: the
evaluation runs the same code for real and judges it. Its builds are keyed by
their arguments, so a build whose arguments differ for real (a flag read from
the device) is simply built again then, and the record shows it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelsweep.runtime import taskcode
from kernelsweep.evaluator.untrusted import frame
from kernelsweep.evaluator.untrusted.buildhooks import BuildHooks


def _pretend_a_device() -> None:
    torch.cuda.is_available = lambda: True
    # Tensor's own property shadows the C one for every tensor here (all on the meta device).
    torch.Tensor.is_cuda = property(lambda self: self.is_meta or self.device.type == "cuda")


def body(ctx: frame.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    ctx.hooks = BuildHooks(cfg["build_root"], ctx.channel, cfg.get("cuda_arch")).install()
    ctx.candidate_file = str(Path(cfg["candidate"]).resolve())
    if cfg["device"] == "cuda":
        _pretend_a_device()
    reached, stopped_by = "import", None
    try:
        ctx.phase("import")
        candidate = taskcode.load_module(ctx.candidate_file, "kernelsweep_candidate", register=True)
        reference = taskcode.load_module(cfg["reference"], "kernelsweep_reference_inputs", register=False)
        with torch.device("meta"):
            init = list(reference.get_init_inputs())
            reached = "construct"
            ctx.phase("construct")
            model = candidate.ModelNew(*init)
            inputs = list(reference.get_inputs())
            reached = "forward"
            ctx.phase("forward")
            model(*inputs)
        reached = "done"
    except BaseException as exc:  # noqa: BLE001 - recorded; the evaluation judges the candidate
        stopped_by = f"{type(exc).__name__}: {str(exc)[:300]}"
    return {"builds": ctx.hooks.summary(), "reached": reached, "stopped_by": stopped_by}


if __name__ == "__main__":
    frame.run(body)
