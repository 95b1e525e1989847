"""Child process of `validate.py`: imports a reference module (third-party
code) and checks it, writing its progress to a JSON file after every stage so
the parent knows how far it got if it has to kill it.

Standalone on purpose (stdlib + torch only, run by path with `python -P`): it
must not import kernelsweep, whose modules could shadow or be shadowed by
whatever the reference imports.

    python -P check_child.py REFERENCE.py RESULT.json DEVICE FORWARD MAX_NUMEL
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback

state: dict = {
    "stage": "start", "ok": None, "reason": None, "forward": None, "skip_reason": None,
    "input_numel": None, "param_numel": None, "forward_ms": None, "output_shapes": None,
    "warnings": [],
}


def save(result_path: str, **updates) -> None:
    state.update(updates)
    tmp = result_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
    os.replace(tmp, result_path)


def describe(exc: BaseException, reference_path: str) -> str:
    """`Type: message (line N of the reference)`: the line is the deepest frame in
    the reference itself, which is where a reader should look."""
    line = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if os.path.abspath(frame.filename) == reference_path:
            line = frame.lineno
    if isinstance(exc, SyntaxError) and exc.lineno and line is None:
        line = exc.lineno
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    where = f" (line {line} of the reference)" if line else ""
    return f"{type(exc).__name__}: {text}{where}" if text else f"{type(exc).__name__}{where}"


def tensors_in(value, torch) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v, torch)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v, torch)]
    return []


def main(reference_path: str, result_path: str, device: str, forward: str, max_numel: int) -> int:
    reference_path = os.path.abspath(reference_path)

    def fail(reason: str) -> int:
        save(result_path, ok=False, reason=reason)
        return 0

    save(result_path, stage="environment")
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        save(result_path, ok=False, reason=f"device {device} requested but torch sees no CUDA device",
             environment_error=True)
        return 0

    save(result_path, stage="import")
    try:
        spec = importlib.util.spec_from_file_location("kernelsweep_reference", reference_path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # SystemExit and KeyboardInterrupt included: it is foreign code
        return fail(f"import failed: {describe(e, reference_path)}")

    save(result_path, stage="interface")
    model_cls = getattr(module, "Model", None)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if getattr(module, n, None) is None]
    if missing:
        return fail(f"missing {', '.join(missing)} (a KernelBench reference defines Model, get_inputs and get_init_inputs)")
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        return fail(f"Model is not a torch.nn.Module subclass (got {type(model_cls).__name__})")
    for name in ("get_inputs", "get_init_inputs"):
        if not callable(getattr(module, name)):
            return fail(f"{name} is not a function")

    save(result_path, stage="init_inputs")
    try:
        init_inputs = module.get_init_inputs()
    except BaseException as e:
        return fail(f"get_init_inputs() raised {describe(e, reference_path)}")
    if not isinstance(init_inputs, (list, tuple)):
        return fail(f"get_init_inputs() must return a list, got {type(init_inputs).__name__}")

    # Size inputs and parameters on the meta device: shapes without allocating
    # (KernelBench inputs run to gigabytes). Some references cannot run on meta
    # (they call .item(), numpy, …); then the size is unknown, not an error.
    save(result_path, stage="sizing")
    size_error = None
    try:
        with torch.device("meta"):
            meta_inputs = module.get_inputs()
            meta_model = module.Model(*init_inputs)
        if not isinstance(meta_inputs, (list, tuple)):
            return fail(f"get_inputs() must return a list, got {type(meta_inputs).__name__}")
        input_numel = sum(t.numel() for t in tensors_in(list(meta_inputs), torch))
        param_numel = sum(p.numel() for p in meta_model.parameters()) + sum(b.numel() for b in meta_model.buffers())
        save(result_path, input_numel=input_numel, param_numel=param_numel)
        del meta_inputs, meta_model
    except Exception as e:
        size_error = describe(e, reference_path)

    if forward == "never":
        save(result_path, ok=True, forward="skipped", skip_reason="forward check disabled")
        return 0
    if forward == "auto" and device == "cpu":
        if size_error is not None:
            save(result_path, ok=True, forward="skipped",
                 skip_reason=f"inputs could not be sized on the meta device ({size_error})")
            return 0
        total = state["input_numel"] + state["param_numel"]
        if total > max_numel:
            save(result_path, ok=True, forward="skipped",
                 skip_reason=f"inputs and parameters hold {total:,} elements, above the CPU bound {max_numel:,}")
            return 0

    save(result_path, stage="construct")
    torch.manual_seed(0)
    try:
        model = module.Model(*module.get_init_inputs()).to(device)
    except BaseException as e:
        return fail(f"Model(*get_init_inputs()) raised {describe(e, reference_path)}")
    try:
        inputs = module.get_inputs()
    except BaseException as e:
        return fail(f"get_inputs() raised {describe(e, reference_path)}")
    if not isinstance(inputs, (list, tuple)):
        return fail(f"get_inputs() must return a list, got {type(inputs).__name__}")
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]

    save(result_path, stage="forward")
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    try:
        with torch.no_grad():
            output = model(*inputs)  # first call: lazy initialisation, caches
            sync()
            # A rough figure, not a benchmark: median of up to 5 warm calls, at most ~1 s.
            times_ms: list[float] = []
            while len(times_ms) < 5 and sum(times_ms) < 1000:
                start = time.perf_counter()
                model(*inputs)
                sync()
                times_ms.append((time.perf_counter() - start) * 1e3)
            forward_ms = sorted(times_ms)[len(times_ms) // 2]
    except BaseException as e:
        return fail(f"forward raised {describe(e, reference_path)}")
    outputs = tensors_in(output, torch)
    if not outputs:
        return fail(f"forward returned no tensor (got {type(output).__name__})")
    warnings = []
    if any(t.is_floating_point() or t.is_complex() for t in outputs) and not all(
        bool(torch.isfinite(t).all()) for t in outputs if t.is_floating_point() or t.is_complex()
    ):
        warnings.append("output holds NaN or Inf")
    save(result_path, ok=True, forward="ran", forward_ms=round(forward_ms, 4),
         output_shapes=[list(t.shape) for t in outputs], warnings=warnings)
    return 0


if __name__ == "__main__":
    ref, out, dev, fwd, bound = sys.argv[1:6]
    sys.exit(main(ref, out, dev, fwd, int(bound)))
