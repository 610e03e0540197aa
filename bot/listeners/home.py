"""App Home: on `app_home_opened` (Home tab), publish the last 7 days per channel and the settings in effect.

Whoever opens the tab sees the figures of public channels and of the private channels they are a member of, as
`/judge stats` would show them (the same membership check, conversations.members): a private channel they are not
in is left out of the list and of the "All channels" line, and the view says how many were left out.

The app answers events only after their listeners ran (process_before_response), so the queries and
views.publish run in a lazy listener: Slack gets its acknowledgement at once, the view follows.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime

from slack_bolt import App
from slack_sdk import WebClient

from bot.membership import MembershipCache
from store.settings import Settings

log = logging.getLogger("relmon.home")


class Viewer:
    """Which channels' figures one person may see, decided once per channel for one view build. A channel is
    private when any of its pairs in the period (or the one before) was captured in a private conversation;
    its figures are shown only to its members (relmon must see the channel to vouch for anyone)."""

    def __init__(self, client: WebClient, membership: MembershipCache, user_id: str, rows: Iterable) -> None:
        self.client, self.membership, self.user_id = client, membership, user_id
        self.private = {row.channel_id for row in rows if row.channel_id and row.channel_is_private}
        self._allowed: dict[str, bool] = {}

    def may_see(self, channel_id: str) -> bool:
        if channel_id not in self.private:
            return True
        allowed = self._allowed.get(channel_id)
        if allowed is None:
            try:
                allowed = self.membership.is_member(self.client, channel_id, self.user_id) is True
            except Exception:  # Slack failed to answer: the safe side, not shown this time
                log.warning("could not check channel membership for the Home tab", extra={"channel": channel_id})
                allowed = False
            self._allowed[channel_id] = allowed
        return allowed


def publish_home(client: WebClient, membership: MembershipCache, user_id: str, now: datetime | None = None) -> dict:
    """Build the Home view from the database for one user and publish it; returns the view."""
    # Imported here: the digest's task module registers Celery tasks, which only processes that use them need
    # (gunicorn's master loads it before forking: bot.server.MODULES_BEFORE_FORK).
    from common.messages.home import home_view
    from common.reports.figures import load_rows, report_from
    from common.reports.period import period_for
    from common.reports.stats import captured
    from common.runtime import get_runtime

    runtime = get_runtime()
    settings, rules = runtime.settings, runtime.rules
    now = now or datetime.now(UTC)
    period = period_for(now, settings.digest_timezone)
    current, previous = load_rows(runtime, period)
    viewer = Viewer(client, membership, user_id, [*current, *previous])
    configured = set(settings.watched_channels) | set(rules.channels)
    listed = {row.channel_id for row in captured(current) if row.channel_id} | configured
    hidden = sorted(c for c in listed if rules.for_channel(c, settings).watch and not viewer.may_see(c))
    report = report_from(runtime, period, current, previous, may_see=viewer.may_see)
    channel_rules = {stats.channel_id: rules.for_channel(stats.channel_id, settings) for stats in report.channels}
    view = home_view(
        report, settings, rules.for_channel(None, settings), channel_rules, now=now, hidden_private=len(hidden)
    )
    client.views_publish(user_id=user_id, view=view)
    return view


def _acknowledge() -> None:
    """Events need no reply body: returning is the acknowledgement."""


class HomeTab:
    """The lazy half of `app_home_opened`, with the app's membership cache."""

    def __init__(self, membership: MembershipCache) -> None:
        self.membership = membership

    def publish_for_opener(self, event: dict, client: WebClient) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab opened: nothing to draw
        publish_home(client, self.membership, event["user"])


def register(app: App, settings: Settings, membership: MembershipCache) -> None:
    app.event("app_home_opened")(ack=_acknowledge, lazy=[HomeTab(membership).publish_for_opener])
