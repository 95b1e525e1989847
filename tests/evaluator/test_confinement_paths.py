"""Confinement wherever a user installs: a checkout and its virtual
environment under /tmp (hidden from every worker), also under a path with
spaces, still run confined evaluations; a machine that refuses the
namespaces is named, with the setting and the opt-out, before any job."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT

UNSHARE = shutil.which("unshare")


def _checkout_under(parent: Path) -> Path:
    """A checkout at PARENT: the package's source, and a venv whose python
    links to this interpreter's base and whose site-packages reach this
    environment's packages (torch) through a link that is itself under PARENT."""
    shutil.copytree(REPO_ROOT / "src", parent / "src", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(parent / ".venv")], check=True)
    (parent / "packages").symlink_to(sysconfig.get_paths()["purelib"])
    site = Path(subprocess.run([str(parent / ".venv/bin/python"), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "checkout.pth").write_text(f"{parent / 'src'}\n{parent / 'packages'}\n")
    return parent / ".venv/bin/python"


@pytest.fixture(params=["checkout", "my checkout with spaces"])
def checkout_in_tmp(request):
    parent = Path(tempfile.mkdtemp(prefix="ks-confine-", dir="/tmp")) / request.param
    parent.mkdir()
    try:
        yield parent, _checkout_under(parent)
    finally:
        shutil.rmtree(parent.parent, ignore_errors=True)


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("KERNELSWEEP_ALLOW_UNCONFINED", None)
    return env


@pytest.mark.slow
def test_checkout_and_venv_under_tmp_evaluate_confined(checkout_in_tmp):
    parent, python = checkout_in_tmp
    env = _clean_env()
    where = subprocess.run([str(python), "-c", "import kernelsweep, torch; print(kernelsweep.__file__); "
                            "print(torch.__file__)"], capture_output=True, text=True, env=env, check=True)
    assert all(line.startswith(str(parent)) for line in where.stdout.splitlines()), where.stdout  # all of it hidden
    check = subprocess.run([str(python), "-m", "kernelsweep", "confinement"], capture_output=True, text=True,
                           env=env, timeout=300)
    assert check.returncode == 0, check.stderr
    # The demo's fused C++ kernel on its task, built and judged inside the confinement, from the
    # checkout's own copy (torch's link line from a spaced path too).
    demo = parent / "src/kernelsweep/demo_tasks"
    done = subprocess.run([str(python), "-m", "kernelsweep", "eval", "--device", "cpu", "--trials", "2",
                           "--timing-trials", "10", "--warmup", "2", "--build-dir", str(parent / "build"),
                           str(demo / "1_Scale_Add_ReLU_Chain.py"), str(demo / "recorded/sources/fused.py")],
                          capture_output=True, text=True, env=env, cwd=parent, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    verdict = json.loads(done.stdout)
    assert verdict["provenance"]["confinement"] == "namespaces"
    assert verdict["compiled"] and verdict["correct"] and verdict["custom_kernel"], verdict.get("error")


def _refusing(argv: list[str]) -> list[str]:
    """ARGV run where the kernel refuses new user namespaces (as with
    user.max_user_namespaces=0 on a cluster node): inside a user namespace of
    our own whose limit is set to 0."""
    return [UNSHARE, "-Ur", "sh", "-c", 'echo 0 > /proc/sys/user/max_user_namespaces && exec "$@"', "sh", *argv]


needs_unshare = pytest.mark.skipif(UNSHARE is None or subprocess.run(
    [UNSHARE or "unshare", "-Ur", "true"], capture_output=True).returncode != 0,
    reason="needs unshare(1) and user namespaces to make a refusing one")


@needs_unshare
def test_refused_namespaces_are_named_with_the_setting_and_the_opt_out():
    done = subprocess.run(_refusing([sys.executable, "-m", "kernelsweep", "confinement"]), capture_output=True,
                          text=True, env=_clean_env(), timeout=120)
    assert done.returncode == 1
    message = done.stderr
    assert "cannot be confined" in message and "max_user_namespaces" in message, message
    assert "apparmor_restrict_unprivileged_userns" in message and "KERNELSWEEP_ALLOW_UNCONFINED=1" in message


def test_a_worker_that_cannot_start_inside_says_what_is_missing():
    message = __import__("kernelsweep.evaluator.confine", fromlist=["x"]).failure_message(
        "kernelsweep confinement failed: [Errno 2] No such file or directory: '/scratch/env/bin/python'\n")
    assert "'/scratch/env/bin/python'" in message and "sys.path" in message and "hidden" in message


@needs_unshare
@pytest.mark.slow
def test_a_run_stops_before_any_job_when_workers_cannot_be_confined(tmp_path):
    config = {"results": str(tmp_path / "results"), "device": "cpu",
              "tasks": {"source": "demo", "levels": [0], "ids": [1]},
              "models": {"recorded-demo": {"backend": "replay", "recorded": True,
                                           "path": str(REPO_ROOT / "src/kernelsweep/demo_tasks/recorded")}},
              "methods": {"zero_shot": {"strategy": "zero_shot"}}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "study.yaml"), "--cores", "1"]
    done = subprocess.run(_refusing(cmd), cwd=REPO_ROOT, capture_output=True, text=True, env=_clean_env(),
                          timeout=600)
    assert done.returncode != 0
    assert "cannot be confined" in done.stderr and "KERNELSWEEP_ALLOW_UNCONFINED=1" in done.stderr, \
        done.stderr[-3000:]
    written = [p for p in (tmp_path / "results").rglob("*") if p.is_file()] if (tmp_path / "results").exists() \
        else []
    assert not [p for p in written if p.name in ("response.json", "eval.json", "prompt.json")], written
