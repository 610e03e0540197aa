"""Verdicts on the support bot's own traces: which trace an answer belongs to, and the scores sent there. Plain
functions over plain data; the sending is `workers.trace_sending` (its tasks `workers.tasks.traces`).

A trace ID is 32 lowercase hex characters (W3C trace context, which Langfuse and OpenTelemetry use). With
RELMON_TRACE_ID_FROM=slack_ts it is derived from the channel and the answer's ts exactly as Langfuse's
`create_trace_id(seed=...)` derives one (the first 16 bytes of SHA-256 of the seed), so a bot that calls
`create_trace_id(seed=f"{channel}:{ts}")` for its own trace gets the same ID without telling relmon anything.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

TRACE_ID = re.compile(r"[0-9a-f]{32}")
SPAN_ID = re.compile(r"[0-9a-f]{16}")
COMMENT_CHARS = 500  # Langfuse shows the comment beside the score: the judge's reasoning, cut


class BadTraceId(ValueError):
    """What the bot gave as a trace ID is not one (wrong length, not hex, all zeros)."""


def slack_trace_id(channel: str, ts: str) -> str:
    return hashlib.sha256(f"{channel}:{ts}".encode()).digest()[:16].hex()


def metadata_trace_id(metadata: Any, key: str) -> str | None:
    """The value at the dotted `key` ("event_payload.trace_id") of a message's `metadata`, or None."""
    value: Any = metadata
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value if isinstance(value, str) and value else None


def checked_trace_id(value: str) -> str:
    """The trace ID in its canonical form (lower case, no dashes), or BadTraceId."""
    canonical = value.strip().lower().replace("-", "")
    if not TRACE_ID.fullmatch(canonical) or canonical == "0" * 32:
        raise BadTraceId(f"not a trace ID: {len(value)} characters, expected 32 hex")
    return canonical


def checked_span_id(value: str) -> str:
    """The span ID in its canonical form (16 lower-case hex, as Phoenix and OpenTelemetry write it), or BadTraceId."""
    canonical = value.strip().lower()
    if not SPAN_ID.fullmatch(canonical) or canonical == "0" * 16:
        raise BadTraceId(f"not a span ID: {len(value)} characters, expected 16 hex")
    return canonical


@dataclass(frozen=True)
class TracedJudgment:
    """What is sent of one judgment: IDs, the judge's name, its score and the second opinion's outcome."""

    judgment_id: int
    judge: str
    status: str  # ok | null | error
    normalized_score: float | None
    reasoning: str | None
    confirmation_status: str | None
    pair_id: int = 0
    # A team's judge (judges.d): whether the answer passed it (above its fails_at), and whether its scale is
    # pass/fail. None for the seed judges, whose scores speak for themselves.
    passed: bool | None = None
    pass_fail: bool = False

    @property
    def label(self) -> str | None:
        """`pass` or `fail` for a team judge's verdict, None otherwise."""
        return None if self.passed is None else ("pass" if self.passed else "fail")


def reasoning_for_traces(
    reasoning: str | None, *, channel_id: str, private: bool, ext_shared: bool, setting: str
) -> str | None:
    """The judge's reasoning as it may go to a trace tool (RELMON_TRACES_REASONING): it quotes the conversation,
    so by default (`public`) only a public channel's, not shared with another organisation; `all` sends every
    channel's. Fails closed: a conversation whose ID is not a channel's (a DM's `D…`, a group's `G…`) is private
    whatever its pair says."""
    if setting == "all":
        return reasoning
    if private or ext_shared or not channel_id.startswith("C"):
        return None
    return reasoning


def judgment_key(judgment_id: int) -> str:
    """What a judgment's score IDs, annotation identifiers and evaluation span IDs derive from (a resend, the same)."""
    return f"relmon-{judgment_id}"


def signal_key(pair_id: int, signal: str) -> str:
    """The same for one outcome signal of a pair: one whichever judge judged the answer."""
    return f"relmon-pair-{pair_id}-{signal}"


def langfuse_scores(verdict: TracedJudgment, trace_id: str) -> list[dict]:
    """Langfuse score bodies (POST /api/public/scores). Each `id` is derived from the judgment, so a resend
    updates the same score (Langfuse upserts by id) instead of adding one."""
    scores = []
    if verdict.status == "ok" and verdict.normalized_score is not None:
        comment = (verdict.reasoning or "")[:COMMENT_CHARS] or None
        # A pass/fail team judge's verdict is Langfuse's BOOLEAN (1 passed); every other score NUMERIC, 0–1.
        boolean = verdict.pass_fail and verdict.passed is not None
        scores.append(
            {
                "id": f"{judgment_key(verdict.judgment_id)}-score",
                "traceId": trace_id,
                "name": f"relmon.{verdict.judge}",
                "value": (1 if verdict.passed else 0) if boolean else verdict.normalized_score,
                "dataType": "BOOLEAN" if boolean else "NUMERIC",
                "comment": comment,
            }
        )
    if verdict.confirmation_status:
        scores.append(
            {
                "id": f"{judgment_key(verdict.judgment_id)}-second-opinion",
                "traceId": trace_id,
                "name": f"relmon.{verdict.judge}.second_opinion",
                "value": verdict.confirmation_status,
                "dataType": "CATEGORICAL",
            }
        )
    return scores


def outcome_score(pair_id: int, signal: str, trace_id: str) -> dict:
    """The Langfuse score of one outcome signal (a name of store.signals.SIGNALS): BOOLEAN, true, since a
    signal is recorded when it happened and never taken back. Its `id` is per pair and signal, not per judgment:
    one score whichever judge judged the answer, and a resend upserts it."""
    return {
        "id": signal_key(pair_id, signal),
        "traceId": trace_id,
        "name": f"relmon.outcome.{signal}",
        "value": 1,
        "dataType": "BOOLEAN",
    }


def phoenix_annotations(verdict: TracedJudgment, span_id: str) -> list[dict]:
    """Phoenix span annotation bodies (POST /v1/span_annotations). Phoenix upserts by (name, span_id, identifier),
    and each identifier is derived from the judgment, as Langfuse's score ids are: a resend updates, never adds."""
    annotations = []
    if verdict.status == "ok" and verdict.normalized_score is not None:
        result = {"score": verdict.normalized_score, "explanation": (verdict.reasoning or "")[:COMMENT_CHARS] or None}
        if verdict.label is not None:  # a team judge's pass or fail, beside its score
            result["label"] = verdict.label
        annotations.append((f"relmon.{verdict.judge}", result, f"{judgment_key(verdict.judgment_id)}-score"))
    if verdict.confirmation_status:
        result = {"label": verdict.confirmation_status}
        annotations.append(
            (f"relmon.{verdict.judge}.second_opinion", result, f"{judgment_key(verdict.judgment_id)}-second-opinion")
        )
    return [
        {"span_id": span_id, "name": name, "annotator_kind": "LLM", "result": result, "identifier": identifier}
        for name, result, identifier in annotations
    ]


def outcome_annotation(pair_id: int, signal: str, span_id: str) -> dict:
    """The Phoenix annotation of one outcome signal: observed by code, not judged by an LLM (annotator CODE);
    its identifier per pair and signal, as the Langfuse score's id."""
    return {
        "span_id": span_id,
        "name": f"relmon.outcome.{signal}",
        "annotator_kind": "CODE",
        "result": {"label": "true", "score": 1.0},
        "identifier": signal_key(pair_id, signal),
    }


EVALUATION_EVENT = "gen_ai.evaluation.result"  # OpenTelemetry's GenAI semantic conventions


def evaluation_events(verdict: TracedJudgment) -> list[dict]:
    """The attributes of `gen_ai.evaluation.result` events: the verdict, and the second opinion as its own."""
    events = []
    if verdict.status == "ok" and verdict.normalized_score is not None:
        event = {
            "gen_ai.evaluation.name": f"relmon.{verdict.judge}",
            "gen_ai.evaluation.score.value": verdict.normalized_score,
        }
        if verdict.label is not None:  # a team judge's pass or fail, beside its score
            event["gen_ai.evaluation.score.label"] = verdict.label
        if verdict.reasoning:
            event["gen_ai.evaluation.explanation"] = verdict.reasoning[:COMMENT_CHARS]
        events.append(event)
    if verdict.confirmation_status:
        events.append(
            {
                "gen_ai.evaluation.name": f"relmon.{verdict.judge}.second_opinion",
                "gen_ai.evaluation.score.label": verdict.confirmation_status,
            }
        )
    return events


def outcome_event(signal: str) -> dict:
    """The `gen_ai.evaluation.result` event of one outcome signal."""
    return {"gen_ai.evaluation.name": f"relmon.outcome.{signal}", "gen_ai.evaluation.score.label": "true"}


EVALUATION_SPAN = "gen_ai.evaluation"  # no convention names a span for it: the GenAI spans' "{operation} {target}"


@dataclass(frozen=True)
class EvaluationSpan:
    """A `gen_ai.evaluation.result` event in its span form (RELMON_OTLP_EVENTS_AS=spans): a span of its own in the
    bot's trace, under the span the bot named (else a root of that trace), carrying the event."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    attributes: dict


def evaluation_span_id(trace_id: str, subject: str, evaluation: str) -> str:
    """16 hex derived from the trace, what is evaluated (`relmon-<judgment>`, `relmon-pair-<pair>-<signal>`) and the
    evaluation's name: a resend is the same span, which a backend keeps once (Phoenix: the first; workers.otlp_spans).
    The trace is in it as Phoenix's span IDs are unique across its traces."""
    span_id = hashlib.sha256(f"{trace_id}:{subject}:{evaluation}".encode()).digest()[:8].hex()
    return span_id if span_id != "0" * 16 else "0" * 15 + "1"  # all zeros is no span ID


def evaluation_spans(trace_id: str, subject: str, parent: str | None, events: list[dict]) -> list[EvaluationSpan]:
    """One span per event (its attributes, as evaluation_events and outcome_event make them), named after the
    evaluation, with the event's attributes on the span too: a trace search (Jaeger, Tempo's TraceQL) filters on
    span attributes."""
    spans = []
    for attributes in events:
        evaluation = attributes["gen_ai.evaluation.name"]
        span_id = evaluation_span_id(trace_id, subject, evaluation)
        spans.append(EvaluationSpan(f"{EVALUATION_SPAN} {evaluation}", trace_id, span_id, parent, attributes))
    return spans
