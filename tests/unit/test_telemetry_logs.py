"""Logs: one JSON line per event with identifier fields; message texts only at DEBUG; secrets masked. Judging's
log lines in a worker's runtime: tests/integration/test_telemetry_logs.py; relmon's own processes:
tests/system/test_telemetry_logs_processes.py."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from common.telemetry.logs import event_fields
from common.telemetry.scrub import SecretMasker, mask_url
from tests.log_capture import ANSWER, BOT_TOKEN, OPENAI_KEY, QUESTION, SIGNING_SECRET, lines


def test_each_event_is_one_json_line_with_identifier_fields(capture_logs) -> None:
    stream = capture_logs()
    log = logging.getLogger("relmon.test")
    log.info("judged", extra=event_fields(channel="C123", message_ts="1700000000.000100", judgment_id=42, score=3))
    try:
        raise ValueError("line one\nline two")
    except ValueError:
        log.exception("failed", extra=event_fields(channel="C123", pair_id=7))
    records = lines(stream)[1:]  # after "starting"
    assert len(stream.getvalue().splitlines()) == 3  # a traceback does not break the one-line rule
    judged, failed = records
    assert judged["event"] == "judged" and judged["level"] == "info"
    assert (judged["channel"], judged["message_ts"], judged["judgment_id"], judged["score"]) == (
        "C123",
        "1700000000.000100",
        42,
        3,
    )
    assert "pair_id" not in judged  # unknown identifiers are left out, not null
    assert failed["pair_id"] == 7 and "line two" in failed["exception"]


def test_message_texts_appear_only_at_debug(capture_logs) -> None:
    stream = capture_logs("INFO")
    log = logging.getLogger("relmon.test")
    for level in (logging.INFO, logging.WARNING, logging.ERROR):
        log.log(level, "pair captured", extra=event_fields(channel="C1", question=QUESTION, answer=ANSWER, text=ANSWER))
    output = stream.getvalue()
    assert QUESTION not in output and ANSWER not in output
    assert all(record["channel"] == "C1" for record in lines(stream)[1:])

    debug_stream = capture_logs("DEBUG")
    log.debug("pair captured", extra=event_fields(channel="C1", question=QUESTION, answer=ANSWER))
    log.info("pair captured", extra=event_fields(channel="C1", question=QUESTION))
    debug, info = lines(debug_stream)[1:]
    assert debug["question"] == QUESTION and debug["answer"] == ANSWER
    assert "question" not in info  # still dropped at INFO when the process logs at DEBUG


def test_beats_schedule_ticks_log_at_debug(capture_logs) -> None:
    beat = logging.getLogger("celery.beat")
    stream = capture_logs("INFO")
    beat.info("Scheduler: Sending due task %s (%s)", "relmon-requeue-orphans", "workers.tasks.judging.requeue_orphans")
    beat.info("beat: Starting...")
    events = [record["event"] for record in lines(stream)[1:]]
    assert events == ["beat: Starting..."]  # the tick left out at INFO, the rest kept

    debug_stream = capture_logs("DEBUG")
    beat.info("Scheduler: Sending due task %s (%s)", "relmon-llm-outage", "workers.tasks.outage.outage_tick")
    (tick,) = [record for record in lines(debug_stream)[1:] if record["logger"] == "celery.beat"]
    assert tick["level"] == "debug" and tick["event"].startswith("Scheduler: Sending due task relmon-llm-outage")


@pytest.fixture
def failed_capture(capture_logs) -> list[dict]:
    """The lines of a failed store (its error quoting texts, with a cause), a warning quoting an answer, and the
    failure again at DEBUG, from a process logging at DEBUG."""
    stream = capture_logs("DEBUG")
    log = logging.getLogger("relmon.test")
    row = f"DETAIL:  Failing row contains (7, C1, {QUESTION}, {ANSWER})."
    try:
        try:
            raise ValueError(f'new row violates check constraint "ck"\n{row}')
        except ValueError as error:
            raise RuntimeError(f"store failed\n[SQL: INSERT INTO pairs]\n[parameters: ({QUESTION!r},)]") from error
    except RuntimeError as error:
        log.error("capture failed: %s", error, exc_info=True, extra=event_fields(channel="C1", message_ts="1.2"))
        log.warning("the model refused to judge: %s", ANSWER)
        log.debug("capture failed: %s", error)  # DEBUG keeps everything
    return lines(stream)[1:]


def test_error_messages_lose_texts_above_debug(failed_capture: list[dict]) -> None:
    failed, refused, _ = failed_capture
    assert QUESTION not in json.dumps([failed, refused]) and ANSWER not in json.dumps([failed, refused])
    assert failed["event"] == "capture failed: store failed [withheld]"
    assert refused["event"] == "the model refused to judge: [withheld]"


def test_an_error_line_keeps_its_identifier_fields(failed_capture: list[dict]) -> None:
    failed, _, _ = failed_capture
    assert (failed["channel"], failed["message_ts"]) == ("C1", "1.2")


def test_a_scrubbed_traceback_keeps_its_frames_with_error_classes(failed_capture: list[dict]) -> None:
    failed, _, _ = failed_capture
    assert 'ValueError: new row violates check constraint "ck" [withheld]' in failed["exception"]
    assert "RuntimeError: store failed [withheld]" in failed["exception"]
    assert "direct cause" in failed["exception"] and 'raise RuntimeError(f"store failed' in failed["exception"]


def test_debug_keeps_every_text_of_an_error(failed_capture: list[dict]) -> None:
    _, _, debug = failed_capture
    assert QUESTION in debug["event"]


@pytest.fixture
def masked_output(capture_logs) -> str:
    """What a library logger writes of the configured secrets, of unknown tokens and of service URLs: in
    arguments, in extra fields and in a traceback."""
    stream = capture_logs(
        redis_url="redis://:hunter2hunter2@redis:6379/0",
        database_url="postgresql://relmon:pgpassword99@db/relmon",
    )
    log = logging.getLogger("slack_sdk.web")  # a library logger: the filter sits on the handler
    log.warning("calling with token %s and key %s", BOT_TOKEN, OPENAI_KEY)
    log.warning("signature secret", extra={"headers": {"Authorization": f"Bearer {BOT_TOKEN}"}, "s": SIGNING_SECRET})
    log.warning("unknown tokens xoxp-9999-8888-zzzzzz and xapp-1-A111-222-abcdef and sk-ant-abcdefghijk123")
    log.warning("connecting to redis://:hunter2hunter2@redis:6379/0 and postgresql://relmon:pgpassword99@db/relmon")
    try:
        token = BOT_TOKEN
        raise RuntimeError(f"auth failed for {token}")
    except RuntimeError:
        log.exception("slack call failed")
    return stream.getvalue()


def test_configured_secrets_are_masked_anywhere_in_a_line(masked_output: str) -> None:
    for secret in (BOT_TOKEN, OPENAI_KEY, SIGNING_SECRET, "hunter2hunter2", "pgpassword99"):
        assert secret not in masked_output, secret


def test_unknown_tokens_are_masked_by_their_shape(masked_output: str) -> None:
    for secret in ("xoxp-9999-8888-zzzzzz", "xapp-1-A111-222-abcdef", "sk-ant-abcdefghijk123"):
        assert secret not in masked_output, secret


def test_a_masked_token_stays_recognisable(masked_output: str) -> None:
    assert "xoxb-****MnOp" in masked_output


def test_a_masked_url_keeps_its_host(masked_output: str) -> None:
    assert "@redis:6379/0" in masked_output and "@db/relmon" in masked_output


def test_the_masker_on_plain_values() -> None:
    masker = SecretMasker(["a-configured-secret-value"])
    assert masker("x a-configured-secret-value y") == "x a-****alue y"
    assert masker.scrub({"k": ["xoxb-123456-abcdef"], "n": 3}) == {"k": ["xoxb-****cdef"], "n": 3}


def test_mask_url_on_plain_values() -> None:
    masker = SecretMasker(["a-configured-secret-value"])
    assert mask_url("redis://:hunter2hunter2@redis:6379/0") == "redis://:****ter2@redis:6379/0"
    assert mask_url("redis://redis:6379/0") == "redis://redis:6379/0"
    assert mask_url(None) == "(unset)"
    # SQLAlchemy reads a password up to the "@", "#", "/" and "?" included; urllib's netloc stops at them
    assert mask_url("postgresql://relmon:Xy#9kLm2pQ@db:5432/relmon") == "postgresql://relmon:****m2pQ@db:5432/relmon"
    assert mask_url("postgresql://u:ab/cd?ef#gh1234@db/relmon") == "postgresql://u:****1234@db/relmon"
    assert masker("could not connect to postgresql://u:ab/cd?ef#gh1234@db/relmon") == (
        "could not connect to postgresql://u:****1234@db/relmon"
    )


class Unprintable(Exception):
    """An exception (or argument) whose str() raises, quoting a text while it does."""

    def __str__(self) -> str:
        raise ValueError(QUESTION)

    __repr__ = __str__


class Opaque:
    def __str__(self) -> str:
        raise RuntimeError(ANSWER)

    __repr__ = __str__


class Wordy:
    """An object in a field whose str() quotes a text: the formatter must scrub it, not write it as it is."""

    def __str__(self) -> str:
        return f"Pair(7, {QUESTION!r})"


@dataclass
class Logged:
    output: str
    records: list[dict]
    handler_errors: list[logging.LogRecord]


@pytest.fixture
def bad_log_calls(capture_logs) -> Logged:
    """Log calls that would raise or leak: an exception whose str() raises, bad format arguments, unprintable
    arguments and messages, a looping field, objects quoting texts. None of them may raise here."""
    stream = capture_logs()
    handler = logging.getLogger().handlers[0]
    handler_errors: list[logging.LogRecord] = []
    handler.handleError = handler_errors.append  # "--- Logging error ---" on stderr, with the record's msg
    log = logging.getLogger("relmon.test")
    loop: dict = {"question": QUESTION, "note": ANSWER}
    loop["self"] = loop
    try:
        try:
            raise KeyError(QUESTION)
        except KeyError as error:
            raise Unprintable(QUESTION) from error
    except Unprintable:
        log.exception("judging pair 7 failed", extra=event_fields(pair_id=7))  # must not raise ValueError here
    log.info("judged %s and %s", QUESTION)  # too few arguments: TypeError
    log.info("judged %d", ANSWER)  # wrong type: TypeError
    log.info("judged %s", Opaque())  # an argument whose str() raises
    log.info(Opaque())  # a message whose str() raises
    log.warning("looping state", extra={"state": loop, "pair_id": 8})  # RecursionError while scrubbing
    log.warning("objects", extra={"pair": Wordy(), "other": Opaque(), "pair_id": 9})
    return Logged(stream.getvalue(), lines(stream)[1:], handler_errors)


def test_log_calls_never_raise_into_the_caller(bad_log_calls: Logged) -> None:
    # one JSON line each, after "starting"
    assert len(bad_log_calls.output.splitlines()) == 8 and len(bad_log_calls.records) == 7
    assert not bad_log_calls.handler_errors


def test_failing_log_calls_leak_no_text(bad_log_calls: Logged) -> None:
    assert QUESTION not in bad_log_calls.output and ANSWER not in bad_log_calls.output


def test_an_unprintable_exception_is_logged_with_its_cause(bad_log_calls: Logged) -> None:
    failed = bad_log_calls.records[0]
    assert failed["event"] == "judging pair 7 failed" and failed["pair_id"] == 7
    assert "Unprintable: <unprintable Unprintable>" in failed["exception"]
    assert "KeyError: '[withheld]'" in failed["exception"] and "direct cause" in failed["exception"]


def test_a_message_that_cannot_be_formatted_says_why(bad_log_calls: Logged) -> None:
    few, wrong, unprintable_arg, unprintable_msg = bad_log_calls.records[1:5]
    assert few["event"] == "judged %s and %s [message not formatted: TypeError]"
    assert wrong["event"] == "judged %d [message not formatted: TypeError]"
    assert unprintable_arg["event"] == "judged %s [message not formatted: RuntimeError]"
    assert unprintable_msg["event"] == "<unprintable Opaque> [message not formatted: RuntimeError]"


def test_fields_that_cannot_be_scrubbed_are_withheld(bad_log_calls: Logged) -> None:
    looping = bad_log_calls.records[5]
    assert looping["event"] == "looping state [fields withheld: RecursionError while scrubbing]"
    assert "state" not in looping and "pair_id" not in looping


def test_objects_in_fields_are_written_scrubbed(bad_log_calls: Logged) -> None:
    objects = bad_log_calls.records[6]
    assert objects["pair"] == "Pair(7, '[withheld]')" and objects["other"] == "<unprintable Opaque>"
    assert objects["pair_id"] == 9


def slack_api_error(code: str, text: str) -> SlackApiError:
    """What slack_sdk's WebClient raises: the code on the message's second line, in Slack's whole answer."""
    data = {"ok": False, "error": code, "response_metadata": {"messages": [f"[ERROR] {text}"]}, "warning": text}
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.com/api/chat.postMessage",
        req_args={},
        data=data,
        headers={},
        status_code=200,
    )
    with pytest.raises(SlackApiError) as raised:
        response.validate()
    return raised.value


def test_slack_error_codes_survive_scrubbing_in_task_log_lines(capture_logs, monkeypatch) -> None:
    from workers.tasks import digest as digest_tasks
    from workers.tasks import slack as slack_tasks

    stream = capture_logs()
    monkeypatch.setattr(slack_tasks, "get_runtime", lambda: None)
    monkeypatch.setattr(digest_tasks, "get_runtime", lambda: None)

    # A transient error: the Slack task logs "slack task retrying" and asks Celery for a retry.
    class Retried(Exception):
        pass

    def retry(countdown: float, exc: Exception) -> None:
        raise Retried

    def post(runtime: object) -> None:
        raise slack_api_error("internal_error", ANSWER)

    task = SimpleNamespace(name="workers.tasks.slack.post_alert", request=SimpleNamespace(retries=0), retry=retry)
    with pytest.raises(Retried):
        slack_tasks._run(task, post)

    # The digest retries on any Slack error (called directly, Celery's retry re-raises it).
    def deliver(*args: object, **kwargs: object) -> None:
        raise slack_api_error("channel_not_found", ANSWER)

    monkeypatch.setattr(digest_tasks, "deliver_digest", deliver)
    with pytest.raises(SlackApiError):
        digest_tasks.send_digest.run()

    # A permanent error fails the task: Celery logs it with its traceback.
    try:
        raise slack_api_error("channel_not_found", ANSWER)
    except SlackApiError as error:
        logging.getLogger("celery.app.trace").error("Task failed: %r", error, exc_info=True)

    output = stream.getvalue()
    assert ANSWER not in output and "[ERROR]" not in output
    retrying, digest, failed = lines(stream)[1:]
    assert retrying["event"] == "slack task retrying" and retrying["slack_error"] == "internal_error"
    assert retrying["error"].endswith("[withheld] (slack error: internal_error)")
    assert digest["event"] == "digest retrying" and digest["slack_error"] == "channel_not_found"
    assert digest["error"].endswith("[withheld] (slack error: channel_not_found)")
    assert failed["event"].endswith("(slack error: channel_not_found)")
    assert (
        "slack_sdk.errors.SlackApiError: The request to the Slack API failed. (url: https://slack.com/api/"
        in (failed["exception"])
    )
    assert failed["exception"].endswith("[withheld] (slack error: channel_not_found)")
