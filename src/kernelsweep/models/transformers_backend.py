"""In-process generation with Hugging Face transformers.

The model is loaded once per process and kept (a stage or a benchmark may call
it many times). A call's n candidates come from one batched `generate()`
(num_return_sequences), seeded with torch.manual_seed(seed) just before, so the
same seed and n reproduce the same text. The sampling configuration is built
from the request alone: a checkpoint's own generation defaults (top_k,
repetition penalty, …) would otherwise change results without being recorded.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from kernelsweep.models.base import Backend, Completion, GenerationFailed, InfrastructureFailure, ModelSetupError
from kernelsweep.models.checkpoint import Location, local_revision, locate, read_marker
from kernelsweep.models.messages import TURN_STOPS, end_of_turn, render_plain_prompt, validate_messages
from kernelsweep.models.records import MACHINE_FAULT

_LOADED: dict[tuple, tuple[Any, Any]] = {}
_LOAD_LOCK = threading.Lock()


def _torch_dtype(name: str):
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def _check_device(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelSetupError(f"device {device!r} requested but CUDA is not available on this machine")
        index = int(device.split(":")[1]) if ":" in device else 0
        if index >= torch.cuda.device_count():
            raise ModelSetupError(
                f"device {device!r} requested but only {torch.cuda.device_count()} GPU(s) are visible")
    elif device not in ("cpu", "auto", "mps"):
        raise ModelSetupError(f"device must be cpu, cuda, cuda:N or auto, got {device!r}")


def load_model(location: Location, *, device: str, dtype: str, revision: str | None = None,
               threads: int | None = None):
    """(model, tokenizer), loaded once per process for the same arguments."""
    cache_key = (location, device, dtype, revision)
    if threads:
        import torch

        # On a shared CPU, fewer threads than cores avoids OpenMP spin-waiting
        # on busy cores (measured 7x faster with 1 thread than 2 on a loaded 2-core machine).
        torch.set_num_threads(threads)
    with _LOAD_LOCK:
        if cache_key in _LOADED:
            return _LOADED[cache_key]
        _check_device(device)
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as e:
            raise ModelSetupError(f"the transformers backend needs `pip install 'kernelsweep[hf]'` ({e})") from e
        kwargs: dict[str, Any] = {"revision": revision}
        if location.gguf_file:
            kwargs["gguf_file"] = location.gguf_file
        try:
            tokenizer = AutoTokenizer.from_pretrained(location.path, **kwargs)
            model = AutoModelForCausalLM.from_pretrained(
                location.path, dtype=_torch_dtype(dtype), device_map="auto" if device == "auto" else None, **kwargs)
        except (OSError, ValueError, ImportError) as e:
            raise ModelSetupError(f"cannot load {location.model_id}: {type(e).__name__}: {e}") from e
        if device != "auto":
            model.to(device)
        model.eval()
        # generate() fills every unset option from the checkpoint's own defaults
        # (top_k, min_p, repetition penalty…). Keep only its special tokens, so a
        # call samples with exactly the parameters it records.
        from transformers import GenerationConfig

        checkpoint_defaults = model.generation_config
        model.generation_config = GenerationConfig(
            eos_token_id=checkpoint_defaults.eos_token_id, bos_token_id=checkpoint_defaults.bos_token_id,
            pad_token_id=checkpoint_defaults.pad_token_id)
        _LOADED[cache_key] = (model, tokenizer)
        return model, tokenizer


class TransformersBackend(Backend):
    kind = "transformers"

    def __init__(self, name: str, spec: dict[str, Any]):
        super().__init__(name, spec)
        self.location = locate(spec["path"], spec.get("gguf_file"))
        self._model = self._tokenizer = None

    @property
    def model_id(self) -> str:
        # A prepared checkpoint names its origin; otherwise the path or hub id.
        marker = read_marker(self.location.path) if self.location.source == "local" else None
        return self.spec.get("model_id") or (marker or {}).get("model_id") or self.location.model_id

    @property
    def revision(self) -> str | None:
        if self.location.source == "hub":
            model = self._loaded()[0]
            return getattr(model.config, "_commit_hash", None) or self.spec.get("revision")
        return local_revision(self.location.path, self.location.gguf_file)

    def _loaded(self):
        if self._model is None:
            self._model, self._tokenizer = load_model(
                self.location, device=self.spec["device"], dtype=self.spec["dtype"], revision=self.spec.get("revision"),
                threads=self.spec.get("threads"))
        return self._model, self._tokenizer

    def uses_chat_template(self) -> bool:
        tokenizer = self._loaded()[1]
        has_template = bool(getattr(tokenizer, "chat_template", None))
        chat = self.spec["chat"]
        if chat is True and not has_template:
            raise ModelSetupError(f"model '{self.name}': chat: true but {self.model_id} has no chat template "
                                  "(use chat: auto or false for a base model)")
        return has_template if chat == "auto" else bool(chat)

    def render(self, messages: list[dict]) -> tuple[dict[str, Any], str, bool]:
        """(request record, text fed to the tokenizer, whether it already holds special tokens)."""
        validate_messages(messages)
        if self.uses_chat_template():
            text = self._tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            return {"messages": messages, "prompt": text}, text, True
        prompt = render_plain_prompt(messages)
        return {"prompt": prompt}, prompt, False

    def _eos_ids(self) -> list[int]:
        model, tokenizer = self._loaded()
        ids = model.generation_config.eos_token_id
        ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
            ids.append(tokenizer.eos_token_id)
        return ids

    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: dict) -> list[Completion]:
        import torch
        from transformers import GenerationConfig

        model, tokenizer = self._loaded()
        request, text, templated = self.render(messages)
        inputs = tokenizer(text, return_tensors="pt", add_special_tokens=not templated).to(model.device)
        prompt_len = int(inputs["input_ids"].shape[1])
        eos_ids = self._eos_ids()
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
        greedy = temperature == 0
        # Greedy decoding is deterministic: one sequence stands for all n.
        rows = 1 if greedy else n
        settings: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": not greedy,
                                    "num_return_sequences": rows}
        if not greedy:
            # top_k=0: no top-k cut (transformers would otherwise default to 50).
            settings.update(temperature=float(temperature), top_p=float(top_p), top_k=0)
        if not templated:
            # A base model's answer ends where it starts the next turn (messages.TURN_STOPS);
            # without this it restates the prompt up to the cap (most of a demo call's time).
            settings["stop_strings"] = list(TURN_STOPS)
        config = GenerationConfig(**settings, eos_token_id=eos_ids, pad_token_id=pad_id,
                                  bos_token_id=tokenizer.bos_token_id)

        torch.manual_seed(seed)
        start = time.perf_counter()
        try:
            with torch.inference_mode():
                out = model.generate(**inputs, generation_config=config, tokenizer=tokenizer)
        except (MemoryError, RuntimeError, ValueError) as e:
            cause = f"{type(e).__name__}: {e}"
            if isinstance(e, MemoryError) or MACHINE_FAULT.search(cause):
                # The machine, not the model: never a result, the job fails and a rerun retries.
                raise InfrastructureFailure(f"model '{self.name}': generation on {self.spec['device']} failed: "
                                            f"{cause}; free memory or the device, then rerun the same "
                                            "command") from e
            raise GenerationFailed(f"generate() failed on {self.model_id}: {cause}") from e
        latency = time.perf_counter() - start

        completions = []
        for i in range(n):
            tokens = out[0 if greedy else i, prompt_len:].tolist()
            while tokens and tokens[-1] == pad_id and pad_id not in eos_ids:
                tokens.pop()  # a row that hit a stop string was padded to the batch's length
            stop = next((j for j, t in enumerate(tokens) if t in eos_ids), None)
            generated = tokens if stop is None else tokens[:stop]
            text = tokenizer.decode(generated, skip_special_tokens=True)
            turn_end = end_of_turn(text) if not templated else None
            if turn_end is not None:  # the heading that stopped it is not part of the answer
                text = text[:turn_end]
            completions.append(Completion(
                text=text,
                finish_reason="length" if stop is None and turn_end is None else "stop",
                prompt_tokens=prompt_len,
                # The end-of-sequence token counts as generated, as servers count it.
                completion_tokens=len(generated) + (stop is not None),
                latency_s=latency,
                request=request,
                seed=seed,
                index=i,
                meta={"batch": {"n": n, "rows": rows, "seed": seed, "index": i},
                      "generation": {**settings, "eos_token_id": eos_ids}},
            ))
        return completions
