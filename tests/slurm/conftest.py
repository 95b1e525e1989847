"""The single-node SLURM test cluster, as a session fixture; and the tiny
workflow's SLURM run (test_slurm_profile.py), which the demo test starts early."""

from __future__ import annotations

import os
import subprocess

import pytest

from slurm_helpers import CLUSTER, PROFILE, SLURM_TEST_OPTIONS, TINY, Snakemake


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


@pytest.fixture(scope="session")
def tiny_workflow_on_slurm(slurm_cluster, tmp_path_factory) -> Snakemake:
    """tests/slurm/Snakefile through profiles/slurm, running in the background from the
    first request on (test_slurm_profile.py waits for it and checks it). Its jobs take
    a second each and it mostly waits on the scheduler, so it is started while the
    demo test keeps the cores busy (start_tiny_workflow)."""
    run = Snakemake(["-s", str(TINY), "--workflow-profile", str(PROFILE), *SLURM_TEST_OPTIONS],
                    tmp_path_factory.mktemp("tiny") / "slurm")
    try:
        yield run
    finally:
        run.stop()  # only where its test did not run: it has ended otherwise


@pytest.fixture
def start_tiny_workflow(request):
    """Starts tiny_workflow_on_slurm now if a test of this session will check it."""
    if any("tiny_workflow_on_slurm" in getattr(item, "fixturenames", ()) for item in request.session.items):
        request.getfixturevalue("tiny_workflow_on_slurm")
