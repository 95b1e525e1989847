"""A tiny OpenAI-compatible model server for fault-injection tests, run as its
own process on 127.0.0.1 (so a test can SIGKILL it like a real server).

    python loopback_model.py --port P --state DIR [--hold I,J,...]

Its answers are a pure function of the request: the prompt's reference module
(the first ```python block) renamed to `ModelNew` (a correct rewrite without a
kernel), or a prose answer for every other reference by hash, so two studies
run with it get the same candidates whatever was interrupted. POST number I
(0-based, counted over the process's life) in --hold is never answered: the
server holds it open, for a test to kill the server or the client mid-call.
Every POST is logged to DIR/posts.log (one line: its index and the served
model); DIR/holding-I appears when POST I is being held.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FENCE = re.compile(r"```python\n(.*?)```", re.DOTALL)


def answer(messages: list[dict]) -> str:
    text = messages[-1]["content"]
    found = FENCE.search(text)
    reference = found.group(1) if found else ""
    if hashlib.sha256(reference.encode()).digest()[0] % 2:
        return "I would fuse these operations into one loop, but I will not write the code here."
    code = re.sub(r"\bModel\b", "ModelNew", reference)
    return f"Here is the module.\n```python\n{code}```\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--state", required=True)
    parser.add_argument("--model", default="loopback")
    parser.add_argument("--hold", default="", help="0-based POST indices never answered")
    args = parser.parse_args()
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    hold = {int(i) for i in args.hold.split(",") if i}
    lock = threading.Lock()
    posts = [0]

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": args.model, "object": "model"}]})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with lock:
                index = posts[0]
                posts[0] += 1
                with open(state / "posts.log", "a") as log:
                    log.write(f"{index} {body.get('model')}\n")
            if index in hold:
                (state / f"holding-{index}").touch()
                while True:  # never answered: the test kills the server or the client
                    time.sleep(60)
            n = int(body.get("n", 1))
            text = answer(body["messages"])
            self._send(200, {
                "id": f"loopback-{index}", "object": "chat.completion", "model": args.model,
                "choices": [{"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                            for i in range(n)],
                "usage": {"prompt_tokens": len(json.dumps(body["messages"])) // 4, "completion_tokens": len(text) // 4},
            })

    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    (state / "ready").write_text(str(args.port))
    server.serve_forever()


if __name__ == "__main__":
    main()
