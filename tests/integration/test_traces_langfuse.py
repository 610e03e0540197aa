"""Verdicts on the bot's traces, to Langfuse: the official SDK's API client against a fake that answers as
Langfuse's public API does (Langfuse itself needs ClickHouse). The task runs eagerly (Celery's own retry path,
without the countdowns); judgments are real rows in SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from langfuse import Langfuse

from common.runtime import Runtime
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.fakes.slack_server import FakeSlack
from tests.services import free_port
from tests.trace_helpers import CHANNEL, TS, judged, runtime_on, sends
from workers.tasks.traces import send_langfuse_scores, send_otlp_evaluations


@pytest.fixture
def langfuse() -> Iterator[FakeLangfuse]:
    with FakeLangfuse() as fake:
        yield fake


def test_a_verdict_and_its_second_opinion_become_scores_on_the_trace_langfuse_derives_and_a_resend_upserts(
    langfuse: FakeLangfuse, redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(runtime_for, redis_url, db_url, langfuse.url)
    judgment_id = judged(runtime, confirmation="confirmed")
    before = sends("sent")
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"  # a redelivery
    scores = langfuse.stored()
    assert len(scores) == 3  # upserted by id, not added twice
    trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")  # the bot's own derivation
    score = scores[f"relmon-{judgment_id}-score"]
    assert score["traceId"] == trace_id and score["name"] == "relmon.relevancy"
    assert score["value"] == 0.25 and score["dataType"] == "NUMERIC" and "passwords" in score["comment"]
    second = scores[f"relmon-{judgment_id}-second-opinion"]
    assert second["value"] == "confirmed" and second["dataType"] == "CATEGORICAL"
    signal = next(score for key, score in scores.items() if key.endswith("-reask"))
    assert signal["name"] == "relmon.outcome.reask" and signal["value"] == 1 and signal["dataType"] == "BOOLEAN"
    assert sends("sent") - before == 2


def test_an_outage_is_retried_with_backoff_then_given_up_and_counted(
    langfuse: FakeLangfuse, redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(runtime_for, redis_url, db_url, langfuse.url)
    judgment_id = judged(runtime)
    langfuse.fail_next(2, 503)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"  # third try
    assert langfuse.requests == 3 and len(langfuse.stored()) == 1
    failed = sends("failed")
    langfuse.fail_next(1, 503)
    # The last retry allowed (RELMON_TRACE_SEND_RETRIES=3) fails: given up, counted, nothing sent again.
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert langfuse.requests == 4
    assert sends("failed") - failed == 1


def test_a_refused_key_or_a_dead_host_is_said_and_counted_without_a_retry_storm(
    langfuse: FakeLangfuse, redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(runtime_for, redis_url, db_url, langfuse.url, langfuse_secret_key="sk-lf-wrong")
    judgment_id = judged(runtime)
    rejected = sends("rejected")
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "rejected"
    assert langfuse.requests == 1  # one request, refused: never resent
    assert sends("rejected") - rejected == 1 and not langfuse.stored()
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "rejected"
    assert langfuse.requests == 2


def test_a_dead_host_is_given_up_after_the_retries_allowed(
    redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(runtime_for, redis_url, db_url, f"http://127.0.0.1:{free_port()}")
    judgment_id = judged(runtime)
    failed = sends("failed")
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert sends("failed") - failed == 1


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_trace_id_in_the_bot_messages_metadata_is_read_at_the_configured_key_top_level_and_in_a_thread(
    langfuse: FakeLangfuse, redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": TRACE}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        slack.add_message(CHANNEL, "1767225700.000100", user="U_ASKER", text="Where?")
        reply = "1767225800.000100"
        slack.add_message(
            CHANNEL,
            reply,
            text="Top right.",
            thread_ts="1767225700.000100",
            bot_id="B_SUPPORT",
            metadata={"event_type": "support_answer", "event_payload": {"trace_id": TRACE.upper()}},
        )
        runtime = runtime_on(runtime_for, redis_url, db_url, langfuse.url, slack.api_url, trace_id_from="metadata")
        top = judged(runtime)
        threaded = judged(runtime, ts=reply, thread_ts="1767225700.000100")
        assert send_langfuse_scores.apply(args=[top]).get() == "sent"
        assert send_langfuse_scores.apply(args=[threaded]).get() == "sent"
        reads = [call for call in slack.calls if call[0] in ("conversations.history", "conversations.replies")]
        assert reads and all(str(call[1].get("include_all_metadata")).lower() in ("true", "1") for call in reads)
    scores = langfuse.stored()
    assert {scores[f"relmon-{top}-score"]["traceId"], scores[f"relmon-{threaded}-score"]["traceId"]} == {TRACE}


@pytest.mark.parametrize("given", ["not-a-trace", "4bf92f3577b34da6", "z" * 32])
def test_a_trace_id_that_is_not_one_is_said_counted_and_not_sent_or_retried(
    given: str, langfuse: FakeLangfuse, redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": given}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        runtime = runtime_on(runtime_for, redis_url, db_url, langfuse.url, slack.api_url, trace_id_from="metadata")
        judgment_id = judged(runtime)
        bad = sends("bad_trace_id")
        assert send_langfuse_scores.apply(args=[judgment_id]).get() == "bad_trace_id"
    assert sends("bad_trace_id") - bad == 1
    assert langfuse.requests == 0


def test_verdicts_go_over_otlp_as_gen_ai_evaluation_result_events_on_the_trace(
    redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on(runtime_for, redis_url, db_url, "", langfuse_host=None, otlp_endpoint=otlp.url)
        judgment_id = judged(runtime, confirmation="disputed")
        otlp.fail_next(1, 503)  # an outage: retried (by the exporter within its timeout, then by the task)
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        records = otlp.log_records()
    trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")
    assert [(trace, name) for trace, _, name, _ in records] == [(trace_id, "gen_ai.evaluation.result")] * 3
    verdict, second = records[0][3], records[1][3]
    assert verdict["gen_ai.evaluation.name"] == "relmon.relevancy"
    assert verdict["gen_ai.evaluation.score.value"] == 0.25 and "passwords" in verdict["gen_ai.evaluation.explanation"]
    assert second == {
        "gen_ai.evaluation.name": "relmon.relevancy.second_opinion",
        "gen_ai.evaluation.score.label": "disputed",
    }


def test_a_dead_otlp_endpoint_is_given_up_after_the_retries_allowed_and_counted(
    redis_url: str, db_url: str, runtime_for: Callable[..., Runtime]
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    runtime = runtime_on(runtime_for, redis_url, db_url, "", langfuse_host=None, otlp_endpoint=dead)
    judgment_id = judged(runtime)
    failed = sends("failed", tool="otlp")
    assert send_otlp_evaluations.apply(args=[judgment_id], retries=3).get() == "failed"
    assert sends("failed", tool="otlp") - failed == 1
