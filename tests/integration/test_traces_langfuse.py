"""Verdicts on the bot's traces, to Langfuse: the official SDK's API client against a fake that answers as
Langfuse's public API does (Langfuse itself needs ClickHouse). The task runs eagerly (Celery's own retry path,
without the countdowns); judgments are real rows in SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from celery import Task
from langfuse import Langfuse
from prometheus_client.parser import text_string_to_metric_families

from common import celery_app, metrics, task_names
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK
from common.runtime import Runtime
from store.models import Judgment, OutcomeSignal
from tests.alert_helpers import add_judgment
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.fakes.slack_server import FakeSlack
from tests.services import free_port
from workers import noted_tasks
from workers.judging.queued import queued_notes
from workers.sweeps import requeue_lost_follow_ups
from workers.tasks.traces import send_langfuse_outcome, send_langfuse_scores, send_otlp_evaluations, send_otlp_outcome

CHANNEL, TS = "C_SUPPORT", "1767225600.000100"


@pytest.fixture
def langfuse() -> Iterator[FakeLangfuse]:
    with FakeLangfuse() as fake:
        yield fake


def judged(runtime: Runtime, *, confirmation: str | None = None, ts: str = TS, thread_ts: str | None = None) -> int:
    """A relevancy judgment of 1 out of 4 (0.25), maybe with a second opinion's outcome."""
    judgment_id = add_judgment(runtime, score=1, channel_id=CHANNEL, answer_ts=ts, thread_ts=thread_ts)
    if confirmation:
        with runtime.db.session() as session:
            session.get(Judgment, judgment_id).confirmation_status = confirmation
    return judgment_id


def signalled(runtime: Runtime, judgment_id: int, name: str = "reask") -> int:
    """An outcome signal recorded on the judged pair (as workers.outcome_watching records it); returns the pair."""
    with runtime.db.session() as session:
        pair_id = session.get(Judgment, judgment_id).pair_id
        session.add(OutcomeSignal(pair_id=pair_id, name=name, after_seconds=30.0))
    return pair_id


def sends(outcome: str, tool: str = "langfuse") -> float:
    body = metrics.exposition()[0].decode()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "relmon_trace_sends_total" and sample.labels == {"tool": tool, "outcome": outcome}:
                return sample.value
    return 0.0


@pytest.fixture
def confirmed(langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]) -> int:
    """A verdict whose second opinion confirmed it, on a runtime sending to the fake Langfuse."""
    return judged(runtime_on(langfuse.url), confirmation="confirmed")


def test_a_verdict_becomes_a_numeric_score_on_the_trace_langfuse_derives(
    langfuse: FakeLangfuse, confirmed: int
) -> None:
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")  # the bot's own derivation
    score = langfuse.stored()[f"relmon-{confirmed}-score"]
    assert score["traceId"] == trace_id and score["name"] == "relmon.relevancy"
    assert score["value"] == 0.25 and score["dataType"] == "NUMERIC" and "passwords" in score["comment"]


def test_a_second_opinion_becomes_a_categorical_score(langfuse: FakeLangfuse, confirmed: int) -> None:
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    second = langfuse.stored()[f"relmon-{confirmed}-second-opinion"]
    assert second["value"] == "confirmed" and second["dataType"] == "CATEGORICAL"


def test_a_resent_verdict_upserts_its_scores(langfuse: FakeLangfuse, confirmed: int) -> None:
    before = sends("sent")
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"  # a redelivery
    assert len(langfuse.stored()) == 2  # upserted by id, not added twice
    assert sends("sent") - before == 2


def test_an_outcome_signal_becomes_a_boolean_score_on_the_answers_trace(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    """A signal goes by its own send (per pair and signal, whichever judge judged): a redelivery upserts the same
    score; a signal not recorded sends nothing."""
    runtime = runtime_on(langfuse.url)
    pair_id = signalled(runtime, judged(runtime))
    assert send_langfuse_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
    assert send_langfuse_outcome.apply(args=[pair_id, "reask"]).get() == "sent"  # a redelivery
    assert send_langfuse_outcome.apply(args=[pair_id, "resolved"]).get() == "skipped"  # not recorded
    scores = langfuse.stored()
    assert list(scores) == [f"relmon-pair-{pair_id}-reask"] and langfuse.requests == 2
    score = scores[f"relmon-pair-{pair_id}-reask"]
    assert score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")
    assert score["name"] == "relmon.outcome.reask" and score["value"] == 1 and score["dataType"] == "BOOLEAN"


def test_an_outcome_signal_becomes_an_evaluation_event_on_the_answers_trace(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    """Over OTLP too, by its own send: a signal whose pair is gone, or that is not recorded, sends nothing."""
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on(langfuse.url, otlp_endpoint=otlp.url)
        pair_id = signalled(runtime, judged(runtime))
        assert send_otlp_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
        assert send_otlp_outcome.apply(args=[pair_id + 1000, "reask"]).get() == "skipped"  # no such pair
        assert send_otlp_outcome.apply(args=[pair_id, "reask', 'x"]).get() == "skipped"  # no such signal
        records = otlp.log_records()
    assert records == [
        (
            Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}"),
            "",  # no span: relmon knows the trace, not the bot's spans
            "gen_ai.evaluation.result",
            {"gen_ai.evaluation.name": "relmon.outcome.reask", "gen_ai.evaluation.score.label": "true"},
        )
    ]


def orphaned_send(runtime: Runtime) -> tuple[tuple[str, list], str]:
    """A worker noted a signal's send, committed the signal and died before queueing it: its note is all that is
    left. Another send's message waits on the judge queue. Returns the lost send and the waiting one's note."""
    pair_id = signalled(runtime, judged(runtime))
    waiting = judged(runtime, ts="1767225600.000200")
    two_minutes_ago = time.time() - 120
    lost = (task_names.SEND_LANGFUSE_OUTCOME, [pair_id, "reask"])
    assert noted_tasks.note(runtime.redis, [lost], two_minutes_ago) == [True]  # noted before the commit; no message
    noted_tasks.send(runtime.redis, task_names.SEND_LANGFUSE_SCORES, [waiting], two_minutes_ago)  # on the queue
    waiting_note = noted_tasks.note_of(task_names.SEND_LANGFUSE_SCORES, [waiting])
    assert queued_notes(runtime.redis, QUEUE_SLACK, QUEUE_JUDGE) == {waiting_note}
    return lost, waiting_note


def kept_sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list]]:
    """From now on, the tasks sent by name, kept instead of queued."""
    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda name, args=None, **_: sent.append((name, args)))
    return sent


def test_the_orphan_check_sends_again_only_a_noted_send_whose_message_is_gone(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the note is a lease old the orphan check sends the lost one again, and only it."""
    runtime = runtime_on(langfuse.url)
    lost, _ = orphaned_send(runtime)
    sent = kept_sends(monkeypatch)
    assert requeue_lost_follow_ups(runtime, time.time() - 100, lease_seconds=30) == 0  # within its lease: waits
    assert requeue_lost_follow_ups(runtime, time.time(), lease_seconds=30) == 1
    assert sent == [lost]


def test_a_send_the_orphan_check_sent_again_lands_once(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run, it puts the score on the trace once and drops its note; the waiting send's note stays."""
    runtime = runtime_on(langfuse.url)
    (_, (pair_id, _)), waiting_note = orphaned_send(runtime)
    sent = kept_sends(monkeypatch)
    assert requeue_lost_follow_ups(runtime, time.time(), lease_seconds=30) == 1
    [(_, args)] = sent
    assert send_langfuse_outcome.apply(args=args).get() == "sent"  # the message sent again, run
    assert langfuse.posts == {f"relmon-pair-{pair_id}-reask": 1}
    assert {raw.decode() for raw in runtime.redis.zrange(noted_tasks.KEY, 0, -1)} == {waiting_note}


def test_an_outage_is_retried_until_the_scores_are_sent(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    judgment_id = judged(runtime_on(langfuse.url))
    langfuse.fail_next(2, 503)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"  # third try
    assert langfuse.requests == 3 and len(langfuse.stored()) == 1


def test_an_outage_on_the_last_retry_allowed_is_given_up(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    judgment_id = judged(runtime_on(langfuse.url))
    failed = sends("failed")
    langfuse.fail_next(1, 503)
    # The last retry allowed (RELMON_TRACE_SEND_RETRIES=3) fails: given up, counted, nothing sent again.
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert langfuse.requests == 1
    assert sends("failed") - failed == 1


@dataclass
class Watched:
    """Sends made under watch: what each returned with the requests made by then, how many the metric counted
    under the outcome watched, and the warnings said with the message watched."""

    returned: list[tuple[str, int]]
    counted: float
    said: list[logging.LogRecord]


def watched(
    caplog: pytest.LogCaptureFixture,
    calls: list[tuple[Task, list]],
    *,
    tool: str,
    outcome: str,
    message: str,
    requests: Callable[[], int],
) -> Watched:
    before = sends(outcome, tool)
    with caplog.at_level(logging.WARNING, logger="relmon.traces"):
        returned = [(task.apply(args=args).get(), requests()) for task, args in calls]
    said = [r for r in caplog.records if r.getMessage() == message]
    return Watched(returned, sends(outcome, tool) - before, said)


@pytest.fixture
def refused(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> tuple[int, int, Watched]:
    """A verdict's send, then a signal's, with a key Langfuse refuses: the judgment, the pair, what was watched."""
    runtime = runtime_on(langfuse.url, langfuse_secret_key="sk-lf-wrong")
    judgment_id = judged(runtime)
    pair_id = signalled(runtime, judgment_id)
    calls = [(send_langfuse_scores, [judgment_id]), (send_langfuse_outcome, [pair_id, "reask"])]
    message = "langfuse refused the scores"
    watch = watched(
        caplog, calls, tool="langfuse", outcome="rejected", message=message, requests=lambda: langfuse.requests
    )
    return judgment_id, pair_id, watch


def test_a_refused_key_is_not_retried(langfuse: FakeLangfuse, refused: tuple[int, int, Watched]) -> None:
    assert refused[2].returned == [("rejected", 1), ("rejected", 2)]  # one request each, refused: never resent
    assert not langfuse.stored()


def test_a_refused_key_is_counted(refused: tuple[int, int, Watched]) -> None:
    assert refused[2].counted == 2


def test_a_refused_key_is_said_with_its_status(refused: tuple[int, int, Watched]) -> None:
    judgment_id, pair_id, watch = refused
    said = watch.said
    assert [r.status for r in said] == [401, 401]
    assert said[0].judgment_id == judgment_id and (said[1].pair_id, said[1].signal) == (pair_id, "reask")


def test_a_dead_host_is_given_up_after_the_retries_allowed(runtime_on: Callable[..., Runtime]) -> None:
    runtime = runtime_on(f"http://127.0.0.1:{free_port()}")
    judgment_id = judged(runtime)
    failed = sends("failed")
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert sends("failed") - failed == 1


TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


THREAD, REPLY = "1767225700.000100", "1767225800.000100"


@pytest.fixture
def answers_in_slack(langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]) -> Iterator[tuple[FakeSlack, Runtime]]:
    """The bot's answers in Slack with the trace id in their metadata (one at top level, one in a thread with its
    id in upper case), and a runtime that reads it there."""
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": TRACE}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        slack.add_message(CHANNEL, THREAD, user="U_ASKER", text="Where?")
        slack.add_message(
            CHANNEL,
            REPLY,
            text="Top right.",
            thread_ts=THREAD,
            bot_id="B_SUPPORT",
            metadata={"event_type": "support_answer", "event_payload": {"trace_id": TRACE.upper()}},
        )
        yield slack, runtime_on(langfuse.url, slack.api_url, trace_id_from="metadata")


def trace_id_sent_to(langfuse: FakeLangfuse, slack: FakeSlack, judgment_id: int) -> str:
    """Send the verdict: the trace id its score went to. Every read of Slack asks for the messages' metadata."""
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    reads = [call for call in slack.calls if call[0] in ("conversations.history", "conversations.replies")]
    assert reads and all(str(call[1].get("include_all_metadata")).lower() in ("true", "1") for call in reads)
    return langfuse.stored()[f"relmon-{judgment_id}-score"]["traceId"]


def test_the_trace_id_in_a_top_level_answers_metadata_is_read_at_the_configured_key(
    langfuse: FakeLangfuse, answers_in_slack: tuple[FakeSlack, Runtime]
) -> None:
    slack, runtime = answers_in_slack
    assert trace_id_sent_to(langfuse, slack, judged(runtime)) == TRACE


def test_the_trace_id_in_a_threaded_answers_metadata_is_read_at_the_configured_key(
    langfuse: FakeLangfuse, answers_in_slack: tuple[FakeSlack, Runtime]
) -> None:
    slack, runtime = answers_in_slack
    assert trace_id_sent_to(langfuse, slack, judged(runtime, ts=REPLY, thread_ts=THREAD)) == TRACE  # lower case


BAD_TRACE_IDS = pytest.mark.parametrize("given", ["not-a-trace", "4bf92f3577b34da6", "z" * 32, TRACE + "00"])
TOOLS = pytest.mark.parametrize("tool", ["langfuse", "otlp"])


@pytest.fixture
def bad_trace_id(
    given: str,
    tool: str,
    langfuse: FakeLangfuse,
    runtime_on: Callable[..., Runtime],
    caplog: pytest.LogCaptureFixture,
) -> Watched:
    """The bot's answer carries `given` as its trace id: a verdict's send, then a signal's, to `tool`; the requests
    watched are those to either tool."""
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": given}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        runtime = runtime_on(langfuse.url, slack.api_url, trace_id_from="metadata", otlp_endpoint=otlp.url)
        judgment_id = judged(runtime)
        pair_id = signalled(runtime, judgment_id)
        verdict, outcome = (
            (send_langfuse_scores, send_langfuse_outcome)
            if tool == "langfuse"
            else (send_otlp_evaluations, send_otlp_outcome)
        )
        calls = [(verdict, [judgment_id]), (outcome, [pair_id, "reask"])]
        return watched(
            caplog,
            calls,
            tool=tool,
            outcome="bad_trace_id",
            message="trace id refused",
            requests=lambda: langfuse.requests + otlp.posts,
        )


@BAD_TRACE_IDS
@TOOLS
def test_a_trace_id_that_is_not_one_is_refused_without_a_request(bad_trace_id: Watched) -> None:
    """Wrong length (short, long), not hex: no request to either tool and no retry; the refusal counted, and one log
    line a send naming the key read and why the id is not one (one refusal, seen from its three sides: one run of
    the sends serves all three, 16 cases)."""
    assert bad_trace_id.returned == [("bad_trace_id", 0), ("bad_trace_id", 0)]
    assert bad_trace_id.counted == 2
    said = bad_trace_id.said
    assert len(said) == 2 and all(r.key == "event_payload.trace_id" and "expected 32 hex" in r.reason for r in said)


def test_verdicts_go_over_otlp_as_gen_ai_evaluation_result_events_on_the_trace(
    runtime_on: Callable[..., Runtime],
) -> None:
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url)
        judgment_id = judged(runtime, confirmation="disputed")
        otlp.fail_next(1, 503)  # an outage: retried (by the exporter within its timeout, then by the task)
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        records = otlp.log_records()
    trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")
    assert [(trace, name) for trace, _, name, _ in records] == [(trace_id, "gen_ai.evaluation.result")] * 2
    verdict, second = records[0][3], records[1][3]
    assert verdict["gen_ai.evaluation.name"] == "relmon.relevancy"
    assert verdict["gen_ai.evaluation.score.value"] == 0.25 and "passwords" in verdict["gen_ai.evaluation.explanation"]
    assert second == {
        "gen_ai.evaluation.name": "relmon.relevancy.second_opinion",
        "gen_ai.evaluation.score.label": "disputed",
    }


def test_a_dead_otlp_endpoint_is_given_up_after_the_retries_allowed(
    runtime_on: Callable[..., Runtime],
) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    runtime = runtime_on("", langfuse_host=None, otlp_endpoint=dead)
    judgment_id = judged(runtime)
    failed = sends("failed", tool="otlp")
    assert send_otlp_evaluations.apply(args=[judgment_id], retries=3).get() == "failed"
    assert sends("failed", tool="otlp") - failed == 1


@pytest.fixture
def otlp_refused(
    runtime_on: Callable[..., Runtime],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> Iterator[tuple[FakeOtlpReceiver, int, Watched]]:
    """The key goes in the standard OTEL_EXPORTER_OTLP_HEADERS, read by the exporter: a verdict's send with a key
    the endpoint refuses. The endpoint (still up), the judgment, what was watched."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20wrong-token")
    with FakeOtlpReceiver(token="right-token") as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url)
        judgment_id = judged(runtime)
        calls = [(send_otlp_evaluations, [judgment_id])]
        message = "the OTLP endpoint refused the events"
        watch = watched(caplog, calls, tool="otlp", outcome="rejected", message=message, requests=lambda: otlp.posts)
        yield otlp, judgment_id, watch


def test_an_otlp_endpoint_that_refuses_the_key_is_not_retried(
    otlp_refused: tuple[FakeOtlpReceiver, int, Watched],
) -> None:
    """A 401 is a refusal, not an outage: one request (the exporter does not retry it, nor does the task)."""
    otlp, _, watch = otlp_refused
    assert watch.returned == [("rejected", 1)]
    assert otlp.posts == 1 and not otlp.log_records()


def test_an_otlp_endpoint_that_refuses_the_key_is_counted(otlp_refused: tuple[FakeOtlpReceiver, int, Watched]) -> None:
    assert otlp_refused[2].counted == 1


def test_an_otlp_endpoint_that_refuses_the_key_is_said_with_its_status(
    otlp_refused: tuple[FakeOtlpReceiver, int, Watched],
) -> None:
    _, judgment_id, watch = otlp_refused
    (said,) = watch.said
    assert said.status == 401 and said.judgment_id == judgment_id


def test_an_otlp_key_the_endpoint_takes_is_sent_in_the_standard_headers_variable(
    runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20right-token")
    with FakeOtlpReceiver(token="right-token") as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url)
        assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "sent"
        assert otlp.posts == 1 and len(otlp.log_records()) == 1
