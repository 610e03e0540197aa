"""The Slack app, wired in one place: `create_app` builds the Bolt app, `register_listeners` attaches every
listener module (capture, commands and buttons, App Home, membership events)."""

from __future__ import annotations

from slack_bolt import App

from common import celery_app
from common.runtime import Runtime, set_runtime
from store.settings import Settings


def create_app(settings: Settings, runtime: Runtime | None = None) -> App:
    """A Bolt app on the runtime's Slack client (SLACK_API_URL, Retry-After handling).

    `process_before_response=True`: the HTTP answer to an event waits for capture, so a failure (Redis,
    broker or database down) answers 500 and Slack retries the event. Slow work goes to Celery, and
    commands use lazy listeners, so acknowledgements stay well inside Slack's 3 seconds."""
    runtime = runtime or Runtime(settings)
    set_runtime(runtime)  # listeners and tasks in this process share it
    celery_app.configure(settings)
    app = App(
        client=runtime.slack,
        signing_secret=settings.secret("slack_signing_secret"),
        process_before_response=True,
        # Socket Mode has no request signatures; over HTTP bot.server checks them before Bolt does too.
        request_verification_enabled=settings.slack_app_token is None,
    )
    register_listeners(app, settings, runtime)
    return app


def register_listeners(app: App, settings: Settings, runtime: Runtime) -> None:
    from bot.listeners import capture, commands, golden, home, membership_events
    from common.membership import MembershipCache

    # One per app: /judge and the Home tab share what Slack said; member events invalidate it (in Redis: for every
    # bot process and worker).
    membership = MembershipCache(runtime.redis)
    capture.register(app, settings)
    commands.register(app, settings, membership)
    home.register(app, settings, membership)
    membership_events.register(app, membership)
    golden.register(app)  # the alerts' "Add to test set"
