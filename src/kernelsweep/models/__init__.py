"""Sampling backends: the model is a swappable, reproducible part of the study.

    backend = load_backend("gemma270m", spec)
    with backend:
        completions = backend.generate(messages, n=4, temperature=0.7, top_p=1.0,
                                       max_tokens=128, seed=seed, key=key)

`generate` returns exactly n `Completion`s (text, finish_reason, prompt_tokens,
completion_tokens, latency_s, request, seed, index, meta) or raises
`ModelSetupError` (the configuration is wrong: stop the run),
`GenerationFailed` (the server refused this request: record it) or
`InfrastructureFailure` (no answer: fail the job, record nothing, a rerun retries).

Model entry (`config: models: NAME: {...}`): its keys, types, ranges and
per-backend defaults are `$defs/model` of workflow/schemas/config.schema.yaml,
shown as tables in config/README.md; kernelsweep.models.spec applies them.
"""

from __future__ import annotations

from typing import Any

from kernelsweep.models.base import (Backend, Completion, GenerationFailed, InfrastructureFailure, ModelError,
                                     ModelSetupError)
from kernelsweep.models.spec import normalise

__all__ = ["Backend", "Completion", "GenerationFailed", "InfrastructureFailure", "ModelError", "ModelSetupError",
           "load_backend"]


def load_backend(name: str, spec: dict[str, Any]) -> Backend:
    """The backend for one model entry (validated, defaults filled in). Loading
    weights or starting a server is deferred to the first call. Inside a local
    workflow run (KERNELSWEEP_RUN_SERVERS set) an in-process model is served once
    for the whole run (kernelsweep.models.run_server)."""
    spec = normalise(name, spec)
    from kernelsweep.models.run_server import shared_or_none

    shared = shared_or_none(name, spec)  # the run's one server for this model, when the workflow runs locally
    if shared is not None:
        return shared
    if spec["backend"] == "transformers":
        from kernelsweep.models.transformers_backend import TransformersBackend

        return TransformersBackend(name, spec)
    if spec["backend"] == "openai":
        from kernelsweep.models.openai_backend import OpenAIBackend

        return OpenAIBackend(name, spec)
    if spec["backend"] == "corpus":
        from kernelsweep.models.corpus import CorpusBackend

        return CorpusBackend(name, spec)
    from kernelsweep.models.replay import ReplayBackend

    return ReplayBackend(name, spec)
