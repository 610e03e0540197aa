"""A click on an alert's button, read in one place: who clicked, where, and the judgment the button's value names.
Buttons carry a judgment's id as their value; anything else (a forged or mangled click) reads as no click."""

from __future__ import annotations

import re
from dataclasses import dataclass

from slack_bolt import Ack

from common.replies import Asker

_ID = re.compile(r"[0-9]{1,18}")  # a database id: digits, and few enough for a 64-bit integer


@dataclass(frozen=True)
class AlertClick:
    asker: Asker  # who clicked, in which channel, with the response_url to answer them privately
    judgment_id: int
    action_id: str | None
    message_ts: str | None  # the alert's message


def judgment_id_of(value: object) -> int | None:
    """The judgment id a button's value (or a modal's metadata) names, or None."""
    return int(value) if isinstance(value, str) and _ID.fullmatch(value) else None


def alert_click(body: dict) -> AlertClick | None:
    """The click a block_actions payload carries, or None when its value names no judgment."""
    action = (body.get("actions") or [{}])[0]
    container = body.get("container") or {}
    judgment_id = judgment_id_of(action.get("value"))
    if judgment_id is None:
        return None
    asker = Asker(body["user"]["id"], container.get("channel_id"), body.get("response_url"))
    return AlertClick(asker, judgment_id, action.get("action_id"), container.get("message_ts"))


def ack_now(ack: Ack) -> None:
    """A button's ack: at once, the work goes to the lazy half."""
    ack()
