"""Helpers for running workflows through profiles/slurm on the single-node
test cluster of tests/slurm/cluster.sh (installed by .ci/slurm.sh)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CLUSTER = HERE / "cluster.sh"
PROFILE = REPO / "profiles" / "slurm"
TINY = HERE / "Snakefile"  # the tiny stand-in workflow of test_slurm_profile.py
POLLING = HERE / "snakemake_polling.py"  # the snakemake CLI, its SLURM status checks kept short
VENV_BIN = Path(sys.executable).parent

# Options the test cluster needs on top of the profile: no accounting storage,
# so job states come from squeue; and a short first status check, because a
# test job lasts seconds where a real one lasts minutes. (`--slurm-no-account`
# is accepted but has no effect in plugin 2.8.0: with no slurm_account set the
# plugin tries to guess one, fails, and submits without -A.)
SLURM_TEST_OPTIONS = [
    "--slurm-status-command", "squeue",
    "--slurm-init-seconds-before-status-checks", "1",
]


def workflow_env(**extra: str) -> dict[str, str]:
    """The environment for a snakemake run: this venv first on PATH (jobs on the
    node find the same python), no SLURM variables leaking from the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


class Snakemake:
    """Snakemake in `workdir`, started in the background (its own process group); its
    output goes to workdir/`log`. A run that mostly waits on the scheduler (the SLURM
    runs poll squeue between jobs of seconds) lets another run use the cores meanwhile."""

    def __init__(self, args: list[str], workdir: Path, log: str = "snakemake.out", **env: str):
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir, self.log = workdir, workdir / log
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, str(POLLING), "--directory", str(workdir), *args], cwd=workdir,
                                         env=workflow_env(**env), stdout=out, stderr=subprocess.STDOUT,
                                         text=True, start_new_session=True)

    def wait(self, timeout: float) -> subprocess.CompletedProcess:
        """Its end (it must succeed); stopped, SLURM jobs cancelled, if it takes longer."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        text = self.log.read_text()
        assert self.proc.returncode == 0, f"snakemake failed ({self.proc.returncode}):\n{text[-6000:]}"
        return subprocess.CompletedProcess(self.proc.args, self.proc.returncode, text, "")

    def stop(self) -> None:
        """SIGINT first: Snakemake then cancels the SLURM jobs it submitted."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def run_snakemake(args: list[str], workdir: Path, timeout: float, log: str = "snakemake.out",
                  **env: str) -> subprocess.CompletedProcess:
    """Snakemake in `workdir`, to its end; its output is kept in workdir/`log` (and is the
    result's stdout)."""
    return Snakemake(args, workdir, log, **env).wait(timeout)


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    name: str  # rule_<rule> or group_<group>_<rules>, from the plugin's log folder
    log: Path


def submitted_jobs(workdir: Path) -> list[SlurmJob]:
    """Jobs the executor plugin submitted, from its kept logs
    (.snakemake/slurm_logs/<rule_or_group>/[<wildcards>/]<jobid>.log)."""
    root = workdir / ".snakemake" / "slurm_logs"
    jobs = []
    for log in sorted(root.rglob("*.log")):
        if re.fullmatch(r"\d+", log.stem):
            jobs.append(SlurmJob(log.stem, log.relative_to(root).parts[0], log))
    return jobs


def scheduler_view(job_ids: list[str]) -> dict[str, tuple[str, str, int]]:
    """{job id: (state, partition, CPUs)} as squeue reports them (finished jobs
    stay listed for MinJobAge = 2 h on the test cluster)."""
    out = subprocess.run(
        ["squeue", "--states=all", "--noheader", "--format=%i|%T|%P|%C", "--jobs", ",".join(job_ids)],
        capture_output=True, text=True, timeout=30, env=workflow_env(),
    )
    assert out.returncode == 0, out.stderr
    view = {}
    for line in out.stdout.split():
        job_id, state, partition, cpus = line.split("|")
        view[job_id] = (state, partition, int(cpus))
    return view
