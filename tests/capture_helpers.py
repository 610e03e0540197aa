"""Sending the served bot Slack events and running its capture task again, as a redelivered or late message would:
shared by tests/integration/test_capture_worker.py and test_capture_judging.py."""

from __future__ import annotations

from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from workers.pairs.capturing import capture_answer_in

C = "C_SUPPORT"


def send(bot: ServedBot, event: dict) -> None:
    assert sr.post(bot.url, sr.envelope(event), SECRET).status_code == 200


def run_again(bot: ServedBot, ts: str, thread_ts: str | None) -> str:
    return capture_answer_in(bot.runtime, C, ts, thread_ts=thread_ts, channel_type="channel", ext_shared=False)
