"""Logs: one JSON line per event with identifier fields; message texts only at DEBUG; secrets masked."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web import SlackResponse

from common.telemetry.logs import event_fields, setup_logging
from common.telemetry.scrub import SecretMasker, mask_url
from store.settings import Settings
from tests import slack_requests as sr
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, start_worker

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


def test_log_calls_never_raise_into_the_caller_and_leak_nothing(capture_logs) -> None:
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

    output = stream.getvalue()
    records = lines(stream)[1:]
    assert len(output.splitlines()) == 8 and len(records) == 7  # one JSON line each, after "starting"
    assert not handler_errors
    assert QUESTION not in output and ANSWER not in output
    failed, few, wrong, unprintable_arg, unprintable_msg, looping, objects = records
    assert failed["event"] == "judging pair 7 failed" and failed["pair_id"] == 7
    assert "Unprintable: <unprintable Unprintable>" in failed["exception"]
    assert "KeyError: '[withheld]'" in failed["exception"] and "direct cause" in failed["exception"]
    assert few["event"] == "judged %s and %s [message not formatted: TypeError]"
    assert wrong["event"] == "judged %d [message not formatted: TypeError]"
    assert unprintable_arg["event"] == "judged %s [message not formatted: RuntimeError]"
    assert unprintable_msg["event"] == "<unprintable Opaque> [message not formatted: RuntimeError]"
    assert looping["event"] == "looping state [fields withheld: RecursionError while scrubbing]"
    assert "state" not in looping and "pair_id" not in looping
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


def test_retry_and_budget_lines_of_judging_carry_channel_and_message_ts(
    capture_logs, database, redis_url: str, db_url: str, runtime_for
) -> None:
    """judge_pair's "retrying" and "budget spent" lines name the pair's channel and answer ts, never its texts."""
    from tests.pipeline_helpers import add_pairs
    from workers.tasks.judging import judge_pair

    stream = capture_logs()
    with FakeOpenAI() as fake_openai:
        settings = Settings(
            _env_file=None,
            redis_url=redis_url,
            database_url=db_url,
            openai_base_url=fake_openai.base_url,
            openai_api_key=OPENAI_KEY,
            llm_max_retries=1,
            retry_base_seconds=0.01,
            daily_budget=1,
        )
        runtime_for(settings, worker=True)
        fake_openai.set_behavior(fault_first=1, faults=["500"], retry_after_seconds=0)
        (first,) = add_pairs(database, 1, channel="C_LOGS", question=QUESTION, answer=ANSWER)
        (second,) = add_pairs(database, 1, channel="C_LOGS", start=1)  # other texts: no cache hit
        judge_pair.apply(args=[first]).get()  # fails once, retried, judged: the day's one judgment
        judge_pair.apply(args=[second]).get()  # the budget is spent
    events = {line["event"]: line for line in lines(stream)}
    retrying = events["LLM transient error, retrying"]
    skipped = events["daily budget spent: pair skipped"]
    assert (retrying["channel"], retrying["message_ts"], retrying["pair_id"]) == ("C_LOGS", "1700000000.000000", first)
    assert (retrying["judge"], retrying["retry"]) == ("relevancy", 1)
    assert (skipped["channel"], skipped["message_ts"], skipped["pair_id"]) == ("C_LOGS", "1700000000.000001", second)
    assert QUESTION not in stream.getvalue() and ANSWER not in stream.getvalue()
