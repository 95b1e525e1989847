"""What the parent draws in secret and sends only when it is used: the seed
of every trial, shape variant and timed call (the candidate's process never
sees one before the call it makes inputs for)."""

from __future__ import annotations

import secrets


def secret_seed() -> int:
    return secrets.randbelow(2**31 - 1) + 1
