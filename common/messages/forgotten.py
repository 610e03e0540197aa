"""What an alert redrawn after a deletion says in place of the words it no longer shows."""

from __future__ import annotations


def forgotten_note(what: str) -> str:
    """`what`: question, answer, message (an earlier turn, a reference, an answer's part), edit, or exchange (the
    bot's side deleted it: DELETE /v1/exchanges/{id})."""
    if what == "exchange":
        return ":wastebasket: _The exchange was deleted by the bot's side: relmon no longer keeps or shows its words._"
    if what == "edit":
        return ":wastebasket: _Words were edited out of this conversation in Slack: relmon no longer keeps them._"
    return f":wastebasket: _The {what} was deleted in Slack: relmon no longer keeps or shows its words._"
