"""Message and reaction events, from Slack's request to the hand-on (bot.hand_on), with nothing else on the way.

They are most of what Slack sends, and each must be acknowledged quickly while a worker may be judging on the
same cores (#29). Over HTTP the server (bot.server) gives an Events API envelope of those types straight to
`CaptureEvents.answered` once its signature and shape are checked: no second parse, no Bolt dispatch (its
request object, middleware chain and listener matching cost more CPU than the hand-on itself). What Bolt would
have done on the way is done here too: relmon's own events are acknowledged and dropped (Bolt's
`IgnoringSelfEvents`), and the listener's identity fields are the ones Bolt's authorization gives.

relmon's identity comes from Bolt: until the capture listener (bot.listeners.capture) has run once in this
process, events go through Bolt, and the listener hands them to `from_listener`, which keeps the bot user and bot
IDs Bolt's `auth.test` gave. Socket Mode's events always take the listener's way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_bolt.request.internals import extract_user_id

from capture.events import REACTION_EVENTS, ignored
from store.rules import ChannelRules
from store.settings import Settings

CAPTURED_EVENTS = ("message", *REACTION_EVENTS)


class CaptureEvents:
    """What is done with a message or reaction event before Slack gets its acknowledgement: nothing captured of it
    (capture.events.ignored), or handed on."""

    def __init__(self, settings: Settings, rules: ChannelRules, hand_on: Callable[[dict[str, Any]], None]) -> None:
        self.settings, self.rules, self.hand_on = settings, rules, hand_on
        self._own: tuple[str | None, str | None] | None = None  # (bot user ID, bot ID) once Bolt has said

    def from_listener(self, body: dict[str, Any], bot_user_id: str | None, bot_id: str | None) -> None:
        """An event Bolt dispatched to the capture listener, with the identity its authorization found."""
        self._own = (bot_user_id, bot_id)
        self._take(body, bot_user_id, bot_id)

    def answered(self, envelope: dict[str, Any]) -> bool:
        """Take a checked Events API envelope (bot.request_guard) if it is a captured event and relmon's identity is
        known; False leaves it to Bolt. Raises what the hand-on raises besides an outage (a bug: a 500)."""
        if self._own is None or envelope["type"] != "event_callback":
            return False
        event = envelope["event"]  # request_guard checked it: an object with a string type
        if event["type"] not in CAPTURED_EVENTS:
            return False
        bot_user_id, bot_id = self._own
        user_id, event_bot_id = extract_user_id(envelope), event.get("bot_id")
        if (user_id is not None and user_id == bot_user_id) or (event_bot_id is not None and event_bot_id == bot_id):
            return True  # relmon's own message or reaction: Bolt acknowledges these without running a listener
        self._take(envelope, bot_user_id, bot_id)
        return True

    def _take(self, body: dict[str, Any], bot_user_id: str | None, bot_id: str | None) -> None:
        if ignored(body.get("event") or {}, self.settings, self.rules):
            return
        own = {"user_id": bot_user_id, "bot_id": bot_id, "app_id": body.get("api_app_id")}
        self.hand_on({"body": body, "own": own})
