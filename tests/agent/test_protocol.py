"""The text protocol, error normalisation and the workspace's confinement."""

from __future__ import annotations

import pytest

from kernelsweep.agent.guards import normalise_error
from kernelsweep.agent.protocol import enabled_tools, parse_text
from kernelsweep.agent.workspace import Workspace, WorkspaceError

ALL = enabled_tools({"editor": True, "run": True, "evaluate": True, "profiler": True, "docs": True})


def test_action_arguments_and_blocks():
    p = parse_text("<think>plan: fix it</think>\nThought: fix\nAction: edit_file\npath: model_new.py\n"
                   "```python\nold\n```\n```python\nnew\n```\nAction: submit", 4, ALL)
    assert p.reasoning == "plan: fix it" and "<think>" not in p.content
    (call,) = p.calls
    assert (call.name, call.args, call.id) == ("edit_file", {"path": "model_new.py", "old": "old\n", "new": "new\n"}, "s4")


def test_code_block_is_the_code_argument_or_an_implicit_write():
    assert parse_text("Action: submit\n```python\nx = 1\n```", 0, ALL).calls[0].args == {"code": "x = 1\n"}
    call = parse_text("Here it is:\n```python\nx = 2\n```", 0, ALL).calls[0]
    assert (call.name, call.args) == ("write_file", {"path": "model_new.py", "content": "x = 2\n"})
    # code inside the reasoning is never taken as code
    assert parse_text("<think>```python\nx = 3\n```</think>no action", 0, ALL).calls == []


def test_unreadable_replies_say_why():
    assert "no 'Action" in parse_text("I will write a kernel.", 0, ALL).error
    assert "disabled" in parse_text("Action: profile\ntarget: reference", 0, enabled_tools({})).error
    assert "needs path" in parse_text("Action: run", 0, ALL).error


def test_errors_differing_only_in_paths_and_numbers_are_one_key():
    a = normalise_error("compile_error", "/tmp/x1/main.cpp:12:5: error: expected ';' before '}' token\nninja: build stopped")
    b = normalise_error("compile_error", "/tmp/q9/main.cpp:40:7: error: expected ';' before '}' token\nninja: build stopped")
    c = normalise_error("compile_error", "/tmp/q9/main.cpp:40:7: error: 'idx' was not declared in this scope")
    assert a == b != c
    assert normalise_error("syntax_error", "invalid syntax (line 3)") != normalise_error("runtime_error", "invalid syntax (line 3)")


def test_workspace_refuses_paths_outside_it(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ws.reset("class Model: pass\n")
    (tmp_path / "secret.py").write_text("hidden")
    (ws.root / "link").symlink_to(tmp_path / "secret.py")
    for bad in ("../secret.py", str(tmp_path / "secret.py"), "link", "", "sub/../../secret.py"):
        with pytest.raises(WorkspaceError):
            ws.view(bad, 1000)
    with pytest.raises(WorkspaceError, match="the task"):
        ws.write("reference.py", "x")
    ws.write("sub/a.py", "a = 1\n")
    assert ws.edit("sub/a.py", "a = 1", "a = 2").startswith("edited")
    with pytest.raises(WorkspaceError, match="exactly once"):
        ws.edit("sub/a.py", "zzz", "y")
    assert ws.view(".", 1000).split() == ["reference.py", "sub/a.py"]


def test_a_code_block_never_overwrites_the_candidate_through_other_actions():
    (call,) = parse_text("Action: run\npath: test.py\n```python\nprint(1)\n```", 0, ALL).calls
    assert call.args == {"path": "test.py"}


def test_ncu_csv_becomes_a_table_per_kernel():
    from kernelsweep.agent import ncu

    # the layout of `ncu --csv --metrics ...`: notes and program output first, then one row per (launch, metric)
    header = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",' \
             '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'

    def row(launch, kernel, metric, unit, value):
        return f'"{launch}","1","python3","h","{kernel}","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0",' \
               f'"Command line profiler metrics","{metric}","{unit}","{value}"'

    text = "\n".join(["==PROF== Connected to process 1", "some program output", header,
                      row(0, "gemm_kernel", "gpu__time_duration.sum", "us", "812.5"),
                      row(0, "gemm_kernel", "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "35.1"),
                      row(1, "scale_leaky_relu_kernel", "gpu__time_duration.sum", "us", "40.2"),
                      row(2, "scale_leaky_relu_kernel", "gpu__time_duration.sum", "us", "41.0")])
    kernels = ncu.parse_csv(text)
    assert kernels["gemm_kernel"] == {"launches": "1", "time": "812.5 us", "DRAM %peak": "35.1 %"}
    assert kernels["scale_leaky_relu_kernel"]["launches"] == "2"
    assert kernels["scale_leaky_relu_kernel"]["time"] == "40.2 us"  # the first launch
    table = ncu.render(kernels).splitlines()
    assert table[2].startswith("  gemm_kernel") and table[3].startswith("  scale_leaky_relu_kernel")
    assert ncu.parse_csv("==PROF== ERR_NVGPUCTRPERM") == {} and ncu.available("cpu") is None
