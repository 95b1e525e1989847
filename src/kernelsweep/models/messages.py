"""How chat messages become one completion prompt for a model without a chat
template (a base model), for both the in-process and the server backends."""

from __future__ import annotations

MESSAGE_ROLES = ("system", "user", "assistant")
_HEADINGS = {"system": "Instructions", "user": "User", "assistant": "Assistant"}


def validate_messages(messages) -> list[dict]:
    """Messages as [{role, content}] with known roles and string content."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list of {role, content}")
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in MESSAGE_ROLES \
                or not isinstance(message.get("content"), str):
            raise ValueError(f"messages[{i}] must be {{role: system|user|assistant, content: str}}, got {message!r}")
    return messages


def render_plain_prompt(messages: list[dict]) -> str:
    """A transcript with a heading per turn, ending with an open assistant turn
    for the model to continue. A base model has no notion of roles, so the
    headings are plain text it can follow."""
    parts = [f"### {_HEADINGS[m['role']]}\n{m['content'].strip()}\n" for m in validate_messages(messages)]
    return "\n".join(parts) + "\n### Assistant\n"


# A base model continues the transcript: a new heading at the start of a line
# means it has begun writing the next turn itself (usually restating the
# prompt), so its answer ended there. Generation stops at these strings.
TURN_STOPS = tuple(f"\n### {heading}" for heading in _HEADINGS.values())


def end_of_turn(text: str) -> int | None:
    """Where a plain-prompt answer ends: the offset of the first turn heading
    that starts a line of it (the answer's first line included), else None."""
    padded = "\n" + text  # the answer starts on a fresh line (the prompt ends with "### Assistant\n")
    found = [i for i in (padded.find(stop) for stop in TURN_STOPS) if i >= 0]
    return max(0, min(found) - 1) if found else None
