"""Native tool calls through the real OpenAI backend against a scripted
OpenAI-compatible server process on loopback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_scripts import broken


def _call(i: int, name: str, args: dict) -> dict:
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


SCRIPT = [
    {"role": "assistant", "content": None, "reasoning_content": "SECRET-REASONING: start with a file.",
     "tool_calls": [_call(0, "write_file", {"path": "model_new.py", "content": broken(1)})]},
    {"role": "assistant", "content": "<think>SECRET-THINK</think>Let me look.",
     "tool_calls": [_call(1, "view_file", {"path": "model_new.py"}), _call(2, "search_docs", {"query": "load_inline cpp_sources"})]},
    {"role": "assistant", "content": None, "tool_calls": [_call(3, "submit", {})]},
]


@pytest.fixture
def server(tmp_path):
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    log = tmp_path / "requests.jsonl"
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_openai_server.py")),
                             str(tmp_path / "script.json"), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}/v1", log
    finally:
        proc.kill()
        proc.wait()


def test_native_tool_calls_round_trip(scenario, server):
    base_url, log = server
    spec = scenario.spec(max_steps=3, goal="none")
    spec["model_spec"] = {"backend": "openai", "base_url": base_url, "model": "scripted-tools", "max_retries": 0}
    from kernelsweep.agent.cell import run_cell

    final = run_cell(spec, scenario.task, scenario.reference, scenario.cell, scenario.cell / "final.json")
    assert scenario.kinds() == ["start", "model", "tool:write_file", "model", "tool:view_file", "tool:search_docs",
                                "model", "tool:submit", "end:limit:max_steps"]
    requests = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(requests) == 3
    assert {t["function"]["name"] for t in requests[0]["tools"]} == \
        {"write_file", "edit_file", "view_file", "run", "evaluate", "profile", "search_docs", "submit"}
    third = requests[2]["messages"]
    # each result goes back as a tool message answering its call, in order
    tool_messages = [m for m in third if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["call_0", "call_1", "call_2"]
    assert "class ModelNew(:" in tool_messages[1]["content"]           # view_file showed the file
    assert "[" in tool_messages[2]["content"] and ".md#" in tool_messages[2]["content"]  # passages with tags
    # reasoning is recorded, never sent back
    sent = json.dumps(requests)
    assert "SECRET-REASONING" not in sent and "SECRET-THINK" not in sent
    models = [r for r in scenario.records() if r["kind"] == "model"]
    assert models[0]["reasoning"].startswith("SECRET-REASONING") and models[1]["reasoning"] == "SECRET-THINK"
    assert final["react"]["native"] is True and final["result"]["category"] == "syntax_error"
    assert final["tokens"] == {"prompt": 150, "completion": 21}
