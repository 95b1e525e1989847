"""Sampling backends: the model is a swappable, reproducible part of the study.

    backend = load_backend("gemma270m", spec)
    with backend:
        completions = backend.generate(messages, n=4, temperature=0.7, top_p=1.0,
                                       max_tokens=128, seed=seed, key=key)

`generate` returns exactly n `Completion`s (text, finish_reason, prompt_tokens,
completion_tokens, latency_s, request, seed, index, meta) or raises
`ModelSetupError` (the configuration is wrong: stop the run) or
`GenerationFailed` (this call failed after its retries: record it).

Model entry (`config: models: NAME: {...}`)
-------------------------------------------
Every backend:
  backend       str    required: openai | transformers | replay
  max_tokens    int    4096   completion token cap (>= 1)
  temperature   float  0.0    default; a method may override it (0 = greedy)
  top_p         float  1.0    in (0, 1]
  model_id      str    null   the id recorded in results (default: derived from the backend)
  description   str    null   free text, ignored

backend: transformers (in-process Hugging Face transformers)
  path          str    required: checkpoint folder, hub id (org/name), or a .gguf file
  gguf_file     str    null   a .gguf file inside `path` (folder or hub id)
  revision      str    null   hub revision (branch, tag, commit)
  device        str    cpu    cpu | cuda | cuda:N | auto
  dtype         str    float32  float32 | float16 | bfloat16 | auto
  chat          bool|"auto"  auto   auto: the chat template if the tokenizer has one,
                                    else the plain prompt of models.prompting
  prepare       str    null   "embedded": the checkpoint at `path` is made by
                              `kernelsweep prepare-model --out PATH`
  threads       int    null   CPU threads for torch (null: torch's default); 1 is much
                              faster than 2 on a busy 2-core machine

backend: openai (any OpenAI-compatible server)
  base_url      str    required unless server.start   e.g. http://127.0.0.1:8000/v1
  model         str    required unless server.start   the served model name
  api_key_env   str    null   name of the environment variable holding the API key
  chat          bool   true   false: /v1/completions with the rendered plain prompt
  n_per_request bool   true   the server honours n > 1; false: n concurrent requests
  concurrency   int    null   cap on concurrent requests when n_per_request is false (null: n)
  revision      str    null   the served weights' revision, recorded as given
  timeout_s     float  600    per request
  max_retries   int    4      retries on connection errors, timeouts, 408/429/5xx
  backoff_s     float  1.0    first retry delay, doubled each retry (capped at 60 s)
  server        map    {start: false}   {start: true, checkpoint: DIR, port: null,
                       startup_timeout_s: 300, device: cpu, dtype: auto, log: null,
                       threads: null}:
                       start `transformers serve` on 127.0.0.1 for this process

backend: replay (recorded responses, see models.replay)
  path          str    required: a .jsonl file, or a folder of <method>.jsonl files
  method        str    null   which file of a folder to read (default: the call's method)
"""

from __future__ import annotations

from typing import Any

from kernelsweep.models.base import Backend, Completion, GenerationFailed, ModelError, ModelSetupError
from kernelsweep.models.spec import normalise

__all__ = ["Backend", "Completion", "GenerationFailed", "ModelError", "ModelSetupError", "load_backend"]


def load_backend(name: str, spec: dict[str, Any]) -> Backend:
    """The backend for one model entry (validated, defaults filled in). Loading
    weights or starting a server is deferred to the first call."""
    spec = normalise(name, spec)
    if spec["backend"] == "transformers":
        from kernelsweep.models.transformers_backend import TransformersBackend

        return TransformersBackend(name, spec)
    if spec["backend"] == "openai":
        from kernelsweep.models.openai_backend import OpenAIBackend

        return OpenAIBackend(name, spec)
    from kernelsweep.models.replay import ReplayBackend

    return ReplayBackend(name, spec)
