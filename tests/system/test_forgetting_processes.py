"""A deletion reaches every copy, through a real `relmon bot` and a real `relmon worker`: unique markers planted in
a question, in an answer and in words an edit takes out, each judged (the fake judge quotes everything it read)
and alerted; then the question and the answer are deleted and the edit made by signed Slack events. Within a
minute no table of the database, no Redis key, no file of Redis's append-only file on disk, nothing in the bot's
data folder (its spool) and no Slack call made after the deletions holds a marker; the alerts were redrawn saying
the message was deleted. The rules themselves: tests/unit/test_forgetting.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy import MetaData, select

from store.db import Database
from store.models import Judgment, Pair
from tests import slack_requests as sr
from tests.broker import wait_until_idle
from tests.fakes.openai_server import prompt_text
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, CHANNEL, add_support_channel, relmon_processes
from tests.services import RedisProcess

pytestmark = pytest.mark.slow

QUESTION_MARK = "QMARK7731Z"  # in a question, then deleted
ANSWER_MARK = "AMARK4409Z"  # in an answer already judged, then deleted
EDIT_MARK = "EMARK5518Z"  # in a question, then edited out
MARKERS = (QUESTION_MARK, ANSWER_MARK, EDIT_MARK)


def quoting_judge(body: dict) -> str:
    """A judge that repeats what it read of the conversation (as judges do; the lines with a marker, within its
    reply bound) and scores it 0: every answer alerts."""
    quoted = [line for line in prompt_text(body).splitlines() if any(marker in line for marker in MARKERS)]
    return json.dumps({"score": 0, "reasoning": "It read: " + " / ".join(quoted)[:1500]})


def redis_values(client: redis.Redis) -> bytes:
    """Every key of Redis and every value under it, as one blob."""
    blob = []
    for key in client.scan_iter(count=1000):
        blob.append(key)
        kind = client.type(key)
        if kind == b"string":
            blob.append(client.get(key) or b"")
        elif kind == b"list":
            blob.extend(client.lrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                blob.extend((field, value))
        elif kind == b"set":
            blob.extend(client.smembers(key))
        elif kind == b"zset":
            blob.extend(client.zrange(key, 0, -1))
        elif kind == b"stream":
            blob.append(repr(client.xrange(key)).encode())
    return b"\n".join(blob)


def database_values(url: str) -> str:
    """Every row of every table, as text."""
    database = Database(url)
    try:
        metadata = MetaData()
        metadata.reflect(database.engine)
        with database.engine.connect() as connection:
            return "\n".join(repr(row) for table in metadata.sorted_tables for row in connection.execute(select(table)))
    finally:
        database.dispose()


def files_under(directory: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in directory.rglob("*") if path.is_file()}


def aof_files(directory: Path) -> set[tuple[str, int]]:
    """The append-only file(s) and their inodes: a rewrite replaces them (Redis 6's one file, Redis 7's folder)."""
    return {(path.name, path.stat().st_ino) for path in directory.rglob("*.aof*") if path.is_file()}


def rewritten(client: redis.Redis, directory: Path, before: set[tuple[str, int]]) -> bool:
    info = client.info("persistence")
    idle = not int(info["aof_rewrite_in_progress"]) and not int(info.get("aof_rewrite_scheduled", 0))
    return idle and aof_files(directory) != before


def test_words_taken_out_of_the_conversation_leave_every_copy_within_a_minute(
    redis_server: RedisProcess, redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    with FakeSlack() as slack:
        add_support_channel(slack)
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=fresh_db_url,
            directory=tmp_path,
            slack=slack,
            start=("worker", "bot"),
            RELMON_SETTLE_SECONDS=0,
            RELMON_CONFIRM="off",
            RELMON_HISTORY_FALLBACK="false",
            RELMON_DEGRADATION_WINDOW_MINUTES=0,
            RELMON_ALERT_CAP_PER_HOUR=1000,
        ) as system:
            system.llm.set_reply(quoting_judge)
            # A: a question with a marker, answered, then a follow-up in its thread (whose earlier turns quote it).
            question = sr.human_message(CHANNEL, sr.next_ts(), f"My order {QUESTION_MARK} was charged twice, why?")
            answer = sr.bot_message(CHANNEL, sr.next_ts(), "Refunds take five days.", thread_ts=question["ts"])
            follow_up = sr.human_message(CHANNEL, sr.next_ts(), "And the fee?", thread_ts=question["ts"])
            second = sr.bot_message(CHANNEL, sr.next_ts(), "No fee applies.", thread_ts=question["ts"])
            # B: an answer with a marker. C: a question whose marker an edit takes out.
            asked = sr.human_message(CHANNEL, sr.next_ts(), "Where do I see my invoices?")
            marked_answer = sr.bot_message(CHANNEL, sr.next_ts(), f"Call us at {ANSWER_MARK}.", thread_ts=asked["ts"])
            edited = sr.human_message(CHANNEL, sr.next_ts(), f"Reset my account {EDIT_MARK} please")
            edited_answer = sr.bot_message(CHANNEL, sr.next_ts(), "Open Settings, then Reset.", thread_ts=edited["ts"])
            for event in (question, answer, follow_up, second, asked, marked_answer, edited, edited_answer):
                assert system.post_event(event).status_code == 200
                time.sleep(0.3)  # each answer is judged with the turns before it in the log

            wait_for(lambda: len(slack.posted(ALERTS)) == 4, timeout=90, what="the four answers alerted")
            # The follow-up's outcome signals redraw the first alert a moment later: every task that was set off
            # before the deletions has run (nothing queued or held), so what Slack gets from here on follows them.
            wait_until_idle(redis_url, what="the alerts' redraws run")
            assert all(marker in database_values(fresh_db_url) for marker in MARKERS)  # planted where it is kept
            before = len(slack.calls)
            aof_before = aof_files(redis_server.directory)
            started = time.monotonic()
            for event in (
                sr.message_deleted(question),
                sr.message_deleted(marked_answer),
                sr.message_changed(edited, "Reset my account please"),
            ):
                assert system.post_event(event).status_code == 200

            def redrawn() -> list[dict]:
                updates = [call for call in slack.calls_to("chat.update") if call.get("channel") == ALERTS]
                return [call for call in updates if ":wastebasket:" in json.dumps(call)]

            wait_for(lambda: len(redrawn()) >= 4, timeout=60, what="the four alerts redrawn saying so")
            wait_for(
                lambda: rewritten(client, redis_server.directory, aof_before),
                timeout=60,
                what="Redis's append-only file rewritten",
            )
            took = time.monotonic() - started
            later_calls = json.dumps(slack.calls[before:], default=str)
            stored = database_values(fresh_db_url)
            in_redis = redis_values(client)
            on_disk = files_under(redis_server.directory) | files_under(tmp_path / "data")
            notes = json.dumps(redrawn())

    assert took < 60, took
    for marker in MARKERS:
        assert marker not in stored, f"{marker} is still in the database"
        assert marker.encode() not in in_redis, f"{marker} is still in a Redis key"
        for path, content in on_disk.items():
            assert marker.encode() not in content, f"{marker} is still in {path}"
        assert marker not in later_calls, f"{marker} was sent to Slack after the deletion"
    assert "The question was deleted in Slack" in notes and "The answer was deleted in Slack" in notes
    assert "edited out" in notes
    with Database(fresh_db_url).session() as session:  # the scores stay
        scores = session.execute(select(Judgment.score)).scalars().all()
        assert scores == [0.0, 0.0, 0.0, 0.0]
        kept = {p.question_ts: p.question_text for p in session.execute(select(Pair)).scalars()}
        assert kept[question["ts"]] is None and kept[edited["ts"]] == "Reset my account [removed] please"
