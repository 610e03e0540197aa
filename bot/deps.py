"""What the bot's listeners use, built once per app (bot.app.create_app) and passed to each listener module's
`register(app, deps)`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from bot.publishing import EventPublisher, warn_spool_full
from common.membership import MembershipCache
from common.runtime import Runtime
from store.settings import Settings


@dataclass(frozen=True)
class BotDeps:
    settings: Settings
    runtime: Runtime  # the database, Redis, Slack client and channel rules of this process
    membership: MembershipCache  # /judge and the Home tab share what Slack said; member events invalidate it
    publisher: EventPublisher  # events to the workers, through the spool while an outage lasts

    @classmethod
    def build(cls, runtime: Runtime) -> BotDeps:
        settings = runtime.settings
        publisher = EventPublisher(
            runtime.redis,
            settings.data_dir / "spool",
            max_bytes=int(settings.spool_max_mb * 1024 * 1024),
            on_full=partial(warn_spool_full, runtime.slack, settings.alert_channel),
        )
        return cls(settings, runtime, MembershipCache(runtime.redis), publisher)
