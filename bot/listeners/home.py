"""App Home: on `app_home_opened` (Home tab), publish the last 7 days per channel and the settings in effect.

Whoever opens the tab sees the figures of public channels and of the private channels they are a member of, as
`/judge stats` would show them (`common.membership.Viewer`: private as Slack's channel info says, membership as
conversations.members says): a private channel they are not in is left out of the list and of the "All channels"
line, and the view says how many were left out.

The app answers events only after their listeners ran (process_before_response): the lazy listener counts the ask
against the person's limit (RELMON_REPORTS_PER_PERSON_MINUTE) and hands the build to the bot's report thread
(`bot.report_work`), never building on Bolt's listener threads; the view is served from one cached per viewer
class (the channels the person may see, the period, the data's version) for a minute, with the person's own topics.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import partial

from slack_bolt import App
from slack_sdk import WebClient

from bot.deps import BotDeps
from bot.on_demand_limits import take_report
from bot.report_work import ReportWorker
from common.membership import MembershipCache, Refusal, Viewer
from common.reports.view_cache import HOME_VIEW_KEY, cached, viewer_class
from common.runtime import Runtime

log = logging.getLogger("relmon.home")

# Where the person's own topics go in a cached view: the topics quote text only to the channel's members, so they
# are drawn for each person, and the figures around them are shared by everyone of the viewer class.
TOPICS_SLOT = {"type": "context", "block_id": "relmon-topics-slot", "elements": [{"type": "mrkdwn", "text": " "}]}


def publish_home(
    runtime: Runtime, client: WebClient, membership: MembershipCache, user_id: str, now: datetime | None = None
) -> dict:
    """Publish the Home view for one user: the figures cached for their viewer class (`common.reports.view_cache`),
    or read now from the database, with their own topics; returns the view."""
    from common.reports.period import period_for

    now = now or datetime.now(UTC)
    period = period_for(now, runtime.settings.timezone)
    viewer = Viewer(client, membership, user_id)
    key = HOME_VIEW_KEY + viewer_class(runtime, viewer, period)
    figures = cached(runtime.redis, key, lambda: figures_view(runtime, viewer, period, now))
    view = with_topics(figures, topics_blocks(runtime, viewer, now))
    client.views_publish(user_id=user_id, view=view)
    return view


def with_topics(figures: dict, topics: list[dict]) -> dict:
    """The cached view with the person's topics in their slot (and the slot's divider gone when there are none)."""
    blocks = list(figures["blocks"])
    if TOPICS_SLOT in blocks:
        at = blocks.index(TOPICS_SLOT)
        blocks[at : at + 1] = topics
        if not topics and at > 0 and blocks[at - 1] == {"type": "divider"}:
            del blocks[at - 1]
    return {**figures, "blocks": blocks}


def topics_blocks(runtime: Runtime, viewer: Viewer, now: datetime) -> list[dict]:
    """The latest topics as this person may see them: a channel's text only if they are its member and the rule
    quotes it to a person; a topic's name only if they may read every channel it was made from."""
    from common.messages.topics import home_blocks
    from common.privacy import Destination
    from common.reports.topic_runs import latest_view, place_of, quoting_in

    here = Destination(None, viewer.may_read)
    quoting = quoting_in(runtime, here)
    view = latest_view(
        runtime, now, audience_sees=viewer.may_see, may_quote_text=quoting, place=place_of(runtime, here)
    )
    return home_blocks(view)


def figures_view(runtime: Runtime, viewer: Viewer, period, now: datetime) -> dict:
    """The Home view from the database, of what `viewer` may see, with a slot for their topics."""
    # Imported here: the digest's task module registers Celery tasks, which only processes that use them need
    # (gunicorn's master loads it before forking: bot.server.MODULES_BEFORE_FORK).
    from common.messages.home import home_view
    from common.reports.figures import read_report

    settings, rules = runtime.settings, runtime.rules
    figures = read_report(runtime, period, may_see=viewer.may_see)
    configured = set(settings.watched_channels) | set(rules.channels)
    listed = figures.captured_channels | configured
    hidden = sorted(c for c in listed if rules.for_channel(c, settings).watch and not viewer.may_see(c))
    report = figures.report()
    channel_rules = {stats.channel_id: rules.for_channel(stats.channel_id, settings) for stats in report.channels}
    return home_view(
        report,
        settings,
        rules.for_channel(None, settings),
        channel_rules,
        now=now,
        hidden_private=len(hidden),
        topics=[TOPICS_SLOT],
    )


def _acknowledge() -> None:
    """Events need no reply body: returning is the acknowledgement."""


class HomeTab:
    """The lazy half of `app_home_opened`, with the app's runtime and membership cache: it only counts the ask
    against the person's limit and hands the build to the report thread (`bot.report_work`)."""

    def __init__(self, runtime: Runtime, membership: MembershipCache) -> None:
        self.runtime, self.membership = runtime, membership
        self.worker = ReportWorker()

    def publish_for_opener(self, event: dict, client: WebClient) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab opened: nothing to draw
        user = event["user"]
        try:
            take_report(self.runtime.redis, self.runtime.settings, user)
        except Refusal:
            log.info("home not redrawn: the person's report limit is reached", extra={"user": user})
            return  # the tab keeps the view it shows
        self.worker.submit(user, partial(publish_home, self.runtime, client, self.membership, user))


def register(app: App, deps: BotDeps) -> None:
    app.event("app_home_opened")(ack=_acknowledge, lazy=[HomeTab(deps.runtime, deps.membership).publish_for_opener])
