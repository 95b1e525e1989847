"""The failure study's guards, each a method flag, each firing a trace record.

- repeat_error (K): the same normalised error K times -> stop the trajectory,
  or (repeat_error_action: inject) tell the agent to change approach and count afresh.
- force_profile (M): M failed attempts in a row (an evaluate/submit that does not
  beat the best evaluation so far) -> edits are refused until a profile ran.
- regression_lock: the cell's result is the best submission; a worse later one is
  recorded but never replaces it (off: the last submission is the result).
- max_submissions (N): stop after the N-th submission.

`pending(state, flags)` lists the guard records the state calls for and not yet
recorded; applying a record (kernelsweep.agent.state) settles it, so calling it
again after a resume never fires twice."""

from __future__ import annotations

import re
from typing import Any

from kernelsweep.core.verdict import selection_key

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[^\s:'\"()\[\],]+)+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUM = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_ERRORISH = re.compile(r"error|exception|fail|undefined|expected|invalid", re.IGNORECASE)
MAX_KEY_CHARS = 300


def normalise_error(category: str | None, message: str | None) -> str:
    """One key per kind of failure: the category plus the message's error lines
    with paths, addresses, numbers and spacing made uniform (line numbers and
    temp folders change between attempts; the mistake does not)."""
    lines = [ln.strip() for ln in (message or "").splitlines() if ln.strip()]
    picked = [ln for ln in lines if _ERRORISH.search(ln)][:3] or lines[-1:]
    text = " | ".join(picked)
    text = _NUM.sub("N", _HEX.sub("H", _PATH.sub("<path>", text)))
    text = _SPACE.sub(" ", text).strip()
    return f"{category or 'error'}: {text}"[:MAX_KEY_CHARS]


def change_approach_message(key: str, count: int) -> str:
    return (f"The same error has now occurred {count} times:\n  {key}\n"
            "Repeating the approach will not fix it. Step back: re-read the failing line, "
            "write a simpler version that is correct first, or go back to your last working code.")


def pending(state, flags: dict[str, Any]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for seq in state.blocked_unrecorded:
        events.append({"guard": "force_profile", "action": "blocked", "tool_seq": seq,
                       "detail": "an edit was refused: profile first"})
    if flags.get("regression_lock") and state.submissions:
        latest = state.submissions[-1]
        best = state.best_submission(lock=True)
        if best is not None and latest["index"] not in state.lock_recorded and \
                selection_key(latest["eval"]) < selection_key(best["eval"]):
            events.append({"guard": "regression_lock", "action": "kept_best", "submission": latest["index"],
                           "kept": best["index"],
                           "detail": f"submission {latest['index']} ({latest['eval'].get('category')}) is worse "
                                     f"than submission {best['index']} ({best['eval'].get('category')}), which stays",
                           "message": f"Submission {latest['index']} is worse than submission {best['index']}; "
                                      f"the result stays submission {best['index']}."})
    k = flags.get("repeat_error")
    if k:
        for key, count in state.error_counts.items():
            if count >= k:
                action = flags.get("repeat_error_action", "stop")
                event = {"guard": "repeat_error", "action": action, "error_key": key, "count": count,
                         "detail": f"{count} identical errors"}
                if action == "inject":
                    event["message"] = change_approach_message(key, count)
                events.append(event)
                break  # one firing per check: a stop ends the trajectory anyway
    if state.stop is not None or any(e["action"] == "stop" for e in events):
        return events  # the trajectory ends here: locking edits or capping would change nothing
    m = flags.get("force_profile")
    if m and state.failed_attempts >= m and not state.profile_required:
        events.append({"guard": "force_profile", "action": "engaged", "count": state.failed_attempts,
                       "detail": f"{state.failed_attempts} failed attempts in a row",
                       "message": (f"{state.failed_attempts} attempts in a row did not improve on your best. "
                                   "Edits are locked until you call profile (target: reference or candidate) "
                                   "and find where the time goes.")})
    n = flags.get("max_submissions")
    if n and len(state.submissions) >= n:
        events.append({"guard": "max_submissions", "action": "stop", "count": len(state.submissions),
                       "detail": f"{len(state.submissions)} submissions"})
    return events
