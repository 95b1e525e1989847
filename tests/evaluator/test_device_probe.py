"""After a candidate crashed, ran out of memory or hung on CUDA, a fresh
process must still compute on the GPU; otherwise the machine failed and no
verdict is recorded (issue 17). The probe is a real subprocess."""

import torch

from kernelsweep.evaluator import devices


def test_the_probe_tells_whether_a_fresh_process_can_compute_on_the_gpu():
    problem = devices.device_unusable()
    if torch.cuda.is_available():
        assert problem is None
    else:
        assert problem and "CUDA" in problem  # this machine has no usable GPU, and the probe says so
