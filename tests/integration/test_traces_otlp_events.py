"""Verdicts and outcome signals on the bot's traces, over OTLP: gen_ai.evaluation.result events to a fake OTLP
receiver; outages retried or given up, a key the endpoint refuses or takes (OTEL_EXPORTER_OTLP_HEADERS).
The tasks run eagerly (Celery's own retry path, without the countdowns); judgments are real rows in SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from langfuse import Langfuse

from common.runtime import Runtime
from tests.alert_helpers import add_judgment
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.integration.test_traces_langfuse import EXAMPLES
from tests.services import free_port
from tests.trace_helpers import CHANNEL, TS, Watched, judged, sends, signalled, watched
from workers.tasks.traces import send_otlp_evaluations, send_otlp_outcome


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


def test_a_team_judges_verdict_is_an_evaluation_event_under_its_own_name(runtime_on: Callable[..., Runtime]) -> None:
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url, judges_dir=EXAMPLES)
        judgment_id = add_judgment(runtime, score=1, judge="refund_policy", max_score=1, channel_id=CHANNEL,
                                   answer_ts=TS, reasoning="No refund is promised.")  # fmt: skip
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        [(trace, _, name, event)] = otlp.log_records()
    assert trace == Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}") and name == "gen_ai.evaluation.result"
    assert event == {
        "gen_ai.evaluation.name": "relmon.refund_policy",
        "gen_ai.evaluation.score.value": 1.0,
        "gen_ai.evaluation.score.label": "pass",
        "gen_ai.evaluation.explanation": "No refund is promised.",
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
