"""A deletion reaches every copy, through a real `relmon bot` and a real `relmon worker`: unique markers planted in
a question, in an answer and in words an edit takes out, each judged (the fake judge quotes everything it read)
and alerted; then the question and the answer are deleted and the edit made by signed Slack events. Within a
minute no table of the database, no Redis key, no file of Redis's append-only file on disk, nothing in the bot's
data folder (its spool) and no Slack call made after the deletions holds a marker; the alerts were redrawn saying
the message was deleted. A teammate's reply that a golden item took as its expected answer, judged with the
question's thread by a `relmon regress` run, is deleted too: the run's checks and report keep neither it nor the
deleted question. A judging backlog of 10,000 pairs does not hold a deletion up past the minute. The rules
themselves: tests/unit/test_forgetting.py."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import redis
from sqlalchemy import MetaData, select

from common.celery_app import QUEUE_JUDGE
from common.task_names import JUDGE_PAIR
from store.db import Database
from store.golden_models import GoldenItem, RegressCheck, RegressRun
from store.models import Judgment, Pair
from tests import slack_requests as sr
from tests.broker import publish_in_bulk, wait_until_idle
from tests.fakes.openai_server import prompt_text
from tests.fakes.slack_server import FakeSlack
from tests.pipeline_helpers import add_pairs
from tests.processes import relmon_command, wait_for
from tests.running_system import ALERTS, CHANNEL, add_support_channel, relmon_processes
from tests.services import RedisProcess

pytestmark = pytest.mark.slow

QUESTION_MARK = "QMARK7731Z"  # in a question, then deleted
ANSWER_MARK = "AMARK4409Z"  # in an answer already judged, then deleted
EDIT_MARK = "EMARK5518Z"  # in a question, then edited out
REPLY_MARK = "RMARK6620Z"  # in a teammate's reply (a golden item's expected answer), then deleted
MARKERS = (QUESTION_MARK, ANSWER_MARK, EDIT_MARK, REPLY_MARK)


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


def golden_item_quoting(url: str, text: str) -> int | None:
    """The golden item whose expected answer holds `text` (a teammate's reply), once collected."""
    database = Database(url)
    try:
        with database.reading() as session:
            return session.scalar(select(GoldenItem.id).where(GoldenItem.expected.contains(text)))
    finally:
        database.dispose()


def regress_quoting(env: dict[str, str], directory: Path, item_id: int) -> None:
    """`relmon regress`, a process of its own on the same database and fake LLM, judging one candidate for the item:
    its checks and its report are stored (the quoting judge fails it: exit 1)."""
    candidates = directory / "candidates.jsonl"
    candidates.write_text(json.dumps({"id": item_id, "answer": "The fee is refunded."}) + "\n", encoding="utf-8")
    run = subprocess.run(relmon_command("regress", str(candidates)), env=env, capture_output=True, timeout=120)
    assert run.returncode in (0, 1), run.stderr.decode()[-2000:]


def regress_values(url: str) -> str:
    """Every check's verdict and every run's report, as text."""
    database = Database(url)
    try:
        with database.reading() as session:
            rows = [*session.scalars(select(RegressCheck.verdict)), *session.scalars(select(RegressRun.report))]
            return json.dumps(rows)
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
        add_support_channel(slack, members=("U_ASKER", "U_AGENT", "U_RELMON"))
        slack.add_user("U_AGENT", "sam", "Sam Lee")
        slack.add_channel(ALERTS, "alerts", members=["U_AGENT", "U_RELMON"])  # staff: in the alert channel
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
            # D: a teammate answers the follow-up: its question (whose earlier turns quote A's) joins the golden set
            # with the reply as its expected answer, and `relmon regress` judges a candidate against it (the judge
            # quotes the earlier turn and the reply in its reasoning, the report quotes the question).
            reply = sr.human_message(CHANNEL, sr.next_ts(), f"Sam here: the fee is waived, ref {REPLY_MARK}.",
                                     user="U_AGENT", thread_ts=question["ts"])  # fmt: skip
            assert system.post_event(reply).status_code == 200
            item_id = wait_for(lambda: golden_item_quoting(fresh_db_url, REPLY_MARK), timeout=30, what="the item")
            regress_quoting(system.env, tmp_path, item_id)
            # The follow-up's outcome signals redraw the first alert a moment later: every task that was set off
            # before the deletions has run (nothing queued or held), so what Slack gets from here on follows them.
            wait_until_idle(redis_url, what="the alerts' redraws run")
            assert all(marker in database_values(fresh_db_url) for marker in MARKERS)  # planted where it is kept
            in_regress = regress_values(fresh_db_url)
            assert QUESTION_MARK in in_regress and REPLY_MARK in in_regress  # in the reasoning and the raw output
            before = len(slack.calls)
            aof_before = aof_files(redis_server.directory)
            started = time.monotonic()
            for event in (
                sr.message_deleted(question),
                sr.message_deleted(marked_answer),
                sr.message_changed(edited, "Reset my account please"),
                sr.message_deleted(reply),
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
    assert "[deleted]" in regress_values(fresh_db_url)  # the regress rows are kept, scrubbed
    assert "edited out" in notes
    with Database(fresh_db_url).session() as session:  # the scores stay
        # (The teammate's reply is a reference: the follow-up's answer is judged against it too.)
        scores = session.execute(select(Judgment.score).where(Judgment.judge == "relevancy")).scalars().all()
        assert scores == [0.0, 0.0, 0.0, 0.0]
        kept = {p.question_ts: p.question_text for p in session.execute(select(Pair)).scalars()}
        assert kept[question["ts"]] is None and kept[edited["ts"]] == "Reset my account [removed] please"


BACKLOG = 10_000  # judge_pair messages queued ahead of the deletion (pairs a worker takes seconds each to judge)
BACKLOG_MARK = "BMARK2290Z"


def test_a_deletion_is_carried_out_within_a_minute_behind_a_judging_backlog(
    redis_url: str, fresh_db_url: str, tmp_path: Path, producer
) -> None:
    """10,000 pending pairs, each queued for judging by an LLM that takes 1 s a call (a worker of 8 slots would
    take over 20 minutes): a question deleted meanwhile is scrubbed within the minute, ahead of the backlog, since the
    deletion's event and its scrub have a queue of their own (common.celery_app.route_task)."""
    client = redis.Redis.from_url(redis_url)
    database = Database(fresh_db_url)
    with relmon_processes(
        redis_url=redis_url,
        database_url=fresh_db_url,
        directory=tmp_path,
        start=("worker", "bot"),
        RELMON_SETTLE_SECONDS=0,
        RELMON_CONFIRM="off",
        RELMON_HISTORY_FALLBACK="false",
        RELMON_WORKER_CONCURRENCY=8,
    ) as system:
        question = sr.human_message(CHANNEL, sr.next_ts(), f"My order {BACKLOG_MARK} never came, where is it?")
        answer = sr.bot_message(CHANNEL, sr.next_ts(), "It ships tomorrow.", thread_ts=question["ts"])
        for event in (question, answer):
            assert system.post_event(event).status_code == 200
            time.sleep(0.3)

        def question_text() -> tuple[str | None, ...]:
            with database.reading() as session:
                return tuple(session.scalars(select(Pair.question_text).where(Pair.question_ts == question["ts"])))

        def judged() -> bool:
            with database.reading() as session:
                return (
                    session.scalar(select(Judgment.id).join(Pair).where(Pair.question_ts == question["ts"])) is not None
                )

        wait_for(judged, timeout=60, what="the marked question's answer judged")
        assert BACKLOG_MARK in (question_text()[0] or "")
        system.llm.set_behavior(latency_ms=1000)
        waiting = add_pairs(database, BACKLOG, channel="C_BACKLOG")
        assert publish_in_bulk(producer, client, JUDGE_PAIR, ([pair_id] for pair_id in waiting), QUEUE_JUDGE) == BACKLOG
        busy = len(system.llm.requests)
        wait_for(lambda: len(system.llm.requests) >= busy + 8, timeout=30, what="every slot judging the backlog")
        started = time.monotonic()
        assert system.post_event(sr.message_deleted(question)).status_code == 200
        wait_for(lambda: question_text() == (None,), timeout=60, interval=0.2, what="the deleted question scrubbed")
        took = time.monotonic() - started
        still_queued = client.llen(QUEUE_JUDGE)
        stored = database_values(fresh_db_url)
    database.dispose()
    assert took < 60, took
    assert still_queued > BACKLOG - 1_000, still_queued  # the backlog was still there: the deletion went ahead of it
    assert BACKLOG_MARK not in stored
