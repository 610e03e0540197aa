"""What one of relmon's own posts says once retention has taken its words out (RELMON_RETENTION_SLACK=redraw)."""

from __future__ import annotations

from common.messages.blocks import context, message

_WHAT = {"summary": "This summary", "verdict": "This verdict"}


def retired_message(kind: str, days: int) -> dict:
    """The chat.update of a retired post: no question, answer, reasoning or link; when and why they went."""
    text = f"{_WHAT.get(kind, 'This alert')}'s words were removed after {days} days (relmon keeps them no longer)."
    return message(text, [context(f":hourglass: {text}")])
