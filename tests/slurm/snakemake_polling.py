"""`snakemake` for the test cluster: the real CLI and the real SLURM executor
plugin, with the plugin's status polling kept short.

After each status check that finds no job finished, the plugin waits 10 s
longer before the next one, up to 180 s (hard-coded in plugin 2.8). That suits
jobs of minutes; the test cluster's jobs last seconds, so each job's end was
seen up to tens of seconds late and the SLURM tests spent most of their time
waiting. Here the wait never exceeds POLL_CAP_S; what is tested (what is
submitted, where it runs, what it produces) is unchanged."""

from __future__ import annotations

import sys

import snakemake_executor_plugin_slurm as slurm
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor

POLL_CAP_S = 2

_wait = RemoteExecutor.next_seconds_between_status_checks
slurm.Executor.next_seconds_between_status_checks = property(
    _wait.fget, lambda executor, seconds: _wait.fset(executor, min(seconds, POLL_CAP_S)))

if __name__ == "__main__":
    from snakemake.cli import main

    sys.exit(main())
