"""Helpers shared by the model tests (imported by name: tests/models is on sys.path)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MESSAGES = [{"role": "system", "content": "You write PyTorch."}, {"role": "user", "content": "Add two tensors."}]


def make_key(**over) -> dict:
    return {"model": "m", "method": "zero_shot", "task": "L1-001", "sample": 0, "turn": 0, "role": "generator", **over}


class ScriptedServer:
    """GET /v1/models answers `listing`; each POST gets the next scripted
    (status, body), or a function of the request (the last step repeats).
    Records every request it received."""

    def __init__(self, script, listing):
        self.script = list(script)
        self.listing = listing
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, body_in):
                with outer.lock:
                    request = {"method": self.command, "path": self.path, "body": body_in,
                               "auth": self.headers.get("Authorization")}
                    outer.requests.append(request)
                    if self.command == "GET":
                        step = outer.listing
                    else:
                        step = outer.script.pop(0) if len(outer.script) > 1 else outer.script[0]
                status, body = step(request) if callable(step) else step
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer(None)

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                self._answer(json.loads(self.rfile.read(length) or b"null"))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def posts(self) -> list[dict]:
        return [r for r in self.requests if r["method"] == "POST"]


def models_listing(*ids) -> tuple[int, dict]:
    return 200, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]}


def chat_reply(*texts, usage=(11, 7)) -> tuple[int, dict]:
    return 200, {"id": "r1", "model": "m", "object": "chat.completion",
                 "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                             for i, t in enumerate(texts)],
                 "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1]}}
