"""JSON log lines captured in this process: the settings' secrets and texts the logging tests look for."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from common.telemetry.logs import setup_logging
from tests.builders import make_settings

BOT_TOKEN = "xoxb-1111-2222-AbCdEfGhIjKlMnOp"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
OPENAI_KEY = "sk-proj-QwErTyUiOpAsDfGhJkL0987"
QUESTION = "How do I reset the flux capacitor on my Model 7?"
ANSWER = "Unplug it, wait ten seconds, then hold the blue button."


@contextmanager
def captured_logs() -> Iterator[Callable[..., io.StringIO]]:
    """`start(level, **settings)` sets relmon's logging up on a fresh stream (returned) with these secrets;
    the root logger's handlers and level come back after."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level

    def start(level: str = "INFO", **settings: object) -> io.StringIO:
        stream = io.StringIO()
        values = {
            "slack_bot_token": BOT_TOKEN,
            "slack_signing_secret": SIGNING_SECRET,
            "openai_api_key": OPENAI_KEY,
            "log_level": level,
            **settings,
        }
        setup_logging(make_settings(**values), "test", stream=stream)
        return stream

    try:
        yield start
    finally:
        root.handlers[:], root.level = saved_handlers, saved_level


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]
