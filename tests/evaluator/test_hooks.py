"""The interpreter hooks the candidate's worker looks for (untrusted/hooks.py),
in a fresh interpreter each (importing the module refuses every audit hook
added after it, for the life of the process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_SETUP = {
    "nothing": "",
    "default device": "torch.set_default_device('cpu')",
    "mode named torch's": """
from torch.utils._python_dispatch import TorchDispatchMode
class M(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))
M.__module__ = 'torch'
M().__enter__()
""",
    "partial gc callback": "import functools, gc; gc.callbacks.append(functools.partial(exec, 'pass'))",
    "signal handler": "import signal; signal.signal(signal.SIGALRM, lambda *a: None)",
    "audit hook": "import sys; sys.addaudithook(lambda *a: None)",
}
_EXPECTED = {
    "nothing": [],
    "default device": [],
    "mode named torch's": ["torch dispatch mode M"],
    "partial gc callback": ["gc.callbacks"],
    "signal handler": ["signal handler SIGALRM"],
    "audit hook": ["sys.addaudithook"],
}


@pytest.mark.parametrize("case", sorted(_SETUP))
def test_what_the_worker_counts_as_a_hook(case):
    """Torch's own default-device mode is no hook of the candidate's; a mode
    that only names itself torch's, a partial over a builtin, a handler or an
    audit hook of its own are."""
    code = "import json, torch\nfrom kernelsweep.evaluator.untrusted import hooks\n" + _SETUP[case] + \
        "\nprint(json.dumps(hooks.installed()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == _EXPECTED[case], out.stderr[-2000:]
