"""Errors a user can hit while selecting, fetching or validating tasks. Each
carries a message meant to be printed as is (the CLI prints it and exits 2)."""

from __future__ import annotations


class TaskError(Exception):
    """Base class: a task problem with a user-facing message."""


class TaskConfigError(TaskError):
    """The `tasks:` selection is malformed (unknown key, bad range, bad regex…)."""


class TaskSourceError(TaskError):
    """A source is missing, unreachable, not fetched yet, or lacks a task."""


class TaskInvalidError(TaskError):
    """A reference module does not import, lacks its interface, or fails to run."""

    def __init__(self, task_id: str, reason: str):
        super().__init__(f"{task_id}: invalid reference: {reason}")
        self.task_id = task_id
        self.reason = reason
