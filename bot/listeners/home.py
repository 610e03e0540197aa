"""App Home: on `app_home_opened` (Home tab), publish the last 7 days per channel and the settings in effect.

Bolt acknowledges the event before the listener runs (process_before_response is off), so the few queries
here never delay the acknowledgement.
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


def register(app: App, settings: Settings) -> None:
    @app.event("app_home_opened")
    def on_home_opened(event: dict, client: WebClient) -> None:
        if event.get("tab", "home") != "home":
            return  # the Messages tab opened: nothing to draw
        publish_home(client, event["user"])
