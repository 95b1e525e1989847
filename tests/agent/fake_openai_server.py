"""A scripted OpenAI-compatible chat server on loopback, for the native
tool-call test: answers /v1/models and /v1/chat/completions with the next
scripted assistant message and logs every request body (JSON lines).

    python fake_openai_server.py SCRIPT.json REQUESTS.jsonl   # prints the port, then serves
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "scripted-tools"


def main() -> None:
    script = json.load(open(sys.argv[1]))
    log_path = sys.argv[2]
    replies = iter(script)

    class Handler(BaseHTTPRequestHandler):
        def _send(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": "not found"}})

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with open(log_path, "a") as f:
                f.write(json.dumps(body) + "\n")
            if self.path != "/v1/chat/completions":
                self._send(404, {"error": {"message": "not found"}})
                return
            message = next(replies, {"role": "assistant", "content": "out of script"})
            self._send(200, {"id": "r", "model": MODEL, "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 7}})

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
