"""Capture listener: every `message` event (all subtypes) and reaction in watched channels is deduplicated and
handed on to a worker (bot.hand_on) before Slack gets its acknowledgement; events nothing is captured of are
dropped first, from the event alone (capture.events.ignored). The worker reads the conversation, pairs and records
(workers.live_capture, workers.tasks.events). Over HTTP, once this listener has run, bot.server hands those events
to the same code without Bolt (bot.event_path)."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext

from bot.deps import BotDeps
from bot.event_path import CAPTURED_EVENTS


def register(app: App, deps: BotDeps) -> None:
    events = deps.events

    def on_event(body: dict[str, Any], context: BoltContext) -> None:
        events.from_listener(body, context.bot_user_id, context.bot_id)

    for event_type in CAPTURED_EVENTS:  # one spool keeps them in order through an outage
        app.event(event_type)(on_event)

    @app.event("app_mention")
    def _mention_is_seen_as_a_message_too() -> None:
        """A mention in a watched channel also arrives as a `message` event, which captures it."""
