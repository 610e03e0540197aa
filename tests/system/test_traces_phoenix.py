"""Verdicts on the bot's traces, to a real Phoenix server (`phoenix serve` from PyPI, SQLite, auth on: relmon's key
is Phoenix's admin secret). The "bot" sends its trace to Phoenix's own OTLP endpoint with the OpenTelemetry SDK;
relmon's send task (run eagerly, and once through a real `relmon worker`) puts span annotations on it through the
official client; the test reads them back through Phoenix's REST API. With RELMON_OTLP_EVENTS_AS=spans its
evaluation events go to the same OTLP endpoint as spans in the bot's trace, read back the same way."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.id_generator import IdGenerator

from common import task_names
from common.runtime import Runtime
from relmon.doctor.trace_checks import check_traces
from store.models import Pair
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment
from tests.builders import make_settings
from tests.fakes.slack_server import FakeSlack
from tests.forget_reach import reached  # noqa: F401  (fixture)
from tests.integration.test_traces_exchange_trace import exchange, stored_and_judged
from tests.integration.test_traces_langfuse import CHANNEL, EXAMPLES, TS, judged, sends, signalled
from tests.phoenix_server import ADMIN_SECRET, PhoenixProcess
from tests.processes import wait_for
from tests.running_system import relmon_processes
from workers.tasks.forgetting import forget_message_in
from workers.tasks.traces import (
    send_otlp_evaluations,
    send_otlp_outcome,
    send_phoenix_annotations,
    send_phoenix_outcome,
)
from workers.traces import evaluation_span_id, slack_trace_id

# The first test's setup starts Phoenix (tests/phoenix_server.py: up to START_SECONDS on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixProcess]:
    server = PhoenixProcess(tmp_path_factory.mktemp("phoenix"), auth=True)
    server.start()
    yield server
    server.stop()


class OnTrace(IdGenerator):
    """The bot's trace ID is the one it tells relmon (here: derived from the Slack message, as slack_ts does)."""

    def __init__(self, trace_id: str) -> None:
        self.trace_id = int(trace_id, 16)

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        return random.getrandbits(64) or 1


def bot_trace(phoenix: PhoenixProcess, trace_id: str) -> tuple[str, str]:
    """The support bot's trace of one answer, exported to Phoenix over OTLP/HTTP: a root span and its LLM call (with
    an event). Returns (root span ID, child span ID) once Phoenix lists both."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support-bot"}), id_generator=OnTrace(trace_id))
    exporter = OTLPSpanExporter(endpoint=f"{phoenix.url}/v1/traces", headers=phoenix.headers)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("support-bot")
    with tracer.start_as_current_span("support answer") as root, tracer.start_as_current_span("llm call") as child:
        child.add_event("retrieved", {"documents": 3})
    provider.shutdown()
    ids = (f"{root.get_span_context().span_id:016x}", f"{child.get_span_context().span_id:016x}")
    spans = wait_for(
        lambda: len(found := phoenix.get("v1/projects/default/spans", trace_id=trace_id)["data"]) == 2 and found,
        timeout=30,
        what="the bot's spans in Phoenix",
    )
    assert {span["context"]["span_id"] for span in spans} == set(ids)
    return ids


@pytest.fixture
def on_phoenix(runtime_on, phoenix: PhoenixProcess) -> Callable[..., Runtime]:
    """`on_phoenix(slack_url="", **settings)`: the process runtime sending its verdicts to the test's Phoenix."""

    def build(slack_url: str = "", **more) -> Runtime:
        settings = {"langfuse_host": None, "phoenix_url": phoenix.url, "phoenix_api_key": ADMIN_SECRET} | more
        return runtime_on("", slack_url, **settings)

    return build


def test_verdicts_become_annotations_on_the_traces_root_span_upserted_on_a_resend(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    ts = sr.next_ts()
    root, child = bot_trace(phoenix, slack_trace_id(CHANNEL, ts))
    runtime = on_phoenix()
    judgment_id = judged(runtime, confirmation="confirmed", ts=ts)
    pair_id = signalled(runtime, judgment_id)  # the asker asked again
    before = sends("sent", tool="phoenix")
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"  # a redelivery
    assert send_phoenix_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
    assert send_phoenix_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
    assert sends("sent", tool="phoenix") - before == 4
    annotations = {annotation["name"]: annotation for annotation in phoenix.span_annotations(root)}
    assert len(phoenix.span_annotations(root)) == 3  # upserted by identifier, not added twice
    assert not phoenix.span_annotations(child)
    verdict = annotations["relmon.relevancy"]
    assert verdict["annotator_kind"] == "LLM" and verdict["identifier"] == f"relmon-{judgment_id}-score"
    assert verdict["result"]["score"] == 0.25 and "passwords" in verdict["result"]["explanation"]
    second = annotations["relmon.relevancy.second_opinion"]
    assert second["annotator_kind"] == "LLM" and second["result"]["label"] == "confirmed"
    signal = annotations["relmon.outcome.reask"]
    assert signal["annotator_kind"] == "CODE" and signal["result"] == {
        "label": "true",
        "score": 1.0,
        "explanation": None,
    }


def test_a_team_judges_verdict_is_annotated_under_its_own_name_with_pass_or_fail(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    ts = sr.next_ts()
    root, _child = bot_trace(phoenix, slack_trace_id(CHANNEL, ts))
    runtime = on_phoenix(judges_dir=EXAMPLES)
    judgment_id = add_judgment(runtime, score=0, judge="refund_policy", max_score=1, channel_id=CHANNEL, answer_ts=ts,
                               reasoning="The answer promises a refund.")  # fmt: skip
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"
    [annotation] = phoenix.span_annotations(root)
    assert annotation["name"] == "relmon.refund_policy" and annotation["annotator_kind"] == "LLM"
    assert annotation["result"] == {"label": "fail", "score": 0.0, "explanation": "The answer promises a refund."}


def test_the_span_the_bot_names_in_its_metadata_is_annotated_if_it_is_one(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    trace_id = f"{random.getrandbits(128):032x}"
    root, child = bot_trace(phoenix, trace_id)
    other_ts = sr.next_ts()
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        payload = {"trace_id": trace_id, "span_id": child.upper()}
        slack.add_message(
            CHANNEL,
            TS,
            text="Open Settings.",
            bot_id="B_SUPPORT",
            metadata={"event_type": "support_answer", "event_payload": payload},
        )
        bad = {"trace_id": trace_id, "span_id": "not-a-span"}
        slack.add_message(
            CHANNEL,
            other_ts,
            text="Top right.",
            bot_id="B_SUPPORT",
            metadata={"event_type": "support_answer", "event_payload": bad},
        )
        runtime = on_phoenix(slack.api_url, trace_id_from="metadata")
        named, refused = judged(runtime), judged(runtime, ts=other_ts)
        assert send_phoenix_annotations.apply(args=[named]).get() == "sent"
        bad_before = sends("bad_trace_id", tool="phoenix")
        assert send_phoenix_annotations.apply(args=[refused]).get() == "bad_trace_id"
    assert sends("bad_trace_id", tool="phoenix") - bad_before == 1
    assert [annotation["name"] for annotation in phoenix.span_annotations(child)] == ["relmon.relevancy"]
    assert not phoenix.span_annotations(root)


def test_a_trace_phoenix_does_not_have_yet_is_annotated_once_it_arrives(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    ts = sr.next_ts()
    runtime = on_phoenix()
    judgment_id = judged(runtime, ts=ts)
    failed = sends("failed", tool="phoenix")
    # Eagerly, the task's retries (RELMON_TRACE_SEND_RETRIES=3) run at once: each looks the root span up again.
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "failed"
    assert sends("failed", tool="phoenix") - failed == 1
    root, _ = bot_trace(phoenix, slack_trace_id(CHANNEL, ts))  # the bot's exporter was late
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"
    assert [annotation["name"] for annotation in phoenix.span_annotations(root)] == ["relmon.relevancy"]


def test_a_key_phoenix_refuses_is_a_refusal_not_an_outage(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    ts = sr.next_ts()
    root, _ = bot_trace(phoenix, slack_trace_id(CHANNEL, ts))
    runtime = on_phoenix(phoenix_api_key="not-the-key")
    judgment_id = judged(runtime, ts=ts)
    rejected = sends("rejected", tool="phoenix")
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "rejected"
    assert sends("rejected", tool="phoenix") - rejected == 1
    assert not phoenix.span_annotations(root)


def test_phoenixs_otlp_endpoint_takes_evaluation_spans_not_log_records(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    ts = sr.next_ts()
    trace_id = slack_trace_id(CHANNEL, ts)
    _, child = bot_trace(phoenix, trace_id)
    (span,) = phoenix.get("v1/projects/default/spans", trace_id=trace_id, span_id=child)["data"]
    assert [(event["name"], event["attributes"]) for event in span["events"]] == [("retrieved", {"documents": 3})]
    # relmon's gen_ai.evaluation.result events are OTLP log records (POST /v1/logs): Phoenix takes traces only and
    # answers 405, a refusal (sending again would be refused again), not an outage.
    runtime = on_phoenix(phoenix_url=None, otlp_endpoint=phoenix.url)
    judgment_id = judged(runtime, ts=ts)
    rejected = sends("rejected", tool="otlp")
    assert send_otlp_evaluations.apply(args=[judgment_id], retries=3).get() == "rejected"
    assert sends("rejected", tool="otlp") - rejected == 1


def test_the_span_form_of_the_evaluation_events_goes_into_phoenixs_traces_under_the_named_span_once_per_resend(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """RELMON_OTLP_EVENTS_AS=spans: Phoenix's OTLP endpoint takes them (the key in the standard headers variable),
    under the bot's span; a resend is the same span ID, which Phoenix keeps once."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{ADMIN_SECRET}")
    trace_id = f"{random.getrandbits(128):032x}"
    root, child = bot_trace(phoenix, trace_id)
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        payload = {"trace_id": trace_id, "span_id": child}
        metadata = {"event_type": "support_answer", "event_payload": payload}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        runtime = on_phoenix(
            slack.api_url, trace_id_from="metadata", phoenix_url=None, otlp_endpoint=phoenix.url, otlp_events_as="spans"
        )
        judgment_id = judged(runtime, confirmation="confirmed")
        pair_id = signalled(runtime, judgment_id)
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"  # a redelivery: the same two spans
        assert send_otlp_outcome.apply(args=[pair_id, "reask"]).get() == "sent"  # sent last, stored last

    def relmons() -> dict | None:
        spans = phoenix.get("v1/projects/default/spans", trace_id=trace_id)["data"]
        found = {span["name"]: span for span in spans if span["context"]["span_id"] not in (root, child)}
        return found if "gen_ai.evaluation relmon.outcome.reask" in found else None

    spans = wait_for(relmons, timeout=30, what="relmon's evaluation spans in Phoenix")
    assert len(phoenix.get("v1/projects/default/spans", trace_id=trace_id)["data"]) == 2 + 3  # the resend: no more
    verdict = spans["gen_ai.evaluation relmon.relevancy"]
    assert verdict["parent_id"] == child and verdict["context"]["trace_id"] == trace_id
    assert verdict["context"]["span_id"] == evaluation_span_id(trace_id, f"relmon-{judgment_id}", "relmon.relevancy")
    (event,) = verdict["events"]
    assert event["name"] == "gen_ai.evaluation.result"
    assert verdict["attributes"] == event["attributes"]  # on the span too, for trace searches
    assert event["attributes"]["gen_ai.evaluation.name"] == "relmon.relevancy"
    assert event["attributes"]["gen_ai.evaluation.score.value"] == 0.25
    assert "passwords" in event["attributes"]["gen_ai.evaluation.explanation"]
    second = spans["gen_ai.evaluation relmon.relevancy.second_opinion"]
    assert second["parent_id"] == child
    assert second["events"][0]["attributes"]["gen_ai.evaluation.score.label"] == "confirmed"


def test_the_doctor_checks_phoenix_by_its_api_with_its_otlp_endpoint(
    phoenix: PhoenixProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    def lines(**values: object) -> list[str]:
        return [check.line() for check in check_traces(make_settings(phoenix_url=phoenix.url, **values))]

    assert lines(phoenix_api_key=ADMIN_SECRET) == [f"ok    phoenix: {phoenix.url} takes the key (project 'default')"]
    (refused,) = lines(phoenix_api_key="not-the-key")
    assert (
        refused.startswith(f"FAIL  phoenix: {phoenix.url} refused the key (401)")
        and "RELMON_PHOENIX_API_KEY" in refused
    )
    (absent,) = lines(phoenix_api_key=ADMIN_SECRET, phoenix_project="no-such-project")
    assert absent.startswith(f"warn  phoenix: {phoenix.url} has no project 'no-such-project' (yet)")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{ADMIN_SECRET}")
    otlp = {"phoenix_url": None, "otlp_endpoint": phoenix.url}
    (logs,) = [check.line() for check in check_traces(make_settings(**otlp))]
    assert logs.startswith(f"FAIL  otlp: {phoenix.url}/v1/logs answered 405: it takes no logs")
    assert "set RELMON_OTLP_EVENTS_AS=spans" in logs
    spans = [check.line() for check in check_traces(make_settings(**otlp, otlp_events_as="spans"))]
    assert spans == [f"ok    otlp: {phoenix.url}/v1/traces takes an export (spans)"]


def test_a_judged_answer_becomes_an_annotation_through_a_real_worker(
    phoenix: PhoenixProcess, redis_url: str, db_url: str, tmp_path: Path
) -> None:
    question_ts, answer_ts = sr.next_ts(), sr.next_ts()
    root, _ = bot_trace(phoenix, slack_trace_id(CHANNEL, answer_ts))  # before the bot posts its answer
    with relmon_processes(
        redis_url=redis_url,
        database_url=db_url,
        directory=tmp_path,
        RELMON_SETTLE_SECONDS="0.3",
        RELMON_TRACE_ID_FROM="slack_ts",
        RELMON_PHOENIX_URL=phoenix.url,
        RELMON_PHOENIX_API_KEY=ADMIN_SECRET,
    ) as system:
        question = sr.human_message(CHANNEL, question_ts, "How do I reset my password?")
        answer = sr.bot_message(CHANNEL, answer_ts, "Open Settings > Security > Reset.", thread_ts=question_ts)
        for event in (question, answer):
            assert system.post_event(event).status_code == 200
        (annotation,) = wait_for(lambda: phoenix.span_annotations(root) or None, timeout=90, what="an annotation")
    assert annotation["name"] == "relmon.relevancy" and annotation["annotator_kind"] == "LLM"
    assert 0 <= annotation["result"]["score"] <= 1 and annotation["identifier"].startswith("relmon-")


QUESTION = "Card 4111 1111 1111 1111 for ZEBRA Holdings was declined, why?"


def test_an_ingested_exchanges_verdict_goes_onto_the_span_it_named_with_no_slack_read(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    """`trace` on POST /v1/exchanges (or an OTLP chat span's own ids): no metadata to read, nor a message."""
    trace_id = f"{random.getrandbits(128):032x}"
    root, child = bot_trace(phoenix, trace_id)
    with FakeSlack() as slack:
        runtime = on_phoenix(slack.api_url, trace_id_from="metadata")
        named = stored_and_judged(runtime, exchange(trace={"trace_id": trace_id, "span_id": child}))
        assert send_phoenix_annotations.apply(args=[named]).get() == "sent"
        assert not [call for call in slack.calls if call[0].startswith("conversations.")]
    assert [annotation["name"] for annotation in phoenix.span_annotations(child)] == ["relmon.relevancy"]
    assert not phoenix.span_annotations(root)


def verdict_on(phoenix: PhoenixProcess, root: str) -> dict:
    [verdict] = [a for a in phoenix.span_annotations(root) if a["name"] == "relmon.relevancy"]
    return verdict


def test_a_deleted_question_blanks_the_annotations_explanation_in_phoenix(
    phoenix: PhoenixProcess,
    on_phoenix: Callable[..., Runtime],
    reached,  # noqa: F811
) -> None:
    """The forget path (workers.tasks.forgetting) upserts the verdict's annotation again by its identifier, without
    its explanation; Phoenix keeps the score."""
    question_ts, ts = sr.next_ts(), sr.next_ts()
    root, _ = bot_trace(phoenix, slack_trace_id(CHANNEL, ts))
    runtime = on_phoenix()
    judgment_id = add_judgment(runtime, score=1, channel_id=CHANNEL, answer_ts=ts, thread_ts=question_ts,
                               question=QUESTION, reasoning=f"The asker wrote '{QUESTION}'.")  # fmt: skip
    with runtime.db.session() as session:
        session.query(Pair).filter_by(answer_ts=ts).one().question_ts = question_ts
    assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"
    assert "4111" in verdict_on(phoenix, root)["result"]["explanation"]

    forget_message_in(runtime, CHANNEL, question_ts, thread_ts=question_ts)  # the question deleted in Slack

    assert reached == [(task_names.BLANK_PHOENIX_EXPLANATIONS, "sent")]
    verdict = verdict_on(phoenix, root)
    assert not verdict["result"]["explanation"] and verdict["result"]["score"] == 0.25  # the score stays
    assert verdict["identifier"] == f"relmon-{judgment_id}-score" and len(phoenix.span_annotations(root)) == 1
    assert "4111" not in str(phoenix.span_annotations(root))


def test_phoenix_gets_no_reasoning_for_a_private_channel_unless_the_admin_opts_in(
    phoenix: PhoenixProcess, on_phoenix: Callable[..., Runtime]
) -> None:
    for setting, explained in (("public", False), ("all", True)):
        ts = sr.next_ts()
        root, _ = bot_trace(phoenix, slack_trace_id("C_PRIVATE", ts))
        runtime = on_phoenix(traces_reasoning=setting)
        judgment_id = add_judgment(runtime, score=1, channel_id="C_PRIVATE", private=True, answer_ts=ts)
        assert send_phoenix_annotations.apply(args=[judgment_id]).get() == "sent"
        result = verdict_on(phoenix, root)["result"]
        assert result["score"] == 0.25 and bool(result["explanation"]) is explained
