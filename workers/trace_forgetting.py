"""Forgetting reaches the trace tools: when a message is deleted (or an edit takes words out of it), the verdicts
relmon sent about the pairs that quoted it are sent again with their comment removed, by the same deterministic
IDs, so the tool replaces what it holds: Langfuse's score (upserted by its `id`) keeps its value and loses its
comment; Phoenix's annotation (upserted by name, span and identifier) keeps its score and loses its explanation.
OpenTelemetry has no upsert: an evaluation event or span already exported stays in the backend as it was sent
(docs/reliability.md says so), and nothing is sent again there.

The trace is the one the verdict went to (`workers.sent_traces`), else resolved again as a send does (the answer's
metadata, or its ts). The sends are trace sends like the others (`workers.tasks.traces`): noted before the
forgetting commits, queued after it, retried while the tool is out of reach."""

from __future__ import annotations

from dataclasses import replace

from common import task_names
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from workers import sent_traces
from workers.trace_sending import (
    LANGFUSE,
    PHOENIX,
    Send,
    Subject,
    annotate,
    load_subject,
    note_sends,
    post_scores,
    traced,
)
from workers.traces import langfuse_scores, phoenix_annotations


def blanking_sends(runtime: Runtime, judgment_ids: list[int]) -> list[Send]:
    """One send per judgment to each configured tool that upserts (Langfuse, Phoenix)."""
    settings = runtime.settings
    tools = [(LANGFUSE, task_names.BLANK_LANGFUSE_COMMENTS)] if settings.langfuse_enabled else []
    tools += [(PHOENIX, task_names.BLANK_PHOENIX_EXPLANATIONS)] if settings.phoenix_url else []
    return [Send(tool, task, (judgment_id,)) for judgment_id in sorted(judgment_ids) for tool, task in tools]


def note_blanking(runtime: Runtime, judgment_ids: list[int]) -> list[Send]:
    """The blanking sends of the judgments a forgetting changed, noted before it commits (a worker that dies after
    the commit leaves them to the orphan check: a run again finds nothing left to change). Queue them with
    `workers.trace_sending.queue_sends` once committed."""
    sends = blanking_sends(runtime, judgment_ids)
    note_sends(runtime, sends)
    return sends


def _blanked(runtime: Runtime, judgment_id: int) -> Subject | None:
    subject = load_subject(runtime, judgment_id)
    if subject is None or subject.verdict is None:
        return None
    return replace(subject, verdict=replace(subject.verdict, reasoning=None))


def _where_sent(runtime: Runtime, subject: Subject | None, tool: str, judgment_id: int):
    """(trace ID, span ID named, log fields) of the verdict's trace, or the outcome when there is none."""
    if subject is not None:
        recalled = sent_traces.recall(runtime.redis, subject.key)
        if recalled is not None:
            fields = event_fields(
                channel=subject.channel, message_ts=subject.answer_ts, tool=tool, judgment_id=judgment_id
            )
            return recalled[0], recalled[1], fields
    return traced(runtime, subject, tool, judgment_id=judgment_id)


def blank_on_langfuse(runtime: Runtime, judgment_id: int) -> str:
    """The judgment's scores upserted again without their comment (the value stays). SendAgain: retry."""
    subject = _blanked(runtime, judgment_id)
    found = _where_sent(runtime, subject, LANGFUSE, judgment_id)
    if isinstance(found, str):
        return found
    trace_id, _, fields = found
    return post_scores(runtime, langfuse_scores(subject.verdict, trace_id), fields)


def blank_on_phoenix(runtime: Runtime, judgment_id: int) -> str:
    """The judgment's annotations upserted again without their explanation (the score stays). SendAgain: retry."""
    subject = _blanked(runtime, judgment_id)
    found = _where_sent(runtime, subject, PHOENIX, judgment_id)
    if isinstance(found, str):
        return found
    return annotate(runtime, found, lambda span_id: phoenix_annotations(subject.verdict, span_id))
