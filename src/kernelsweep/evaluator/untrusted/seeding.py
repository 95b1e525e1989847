"""Seeds and inputs in a worker: get_inputs() made on the device under a
seed, cast to the evaluation precision; the same seed gives the same values
in every worker on the same device (docs/taxonomy.md, "How inputs are made")."""

from __future__ import annotations

import contextlib
import random
import types
from typing import Any

import torch

from kernelsweep.runtime import taskcode
from kernelsweep.evaluator.untrusted.trees import map_tensors, to_device


DTYPES = {name: getattr(torch, dtype) for name, dtype in taskcode.DTYPE_NAMES.items()}


def set_seed(seed: int) -> None:
    _fresh_cuda_generators()
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    try:
        import numpy as np
        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def _fresh_cuda_generators() -> None:
    """A CUDA graph capture that fails (cuDNN failing to allocate inside it, a
    host sync while capturing) never ends its default generator's capture, and
    every later draw on that generator raises "Offset increment outside graph
    capture". Before each seeding the default generators get a fresh state, so a
    candidate's failed capture cannot break the draws that follow it."""
    if not torch.cuda.is_initialized():
        return
    for index, generator in enumerate(torch.cuda.default_generators):
        generator.graphsafe_set_state(torch.Generator(device=f"cuda:{index}").graphsafe_get_state())


def construct(cls: Any, init: list, seed: int, on: torch.device | None = None) -> Any:
    """CLS(*INIT) under SEED (Model and ModelNew alike, so both draw the same
    weights), its tensors made ON that device where one is given."""
    set_seed(seed)
    with contextlib.nullcontext() if on is None else on:
        return cls(*init)


def cast_precision(obj: Any, precision: str) -> Any:
    """Floating tensors to the evaluation precision; integer tensors unchanged."""
    dtype = DTYPES[precision]
    return map_tensors(obj, lambda t: t.to(dtype) if t.is_floating_point() else t)


def make_inputs(module: types.ModuleType, seed: int, precision: str, device: torch.device) -> list:
    """get_inputs() under `seed`, created on the device itself (a GiB-sized
    input is never built on the host and copied over); tensors it places on
    the host explicitly are moved. The same seed gives the same values in
    every worker on the same device."""
    set_seed(seed)
    with torch.device(device):
        inputs = module.get_inputs()
    return list(cast_precision(to_device(list(inputs), device), precision))


def make_init_inputs(module: types.ModuleType, seed: int) -> list:
    set_seed(seed)
    init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
    return list(init)
