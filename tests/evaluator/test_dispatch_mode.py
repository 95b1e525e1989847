"""The harness's dispatch modes (untrusted/dispatchmode.py) see every
operator with torch._dynamo not imported, and keep seeing them, through
dynamo's disabled frame, once something imported it (a candidate that
compiles). A fresh interpreter: dynamo, once imported, stays."""

from __future__ import annotations

import json
import subprocess
import sys

_PROGRAM = """
import json, sys, torch
from kernelsweep.evaluator.untrusted.dispatchmode import HarnessMode

class Seen(HarnessMode):
    def __init__(self):
        super().__init__()
        self.ops = []
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func.name())
        return func(*args, **(kwargs or {}))

def seen():
    with Seen() as mode:
        torch.ones(3).add(1).mul(2)
    return mode.ops

before = seen()
imported_before = "torch._dynamo" in sys.modules
import torch._dynamo
after = seen()
compiled = torch.compile(lambda x: x * 2, backend="eager")
with Seen() as mode:
    value = compiled(torch.ones(3)).tolist()
print(json.dumps({"before": before, "imported_before": imported_before, "after": after,
                  "compiled_value": value, "compiled_ops": mode.ops}))
"""


def test_a_harness_mode_sees_every_operator_with_and_without_dynamo():
    done = subprocess.run([sys.executable, "-c", _PROGRAM], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["imported_before"] is False  # the mode itself did not import dynamo
    assert got["before"] == got["after"] == ["aten::ones", "aten::add.Tensor", "aten::mul.Tensor"]
    assert got["compiled_value"] == [2.0, 2.0, 2.0]
    assert "aten::mul.Tensor" in got["compiled_ops"]
