"""The single-node SLURM test cluster, as a session fixture."""

from __future__ import annotations

import os
import subprocess

import pytest

from slurm_helpers import CLUSTER


@pytest.fixture(scope="session")
def slurm_cluster():
    """A running single-node cluster; stopped at the end of the session, also
    after failures (KERNELSWEEP_SLURM_KEEP=1 leaves it running)."""
    if os.environ.get("KERNELSWEEP_SLURM") != "1":
        pytest.skip("SLURM tests need the single-node test cluster: run `bash .ci/slurm.sh` "
                    "as root, then set KERNELSWEEP_SLURM=1")
    start = subprocess.run(["bash", str(CLUSTER), "start"], capture_output=True, text=True, timeout=180)
    if start.returncode != 0:
        pytest.fail(f"could not start the test cluster:\n{start.stdout}{start.stderr}")
    try:
        yield
    finally:
        if os.environ.get("KERNELSWEEP_SLURM_KEEP") != "1":
            subprocess.run(["bash", str(CLUSTER), "stop"], capture_output=True, text=True, timeout=120)
