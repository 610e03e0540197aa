"""Logs: one JSON line per event with identifier fields; message texts only at DEBUG; secrets masked."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.settings import Settings
from tests import slack_requests as sr
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, start_worker
from workers.telemetry import SecretMasker, event_fields, mask_url, setup_logging

BOT_TOKEN = "xoxb-1111-2222-AbCdEfGhIjKlMnOp"
SIGNING_SECRET = "8f14e45fceea167a5a36dedd4bea2543"
OPENAI_KEY = "sk-proj-QwErTyUiOpAsDfGhJkL0987"
QUESTION = "How do I reset the flux capacitor on my Model 7?"
ANSWER = "Unplug it, wait ten seconds, then hold the blue button."


@pytest.fixture
def capture_logs() -> Iterator[callable]:
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
        setup_logging(Settings(**values), "test", stream=stream)
        return stream

    yield start
    root.handlers[:], root.level = saved_handlers, saved_level


def lines(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


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


def test_error_messages_and_tracebacks_lose_texts_above_debug(capture_logs) -> None:
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
    failed, refused, debug = lines(stream)[1:]
    assert QUESTION not in json.dumps([failed, refused]) and ANSWER not in json.dumps([failed, refused])
    assert failed["event"] == "capture failed: store failed [withheld]"
    assert (failed["channel"], failed["message_ts"]) == ("C1", "1.2")
    # The traceback keeps its frames and error classes, in one line of JSON.
    assert 'ValueError: new row violates check constraint "ck" [withheld]' in failed["exception"]
    assert "RuntimeError: store failed [withheld]" in failed["exception"]
    assert "direct cause" in failed["exception"] and 'raise RuntimeError(f"store failed' in failed["exception"]
    assert refused["event"] == "the model refused to judge: [withheld]"
    assert QUESTION in debug["event"]


def test_tokens_and_configured_secrets_are_masked_anywhere_in_a_line(capture_logs) -> None:
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
    output = stream.getvalue()
    for secret in (
        BOT_TOKEN,
        OPENAI_KEY,
        SIGNING_SECRET,
        "xoxp-9999-8888-zzzzzz",
        "xapp-1-A111-222-abcdef",
        "sk-ant-abcdefghijk123",
        "hunter2hunter2",
        "pgpassword99",
    ):
        assert secret not in output, secret
    assert "xoxb-****MnOp" in output  # masked, still recognisable
    assert "@redis:6379/0" in output and "@db/relmon" in output


def test_masker_and_mask_url_on_plain_values() -> None:
    masker = SecretMasker(["a-configured-secret-value"])
    assert masker("x a-configured-secret-value y") == "x a-****alue y"
    assert masker.scrub({"k": ["xoxb-123456-abcdef"], "n": 3}) == {"k": ["xoxb-****cdef"], "n": 3}
    assert mask_url("redis://:hunter2hunter2@redis:6379/0") == "redis://:****ter2@redis:6379/0"
    assert mask_url("redis://redis:6379/0") == "redis://redis:6379/0"
    assert mask_url(None) == "(unset)"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_real_bot_worker_and_beat_write_only_json_lines_with_identifiers(redis_url: str, tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'relmon.sqlite3'}"
    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_user("U_ASKER", "ana", "Ana Diaz")
        slack.add_channel("C_SUPPORT", "support", members=["U_ASKER", "U_RELMON"])
        env = relmon_env(
            redis_url=redis_url,
            database_url=db_url,
            slack_api_url=slack.api_url,
            openai_base_url=llm.base_url,
            data_dir=tmp_path / "data",
            RELMON_SETTLE_SECONDS="0",
        )
        bot, base_url = start_bot(env, log_dir=tmp_path)
        worker = start_worker(env, log_dir=tmp_path)
        beat = RelmonProcess("beat", env=env, log_dir=tmp_path).start()
        with bot, worker, beat:
            beat.wait_for_log("beat: Starting", timeout=60)
            question = sr.human_message("C_SUPPORT", sr.next_ts(), QUESTION)
            answer = sr.bot_message("C_SUPPORT", sr.next_ts(), ANSWER, thread_ts=question["ts"])
            for event in (question, answer):
                assert sr.post(base_url + "/slack/events", sr.envelope(event), "test-signing-secret").status_code == 200
            worker.wait_for_log('"pair settled"', timeout=60)
            for process in (bot, worker, beat):
                assert process.stop() in (0, -15), process.tail()

    outputs = {"bot": bot.log(), "worker": worker.log(), "beat": beat.log()}
    parsed = {name: json_lines(output) for name, output in outputs.items()}
    for name, output in outputs.items():
        assert QUESTION not in output and ANSWER not in output, name
    bot_events = {line["event"]: line for line in parsed["bot"]}
    # gunicorn's own lines, JSON like the rest (they were "[date] [pid] [INFO] Listening at: ...").
    assert any(e.startswith("Listening at: http://127.0.0.1:") for e in bot_events)
    assert bot_events["Listening at: " + base_url + f" ({bot.pid})"]["logger"] == "gunicorn.error"
    captured = bot_events["answer captured"]
    assert (captured["channel"], captured["message_ts"]) == ("C_SUPPORT", answer["ts"]) and captured["pair_id"]
    settled = next(line for line in parsed["worker"] if line["event"] == "pair settled")
    assert (settled["channel"], settled["message_ts"], settled["pair_id"]) == (
        "C_SUPPORT",
        answer["ts"],
        captured["pair_id"],
    )
    worker_events = [line["event"] for line in parsed["worker"]]
    assert "worker: Warm shutdown (MainProcess)" in worker_events  # printed by Celery itself, now JSON
    assert not any("-------------- celery@" in output for output in outputs.values())  # no banner
    assert any(line["event"] == "beat: Starting..." for line in parsed["beat"])


def json_lines(output: str) -> list[dict]:
    """Each line of a process's output as JSON; fails on the first line that is not one JSON object."""
    parsed = []
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            pytest.fail(f"not a JSON line: {line!r}\n--- output ---\n{output[-3000:]}")
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed
