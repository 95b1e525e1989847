"""A trace as one self-contained HTML page: every message, tool call, result,
guard firing and evaluation in order, readable in a browser with no server."""

from __future__ import annotations

import html
import json
from typing import Any

_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}
.r{border-left:4px solid #ccc;margin:.6em 0;padding:.3em .8em;background:#fafafa}
.model{border-color:#4a7}.tool{border-color:#47a}.guard{border-color:#d63;background:#fff4ef}
.end{border-color:#333}.start{border-color:#999}.err{color:#b00}
pre{white-space:pre-wrap;word-break:break-word;background:#f0f0f0;padding:.5em;max-height:30em;overflow:auto}
h1{font-size:1.3em}.meta{color:#666;font-size:.85em}details summary{cursor:pointer}
"""


def _pre(text: Any) -> str:
    return f"<pre>{html.escape(text if isinstance(text, str) else json.dumps(text, indent=1))}</pre>"


def _block(record: dict[str, Any]) -> str:
    kind = record["kind"]
    meta = f"<div class='meta'>#{record.get('seq')} · {kind} · step {record.get('step', '')} · " \
           f"{record.get('wall_s', '')} s</div>"
    body = ""
    if kind == "start":
        body = "".join(f"<details><summary>{html.escape(m['role'])} prompt</summary>{_pre(m['content'])}</details>"
                       for m in record["messages"])
        body += f"<p>tools: {html.escape(', '.join(record['tools']))}; native: {record['native']}</p>"
    elif kind == "model":
        usage = record.get("usage") or {}
        body = f"<p>tokens: {usage.get('prompt_tokens')} in / {usage.get('completion_tokens')} out</p>"
        if record.get("reasoning"):
            body += f"<details><summary>reasoning</summary>{_pre(record['reasoning'])}</details>"
        body += _pre(record.get("raw_text") or "")
        for call in record.get("calls") or []:
            body += f"<p><b>call {html.escape(call['name'])}</b></p>{_pre(call['args'])}"
        if record.get("protocol_error"):
            body += f"<p class='err'>protocol: {html.escape(record['protocol_error'])}</p>"
    elif kind == "tool":
        status = "ok" if record.get("ok") else "failed"
        body = f"<p><b>{html.escape(record['name'])}</b> → {status}</p>{_pre(record.get('observation', ''))}"
    elif kind == "guard":
        body = f"<p><b>guard {html.escape(record['guard'])}: {html.escape(record['action'])}</b> — " \
               f"{html.escape(str(record.get('detail', '')))}</p>"
    elif kind == "end":
        body = f"<p><b>end: {html.escape(record['reason'])}</b> {html.escape(record.get('error') or '')}</p>"
    return f"<div class='r {kind}'>{meta}{body}</div>"


def render_html(records: list[dict[str, Any]]) -> str:
    key = records[0].get("key", {}) if records else {}
    title = html.escape(" / ".join(str(key.get(k, "")) for k in ("model", "method", "task", "sample")))
    blocks = "\n".join(_block(r) for r in records)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{_STYLE}</style>"
            f"</head><body><h1>react trajectory: {title}</h1>{blocks}</body></html>\n")
