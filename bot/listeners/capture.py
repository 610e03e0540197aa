"""Capture listener: every `message` event (all subtypes) and reaction in watched channels is deduplicated and
handed on to a worker (bot.hand_on) before Slack gets its acknowledgement; events nothing is captured of are
dropped first, from the event alone (capture.events.ignored). The worker reads the conversation, pairs and records
(workers.live_capture, workers.tasks.events)."""

from __future__ import annotations

from typing import Any

from slack_bolt import App, BoltContext

from bot.deps import BotDeps
from capture.events import REACTION_EVENTS, ignored


def register(app: App, deps: BotDeps) -> None:
    settings, rules, hand_on = deps.settings, deps.runtime.rules, deps.hand_on

    def on_event(body: dict[str, Any], context: BoltContext) -> None:
        if ignored(body.get("event") or {}, settings, rules):
            return
        own = {"user_id": context.bot_user_id, "bot_id": context.bot_id, "app_id": body.get("api_app_id")}
        hand_on({"body": body, "own": own})

    for event_type in ("message", *REACTION_EVENTS):  # one spool keeps them in order through an outage
        app.event(event_type)(on_event)

    @app.event("app_mention")
    def _mention_is_seen_as_a_message_too() -> None:
        """A mention in a watched channel also arrives as a `message` event, which captures it."""
