"""What the bot's listeners use, built once per app (bot.app.create_app) and passed to each listener module's
`register(app, deps)`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from bot.event_path import CaptureEvents
from bot.hand_on import EventHandOn, warn_spool_full
from capture.conversation_log import ConversationLog
from common.celery_app import broker_url_for
from common.membership import MembershipCache
from common.runtime import Runtime
from store.settings import Settings


@dataclass(frozen=True)
class BotDeps:
    settings: Settings
    runtime: Runtime  # the database, Redis, Slack client and channel rules of this process
    membership: MembershipCache  # /judge and the Home tab share what Slack said; member events invalidate it
    hand_on: EventHandOn  # events to the workers, through the spool while an outage lasts
    events: CaptureEvents  # message and reaction events to the hand-on: the capture listener's and bot.server's

    @classmethod
    def build(cls, runtime: Runtime) -> BotDeps:
        settings = runtime.settings
        hand_on = EventHandOn(
            runtime.redis,
            settings.data_dir / "spool",
            broker_url=broker_url_for(settings),
            max_bytes=int(settings.spool_max_mb * 1024 * 1024),
            on_full=partial(warn_spool_full, runtime.slack, settings.alert_channel),
            conversation_log=ConversationLog(runtime.redis, settings.question_ttl_seconds),
            monitored=settings.monitored_bots,
        )
        events = CaptureEvents(settings, runtime.rules, hand_on)
        return cls(settings, runtime, MembershipCache(runtime.redis), hand_on, events)
