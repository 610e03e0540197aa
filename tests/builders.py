"""The one way tests build relmon's settings (`make_settings`) and install its process runtime
(`installed_runtime`; tests take the `runtime_for` fixture of tests/conftest.py).

A test states only what it is about: the services it runs on (redis_url, database_url, slack_api_url, a fake
LLM's openai_base_url) and the settings under test, on top of TEST_VALUES.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import celery_app
from common.runtime import Runtime, set_runtime
from store.settings import Settings

SECRET = "test-signing-secret"  # the Slack signing secret tests sign their requests with
ALERTS = "C_ALERTS"
CLOSED_PORT = "http://127.0.0.1:9"  # nothing listens there: a call a test did not point at a fake fails at once

TEST_VALUES: dict[str, Any] = {
    "slack_bot_token": "xoxb-test-token",
    "slack_signing_secret": SECRET,
    "slack_api_url": f"{CLOSED_PORT}/api/",
    "openai_api_key": "sk-test",
    "openai_base_url": f"{CLOSED_PORT}/v1",
    "monitored_bots": ["B_SUPPORT"],
    "alert_channel": ALERTS,
    # Alerts on the first verdict: the tests of the second opinion turn it on with a fake LLM.
    "confirm": "off",
    # Each redraw at once: the tests of what a redraw shows; the coalescing has tests of its own.
    "alert_redraw_seconds": 0,
}


def make_settings(**values: Any) -> Settings:
    """Settings for a test: TEST_VALUES with `values` on top, a fresh data folder unless `data_dir` is given (the
    event spool, the embedded Redis and the default SQLite file live there), no `.env` file read."""
    if "data_dir" not in values:
        values["data_dir"] = Path(tempfile.mkdtemp(prefix="relmon-test-"))
    return Settings(_env_file=None, **{**TEST_VALUES, **values})


@contextmanager
def installed_runtime(settings: Settings) -> Iterator[Runtime]:
    """A Runtime for `settings`, installed as the process runtime, with the Celery app configured as `relmon bot`
    and `relmon worker` do (tasks sent go to these settings' broker; tasks run with `.apply()` see them);
    afterwards set_runtime(None) and the database it opened disposed."""
    celery_app.configure(settings)
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        yield runtime
    finally:
        set_runtime(None)
        if "db" in runtime.__dict__:  # only a database it opened (a cached_property)
            runtime.db.dispose()
