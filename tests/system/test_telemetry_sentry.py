"""Sentry: errors reach the (fake) Sentry endpoint with the Celery integration, and no question, answer or token
ever does. Each scenario runs in a subprocess of its own (sentry_sdk.init is process-global): a Celery worker, then
the real bot and worker against a database that refuses the texts; last, the fake's envelope parser. The scrubbers
one by one: tests/system/test_sentry_scrubbing.py."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.db import Database
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.fakes.sentry_server import FakeSentry, parse_envelope
from tests.processes import json_lines, wait_for
from tests.running_system import SECRET, relmon_processes
from tests.sentry_texts import ANSWER, BOT_TOKEN, LLM_URL, OPENAI_KEY, QUESTION, RESPONSE_URL, SECRETS
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url

ROOT = Path(__file__).resolve().parents[2]


def run_script(script: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "OPENAI_", "RELMON_", "SENTRY"))}
    clean.pop("REDIS_URL", None)
    clean.pop("DATABASE_URL", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def assert_nothing_leaked(sentry: FakeSentry) -> None:
    raw = sentry.raw_text()
    for secret in SECRETS:
        assert secret not in raw, f"{secret!r} reached Sentry"


CELERY_SCRIPT = """
    import sentry_sdk

    from store.settings import Settings
    from common.celery_app import configure
    from common.telemetry.logs import setup_logging

    settings = Settings()
    setup_logging(settings, "worker")  # starts Sentry too, as relmon worker does, before Celery's worker loads
    from celery.contrib.testing.worker import start_worker
    app = configure(settings)
    app.conf.update(result_backend="cache+memory://", task_ignore_result=False)

    @app.task(name="probe.judge_with_texts")
    def judge_with_texts(pair_id, question, answer, token):
        prompt = f"Q: {{question}}\\nA: {{answer}}"  # a local holding both texts
        import logging
        logging.getLogger("probe").warning("no post to %s", {response_url!r})  # short: kept, but for the URL
        logging.getLogger("probe").warning("no answer from %s", {llm_url!r})
        query = "cursor=QueryStringSecret"
        sentry_sdk.add_breadcrumb(category="httplib", data={{"url": {llm_url!r}, "http.query": query}})
        sentry_sdk.add_breadcrumb(category="httplib", data={{"url": {response_url!r}, "method": "POST"}})
        raise RuntimeError(f"judging pair {{pair_id}} failed")

    with start_worker(app, pool="solo", perform_ping_check=False, loglevel="WARNING", shutdown_timeout=10):
        result = judge_with_texts.delay(7, {question!r}, {answer!r}, {token!r})
        result.get(timeout=30, propagate=False)
        assert result.failed(), result.state
    assert sentry_sdk.get_client().is_active()
    sentry_sdk.flush(timeout=10)
    print("done")
"""


@pytest.mark.timeout(90)
def test_a_failing_celery_task_reports_without_texts_or_tokens(redis_url: str, tmp_path: Path) -> None:
    with FakeSentry() as sentry:
        script = CELERY_SCRIPT.format(
            question=QUESTION, answer=ANSWER, token=BOT_TOKEN, response_url=RESPONSE_URL, llm_url=LLM_URL
        )
        env = {
            "SENTRY_DSN": sentry.dsn,
            "REDIS_URL": redis_url,
            "RELMON_DATA_DIR": str(tmp_path),
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "OPENAI_API_KEY": OPENAI_KEY,
        }
        result = run_script(script, env)
        assert result.returncode == 0, result.stderr[-3000:]
        events = sentry.wait_for_events(1)
        assert events, "no event reached Sentry"
        crashes = [e for e in events if any(v.get("type") == "RuntimeError" for v in e["exception"]["values"])]
        assert crashes, events
        event = crashes[0]
        assert event["exception"]["values"][-1]["value"] == "judging pair 7 failed"
        assert event["exception"]["values"][-1]["mechanism"]["type"] == "celery"  # the Celery integration
        assert event["tags"]["component"] == "worker"
        assert "probe.judge_with_texts" in sentry.raw_text()  # the task name is kept; its arguments are not
        frames = event["exception"]["values"][-1]["stacktrace"]["frames"]
        assert all("vars" not in frame for frame in frames)
        crumbs = [c for c in event["breadcrumbs"]["values"] if c.get("category") == "httplib"]
        assert len(crumbs) == 2  # they arrive, without the response_url's path or the URL's query (SECRETS)
        assert_nothing_leaked(sentry)
        assert BOT_TOKEN not in result.stderr and QUESTION not in result.stderr  # nor in the logs


# A real bot (relmon's gunicorn server) and a real worker whose database refuses these texts: PostgreSQL's error
# then quotes the whole failing row (DETAIL: Failing row contains (...)), which hide_parameters does not cover.
REFUSING_CONSTRAINT = """
    ALTER TABLE pairs ADD CONSTRAINT refuses_test_texts CHECK (
        coalesce(answer_text, '') NOT LIKE '%%duplicate charges%%'
        AND coalesce(question_text, '') NOT LIKE '%%charged twice%%'
    )
"""
SECOND_QUESTION = "I was charged twice again for order 99812, can you check my Visa statement?"
SECOND_ANSWER = "Your refund for that second charge is already on its way to you."


@pytest.fixture
def refusing_database() -> Iterator[str]:
    admin = postgres_admin_url()
    if admin is None:
        pytest.skip("no PostgreSQL server (set RELMON_TEST_POSTGRES_URL)")
    url, name = create_postgres_database(admin)
    database = Database(url)
    try:
        database.migrate()
        with database.engine.begin() as connection:
            connection.exec_driver_sql(REFUSING_CONSTRAINT)
        database.dispose()
        yield url
    finally:
        database.dispose()
        drop_postgres_database(admin, name)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_database_errors_of_the_real_processes_are_reported_without_texts(
    redis_url: str, refusing_database: str, tmp_path: Path
) -> None:
    with (
        FakeSentry() as sentry,
        relmon_processes(
            redis_url=redis_url,
            database_url=refusing_database,
            directory=tmp_path,
            SENTRY_DSN=sentry.dsn,
            SLACK_BOT_TOKEN=BOT_TOKEN,
            OPENAI_API_KEY=OPENAI_KEY,
            RELMON_SETTLE_SECONDS="0",
        ) as system,
    ):
        bot, worker = system.bot, system.worker
        # 1. The worker's insert of the answer fails (capture_event).
        question = sr.human_message("C_SUPPORT", sr.next_ts(), QUESTION, user="U_ASKER")
        answer = sr.bot_message("C_SUPPORT", sr.next_ts(), ANSWER, thread_ts=question["ts"])
        # 2. The answer is stored, but the worker's settle fails writing the question.
        second = sr.human_message("C_SUPPORT", sr.next_ts(), SECOND_QUESTION, user="U_ASKER")
        reply = sr.bot_message("C_SUPPORT", sr.next_ts(), SECOND_ANSWER, thread_ts=second["ts"])
        for event in (question, answer, second, reply):
            assert system.post_event(event).status_code == 200  # the bot stores nothing before it answers
        # 3. The bot's own insert fails: the /judge modal submitted with a pasted answer stores an on-demand pair.
        modal = si.payload_body(si.view_submission_payload(question=QUESTION, answer=ANSWER))
        assert sr.post(system.base_url + "/slack/events", modal, SECRET).status_code == 200

        def components() -> set[str]:
            return {e.get("tags", {}).get("component") for e in sentry.events() if e.get("exception")}

        wait_for(lambda: {"bot", "worker"} <= components(), timeout=60, what="errors from the bot and the worker")
        bot.stop()
        worker.stop()

        events = [e for e in sentry.events() if e.get("exception")]
        types = {value["type"] for e in events for value in e["exception"]["values"]}
        assert types & {"IntegrityError", "CheckViolation"}, types  # the error classes are kept
        raw = sentry.raw_text()
        logs = bot.log() + worker.log()
        for text in (QUESTION, ANSWER, SECOND_QUESTION, SECOND_ANSWER, "charged twice", "duplicate charges", BOT_TOKEN):
            assert text not in raw, f"{text!r} reached Sentry"
            assert text not in logs, f"{text!r} is in a log line"
        assert "refuses_test_texts" in raw  # the error still says which constraint failed

        # One JSON object per line, tracebacks included: the worker's failure is one event with its traceback.
        worker_lines = json_lines(worker.log())
        failures = [line for line in worker_lines if "CheckViolation" in line.get("exception", "")]
        assert failures and all("Traceback" in line["exception"] for line in failures)
        bot_lines = json_lines(bot.log())
        assert any("CheckViolation" in line.get("exception", "") for line in bot_lines)


# A header line, then an item framed by its length and one ended by a newline.
ENVELOPE = b'{"event_id":"e1"}\n{"type":"event","length":9}\n{"a":"b"}\n{"type":"session"}\n{"s":1}\n'


def test_envelope_parser_reads_the_headers() -> None:
    assert parse_envelope("1", ENVELOPE).headers == {"event_id": "e1"}


def test_envelope_parser_reads_an_item_of_a_given_length() -> None:
    assert parse_envelope("1", ENVELOPE).payloads("event") == [{"a": "b"}]


def test_envelope_parser_reads_an_item_ended_by_a_newline() -> None:
    assert parse_envelope("1", ENVELOPE).payloads("session") == [{"s": 1}]
