"""The trace ID rules (workers.traces): derived as Langfuse derives it, read from message metadata, checked."""

from __future__ import annotations

import pytest
from langfuse import Langfuse

from workers.traces import (
    BadTraceId,
    TracedJudgment,
    checked_span_id,
    checked_trace_id,
    evaluation_events,
    langfuse_scores,
    metadata_trace_id,
    outcome_annotation,
    phoenix_annotations,
    reasoning_for_traces,
    slack_trace_id,
)


def test_the_slack_derived_trace_id_is_langfuses_own_for_the_same_seed() -> None:
    assert slack_trace_id("C1", "1767225600.000100") == Langfuse.create_trace_id(seed="C1:1767225600.000100")
    assert checked_trace_id(slack_trace_id("C1", "1.2")) == slack_trace_id("C1", "1.2")


def test_the_trace_id_is_read_at_the_configured_key_of_the_metadata() -> None:
    metadata = {"event_type": "bot_answer", "event_payload": {"trace_id": "0af7651916cd43dd8448eb211c80319c"}}
    assert metadata_trace_id(metadata, "event_payload.trace_id") == "0af7651916cd43dd8448eb211c80319c"
    assert metadata_trace_id(metadata, "event_payload.langfuse.trace") is None
    assert metadata_trace_id(None, "event_payload.trace_id") is None
    assert metadata_trace_id({"event_payload": {"trace_id": 12}}, "event_payload.trace_id") is None


@pytest.mark.parametrize("value", ["abc", "0af7651916cd43dd8448eb211c80319", "z" * 32, "0" * 32, "", "g" * 32])
def test_what_is_not_a_trace_id_is_refused(value: str) -> None:
    with pytest.raises(BadTraceId):
        checked_trace_id(value)


def test_a_uuid_or_upper_case_hex_is_taken_in_canonical_form() -> None:
    assert checked_trace_id("0AF76519-16CD-43DD-8448-EB211C80319C") == "0af7651916cd43dd8448eb211c80319c"


def test_an_error_verdict_sends_no_score() -> None:
    error = TracedJudgment(7, "relevancy", "error", None, None, None)
    assert langfuse_scores(error, "a" * 32) == []


def test_score_ids_are_stable() -> None:
    ok = TracedJudgment(7, "relevancy", "ok", 0.75, "fine", "disputed")
    first, again = langfuse_scores(ok, "a" * 32), langfuse_scores(ok, "a" * 32)
    assert first == again and [score["id"] for score in first] == ["relmon-7-score", "relmon-7-second-opinion"]


@pytest.mark.parametrize("value", ["abc", "00f067aa0ba902b", "0" * 16, "z" * 16, "00f067aa0ba902b7" * 2, ""])
def test_what_is_not_a_span_id_is_refused(value: str) -> None:
    with pytest.raises(BadTraceId):
        checked_span_id(value)


SPAN = "00f067aa0ba902b7"
JUDGED = TracedJudgment(7, "relevancy", "ok", 0.75, "x" * 900, "disputed", pair_id=3)


def test_a_span_id_is_taken_in_canonical_form() -> None:
    assert checked_span_id(" 00F067AA0BA902B7 ") == SPAN


def test_an_error_verdict_sends_no_phoenix_annotation() -> None:
    assert phoenix_annotations(TracedJudgment(7, "relevancy", "error", None, None, None), SPAN) == []


def test_phoenix_annotations_are_stable() -> None:
    assert phoenix_annotations(JUDGED, SPAN) == phoenix_annotations(JUDGED, SPAN)


def test_phoenix_annotations_upsert_by_identifiers_derived_from_the_judgment() -> None:
    assert [(a["name"], a["annotator_kind"], a["identifier"]) for a in phoenix_annotations(JUDGED, SPAN)] == [
        ("relmon.relevancy", "LLM", "relmon-7-score"),
        ("relmon.relevancy.second_opinion", "LLM", "relmon-7-second-opinion"),
    ]


def test_an_outcome_annotation_upserts_by_an_identifier_derived_from_the_pair() -> None:
    signal = outcome_annotation(3, "reask", SPAN)
    assert (signal["name"], signal["annotator_kind"], signal["identifier"]) == (
        "relmon.outcome.reask",
        "CODE",
        "relmon-pair-3-reask",
    )


def test_phoenix_annotations_carry_the_verdict_on_the_span() -> None:
    first = phoenix_annotations(JUDGED, SPAN)
    assert first[0]["result"]["score"] == 0.75 and len(first[0]["result"]["explanation"]) == 500
    assert first[1]["result"] == {"label": "disputed"} and {a["span_id"] for a in first} == {SPAN}


@pytest.mark.parametrize(
    ("channel", "private", "ext_shared", "sent"),
    [
        ("C1", False, False, True),  # a public channel
        ("C1", True, False, False),  # a private channel
        ("C1", False, True, False),  # Slack Connect
        ("D1", False, False, False),  # a DM, whatever its row says
        ("G1", False, False, False),  # a group DM or an old private channel
    ],
)
def test_the_judges_reasoning_goes_to_trace_tools_only_for_public_unshared_channels(
    channel: str, private: bool, ext_shared: bool, sent: bool
) -> None:
    shown = reasoning_for_traces("why", channel_id=channel, private=private, ext_shared=ext_shared, setting="public")
    assert shown == ("why" if sent else None)
    every = reasoning_for_traces("why", channel_id=channel, private=private, ext_shared=ext_shared, setting="all")
    assert every == "why"  # the admin opted in (RELMON_TRACES_REASONING=all)


# A team's own judge (judges.d) ------------------------------------------------------------------------------------


def team_verdict(passed: bool, *, pass_fail: bool = True) -> TracedJudgment:
    return TracedJudgment(9, "refund_policy", "ok", 1.0 if passed else 0.0, "Kept the rule.", None, pass_fail=pass_fail,
                          passed=passed)  # fmt: skip


def test_a_team_judges_verdict_is_sent_under_its_own_name_with_pass_or_fail() -> None:
    [failed] = langfuse_scores(team_verdict(False), "a" * 32)
    assert failed["name"] == "relmon.refund_policy" and failed["dataType"] == "BOOLEAN" and failed["value"] == 0
    [ranged] = langfuse_scores(team_verdict(True, pass_fail=False), "a" * 32)
    assert ranged["dataType"] == "NUMERIC" and ranged["value"] == 1.0
    [annotation] = phoenix_annotations(team_verdict(False), "b" * 16)
    assert annotation["name"] == "relmon.refund_policy" and annotation["result"]["label"] == "fail"
    assert annotation["result"]["score"] == 0.0
    [event] = evaluation_events(team_verdict(True))
    assert event["gen_ai.evaluation.name"] == "relmon.refund_policy"
    assert event["gen_ai.evaluation.score.label"] == "pass" and event["gen_ai.evaluation.score.value"] == 1.0


def test_a_seed_judges_verdict_has_no_pass_or_fail_label() -> None:
    seed = TracedJudgment(3, "relevancy", "ok", 0.25, None, None)
    assert "label" not in phoenix_annotations(seed, "b" * 16)[0]["result"]
    assert "gen_ai.evaluation.score.label" not in evaluation_events(seed)[0]
    assert langfuse_scores(seed, "a" * 32)[0]["dataType"] == "NUMERIC"
