"""Verdicts and outcome signals as `gen_ai.evaluation.result` events in their span form (RELMON_OTLP_EVENTS_AS=
spans): the SDK's trace exporter against a local OTLP/HTTP receiver that decodes the protobuf
(tests/fakes/otlp_receiver.py); the task runs eagerly. Against a real Phoenix: tests/system/test_traces_phoenix.py."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NamedTuple

import pytest

from common.runtime import Runtime
from tests.fakes.otlp_receiver import FakeOtlpReceiver, Received
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_traces_langfuse import CHANNEL, TS, judged, sends, signalled
from workers.tasks.traces import send_otlp_evaluations, send_otlp_outcome
from workers.traces import evaluation_span_id, slack_trace_id

TRACE, PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def answer_naming(slack: FakeSlack, span_id: str) -> None:
    slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
    payload = {"trace_id": TRACE, "span_id": span_id}
    metadata = {"event_type": "support_answer", "event_payload": payload}
    slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)


def on_metadata(runtime_on: Callable[..., Runtime], slack: FakeSlack, otlp: FakeOtlpReceiver, **settings) -> Runtime:
    """A runtime that reads the trace ID from the answer's metadata on `slack` and sends to `otlp` only."""
    return runtime_on(
        "", slack.api_url, langfuse_host=None, trace_id_from="metadata", otlp_endpoint=otlp.url, **settings
    )


class SentAsSpans(NamedTuple):
    judgment_id: int
    pair_id: int
    spans: list[Received]
    log_records: list[tuple[str, str, str, dict]]


def sent_as_spans(runtime_on: Callable[..., Runtime], *, outage: int = 0) -> SentAsSpans:
    """A verdict with a disputing second opinion, sent twice (the second a redelivery), then its pair's outcome
    signal, as spans, for an answer whose metadata names its span in capitals; the first post meets `outage` 503s."""
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        answer_naming(slack, PARENT.upper())
        runtime = on_metadata(runtime_on, slack, otlp, otlp_events_as="spans")
        judgment_id = judged(runtime, confirmation="disputed")
        pair_id = signalled(runtime, judgment_id)
        otlp.fail_next(outage, 503)  # an outage: retried (by the exporter within its timeout, then by the task)
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"  # a redelivery
        assert send_otlp_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
        spans = otlp.spans()
    return SentAsSpans(judgment_id, pair_id, spans, otlp.log_records())


def test_each_evaluation_is_a_span_under_the_span_the_bot_names(runtime_on: Callable[..., Runtime]) -> None:
    sent = sent_as_spans(runtime_on)
    assert not sent.log_records
    verdict, _, _, _, signal = sent.spans
    assert {(span.trace_id, span.parent_span_id) for span in sent.spans} == {(TRACE, PARENT)}
    assert verdict.name == "gen_ai.evaluation relmon.relevancy"
    assert signal.name == "gen_ai.evaluation relmon.outcome.reask"


def test_an_evaluation_span_carries_its_event(runtime_on: Callable[..., Runtime]) -> None:
    verdict, second, *_ = sent_as_spans(runtime_on).spans
    ((event_name, attributes),) = verdict.events
    assert event_name == "gen_ai.evaluation.result" and attributes == verdict.attributes
    assert attributes["gen_ai.evaluation.name"] == "relmon.relevancy"
    assert (
        attributes["gen_ai.evaluation.score.value"] == 0.25
        and "passwords" in attributes["gen_ai.evaluation.explanation"]
    )
    assert second.events == [
        (
            "gen_ai.evaluation.result",
            {"gen_ai.evaluation.name": "relmon.relevancy.second_opinion", "gen_ai.evaluation.score.label": "disputed"},
        )
    ]


def test_a_retried_or_redelivered_evaluation_is_the_same_span(runtime_on: Callable[..., Runtime]) -> None:
    sent = sent_as_spans(runtime_on, outage=1)
    verdict, second, verdict_again, second_again, signal = sent.spans
    assert (verdict_again.span_id, second_again.span_id) == (verdict.span_id, second.span_id)
    assert verdict.span_id == evaluation_span_id(TRACE, f"relmon-{sent.judgment_id}", "relmon.relevancy")
    assert signal.span_id == evaluation_span_id(TRACE, f"relmon-pair-{sent.pair_id}-reask", "relmon.outcome.reask")


def test_without_a_named_span_the_evaluation_is_a_root_of_the_derived_trace(
    runtime_on: Callable[..., Runtime],
) -> None:
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url, otlp_events_as="spans")
        assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "sent"
        (span,) = otlp.spans()
    assert (span.trace_id, span.parent_span_id) == (slack_trace_id(CHANNEL, TS), "")


def sent_under_a_span_that_is_not_one(
    runtime_on: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> tuple[float, int]:
    """A verdict sent for an answer whose metadata names "not-a-span": (its bad_trace_id sends counted, the posts
    the receiver had); relmon.traces' warnings are in `caplog`."""
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        answer_naming(slack, "not-a-span")
        runtime = on_metadata(runtime_on, slack, otlp, otlp_events_as="spans")
        bad = sends("bad_trace_id", tool="otlp")
        with caplog.at_level(logging.WARNING, logger="relmon.traces"):
            assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "bad_trace_id"
    return sends("bad_trace_id", tool="otlp") - bad, otlp.posts


def test_a_named_span_that_is_not_one_is_not_sent(
    runtime_on: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> None:
    counted, posts = sent_under_a_span_that_is_not_one(runtime_on, caplog)
    assert counted == 1 and posts == 0


def test_a_named_span_that_is_not_one_is_logged_with_why(
    runtime_on: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> None:
    sent_under_a_span_that_is_not_one(runtime_on, caplog)
    (said,) = [r for r in caplog.records if r.getMessage() == "span id refused"]
    assert said.key == "event_payload.span_id" and "expected 16 hex" in said.reason


def test_a_key_the_endpoint_refuses_is_a_refusal_not_an_outage(
    runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20wrong-token")
    with FakeOtlpReceiver(token="right-token") as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url, otlp_events_as="spans")
        rejected = sends("rejected", tool="otlp")
        assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "rejected"
        assert otlp.posts == 1 and not otlp.spans()
    assert sends("rejected", tool="otlp") - rejected == 1


def test_as_log_records_the_events_are_parented_to_the_span_the_bot_names(runtime_on: Callable[..., Runtime]) -> None:
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        answer_naming(slack, PARENT)
        runtime = on_metadata(runtime_on, slack, otlp)
        assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "sent"
        records = otlp.log_records()
    assert [(trace, span, name) for trace, span, name, _ in records] == [(TRACE, PARENT, "gen_ai.evaluation.result")]


def test_a_receiver_without_the_logs_signal_is_a_refusal_not_an_outage(runtime_on: Callable[..., Runtime]) -> None:
    """405, as Phoenix answers /v1/logs: sending again would be refused again (RELMON_OTLP_EVENTS_AS=spans fits)."""
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url)
        otlp.fail_next(1, 405)
        rejected = sends("rejected", tool="otlp")
        assert send_otlp_evaluations.apply(args=[judged(runtime)]).get() == "rejected"
    assert otlp.posts == 1 and sends("rejected", tool="otlp") - rejected == 1
