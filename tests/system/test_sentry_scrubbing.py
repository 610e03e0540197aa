"""Sentry's scrubbers, called directly: no question, answer, token, task argument, request body, local variable,
URL path or query survives an event or a breadcrumb, while error names, Slack's error codes and identifiers do; an
event that cannot be scrubbed is sent reduced. The real processes: tests/system/test_telemetry_sentry.py."""

from __future__ import annotations

import pytest

from common.telemetry.scrub import SecretMasker, scrub_message, scrub_url
from common.telemetry.sentry import scrub_breadcrumb, scrub_event
from tests.sentry_texts import ANSWER, BOT_TOKEN, LLM_URL, OPENAI_KEY, QUESTION, RESPONSE_URL, SECRETS


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
