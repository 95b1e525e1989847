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
