"""Verdicts on the bot's traces through real processes: a signed answer to a real `relmon bot`, judged by a real
`relmon worker`, whose send task puts the score on the trace Langfuse derives from the message (the fake Langfuse,
through the official SDK's client) and counts it on the worker's /metrics; an outcome signal that comes after the
verdict was sent follows it to Langfuse and to an OTLP receiver, once."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langfuse import Langfuse
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from store.db import Database
from store.models import Judgment, OutcomeSignal
from tests import slack_requests as sr
from tests.broker import wait_until_idle
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.processes import wait_for
from tests.running_system import CHANNEL, Processes, fresh_database, relmon_processes
from tests.services import free_port

pytestmark = pytest.mark.slow


def sent_count(port: int, tool: str = "langfuse", outcome: str = "sent") -> float:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "relmon_trace_sends_total" and sample.labels == {"tool": tool, "outcome": outcome}
    )


def traced_processes(langfuse_url: str, worker_port: int, redis_url: str, db_url: str, directory: Path, **extra):
    """A real bot and worker that send verdicts to the Langfuse at `langfuse_url` (a FakeLangfuse's keys; trace
    IDs derived from the messages) and serve the worker's metrics on `worker_port`."""
    return relmon_processes(
        redis_url=redis_url,
        database_url=db_url,
        directory=directory,
        RELMON_SETTLE_SECONDS="0.3",
        RELMON_WORKER_METRICS_PORT=worker_port,
        RELMON_TRACE_ID_FROM="slack_ts",
        RELMON_LANGFUSE_HOST=langfuse_url,
        RELMON_LANGFUSE_PUBLIC_KEY="pk-lf-test",  # the keys a FakeLangfuse() takes
        RELMON_LANGFUSE_SECRET_KEY="sk-lf-test",
        **extra,
    )


def answered(system: Processes) -> tuple[dict, dict]:
    """A question and the support bot's answer in its thread, posted to the bot: (question, answer)."""
    question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
    answer = sr.bot_message(CHANNEL, sr.next_ts(), "Open Settings > Security > Reset.", thread_ts=question["ts"])
    for event in (question, answer):
        assert system.post_event(event).status_code == 200
    return question, answer


def test_a_judged_answer_becomes_a_score_on_the_bots_langfuse_trace(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    worker_port = free_port()
    with (
        FakeLangfuse() as langfuse,
        traced_processes(langfuse.url, worker_port, redis_url, db_url, tmp_path) as system,
    ):
        _, answer = answered(system)
        scores = wait_for(lambda: langfuse.stored() or None, timeout=60, what="a score in Langfuse")
        wait_for(lambda: sent_count(worker_port) == 1, timeout=20, what="the send counted on the worker's /metrics")
    (score,) = scores.values()
    assert score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{answer['ts']}")
    assert score["name"] == "relmon.relevancy" and score["dataType"] == "NUMERIC" and 0 <= score["value"] <= 1


def evaluations(otlp: FakeOtlpReceiver) -> list[tuple[str, str]]:
    """(trace ID, gen_ai.evaluation.name) of each event the receiver holds."""
    return [(trace, attributes["gen_ai.evaluation.name"]) for trace, _, _, attributes in otlp.log_records()]


def test_an_outcome_signal_after_the_verdict_was_sent_reaches_each_tool_once(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    """The answer is judged and its verdict sent to both tools; then the asker asks again in the thread: the
    worker records `reask` and sends it on its own (the verdict is not sent again), once to each tool."""
    worker_port = free_port()
    with (
        FakeLangfuse() as langfuse,
        FakeOtlpReceiver() as otlp,
        traced_processes(
            langfuse.url,
            worker_port,
            redis_url,
            db_url,
            tmp_path,
            RELMON_OUTCOME_WINDOW=600,  # open for the whole test (no beat runs to close it)
            OTEL_EXPORTER_OTLP_ENDPOINT=otlp.url,
        ) as system,
    ):
        question, answer = answered(system)
        trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{answer['ts']}")
        verdict = (trace_id, "relmon.relevancy")
        wait_for(lambda: len(langfuse.stored()) == 1, timeout=60, what="the verdict's score in Langfuse")
        wait_for(lambda: evaluations(otlp) == [verdict], timeout=30, what="the verdict's event at the receiver")

        reask = sr.human_message(CHANNEL, sr.next_ts(), "Where is the Security tab?", thread_ts=question["ts"])
        assert system.post_event(reask).status_code == 200
        signal = (trace_id, "relmon.outcome.reask")
        wait_for(lambda: len(langfuse.stored()) == 2, timeout=60, what="the signal's score in Langfuse")
        wait_for(lambda: signal in evaluations(otlp), timeout=30, what="the signal's event at the receiver")
        wait_for(lambda: sent_count(worker_port, "otlp") == 2, timeout=20, what="both OTLP sends counted")
        # A duplicate send would be a task still queued or held by the worker: wait until there is none.
        wait_until_idle(redis_url, what="every send run")
        assert evaluations(otlp) == [verdict, signal]
        assert langfuse.requests == 2 and sent_count(worker_port) == 2
    scores = langfuse.stored()
    (outcome,) = [score for key, score in scores.items() if key.endswith("-reask")]
    assert outcome["traceId"] == trace_id and outcome["name"] == "relmon.outcome.reask"
    assert outcome["value"] == 1 and outcome["dataType"] == "BOOLEAN"


def test_tools_that_are_down_are_given_up_after_one_retry_holding_nothing_up(redis_url: str, tmp_path: Path) -> None:
    """Langfuse and the OTLP endpoint both out of reach (RELMON_TRACE_SEND_RETRIES=1): the answer is judged and
    its re-ask recorded as ever; each send (the verdict's, the signal's) is tried twice, a line each time, then
    given up and counted as failed on the worker's /metrics. One database: the sends do not depend on it."""
    worker_port = free_port()
    dead_langfuse, dead_otlp = f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"
    with (
        fresh_database(tmp_path) as db_url,
        traced_processes(
            dead_langfuse,
            worker_port,
            redis_url,
            db_url,
            tmp_path,
            RELMON_OUTCOME_WINDOW=600,
            RELMON_TRACE_SEND_RETRIES=1,
            OTEL_EXPORTER_OTLP_ENDPOINT=dead_otlp,
        ) as system,
    ):
        question, _ = answered(system)
        database = Database(db_url)
        try:

            def judged() -> Judgment | None:
                with database.session() as session:
                    return session.execute(select(Judgment)).scalar()

            assert wait_for(judged, timeout=60, what="the answer judged").status == "ok"
            reask = sr.human_message(CHANNEL, sr.next_ts(), "Where is the Security tab?", thread_ts=question["ts"])
            assert system.post_event(reask).status_code == 200

            def signals() -> list[str]:
                with database.session() as session:
                    return list(session.execute(select(OutcomeSignal.name)).scalars())

            assert wait_for(signals, timeout=30, what="the re-ask recorded") == ["reask"]
        finally:
            database.dispose()
        for tool in ("langfuse", "otlp"):
            wait_for(
                lambda tool=tool: sent_count(worker_port, tool, "failed") == 2,
                timeout=60,
                what=f"the verdict's and the signal's {tool} sends given up",
            )
        # No further try is on its way: nothing queued or held by the worker (a retry waits there, as a countdown).
        wait_until_idle(redis_url, what="no send left to try")
        log = system.worker.log()
        for tool in ("langfuse", "otlp"):
            assert sent_count(worker_port, tool, "failed") == 2 and sent_count(worker_port, tool) == 0
            assert log.count(f"{tool}: retrying") == 2 and log.count(f"{tool}: gave up") == 2


def test_a_deleted_question_blanks_the_verdicts_comment_in_langfuse_through_real_processes(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    """A judge that quotes the question; its verdict sent to Langfuse with the quote as the comment. Slack says
    the question was deleted: the worker's forgetting sends the score again by its ID, without the comment."""
    from tests.system.test_forgetting_processes import QUESTION_MARK, quoting_judge

    worker_port = free_port()
    with (
        FakeLangfuse() as langfuse,
        traced_processes(langfuse.url, worker_port, redis_url, db_url, tmp_path) as system,
    ):
        system.llm.set_reply(quoting_judge)
        question = sr.human_message(CHANNEL, sr.next_ts(), f"Why was order {QUESTION_MARK} refused?")
        answer = sr.bot_message(CHANNEL, sr.next_ts(), "Orders ship in two days.", thread_ts=question["ts"])
        for event in (question, answer):
            assert system.post_event(event).status_code == 200
        scores = wait_for(lambda: langfuse.stored() or None, timeout=60, what="a score in Langfuse")
        (score_id,) = [key for key in scores if key.endswith("-score")]  # (a second opinion's has no comment)
        assert QUESTION_MARK in scores[score_id]["comment"]

        assert system.post_event(sr.message_deleted(question)).status_code == 200
        wait_for(lambda: not langfuse.stored()[score_id].get("comment"), timeout=60, what="the comment blanked")
        wait_until_idle(redis_url, what="every send run")
    score = langfuse.stored()[score_id]
    assert score["value"] == 0.0 and score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{answer['ts']}")
    assert QUESTION_MARK not in str(langfuse.stored()) and langfuse.posts[score_id] >= 2  # upserted, not added
