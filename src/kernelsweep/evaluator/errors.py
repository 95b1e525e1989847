"""The one error the evaluator raises to its callers: the harness itself could
not run (bad arguments, unreadable files, a reference that does not run). A
candidate's failure is never an exception: it is a category in the result."""


class HarnessError(Exception):
    """The evaluation could not be carried out; the message says why."""

    def __init__(self, message: str, *, log: str | None = None):
        super().__init__(message)
        self.log = log

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text} (log: {self.log})" if self.log else text
