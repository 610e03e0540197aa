"""The span form of the `gen_ai.evaluation.result` events (workers.traces.evaluation_spans, RELMON_OTLP_EVENTS_AS=
spans): one span per evaluation, named after it, under the span the bot named, with IDs derived so that a resend
is the same span."""

from __future__ import annotations

from workers.traces import (
    SPAN_ID,
    EvaluationSpan,
    TracedJudgment,
    evaluation_events,
    evaluation_span_id,
    evaluation_spans,
    outcome_event,
)

TRACE, OTHER_TRACE, PARENT = "0af7651916cd43dd8448eb211c80319c", "4bf92f3577b34da6a3ce929d0e0e4736", "b7ad6b7169203331"
VERDICT = TracedJudgment(7, "relevancy", "ok", 0.25, "It is about passwords.", "disputed", pair_id=3)


def test_each_evaluation_is_a_span_named_after_it_carrying_its_attributes_under_the_span_the_bot_named() -> None:
    events = evaluation_events(VERDICT)
    spans = evaluation_spans(TRACE, "relmon-7", PARENT, events)
    assert [span.name for span in spans] == [
        "gen_ai.evaluation relmon.relevancy",
        "gen_ai.evaluation relmon.relevancy.second_opinion",
    ]
    assert [span.attributes for span in spans] == events
    assert spans[0].attributes["gen_ai.evaluation.score.value"] == 0.25
    assert spans[1].attributes["gen_ai.evaluation.score.label"] == "disputed"
    assert {(span.trace_id, span.parent_span_id) for span in spans} == {(TRACE, PARENT)}
    (root,) = evaluation_spans(TRACE, "relmon-pair-3-reask", None, [outcome_event("reask")])
    assert root.parent_span_id is None and root.name == "gen_ai.evaluation relmon.outcome.reask"


def _judgment_spans(parent: str | None = PARENT) -> list[EvaluationSpan]:
    return evaluation_spans(TRACE, "relmon-7", parent, evaluation_events(VERDICT))


def _span_ids() -> set[str]:
    """The IDs of the judgment's two spans, and of spans that differ from them in one input each."""
    first = _judgment_spans()
    return {
        first[0].span_id,
        first[1].span_id,
        evaluation_span_id(TRACE, "relmon-8", "relmon.relevancy"),  # another judgment
        evaluation_span_id(OTHER_TRACE, "relmon-7", "relmon.relevancy"),  # another trace
        evaluation_span_id(TRACE, "relmon-pair-3-reask", "relmon.outcome.reask"),
    }


def test_a_resent_evaluation_keeps_its_span_ids() -> None:
    again = _judgment_spans(parent=None)
    assert [span.span_id for span in _judgment_spans()] == [span.span_id for span in again]


def test_span_ids_differ_by_trace_subject_evaluation() -> None:
    assert len(_span_ids()) == 5


def test_span_ids_are_16_hex_not_all_zero() -> None:
    assert all(SPAN_ID.fullmatch(span_id) and span_id != "0" * 16 for span_id in _span_ids())


def test_a_spans_id_is_derived_from_its_trace_subject_evaluation() -> None:
    assert _judgment_spans()[0].span_id == evaluation_span_id(TRACE, "relmon-7", "relmon.relevancy")
