"""Sentry: errors reach the (fake) Sentry endpoint with the Celery integration, and no question, answer or token
ever does. Each scenario runs in a subprocess of its own (sentry_sdk.init is process-global)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.fakes.sentry_server import FakeSentry, parse_envelope
from tests.fakes.slack_server import FakeSlack
from workers.telemetry import SecretMasker, scrub_breadcrumb, scrub_event

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "Why was I charged twice for order 99812 on my Visa?"
ANSWER = "Refunds for duplicate charges on order 99812 take five days."
BOT_TOKEN = "xoxb-5555-6666-SeNtRyLeAkTeSt"
OPENAI_KEY = "sk-proj-NeverSendThisKey12345"
SECRETS = (QUESTION, ANSWER, BOT_TOKEN, OPENAI_KEY, "99812", "SeNtRy", "NeverSendThisKey")


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
    from workers.celery_app import configure
    from workers.telemetry import setup_logging

    settings = Settings()
    setup_logging(settings, "worker")  # starts Sentry too, as relmon worker does, before Celery's worker loads
    from celery.contrib.testing.worker import start_worker
    app = configure(settings)
    app.conf.update(result_backend="cache+memory://", task_ignore_result=False)

    @app.task(name="probe.judge_with_texts")
    def judge_with_texts(pair_id, question, answer, token):
        prompt = f"Q: {{question}}\\nA: {{answer}}"  # a local holding both texts
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
        script = CELERY_SCRIPT.format(question=QUESTION, answer=ANSWER, token=BOT_TOKEN)
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
        assert_nothing_leaked(sentry)
        assert BOT_TOKEN not in result.stderr and QUESTION not in result.stderr  # nor in the logs


BOLT_SCRIPT = """
    import json

    import sentry_sdk
    from slack_bolt import App, BoltRequest
    from slack_sdk import WebClient

    from store.settings import Settings
    from workers.telemetry import setup_logging

    settings = Settings()
    setup_logging(settings, "bot")
    client = WebClient(token=settings.secret("slack_bot_token"), base_url=settings.slack_api_url)
    app = App(client=client, signing_secret=settings.secret("slack_signing_secret"),
              request_verification_enabled=False)

    @app.event("message")
    def on_message(event, client):
        question, answer, token = {question!r}, event["text"], client.token
        raise KeyError("no pair for this message")

    body = {{"type": "event_callback", "team_id": "T1", "event_id": "Ev1", "event": {{
        "type": "message", "channel": "C1", "ts": "1.2", "text": {answer!r}, "bot_id": "B1"}}}}
    response = app.dispatch(BoltRequest(body=json.dumps(body), headers={{"content-type": ["application/json"]}}))
    print("status", response.status)
    sentry_sdk.flush(timeout=10)
"""


@pytest.mark.timeout(60)
def test_a_failing_bolt_listener_reports_without_texts_or_tokens(tmp_path: Path) -> None:
    with FakeSentry() as sentry, FakeSlack() as slack:
        script = BOLT_SCRIPT.format(question=QUESTION, answer=ANSWER)
        env = {
            "SENTRY_DSN": sentry.dsn,
            "RELMON_DATA_DIR": str(tmp_path),
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": "s3cr3t-signing-value",
            "SLACK_API_URL": slack.api_url,
        }
        result = run_script(script, env)
        assert result.returncode == 0, result.stderr[-3000:]
        events = sentry.wait_for_events(1)
        assert events, f"no event reached Sentry:\n{result.stderr[-2000:]}"
        assert any(v.get("type") == "KeyError" for e in events for v in e.get("exception", {}).get("values", []))
        assert all(e["tags"]["component"] == "bot" for e in events)
        assert_nothing_leaked(sentry)
        assert "s3cr3t-signing-value" not in sentry.raw_text()


def test_scrubbers_drop_texts_arguments_bodies_and_tokens() -> None:
    masker = SecretMasker([OPENAI_KEY])
    event = {
        "message": f"posting with {BOT_TOKEN}",
        "extra": {"celery-job": {"task_name": "judge_pair", "args": [1, QUESTION], "kwargs": {"answer": ANSWER}}},
        "request": {"method": "POST", "url": "http://h/slack/events", "data": {"text": ANSWER}, "headers": {"x": 1}},
        "logentry": {"message": "judge %s", "params": [QUESTION], "formatted": "judge failed"},
        "exception": {"values": [{"type": "E", "value": f"key {OPENAI_KEY}", "stacktrace": {"frames": [
            {"function": "f", "vars": {"question": QUESTION}}]}}]},
    }  # fmt: skip
    scrubbed = scrub_event(event, masker)
    assert scrubbed["extra"]["celery-job"] == {"task_name": "judge_pair"}
    assert scrubbed["request"] == {"method": "POST", "url": "http://h/slack/events"}
    assert scrubbed["logentry"] == {"message": "judge failed"}
    assert "vars" not in scrubbed["exception"]["values"][0]["stacktrace"]["frames"][0]
    text = repr(scrubbed)
    assert all(secret not in text for secret in SECRETS)
    crumb = scrub_breadcrumb(
        {"category": "httplib", "data": {"url": "http://x", "body": ANSWER}, "message": BOT_TOKEN}, masker
    )
    assert crumb["data"] == {"url": "http://x"} and BOT_TOKEN not in crumb["message"]


# What a failed INSERT raised before hide_parameters (and what PostgreSQL's own DETAIL still says).
SQL_ERROR = (
    '(psycopg.errors.CheckViolation) new row for relation "pairs" violates check constraint "ck"\n'
    f"DETAIL:  Failing row contains (7, C1, 1.2, {ANSWER}).\n"
    "[SQL: INSERT INTO pairs (channel_id, answer_text) VALUES (%(channel_id)s, %(answer_text)s)]\n"
    f"[parameters: {{'channel_id': 'C1', 'answer_text': {ANSWER!r}}}]\n"
    "(Background on this error at: https://sqlalche.me/e/20/gkpj)"
)


def test_scrubbers_take_texts_out_of_exception_values_and_messages() -> None:
    masker = SecretMasker([])
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
    scrubbed = scrub_event(event, masker)
    assert all(secret not in repr(scrubbed) for secret in SECRETS)
    values = scrubbed["exception"]["values"]
    assert [v["type"] for v in values] == ["CheckViolation", "IntegrityError", "KeyError", "RuntimeError", "ValueError"]
    assert values[1]["value"] == (
        '(psycopg.errors.CheckViolation) new row for relation "pairs" violates check constraint "ck" [withheld]'
    )
    assert values[2]["value"] == "'[withheld]'"
    assert values[3]["value"] == "judging pair 7 failed"  # identifiers and error names are kept
    assert values[4]["value"] == "[withheld] (500 characters)"
    assert scrubbed["message"] == "the model refused to judge: [withheld]"
    assert scrubbed["logentry"]["message"].startswith("Failed to run listener function (error: (psycopg")
    assert scrubbed["breadcrumbs"]["values"][0]["message"].startswith("settle failed: (psycopg")


def test_envelope_parser_reads_length_and_newline_items() -> None:
    raw = b'{"event_id":"e1"}\n{"type":"event","length":9}\n{"a":"b"}\n{"type":"session"}\n{"s":1}\n'
    envelope = parse_envelope("1", raw)
    assert envelope.headers == {"event_id": "e1"}
    assert envelope.payloads("event") == [{"a": "b"}] and envelope.payloads("session") == [{"s": 1}]
