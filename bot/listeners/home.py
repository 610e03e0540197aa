"""App Home: on `app_home_opened` (Home tab), publish the last 7 days per channel and the settings in effect.

Whoever opens the tab sees the figures of public channels and of the private channels they are a member of, as
`/judge stats` would show them (`common.membership.Viewer`: private as Slack's channel info says, membership as
conversations.members says): a private channel they are not in is left out of the list and of the "All channels"
line, and the view says how many were left out.

The app answers events only after their listeners ran (process_before_response), so the queries and
views.publish run in a lazy listener: Slack gets its acknowledgement at once, the view follows.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from slack_bolt import App
from slack_sdk import WebClient

from bot.deps import BotDeps
from common.membership import MembershipCache, Viewer
from common.runtime import Runtime

log = logging.getLogger("relmon.home")


def publish_home(
    runtime: Runtime, client: WebClient, membership: MembershipCache, user_id: str, now: datetime | None = None
) -> dict:
    """Build the Home view from the database for one user and publish it; returns the view."""
    # Imported here: the digest's task module registers Celery tasks, which only processes that use them need
    # (gunicorn's master loads it before forking: bot.server.MODULES_BEFORE_FORK).
    from common.messages.home import home_view
    from common.messages.topics import home_blocks
    from common.privacy import Destination
    from common.reports.figures import read_report
    from common.reports.period import period_for
    from common.reports.topic_runs import latest_view, quoting_in

    settings, rules = runtime.settings, runtime.rules
    now = now or datetime.now(UTC)
    period = period_for(now, settings.digest_timezone)
    viewer = Viewer(client, membership, user_id)
    figures = read_report(runtime, period, may_see=viewer.may_see)
    configured = set(settings.watched_channels) | set(rules.channels)
    listed = figures.captured_channels | configured
    hidden = sorted(c for c in listed if rules.for_channel(c, settings).watch and not viewer.may_see(c))
    report = figures.report()
    channel_rules = {stats.channel_id: rules.for_channel(stats.channel_id, settings) for stats in report.channels}
    # A person's Home tab: a channel's text only if they are its member and the rule quotes it to a person.
    quoting = quoting_in(runtime, Destination(None, viewer.may_read))
    topics = latest_view(runtime, now, audience_sees=viewer.may_see, may_quote_text=quoting)
    view = home_view(
        report,
        settings,
        rules.for_channel(None, settings),
        channel_rules,
        now=now,
        hidden_private=len(hidden),
        topics=home_blocks(topics),
    )
    client.views_publish(user_id=user_id, view=view)
    return view


def _acknowledge() -> None:
    """Events need no reply body: returning is the acknowledgement."""


class HomeTab:
    """The lazy half of `app_home_opened`, with the app's runtime and membership cache."""

    def __init__(self, runtime: Runtime, membership: MembershipCache) -> None:
        self.runtime, self.membership = runtime, membership

    def publish_for_opener(self, event: dict, client: WebClient) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab opened: nothing to draw
        publish_home(self.runtime, client, self.membership, event["user"])


def register(app: App, deps: BotDeps) -> None:
    app.event("app_home_opened")(ack=_acknowledge, lazy=[HomeTab(deps.runtime, deps.membership).publish_for_opener])
