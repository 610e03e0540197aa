"""Capture listener: every `message` event (all subtypes) and reaction in watched channels is published to a worker
(bot.publishing) before Slack gets its acknowledgement; events nothing is captured of are dropped first, from the
event alone (capture.events.ignored). relmon's own messages and reactions never get here: Bolt's self-event
middleware drops them. The worker reads the conversation, logs and pairs (workers.live_capture)."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext

from bot.deps import BotDeps
from capture.events import REACTION_EVENTS, ignored

CAPTURED_EVENTS = ("message", *REACTION_EVENTS)


def register(app: App, deps: BotDeps) -> None:
    settings, source, publish = deps.settings, deps.runtime.rule_source, deps.publisher
    source.peek()  # read once at start

    def on_event(body: dict[str, Any], context: BoltContext) -> None:
        # The rules in force as last read (a `/judge config` change included), never waiting for the database on the
        # acknowledgement's path; the worker applies them to every event again.
        if ignored(body.get("event") or {}, settings, source.peek()):
            return
        # relmon's identity as Bolt's authorization found it: the worker tells relmon's own messages apart by it.
        own = {"user_id": context.bot_user_id, "bot_id": context.bot_id, "app_id": body.get("api_app_id")}
        publish({"body": body, "own": own})

    for event_type in CAPTURED_EVENTS:  # one spool keeps them in order through an outage
        app.event(event_type)(on_event)

    @app.event("app_mention")
    def _mention_is_seen_as_a_message_too() -> None:
        """A mention in a watched channel also arrives as a `message` event, which captures it."""
