"""Child process of `validate.py`: imports a reference module (third-party
code) and checks it, writing its progress to a JSON file after every stage so
the parent knows how far it got if it has to kill it.

Started like every child that runs task code (taskcode.child_argv: isolated
mode, this kernelsweep first on sys.path, so nothing beside the reference can
shadow a module), and loads it with taskcode.load_module:

    child_argv("kernelsweep.tasks.check_child") + [REFERENCE.py, RESULT.json, DEVICE, FORWARD, MAX_NUMEL, MEMORY_MB]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback

from kernelsweep.runtime import taskcode

state: dict = {
    "stage": "start", "ok": None, "reason": None, "forward": None, "skip_reason": None,
    "input_numel": None, "param_numel": None, "forward_ms": None, "output_shapes": None,
    "warnings": [], "degenerate": None, "degenerate_reason": None,
}


class Verdict(Exception):
    """Ends the check: `ok` False (invalid, with a reason) or True (valid, the
    forward check skipped for `reason`)."""

    def __init__(self, ok: bool, reason: str):
        super().__init__(reason)
        self.ok, self.reason = ok, reason


def invalid(reason: str) -> Verdict:
    return Verdict(False, reason)


def skipped(reason: str) -> Verdict:
    return Verdict(True, reason)


class Checker:
    def __init__(self, reference_path: str, result_path: str, device: str, forward: str,
                 max_numel: int, memory_mb: int):
        self.reference_path = os.path.abspath(reference_path)
        self.result_path = result_path
        self.device, self.forward, self.max_numel, self.memory_mb = device, forward, max_numel, memory_mb
        # On the CPU in auto mode the forward check is for small references only:
        # it runs under an address-space cap, and running out of it means "skip".
        self.small_only = forward == "auto" and device == "cpu"

    def save(self, **updates) -> None:
        state.update(updates)
        tmp = self.result_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(tmp, self.result_path)

    def run(self) -> None:
        try:
            self.check()
        except Verdict as v:
            if v.ok:
                self.save(ok=True, forward="skipped", skip_reason=v.reason)
            else:
                self.save(ok=False, reason=v.reason)

    def describe(self, exc: BaseException) -> str:
        """`Type: message (line N of the reference)`: the deepest frame in the
        reference itself, which is where a reader should look."""
        line = None
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.abspath(frame.filename) == self.reference_path:
                line = frame.lineno
        if isinstance(exc, SyntaxError) and exc.lineno and line is None:
            line = exc.lineno
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        where = f" (line {line} of the reference)" if line else ""
        return f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"

    def call(self, what: str, fn, *args):
        """Run reference code; an allocation failure under the cap skips the
        forward check, any other exception makes the reference invalid."""
        try:
            return fn(*args)
        except BaseException as e:  # SystemExit and KeyboardInterrupt included: it is foreign code
            if self.small_only and is_allocation_failure(e):
                raise skipped(f"{what} needs more than {self.memory_mb} MiB on the CPU "
                              f"(the auto-mode memory cap)") from None
            raise invalid(f"{what} raised {self.describe(e)}") from None

    def check(self) -> None:
        self.save(stage="environment")
        import torch

        if self.device.startswith("cuda") and not torch.cuda.is_available():
            self.save(environment_error=True)
            raise invalid(f"device {self.device} requested but torch sees no CUDA device")

        self.save(stage="import")
        try:
            module = taskcode.load_module(self.reference_path, "kernelsweep_reference", register=True)
        except BaseException as e:
            raise invalid(f"import failed: {self.describe(e)}") from None

        self.save(stage="interface")
        missing = taskcode.missing_task_names(module)
        if missing:
            raise invalid(f"missing {', '.join(missing)} "
                          "(a KernelBench reference defines Model, get_inputs and get_init_inputs)")
        if not (isinstance(module.Model, type) and issubclass(module.Model, torch.nn.Module)):
            raise invalid(f"Model is not a torch.nn.Module subclass (got {type(module.Model).__name__})")
        for name in ("get_inputs", "get_init_inputs"):
            if not callable(getattr(module, name)):
                raise invalid(f"{name} is not a function")

        self.save(stage="init_inputs")
        init_inputs = self.call("get_init_inputs()", module.get_init_inputs)
        if not isinstance(init_inputs, (list, tuple)):
            raise invalid(f"get_init_inputs() must return a list, got {type(init_inputs).__name__}")

        self.size_on_meta(module, init_inputs, torch)
        if self.forward == "never":
            raise skipped("forward check disabled")

        if self.small_only:
            warm_up_threads(torch)  # thread stacks and malloc arenas are mapped before the cap
        with address_space_cap(self.memory_mb << 20) if self.small_only else contextlib.nullcontext():
            self.run_forward(module, torch)

    def size_on_meta(self, module, init_inputs, torch) -> None:
        """Count input and parameter elements on the meta device: shapes without
        allocating (KernelBench inputs run to gigabytes). References that cannot
        run on meta (.item(), numpy, …) are sized later, for real, under the cap."""
        self.save(stage="sizing")
        try:
            with torch.device("meta"):
                inputs = module.get_inputs()
                model = module.Model(*init_inputs)
        except Exception:
            return
        if isinstance(inputs, (list, tuple)):
            self.save(input_numel=numel(inputs, torch), param_numel=param_numel(model))
            self.raise_if_too_big()

    def raise_if_too_big(self) -> None:
        total = state["input_numel"] + state["param_numel"]
        if self.small_only and total > self.max_numel:
            raise skipped(f"inputs and parameters hold {total:,} elements, above the CPU bound {self.max_numel:,}")

    def run_forward(self, module, torch) -> None:
        self.save(stage="construct")
        torch.manual_seed(0)
        model = self.call("Model(*get_init_inputs())", lambda: module.Model(*module.get_init_inputs()).to(self.device))
        inputs = self.call("get_inputs()", module.get_inputs)
        if not isinstance(inputs, (list, tuple)):
            raise invalid(f"get_inputs() must return a list, got {type(inputs).__name__}")
        if state["input_numel"] is None:  # not sized on meta
            self.save(input_numel=numel(inputs, torch), param_numel=param_numel(model))
            self.raise_if_too_big()
        inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

        self.save(stage="forward")
        sync = torch.cuda.synchronize if self.device.startswith("cuda") else (lambda: None)

        def forward_and_time():
            # A rough figure, not a benchmark: the median of up to 5 warm calls
            # within ~1 s; a reference slower than that is run (and timed) once.
            with torch.no_grad():
                start = time.perf_counter()
                output = model(*inputs)  # the cold call: lazy initialisation, caches
                sync()
                cold_ms = (time.perf_counter() - start) * 1e3
                warm_ms: list[float] = []
                while len(warm_ms) < 5 and cold_ms + sum(warm_ms) < 1000:
                    start = time.perf_counter()
                    model(*inputs)
                    sync()
                    warm_ms.append((time.perf_counter() - start) * 1e3)
            return output, sorted(warm_ms)[len(warm_ms) // 2] if warm_ms else cold_ms

        output, forward_ms = self.call("forward", forward_and_time)
        outputs = tensors_in(output, torch)
        if not outputs:
            raise invalid(f"forward returned no tensor (got {type(output).__name__})")
        floating = [t for t in outputs if t.is_floating_point() or t.is_complex()]
        warnings = [] if all(bool(torch.isfinite(t).all()) for t in floating) else ["output holds NaN or Inf"]
        # fp32's absolute tolerance (evaluator/settings.TOLERANCES): below it, all zeros would pass.
        if floating and all(float(t.detach().abs().nan_to_num(0.0).max()) <= DEGENERATE_ATOL for t in floating
                            if t.numel()):
            warnings.append("degenerate tolerance: every output is within the fp32 atol of zero, so zeros "
                            "would pass; the evaluator judges this task with a distinguishing atol "
                            "(docs/taxonomy.md)")
        # Saved before the dependence check: a reference too slow for its extra draws stays valid.
        self.save(ok=True, forward="ran", forward_ms=round(forward_ms, 4),
                  output_shapes=[list(t.shape) for t in outputs], warnings=warnings, stage="dependence")
        self.check_dependence(module, model, outputs, torch)

    def check_dependence(self, module, model, first: list, torch) -> None:
        """Is the task degenerate, its outputs the same whatever the inputs?
        The model at its default init (seed 0) runs on more input draws
        (get_inputs() under DEPENDENCE_SEEDS); the evaluator's rule for a constant reference
        (`constant_reference`, docs/taxonomy.md): every draw's outputs within
        the fp32 tolerance of the first's, judged at the distinguishing atol
        where zeros would pass (so a tiny but input-dependent output varies).
        A degenerate task's matching candidates are `indistinguishable`."""
        draws = [first]
        try:
            for seed in DEPENDENCE_SEEDS:
                torch.manual_seed(seed)
                inputs = self.call("get_inputs()", module.get_inputs)
                inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
                with torch.no_grad():
                    draws.append(tensors_in(self.call(f"forward on input draw {seed}", model, *inputs), torch))
        except Verdict as v:
            if not v.ok:
                raise
            self.save(degenerate_reason=f"not checked: {v.reason}")  # out of memory under the cap
            return
        # Per draw, its largest finite |value|; where zeros would pass every draw, the evaluator's
        # distinguishing atol: a thousandth of the smallest of them (evaluator/compare.py).
        magnitudes = [max((magnitude(t, torch) for t in outputs if t.is_floating_point() and t.numel()), default=0.0)
                      for outputs in draws]
        atol = DEGENERATE_ATOL
        if max(magnitudes) <= DEGENERATE_ATOL and min(magnitudes) > 0:
            atol = min(atol, min(magnitudes) * 1e-3)
        if any(not same_outputs(first, outputs, atol, DEGENERATE_ATOL, torch) for outputs in draws[1:]):
            self.save(degenerate=False)
            return
        floating = any(t.is_floating_point() for t in first)
        what = ("every output is zero" if floating and max(magnitudes) == 0
                else f"the outputs are the same within atol={atol:.3g}, rtol={DEGENERATE_ATOL:g}")
        self.save(degenerate=True, degenerate_reason=(
            f"the outputs do not depend on the inputs: at the default init, on {len(draws)} input draws "
            f"{what}, so a constant answer would match"))


DEGENERATE_ATOL = 1e-4  # the child may not import kernelsweep; tests/tasks checks it equals the evaluator's
# Input draws beyond the first for the dependence check (get_inputs() under these seeds).
DEPENDENCE_SEEDS = (1, 2)


def magnitude(t, torch) -> float:
    """Largest finite |value| of a tensor (0 when it has none)."""
    finite = t.detach().abs()[torch.isfinite(t.detach())]
    return float(finite.max()) if finite.numel() else 0.0


def same_outputs(a: list, b: list, atol: float, rtol: float, torch) -> bool:
    """Outputs alike under torch.allclose's rule (NaN where the other is NaN),
    as evaluator/compare.py compares them; a different structure differs."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x, y, atol=atol, rtol=rtol, equal_nan=True):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def tensors_in(value, torch) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v, torch)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v, torch)]
    return []


def numel(values, torch) -> int:
    return sum(t.numel() for t in tensors_in(list(values), torch))


def param_numel(model) -> int:
    return sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())


def is_allocation_failure(e: BaseException) -> bool:
    text = str(e)
    return isinstance(e, MemoryError) or "can't allocate memory" in text or "not enough memory" in text


def warm_up_threads(torch) -> None:
    """Start torch's intra-op threads (and their malloc arenas) before the
    address-space cap, which would otherwise count them against the reference."""
    a = torch.ones(256, 256)
    (a @ a).sum()
    torch.nn.functional.conv2d(torch.ones(1, 4, 16, 16), torch.ones(4, 4, 3, 3)).sum()


@contextlib.contextmanager
def address_space_cap(headroom_bytes: int):
    """Allow the process `headroom_bytes` more virtual memory than it maps now
    (Linux); elsewhere, no cap."""
    try:
        import resource

        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, StopIteration):
        yield
        return
    limit = used + headroom_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


if __name__ == "__main__":
    ref, out, dev, fwd, bound, memory_mb = sys.argv[1:7]
    Checker(ref, out, dev, fwd, int(bound), int(memory_mb)).run()
