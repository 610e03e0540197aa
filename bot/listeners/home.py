"""App Home: on `app_home_opened` (Home tab), publish the last 7 days per channel and the settings in effect.

The app answers events only after their listeners ran (process_before_response), so the queries and
views.publish run in a lazy listener: Slack gets its acknowledgement at once, the view follows.
"""

from __future__ import annotations

from datetime import UTC, datetime

from slack_bolt import App
from slack_sdk import WebClient

from store.settings import Settings


def publish_home(client: WebClient, user_id: str, now: datetime | None = None) -> dict:
    """Build the Home view from the database and publish it for one user; returns the view."""
    # Imported here: the bot process loads the digest code (and matplotlib) only when the Home tab opens.
    from workers.digest.period import period_for
    from workers.messages.home import home_view
    from workers.runtime import get_runtime
    from workers.tasks.digest import load_report

    runtime = get_runtime()
    settings, rules = runtime.settings, runtime.rules
    now = now or datetime.now(UTC)
    report = load_report(runtime, period_for(now, settings.digest_timezone))
    channel_rules = {stats.channel_id: rules.for_channel(stats.channel_id, settings) for stats in report.channels}
    view = home_view(report, settings, rules.for_channel(None, settings), channel_rules, now=now)
    client.views_publish(user_id=user_id, view=view)
    return view


def _acknowledge() -> None:
    """Events need no reply body: returning is the acknowledgement."""


def _publish_for_opener(event: dict, client: WebClient) -> None:
    if event.get("tab", "home") != "home":
        return  # the Messages tab opened: nothing to draw
    publish_home(client, event["user"])


def register(app: App, settings: Settings) -> None:
    app.event("app_home_opened")(ack=_acknowledge, lazy=[_publish_for_opener])
