"""Sentry: errors reach the (fake) Sentry endpoint with the Celery integration, and no question, answer or token
ever does. Each scenario runs in a subprocess of its own (sentry_sdk.init is process-global)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.telemetry.scrub import SecretMasker, scrub_message, scrub_url
from common.telemetry.sentry import scrub_breadcrumb, scrub_event
from store.db import Database
from tests import slack_requests as sr
from tests.fakes.sentry_server import FakeSentry, parse_envelope
from tests.processes import json_lines, wait_for
from tests.running_system import SECRET, relmon_processes
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "Why was I charged twice for order 99812 on my Visa?"
ANSWER = "Refunds for duplicate charges on order 99812 take five days."
BOT_TOKEN = "xoxb-5555-6666-SeNtRyLeAkTeSt"
OPENAI_KEY = "sk-proj-NeverSendThisKey12345"
# A response_url is a credential to post; a URL's query can carry cursors, keys or texts.
RESPONSE_URL = "https://hooks.slack.com/commands/T0001/12345/RespUrlSecretPath"
LLM_URL = "http://127.0.0.1:9/v1/chat/completions?api-version=2024&cursor=QueryStringSecret"
SECRETS = (
    QUESTION, ANSWER, BOT_TOKEN, OPENAI_KEY, "99812", "SeNtRy", "NeverSendThisKey", "RespUrlSecretPath",
    "QueryStringSecret",
)  # fmt: skip


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
        # 1. The worker's insert of the answer fails (capture_answer).
        question = sr.human_message("C_SUPPORT", sr.next_ts(), QUESTION, user="U_ASKER")
        answer = sr.bot_message("C_SUPPORT", sr.next_ts(), ANSWER, thread_ts=question["ts"])
        # 2. The answer is stored, but the worker's settle fails writing the question.
        second = sr.human_message("C_SUPPORT", sr.next_ts(), SECOND_QUESTION, user="U_ASKER")
        reply = sr.bot_message("C_SUPPORT", sr.next_ts(), SECOND_ANSWER, thread_ts=second["ts"])
        for event in (question, answer, second, reply):
            assert system.post_event(event).status_code == 200  # the bot stores nothing before it answers
        # 3. The bot's own insert fails: the /judge modal submitted with a pasted answer stores an on-demand pair.
        modal = sr.payload_body(sr.view_submission_payload(question=QUESTION, answer=ANSWER))
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


@pytest.fixture
def scrubbed_event() -> dict:
    """An event with texts, arguments, a body and tokens in every field that can carry them, scrubbed."""
    event = {
        "message": f"posting with {BOT_TOKEN}",
        "extra": {"celery-job": {"task_name": "judge_pair", "args": [1, QUESTION], "kwargs": {"answer": ANSWER}}},
        "request": {"method": "POST", "url": "http://h/slack/events", "data": {"text": ANSWER}, "headers": {"x": 1}},
        "logentry": {"message": "judge %s", "params": [QUESTION], "formatted": "judge failed"},
        "exception": {"values": [{"type": "E", "value": f"key {OPENAI_KEY}", "stacktrace": {"frames": [
            {"function": "f", "vars": {"question": QUESTION}}]}}]},
    }  # fmt: skip
    return scrub_event(event, SecretMasker([OPENAI_KEY]))


def test_a_scrubbed_event_keeps_no_text_or_token(scrubbed_event: dict) -> None:
    text = repr(scrubbed_event)
    assert all(secret not in text for secret in SECRETS)


def test_a_scrubbed_event_keeps_no_task_arguments(scrubbed_event: dict) -> None:
    assert scrubbed_event["extra"]["celery-job"] == {"task_name": "judge_pair"}


def test_a_scrubbed_events_request_keeps_only_how_it_was_made(scrubbed_event: dict) -> None:
    assert scrubbed_event["request"] == {"method": "POST", "url": "http://h/slack/events"}


def test_a_scrubbed_events_log_entry_keeps_only_the_formatted_line(scrubbed_event: dict) -> None:
    assert scrubbed_event["logentry"] == {"message": "judge failed"}


def test_a_scrubbed_events_frames_keep_no_local_variables(scrubbed_event: dict) -> None:
    assert "vars" not in scrubbed_event["exception"]["values"][0]["stacktrace"]["frames"][0]


def test_a_scrubbed_breadcrumb_keeps_neither_body_nor_token() -> None:
    crumb = scrub_breadcrumb(
        {"category": "httplib", "data": {"url": "http://x", "body": ANSWER}, "message": BOT_TOKEN},
        SecretMasker([OPENAI_KEY]),
    )
    assert crumb["data"] == {"url": "http://x"} and BOT_TOKEN not in crumb["message"]


def test_a_response_url_loses_its_path() -> None:
    assert scrub_url(RESPONSE_URL) == "https://hooks.slack.com/commands/[withheld]"
    assert scrub_url("https://hooks.slack.com/actions/T1/2/abc") == "https://hooks.slack.com/actions/[withheld]"


def test_a_url_loses_its_query() -> None:
    assert scrub_url(LLM_URL) == "http://127.0.0.1:9/v1/chat/completions?[withheld]"


def test_a_url_loses_its_fragment() -> None:
    assert scrub_url("https://h/a#frag") == "https://h/a"


def test_a_url_with_nothing_to_withhold_is_kept_whole() -> None:
    assert scrub_url("https://slack.com/api/chat.postMessage") == "https://slack.com/api/chat.postMessage"


def test_urls_in_a_message_are_scrubbed() -> None:
    text = scrub_message(f"could not post to {RESPONSE_URL} nor {LLM_URL}")
    assert "RespUrlSecretPath" not in text and "QueryStringSecret" not in text and "hooks.slack.com" in text


def test_an_events_request_url_loses_its_query() -> None:
    event = scrub_event(
        {"request": {"method": "POST", "url": "http://h/slack/events?token=QueryStringSecret"}}, SecretMasker([])
    )
    assert event["request"]["url"] == "http://h/slack/events?[withheld]"


def test_a_breadcrumbs_url_data_is_scrubbed() -> None:
    crumb = scrub_breadcrumb(
        {"category": "httplib", "data": {"url": RESPONSE_URL, "http.query": "a=QueryStringSecret"}}, SecretMasker([])
    )
    assert crumb["data"] == {"url": "https://hooks.slack.com/commands/[withheld]", "http.query": "[withheld]"}


# What a failed INSERT raised before hide_parameters (and what PostgreSQL's own DETAIL still says).
SQL_ERROR = (
    '(psycopg.errors.CheckViolation) new row for relation "pairs" violates check constraint "ck"\n'
    f"DETAIL:  Failing row contains (7, C1, 1.2, {ANSWER}).\n"
    "[SQL: INSERT INTO pairs (channel_id, answer_text) VALUES (%(channel_id)s, %(answer_text)s)]\n"
    f"[parameters: {{'channel_id': 'C1', 'answer_text': {ANSWER!r}}}]\n"
    "(Background on this error at: https://sqlalche.me/e/20/gkpj)"
)


@pytest.fixture
def scrubbed_quoting_event() -> dict:
    """An event whose exception values, message, log line and breadcrumb quote texts, scrubbed."""
    event = {
        "message": f"the model refused to judge: I will not repeat {QUESTION}",
        "logentry": {"message": "%s", "formatted": f"Failed to run listener function (error: {SQL_ERROR})"},
        "exception": {"values": [
            {"type": "CheckViolation", "module": "psycopg.errors", "value": SQL_ERROR.split("\n[SQL")[0]},
            {"type": "IntegrityError", "module": "sqlalchemy.exc", "value": SQL_ERROR},
            {"type": "KeyError", "value": repr(QUESTION)},
            {"type": "RuntimeError", "value": "judging pair 7 failed"},
            {"type": "ValueError", "value": "x" * 500},
        ]},
        "breadcrumbs": {"values": [{"category": "relmon", "message": f"settle failed: {SQL_ERROR}"}]},
    }  # fmt: skip
    return scrub_event(event, SecretMasker([]))


def test_an_event_quoting_texts_keeps_none_of_them(scrubbed_quoting_event: dict) -> None:
    assert all(secret not in repr(scrubbed_quoting_event) for secret in SECRETS)


def test_scrubbers_take_texts_out_of_exception_values(scrubbed_quoting_event: dict) -> None:
    values = scrubbed_quoting_event["exception"]["values"]
    assert [v["type"] for v in values] == ["CheckViolation", "IntegrityError", "KeyError", "RuntimeError", "ValueError"]
    assert values[1]["value"] == (
        '(psycopg.errors.CheckViolation) new row for relation "pairs" violates check constraint "ck" [withheld]'
    )
    assert values[2]["value"] == "'[withheld]'"
    assert values[3]["value"] == "judging pair 7 failed"  # identifiers and error names are kept
    assert values[4]["value"] == "[withheld] (500 characters)"


def test_scrubbers_take_texts_out_of_messages(scrubbed_quoting_event: dict) -> None:
    assert scrubbed_quoting_event["message"] == "the model refused to judge: [withheld]"
    assert scrubbed_quoting_event["logentry"]["message"].startswith("Failed to run listener function (error: (psycopg")
    assert scrubbed_quoting_event["breadcrumbs"]["values"][0]["message"].startswith("settle failed: (psycopg")


@pytest.fixture
def scrubbed_slack_error_event() -> dict:
    """A SlackApiError, in an exception value, a log line and a breadcrumb, scrubbed."""
    # str(SlackApiError) as the async client words it (status in the first line), the sync one's is tested with
    # the log lines; Slack's answer can quote a text (response_metadata, warnings).
    response = {"ok": False, "error": "ratelimited", "response_metadata": {"messages": [f"[ERROR] {ANSWER}"]}}
    value = (
        "The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage, status: 429)\n"
        f"The server responded with: {response}"
    )
    nested = f"Failed to run listener function (error: {'x' * 150} {value})"
    event = {
        "exception": {"values": [{"type": "SlackApiError", "module": "slack_sdk.errors", "value": value}]},
        "logentry": {"message": "%s", "formatted": nested},
        "breadcrumbs": {"values": [{"category": "relmon.worker", "message": f"slack task retrying {value!r}"}]},
    }
    return scrub_event(event, SecretMasker([]))


def test_texts_quoted_by_a_slack_error_are_withheld(scrubbed_slack_error_event: dict) -> None:
    text = repr(scrubbed_slack_error_event)
    assert all(secret not in text for secret in SECRETS) and "[ERROR]" not in text


def test_slack_error_codes_survive_in_exception_values(scrubbed_slack_error_event: dict) -> None:
    assert scrubbed_slack_error_event["exception"]["values"][0]["value"] == (
        "The request to the Slack API failed. (url: https://slack.com/api/chat.postMessage, status: 429) [withheld]"
        " (slack error: ratelimited)"
    )


def test_slack_error_codes_survive_in_messages(scrubbed_slack_error_event: dict) -> None:
    # Withheld as too long, the code and the status are still there.
    assert scrubbed_slack_error_event["logentry"]["message"] == (
        "Failed to run listener function (error: [withheld] (286 characters) (slack error: ratelimited, status: 429)"
    )
    crumb = scrubbed_slack_error_event["breadcrumbs"]["values"][0]
    assert crumb["message"].endswith("[withheld] (slack error: ratelimited)")


def test_a_message_without_a_slack_error_gets_no_suffix() -> None:
    assert scrub_message("channel_not_found") == "channel_not_found"


def self_referencing_state() -> dict:
    """State holding a text that refers to itself: scrubbing it raises RecursionError."""
    loop: dict = {"note": ANSWER}
    loop["self"] = loop
    return loop


def test_an_event_that_cannot_be_scrubbed_is_sent_reduced() -> None:
    event = {
        "event_id": "e1",
        "level": "error",
        "server_name": "worker",
        "message": QUESTION,
        "extra": {"state": self_referencing_state()},
        "exception": {"values": [{"type": "CheckViolation", "module": "psycopg.errors", "value": SQL_ERROR,
            "stacktrace": {"frames": [{"function": "settle", "lineno": 3, "context_line": f"x = {QUESTION!r}",
                                       "vars": {"answer": ANSWER, "token": BOT_TOKEN}}]}}]},
    }  # fmt: skip
    scrubbed = scrub_event(event, SecretMasker([BOT_TOKEN]))  # a RecursionError here would make Sentry drop the event
    assert all(secret not in repr(scrubbed) for secret in SECRETS)
    assert scrubbed["message"] == "[withheld] (event not scrubbed: RecursionError)"
    assert (scrubbed["event_id"], scrubbed["level"], scrubbed["server_name"]) == ("e1", "error", "worker")
    assert scrubbed["exception"] == {"values": [{"type": "CheckViolation", "module": "psycopg.errors",
        "value": "[withheld]", "stacktrace": {"frames": [{"function": "settle", "lineno": 3}]}}]}  # fmt: skip
    assert "extra" not in scrubbed


def test_an_event_of_unexpected_shape_passes_as_it_is() -> None:
    masker = SecretMasker([BOT_TOKEN])
    assert scrub_event({"exception": "not a dict", "message": 7}, masker) == {"exception": "not a dict", "message": 7}


def test_a_breadcrumb_that_cannot_be_scrubbed_is_dropped() -> None:
    masker = SecretMasker([BOT_TOKEN])
    # Sentry keeps a breadcrumb as it was when before_breadcrumb raises: dropped instead.
    crumb = {"category": "relmon", "message": QUESTION, "data": {"state": self_referencing_state()}}
    assert scrub_breadcrumb(crumb, masker) is None


# A header line, then an item framed by its length and one ended by a newline.
ENVELOPE = b'{"event_id":"e1"}\n{"type":"event","length":9}\n{"a":"b"}\n{"type":"session"}\n{"s":1}\n'


def test_envelope_parser_reads_the_headers() -> None:
    assert parse_envelope("1", ENVELOPE).headers == {"event_id": "e1"}


def test_envelope_parser_reads_an_item_of_a_given_length() -> None:
    assert parse_envelope("1", ENVELOPE).payloads("event") == [{"a": "b"}]


def test_envelope_parser_reads_an_item_ended_by_a_newline() -> None:
    assert parse_envelope("1", ENVELOPE).payloads("session") == [{"s": 1}]
