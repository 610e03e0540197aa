"""The Slack app, wired in one place: `create_app` builds the Bolt app and its dependencies (bot.deps), and
`register_listeners` attaches every listener module (capture, commands and buttons, App Home, membership events)."""

from __future__ import annotations

from slack_bolt import App

from bot.deps import BotDeps
from bot.listeners import capture, commands, exchange_view, fixes, golden, home, membership_events
from common import celery_app
from common.runtime import Runtime, set_runtime
from store.settings import Settings


def create_app(settings: Settings, runtime: Runtime | None = None, deps: BotDeps | None = None) -> App:
    """A Bolt app on the runtime's Slack client (SLACK_API_URL, Retry-After handling).

    `process_before_response=True`: the answer to an event waits for its publish (bot.publishing: the event's mark,
    its note and Celery's publish), so nothing Slack got a 200 for is lost, and an error there answers 500 and Slack
    retries the event. Commands use lazy listeners, so acknowledgements stay well inside Slack's 3 seconds."""
    runtime = runtime or Runtime(settings)
    set_runtime(runtime)  # the process's own, for code the listeners share with the workers
    celery_app.configure(settings)
    app = App(
        client=runtime.slack,
        signing_secret=settings.secret("slack_signing_secret"),
        process_before_response=True,
        # Checked once: over HTTP bot.server checks every request's signature before Bolt sees it, and Socket Mode
        # requests carry none.
        request_verification_enabled=False,
    )
    deps = deps or BotDeps.build(runtime)
    deps.publisher.prepare()
    register_listeners(app, deps)
    return app


def register_listeners(app: App, deps: BotDeps) -> None:
    capture.register(app, deps)
    commands.register(app, deps)
    home.register(app, deps)
    membership_events.register(app, deps)
    golden.register(app, deps)  # the alerts' "Add to test set"
    fixes.register(app, deps)  # the topics' "Mark fixed"
    exchange_view.register(app, deps)  # an ingested private exchange's alert: "Show the exchange"
