"""Any OpenAI-compatible server: vLLM, SGLang, TGI, llama.cpp, `transformers serve`.

Chat models get /chat/completions; a base model (`chat: false`) gets
/completions with the messages rendered as one prompt. The n candidates come
from one request (`n_per_request: true`) or from n concurrent requests, each
with its own seed. Connection errors, timeouts, 429 and 5xx are retried with
exponential backoff for up to `wait_s`; a call that still gets no answer raises
InfrastructureFailure (the job fails, nothing is recorded, a rerun retries).
A 404, an unknown model name or rejected credentials stop the run with a clear
message; another 4xx is the server refusing this request, a recorded result
(GenerationFailed).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from kernelsweep.models.base import Backend, Completion, GenerationFailed, InfrastructureFailure, ModelSetupError
from kernelsweep.models.checkpoint import local_revision, read_marker
from kernelsweep.models.messages import render_plain_prompt, validate_messages
from kernelsweep.core.seeds import candidate_seeds

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 60.0


def _server_message(reply: httpx.Response) -> str:
    try:
        body = reply.json()
    except ValueError:
        return reply.text[:500]
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message", body)))
        if isinstance(error, dict):
            error = error.get("message", error)
        return str(error)[:500]
    return str(body)[:500]


class OpenAIBackend(Backend):
    kind = "openai"

    def __init__(self, name: str, spec: dict[str, Any]):
        super().__init__(name, spec)
        self.server = None
        self._model_checked = False
        self._lock = threading.Lock()
        headers = {}
        if spec.get("api_key_env"):
            key = os.environ.get(spec["api_key_env"])
            if not key:
                raise ModelSetupError(f"model '{name}': environment variable {spec['api_key_env']} "
                                      "(api_key_env) is not set")
            headers["Authorization"] = f"Bearer {key}"
        timeout = httpx.Timeout(float(spec["timeout_s"]), connect=min(10.0, float(spec["timeout_s"])))
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self._base_url = (spec.get("base_url") or "").rstrip("/")
        self._model = spec.get("model")

    # ---- identity ----

    @property
    def model_id(self) -> str:
        if self.spec.get("model_id"):
            return self.spec["model_id"]
        if self.server is not None and self.server.location.source == "local":
            # A prepared checkpoint names its origin better than its local path.
            marker = read_marker(self.server.location.path) or {}
            if marker.get("model_id"):
                return marker["model_id"]
        return self._model or str(self.spec["server"]["checkpoint"])

    @property
    def revision(self) -> str | None:
        if self.spec.get("revision"):
            return self.spec["revision"]  # an external server: what its operator declared
        if self.server is not None and self.server.location.source != "hub":
            return local_revision(self.server.location.path, self.server.location.gguf_file)
        return None

    # ---- connection ----

    def _ensure_server(self) -> None:
        server_spec = self.spec["server"]
        if self.server is not None or not server_spec.get("start"):
            return
        from kernelsweep.models.server import LocalServer

        self.server = LocalServer(
            str(server_spec["checkpoint"]), port=server_spec.get("port"), device=server_spec["device"],
            dtype=server_spec["dtype"], startup_timeout_s=float(server_spec["startup_timeout_s"]),
            log_path=server_spec.get("log"), threads=server_spec.get("threads"))
        self.server.start()
        self._base_url = self.server.base_url
        self._model = self.server.model_id

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
        self._client.close()

    def _request(self, method: str, path: str, body: dict | None = None) -> httpx.Response:
        """One request, retried while the server gives no answer (transport error,
        timeout, 408/429/5xx): at least max_retries times and for as long as
        wait_s after the first failure, so a restarting server is waited for.
        Any other status is an answer and is returned as is."""
        url = f"{self._base_url}{path}"
        retries, wait_s = int(self.spec["max_retries"]), float(self.spec["wait_s"])
        first_failure, attempt = None, 0
        while True:
            try:
                reply = self._client.request(method, url, json=body)
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e or 'no detail'}"
                retry_after = None
            else:
                if reply.status_code not in RETRY_STATUS:
                    return reply
                last = f"HTTP {reply.status_code}: {_server_message(reply)}"
                retry_after = reply.headers.get("retry-after")
            now = time.monotonic()
            first_failure = now if first_failure is None else first_failure
            waited = now - first_failure
            delay = min(MAX_BACKOFF_S, float(self.spec["backoff_s"]) * 2 ** attempt)
            if retry_after:
                try:
                    delay = min(MAX_BACKOFF_S, max(delay, float(retry_after)))
                except ValueError:
                    pass
            if attempt >= retries:
                if waited + delay > wait_s:
                    break
                delay = max(delay, 0.1)  # backoff_s 0: still no busy loop while waiting
            if attempt == 0:
                print(f"model '{self.name}': no answer from {url} ({last}); retrying for up to "
                      f"{max(wait_s, 0):.0f} s (wait_s)", file=sys.stderr, flush=True)
            time.sleep(delay)
            attempt += 1
        raise InfrastructureFailure(
            f"model '{self.name}': no answer from the server at {self._base_url} ({method} {url}) after "
            f"{attempt + 1} attempt(s) over {waited:.0f} s: {last}. Nothing was recorded for this call. "
            f"Start the server or fix models.{self.name}.base_url (`kernelsweep check --configfile FILE` "
            "tests it), then rerun the same command: finished cells are kept, this one is redone")

    def _check_model(self) -> None:
        """Fail early and clearly when the server does not serve the model."""
        with self._lock:
            if self._model_checked:
                return
            reply = self._request("GET", "/models")
            if reply.status_code == 200:
                try:
                    served = [m["id"] for m in reply.json()["data"]]
                except (ValueError, KeyError, TypeError):
                    served = None  # an unusual listing: let the completion call decide
                if served is not None and self._model not in served:
                    raise ModelSetupError(
                        f"model '{self.name}': {self._base_url} does not serve '{self._model}'; it serves: "
                        f"{', '.join(served) or 'nothing'}")
            elif reply.status_code in (401, 403):
                raise self._auth_error(reply)
            # Other statuses (404: no listing endpoint) leave the decision to the call.
            self._model_checked = True

    def _auth_error(self, reply: httpx.Response) -> ModelSetupError:
        env = self.spec.get("api_key_env")
        hint = f"check the key in ${env}" if env else "set api_key_env to the variable that holds the key"
        return ModelSetupError(f"model '{self.name}': {self._base_url} rejected the credentials "
                               f"(HTTP {reply.status_code}: {_server_message(reply)}); {hint}")

    # ---- generation ----

    def _post(self, body: dict) -> dict:
        path = "/chat/completions" if self.spec["chat"] else "/completions"
        reply = self._request("POST", path, body)
        if reply.status_code == 200:
            try:
                data = reply.json()
            except ValueError:
                data = None
            if isinstance(data, dict):
                return data
            # A broken reply (a proxy's error page, a dying server) is no answer from the model.
            raise InfrastructureFailure(f"model '{self.name}': {self._base_url}{path} returned invalid JSON "
                                        f"(not a completion object): {reply.text[:200]!r}; rerun the same command "
                                        "once the server is healthy")
        if reply.status_code == 404:
            raise ModelSetupError(
                f"model '{self.name}': {self._base_url}{path} answered 404 ({_server_message(reply)}): "
                f"unknown model '{self._model}' or the server has no {path} endpoint"
                + ("" if self.spec["chat"] else " (chat: false needs /v1/completions)"))
        if reply.status_code in (401, 403):
            raise self._auth_error(reply)
        # Other 4xx: this request was refused (e.g. prompt longer than the context).
        raise GenerationFailed(f"{self._base_url}{path} refused the request: HTTP {reply.status_code}: "
                               f"{_server_message(reply)}")

    def _body(self, messages: list[dict], *, n: int, temperature: float, top_p: float, max_tokens: int,
              seed: int) -> tuple[dict, dict]:
        body: dict[str, Any] = {"model": self._model, "temperature": float(temperature), "top_p": float(top_p),
                                "max_tokens": int(max_tokens), "seed": int(seed)}
        if n > 1:
            body["n"] = n
        if self.spec["chat"]:
            body["messages"] = messages
            return body, {"messages": messages}
        prompt = render_plain_prompt(messages)
        body["prompt"] = prompt
        return body, {"prompt": prompt}

    def _sample(self, messages, *, n, temperature, top_p, max_tokens, seed) -> list[Completion]:
        body, request = self._body(messages, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                   seed=seed)
        start = time.perf_counter()
        data = self._post(body)
        latency = time.perf_counter() - start
        choices = sorted(data.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != n:
            raise ModelSetupError(
                f"model '{self.name}': asked {self._base_url} for n={n} choices and got {len(choices)}; "
                "the server does not honour n, set n_per_request: false")
        usage = data.get("usage") or {}
        completions = []
        for i, choice in enumerate(choices):
            if self.spec["chat"]:
                text = (choice.get("message") or {}).get("content") or ""
            else:
                text = choice.get("text") or ""
            completions.append(Completion(
                text=text,
                finish_reason=choice.get("finish_reason"),
                prompt_tokens=usage.get("prompt_tokens"),
                # With n > 1 servers report one total for all choices: no per-candidate count.
                completion_tokens=usage.get("completion_tokens") if n == 1 else None,
                latency_s=latency,
                request=request,
                seed=seed,
                index=i,
                meta={"response_id": data.get("id"), "served_model": data.get("model"),
                      **({"call_completion_tokens": usage.get("completion_tokens")} if n > 1 else {})},
            ))
        return completions

    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: dict) -> list[Completion]:
        validate_messages(messages)
        self._ensure_server()
        self._check_model()
        params = dict(temperature=temperature, top_p=top_p, max_tokens=max_tokens)
        if n == 1 or self.spec["n_per_request"]:
            return self._sample(messages, n=n, seed=seed, **params)
        seeds = candidate_seeds(key, n, seed)
        workers = min(n, self.spec.get("concurrency") or n)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(self._sample, messages, n=1, seed=s, **params) for s in seeds]
            results = [f.result() for f in futures]
        completions = []
        for i, (completion,) in enumerate(results):
            completion.index = i
            completions.append(completion)
        return completions

    # ---- native tool calls (the react agent, kernelsweep.agent.model) ----

    def chat_tools(self, messages: list[dict], tools: list[dict], *, temperature: float, top_p: float,
                   max_tokens: int, seed: int) -> dict[str, Any]:
        """One chat request offering `tools` (OpenAI function calling): the first
        choice's message as sent (content, tool_calls, reasoning_content), its
        finish_reason, the usage and the latency. The messages hold tool calls and
        tool results, so they are not held to the plain chat shape."""
        if not self.spec["chat"]:
            raise ModelSetupError(f"model '{self.name}': native tool calls need chat: true")
        self._ensure_server()
        self._check_model()
        body = {"model": self._model, "messages": messages, "tools": tools, "tool_choice": "auto",
                "temperature": float(temperature), "top_p": float(top_p), "max_tokens": int(max_tokens),
                "seed": int(seed)}
        start = time.perf_counter()
        data = self._post(body)
        latency = time.perf_counter() - start
        choices = data.get("choices") or []
        if not choices:
            raise GenerationFailed(f"{self._base_url}/chat/completions returned no choices")
        choice = choices[0]
        return {"message": choice.get("message") or {}, "finish_reason": choice.get("finish_reason"),
                "usage": data.get("usage") or {}, "latency_s": latency, "response_id": data.get("id"),
                "served_model": data.get("model")}
