"""The bot's spool keeps only what relmon will use, and no more than RELMON_SPOOL_MAX_MB: with Redis down, events
of unwatched channels and of relmon's own alert channel are not kept (live, they would be ignored); past the bound
an event is answered 200 and dropped, with an error line and one warning in the alert channel; what was kept is
handed on once Redis is back."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.processes import wait_for

C = "C_SUPPORT"


def spooled(bot: ServedBot) -> list[dict]:
    """The entries on disk in the bot's spool files (read as another process would)."""
    entries = []
    for path in sorted(Path(bot.settings.data_dir, "spool").glob("bot-*.sqlite3")):
        with sqlite3.connect(path) as db:
            entries += [json.loads(row[0]) for row in db.execute("SELECT entry FROM entries ORDER BY id")]
    return entries


def post(bot: ServedBot, event: dict) -> None:
    assert sr.post(bot.url, sr.envelope(event), SECRET).status_code == 200


def test_only_events_relmon_will_use_are_spooled(make_bot, redis_server) -> None:
    bot = make_bot(watched_channels=[C])
    q_ts = sr.next_ts()
    redis_server.stop()
    try:
        post(bot, sr.human_message(C, q_ts, "question"))
        post(bot, sr.human_message("C_ELSEWHERE", sr.next_ts(), "a channel nobody watches"))
        post(bot, sr.human_message("C_ALERTS", sr.next_ts(), "talk in relmon's alert channel"))
        post(bot, sr.reaction(sr.human_message("C_ELSEWHERE", sr.next_ts(), "x"), "-1"))
        post(bot, sr.bot_message(C, sr.next_ts(), "answer", thread_ts=q_ts))
        channels = [entry["body"]["event"].get("channel") for entry in spooled(bot)]
        assert channels == [C, C]
    finally:
        redis_server.start()
    wait_for(lambda: [p.answer_text for p in bot.pairs()] == ["answer"], timeout=20, what="the spool handed on")


def test_a_full_spool_drops_events_logging_each_but_warning_once(make_bot, redis_server, slack, capture_logs):
    logs = capture_logs()
    bot = make_bot(spool_max_mb=0.01)  # about 10 KB: a few events of 1,000 characters
    q_ts = sr.next_ts()
    redis_server.stop()
    try:
        post(bot, sr.human_message(C, q_ts, "question"))
        for n in range(30):
            post(bot, sr.bot_message(C, sr.next_ts(), f"part {n} " + "x" * 1_000, thread_ts=q_ts))
        kept = spooled(bot)
        assert 3 <= len(kept) < 12
        assert sum(len(json.dumps(entry)) for entry in kept) <= 0.01 * 1024 * 1024
        warnings = wait_for(lambda: slack.posted("C_ALERTS"), timeout=10, what="the spool-full warning")
    finally:
        redis_server.start()
    assert len(warnings) == 1 and "spool is full" in warnings[0]["text"]
    assert "event dropped: the spool is full" in logs.getvalue()
    wait_for(lambda: len(bot.pairs()) >= 1 and not spooled(bot), timeout=20, what="the spool drained")
    assert len(slack.posted("C_ALERTS")) == 1  # once per filling
