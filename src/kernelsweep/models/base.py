"""What every sampling backend shares: the completion record, the interface and
the three kinds of failure: the configuration is wrong (stop), the call was
answered with a refusal (a result), the call was never answered (an outage,
never a result)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any


class ModelError(RuntimeError):
    """A model problem with a message meant for the user (no traceback needed)."""


class ModelSetupError(ModelError):
    """The model cannot be used as configured (bad spec, missing checkpoint,
    unknown model name, rejected credentials, missing replay record). Retrying
    cannot help: the stage exits non-zero so the run stops with this message."""


class GenerationFailed(ModelError):
    """The server answered this call with a refusal that another attempt would
    repeat (an HTTP 4xx such as a prompt longer than the context). It is the
    model's outcome: the stage records it as a failed candidate and the run goes on."""


class InfrastructureFailure(ModelError):
    """The call never got an answer: connection refused or reset, DNS, HTTP
    5xx/429 or a client timeout after waiting (`wait_s`), an invalid reply,
    the local generation running out of memory. Never a result: the stage
    writes nothing and exits non-zero, so the cell stays unfinished and the
    next run retries it."""


@dataclass
class Completion:
    text: str
    finish_reason: str | None        # "stop" | "length" | a server's own value | None (unknown)
    prompt_tokens: int | None        # tokens of the prompt (the same for every candidate of a call)
    completion_tokens: int | None    # tokens generated for this candidate; None when unknown
    latency_s: float | None          # wall time of the request that produced it; None for replay
    request: dict[str, Any]          # what was sent: {"messages": [...]} and/or {"prompt": "..."}
    seed: int | None                 # seed actually used for the request that produced it
    index: int = 0                   # position among the call's n candidates
    meta: dict[str, Any] = field(default_factory=dict)  # backend specifics (batching, replay source…)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Backend(ABC):
    """A named model. `generate` returns exactly `n` completions or raises
    ModelSetupError / GenerationFailed / InfrastructureFailure."""

    kind: str = ""  # "openai" | "transformers" | "replay" | "corpus"

    def __init__(self, name: str, spec: dict[str, Any]):
        self.name = name
        self.spec = spec

    @property
    @abstractmethod
    def model_id(self) -> str:
        """What the model is: a hub id, a checkpoint path, a served model name."""

    @property
    def revision(self) -> str | None:
        """Which exact weights (commit hash, checkpoint digest); None when unknown."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": self.kind, "model_id": self.model_id, "revision": self.revision}

    @abstractmethod
    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: dict) -> list[Completion]:
        """Sample n completions of one request.

        `seed` is the seed of the call (candidate 0); a backend that samples the
        candidates in separate requests seeds candidate i with
        `kernelsweep.core.seeds.candidate_seeds(key, n, seed)[i]`. `key` is the cell
        identity {model, method, task, sample, turn, role}."""

    def close(self) -> None:
        """Release what the backend holds (a server it started)."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
