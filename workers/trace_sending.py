"""Sending verdicts and outcome signals to the support bot's traces (Langfuse scores, OpenTelemetry evaluation events,
Phoenix span annotations): loading the judgment or signal, finding its trace ID, one send per tool, and queueing the
sends after a judgment or a new signal, noted until they end (common.task_notes). The tasks that run a send (and
retry it) are `workers.tasks.traces`; the payloads' rules are `workers.traces`. The tools' SDKs load on the first
send, not with the worker: most deployments set no tool."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import httpx
import redis
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from common import metrics, task_names, task_notes
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from store.exchanges import StoredTrace, stored_trace
from store.judge_catalog import judge_catalog
from store.models import Judgment, OutcomeSignal, Pair
from store.settings import Settings
from store.signals import SIGNALS
from workers import sent_traces
from workers.phoenix_annotations import upsert_annotations
from workers.trace_answers import REFUSED, TIMEOUT_SECONDS, SendAgain
from workers.traces import (
    BadTraceId,
    TracedJudgment,
    checked_span_id,
    checked_trace_id,
    evaluation_events,
    evaluation_spans,
    judgment_key,
    langfuse_scores,
    metadata_trace_id,
    outcome_annotation,
    outcome_event,
    outcome_score,
    phoenix_annotations,
    reasoning_for_traces,
    signal_key,
    slack_trace_id,
)

log = logging.getLogger("relmon.traces")

LANGFUSE, OTLP, PHOENIX = "langfuse", "otlp", "phoenix"


@dataclass(frozen=True)
class Subject:
    """What is sent (a judgment's verdict, or one outcome signal of a pair) and the answer whose trace gets it."""

    verdict: TracedJudgment | None  # None for an outcome signal
    channel: str
    answer_ts: str
    thread_ts: str | None = None
    signal: str | None = None  # a name of store.signals.SIGNALS
    pair_id: int = 0
    trace: StoredTrace | None = None  # the trace its ingested exchange named (store.exchanges.stored_trace)

    @property
    def key(self) -> str:
        """What is sent, as the score IDs and annotation identifiers name it (workers.traces)."""
        if self.verdict is not None:
            return judgment_key(self.verdict.judgment_id)
        return signal_key(self.pair_id, self.signal)


def load_subject(runtime: Runtime, judgment_id: int) -> Subject | None:
    """The judgment and its answer; its reasoning only where RELMON_TRACES_REASONING lets it go (workers.traces)."""
    with runtime.db.reading() as session:
        row = session.execute(
            select(Judgment, Pair.channel_id, Pair.answer_ts, Pair.thread_ts)
            .add_columns(Pair.channel_is_private, Pair.channel_is_ext_shared)
            .join(Pair, Pair.id == Judgment.pair_id)
            .where(Judgment.id == judgment_id)
        ).first()
        trace = stored_trace(session, row[0].pair_id) if row is not None else None
    if row is None:
        return None
    judgment, channel, answer_ts, thread_ts, private, ext_shared = row
    reasoning = reasoning_for_traces(
        judgment.reasoning,
        channel_id=channel,
        private=bool(private),
        ext_shared=bool(ext_shared),
        setting=runtime.settings.traces_reasoning,
    )
    spec = judge_catalog(runtime.settings).specs.get(judgment.judge)  # a team's judge: its pass or fail too
    passed = None
    if spec is not None and judgment.status == "ok" and judgment.score is not None:
        # The threshold the channel's alerts use (its rule may move it from the file's fails_at), as the digest.
        thresholds = runtime.rules.for_channel(channel, runtime.settings).thresholds
        passed = judgment.score > thresholds.get(judgment.judge, spec.fails_at)
    verdict = TracedJudgment(
        judgment.id,
        judgment.judge,
        judgment.status,
        judgment.normalized_score,
        reasoning,
        judgment.confirmation_status,
        pair_id=judgment.pair_id,
        passed=passed,
        pass_fail=spec is not None and spec.scale.pass_fail,
    )
    return Subject(verdict, channel, answer_ts, thread_ts, pair_id=judgment.pair_id, trace=trace)


def load_outcome(runtime: Runtime, pair_id: int, signal: str) -> Subject | None:
    """The pair's answer, if the signal is recorded on it (None when the pair is gone: retention, a deletion; or
    the name is none of the signals')."""
    if signal not in SIGNALS:
        return None
    with runtime.db.reading() as session:
        row = session.execute(
            select(Pair.channel_id, Pair.answer_ts, Pair.thread_ts)
            .join(OutcomeSignal, OutcomeSignal.pair_id == Pair.id)
            .where(Pair.id == pair_id, OutcomeSignal.name == signal)
        ).first()
        trace = stored_trace(session, pair_id) if row is not None else None
    return None if row is None else Subject(None, *row, signal=signal, pair_id=pair_id, trace=trace)


def trace_ids_of(runtime: Runtime, subject: Subject) -> tuple[str | None, str | None]:
    """The answer's trace ID (canonical) and the span ID the bot gave, if any (unchecked: only Phoenix uses it):
    the trace its ingested exchange named (checked when it came in; no Slack read), else the trace derived from the
    message (slack_ts, no span), or both read from the message's metadata in one read; the trace ID None when it
    gave none; BadTraceId when what it gave is not one."""
    if subject.trace is not None:
        return subject.trace.trace_id, subject.trace.span_id
    settings = runtime.settings
    if settings.trace_id_from == "slack_ts":
        return slack_trace_id(subject.channel, subject.answer_ts), None
    metadata = message_metadata(runtime, subject)
    given = metadata_trace_id(metadata, settings.trace_id_key)
    return (checked_trace_id(given) if given else None), metadata_trace_id(metadata, settings.span_id_key)


def message_metadata(runtime: Runtime, subject: Subject) -> dict | None:
    """The answer message's Slack metadata, read with include_all_metadata (another app's metadata is left out of
    history reads without it): one history read per send, waited out by the client when rate-limited. A read
    Slack refuses (the message deleted, the channel left) gives None; one that gets no answer is sent again."""
    window = {"latest": subject.answer_ts, "oldest": subject.answer_ts, "inclusive": True}
    try:
        if subject.thread_ts and subject.thread_ts != subject.answer_ts:
            # A thread's replies always start with its parent: two messages, the parent and the answer.
            read = runtime.slack.conversations_replies(
                channel=subject.channel, ts=subject.thread_ts, include_all_metadata=True, limit=2, **window
            )
        else:
            read = runtime.slack.conversations_history(
                channel=subject.channel, include_all_metadata=True, limit=1, **window
            )
    except SlackApiError as error:
        log.info("trace id: message not read", extra={"channel": subject.channel, "error": error.response.get("error")})
        return None
    except OSError as error:
        raise SendAgain(f"slack out of reach ({type(error).__name__})") from None
    for message in read.get("messages", []):
        if message.get("ts") == subject.answer_ts:
            return message.get("metadata")
    return None


def traced(runtime: Runtime, subject: Subject | None, tool: str, **ids: object) -> tuple[str, str | None, dict] | str:
    """The subject's trace ID, the span ID its metadata names (or None) and the log fields; or the outcome when
    there is nothing to send (skipped: the judgment or signal is gone or its answer names no trace; bad_trace_id:
    what it names is not one)."""
    if subject is None:
        return "skipped"  # deleted since (retention, a deletion in Slack)
    fields = event_fields(channel=subject.channel, message_ts=subject.answer_ts, tool=tool, **ids)
    try:
        trace_id, span_id = trace_ids_of(runtime, subject)
    except BadTraceId as error:
        log.warning("trace id refused", extra={**fields, "reason": str(error), "key": runtime.settings.trace_id_key})
        return "bad_trace_id"
    if not trace_id:
        return "skipped"
    if subject.verdict is not None:  # a verdict's comment may have to be blanked there later (workers.trace_forgetting)
        sent_traces.remember(runtime.redis, subject.key, trace_id, span_id, days=runtime.settings.retention_days)
    return trace_id, span_id, fields


def send_to_langfuse(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's scores to Langfuse; returns the outcome (sent, skipped, rejected, bad_trace_id). SendAgain:
    retry."""
    subject = load_subject(runtime, judgment_id)
    found = traced(runtime, subject, LANGFUSE, judgment_id=judgment_id)
    if isinstance(found, str):
        return found
    trace_id, _, fields = found
    return post_scores(runtime, langfuse_scores(subject.verdict, trace_id), fields)


def send_outcome_to_langfuse(runtime: Runtime, pair_id: int, signal: str) -> str:
    """One outcome signal's score to Langfuse (on the trace of the pair's answer). SendAgain: retry."""
    found = traced(runtime, load_outcome(runtime, pair_id, signal), LANGFUSE, pair_id=pair_id, signal=signal)
    if isinstance(found, str):
        return found
    trace_id, _, fields = found
    return post_scores(runtime, [outcome_score(pair_id, signal, trace_id)], fields)


def langfuse_api(settings: Settings):
    """The official SDK's API client on the project's keys (its calls take `request_options={"max_retries": 0}`:
    retries are the caller's)."""
    from langfuse.api.client import LangfuseAPI

    return LangfuseAPI(
        base_url=settings.langfuse_host.rstrip("/"),
        username=settings.langfuse_public_key,
        password=settings.secret("langfuse_secret_key"),
        timeout=TIMEOUT_SECONDS,
    )


def post_scores(runtime: Runtime, scores: list[dict], fields: dict) -> str:
    """POST the scores with the official SDK's API client: sent, skipped (none), rejected; SendAgain: retry."""
    from langfuse.api.core.api_error import ApiError

    if not scores:
        return "skipped"
    client = langfuse_api(runtime.settings)
    try:
        # Retries are Celery's (with backoff, counted); the SDK's own would hide an outage inside one attempt.
        answer = client.scores.create(request=scores, request_options={"max_retries": 0})
    except ApiError as error:
        if error.status_code in REFUSED:
            log.warning("langfuse refused the scores", extra={**fields, "status": error.status_code})
            return "rejected"
        raise SendAgain(f"langfuse answered {error.status_code}") from None
    except httpx.HTTPError as error:
        raise SendAgain(f"langfuse out of reach ({type(error).__name__})") from None
    rejected = getattr(answer, "rejected", 0)
    if rejected:  # 207: some accepted, some not (Langfuse asks not to retry such a batch)
        log.warning("langfuse rejected scores", extra={**fields, "rejected": rejected})
        return "rejected"
    log.info("scores sent", extra={**fields, "scores": len(scores)})
    return "sent"


def send_to_otlp(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's `gen_ai.evaluation.result` events over OTLP (workers.otlp_events). SendAgain: retry."""
    subject = load_subject(runtime, judgment_id)
    found = traced(runtime, subject, OTLP, judgment_id=judgment_id)
    if isinstance(found, str):
        return found
    return export_events(runtime, subject.key, found, evaluation_events(subject.verdict))


def send_outcome_to_otlp(runtime: Runtime, pair_id: int, signal: str) -> str:
    """One outcome signal's `gen_ai.evaluation.result` event over OTLP. SendAgain: retry."""
    subject = load_outcome(runtime, pair_id, signal)
    found = traced(runtime, subject, OTLP, pair_id=pair_id, signal=signal)
    if isinstance(found, str):
        return found
    return export_events(runtime, subject.key, found, [outcome_event(signal)])


def export_events(runtime: Runtime, key: str, found: tuple[str, str | None, dict], events: list[dict]) -> str:
    """The events as log records on the trace, or as spans under the span the bot named (RELMON_OTLP_EVENTS_AS)."""
    from workers.otlp_events import export_evaluations
    from workers.otlp_spans import export_evaluation_spans

    trace_id, _, fields = found
    if not events:
        return "skipped"
    endpoint = runtime.settings.otlp_endpoint
    try:
        parent = named_span(runtime, found)  # the evaluated span, when the bot named one
    except BadTraceId:
        return "bad_trace_id"
    if runtime.settings.otlp_events_as == "logs":
        exported = export_evaluations(endpoint, trace_id, events, span_id=parent)
    else:
        exported = export_evaluation_spans(endpoint, evaluation_spans(trace_id, key, parent, events))
    if exported.refused:  # a key or body the endpoint refuses: sending again would be refused again
        log.warning("the OTLP endpoint refused the events", extra={**fields, "status": exported.status})
        return "rejected"
    if not exported.sent:
        raise SendAgain(f"the OTLP endpoint did not take the events (status {exported.status})")
    log.info("evaluation events sent", extra={**fields, "events": len(events)})
    return "sent"


def send_to_phoenix(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's span annotations to Phoenix (workers.phoenix_annotations: which span, and why). SendAgain:
    retry."""
    subject = load_subject(runtime, judgment_id)
    found = traced(runtime, subject, PHOENIX, judgment_id=judgment_id)
    if isinstance(found, str):
        return found
    return annotate(runtime, found, lambda span_id: phoenix_annotations(subject.verdict, span_id))


def send_outcome_to_phoenix(runtime: Runtime, pair_id: int, signal: str) -> str:
    """One outcome signal's span annotation to Phoenix. SendAgain: retry."""
    found = traced(runtime, load_outcome(runtime, pair_id, signal), PHOENIX, pair_id=pair_id, signal=signal)
    if isinstance(found, str):
        return found
    return annotate(runtime, found, lambda span_id: [outcome_annotation(pair_id, signal, span_id)])


def annotate(runtime: Runtime, found: tuple[str, str | None, dict], annotations) -> str:
    """The annotations (built for a span ID) upserted on the span the bot named, checked, or the trace's root."""
    trace_id, _, fields = found
    try:
        span_id = named_span(runtime, found)
    except BadTraceId:
        return "bad_trace_id"
    return upsert_annotations(runtime.settings, trace_id, span_id, annotations, fields)


def named_span(runtime: Runtime, found: tuple[str, str | None, dict]) -> str | None:
    """The span ID the bot named, checked (None when it named none); BadTraceId, said in a log line, when what it
    named is not one."""
    _, given, fields = found
    try:
        return checked_span_id(given) if given else None
    except BadTraceId as error:
        log.warning("span id refused", extra={**fields, "reason": str(error), "key": runtime.settings.span_id_key})
        raise


class Send(NamedTuple):
    """One send of a verdict or a signal to one tool: its task and arguments, as noted and queued."""

    tool: str
    task: str
    args: tuple

    @property
    def call(self) -> task_notes.Call:
        return task_notes.Call(self.task, self.args)


def _tools(runtime: Runtime, langfuse_task: str, otlp_task: str, phoenix_task: str) -> list[tuple[str, str]]:
    settings = runtime.settings
    tools = [(LANGFUSE, langfuse_task)] if settings.langfuse_enabled else []
    tools += [(OTLP, otlp_task)] if settings.otlp_endpoint else []
    return tools + ([(PHOENIX, phoenix_task)] if settings.phoenix_url else [])


def judgment_sends(runtime: Runtime, judgment_ids: list[int]) -> list[Send]:
    """One send per judgment to each tool configured (none when no tool is: no Redis, no task)."""
    tools = _tools(
        runtime, task_names.SEND_LANGFUSE_SCORES, task_names.SEND_OTLP_EVALUATIONS, task_names.SEND_PHOENIX_ANNOTATIONS
    )
    return [Send(tool, task, (judgment_id,)) for judgment_id in judgment_ids for tool, task in tools]


def outcome_sends(runtime: Runtime, pair_id: int, signals: list[str]) -> list[Send]:
    """One send per signal to each tool configured, whether the pair is judged yet or not, since a signal goes on
    the answer's trace by itself."""
    tools = _tools(
        runtime, task_names.SEND_LANGFUSE_OUTCOME, task_names.SEND_OTLP_OUTCOME, task_names.SEND_PHOENIX_OUTCOME
    )
    return [Send(tool, task, (pair_id, signal)) for signal in signals for tool, task in tools]


def note_sends(runtime: Runtime, sends: list[Send]) -> list[Send]:
    """Note the sends before what they send is committed (common.task_notes.note): a worker that dies after the
    commit, before queue_sends, leaves them to the orphan check. Returns the ones this call noted (a note already
    there is kept: a dead run's, still owed). Never raises: a note not made leaves the send unguarded, no more."""
    if not sends:
        return []
    try:
        mine = task_notes.note(runtime.redis, [send.call for send in sends], time.time())
    except redis.RedisError as error:
        log.warning("trace sends not noted", extra={"sends": len(sends), "error": type(error).__name__})
        return []
    return [send for send, noted in zip(sends, mine, strict=True) if noted]


def queue_sends(runtime: Runtime, sends: list[Send], noted: Sequence[Send] = ()) -> None:
    """Queue the sends, each noted until it ends (common.task_notes), and drop the notes of `noted` (note_sends')
    that are not among them: what those would send was committed before, and sent, by another run. A broker that
    fails here is logged and counted (the note stays for the orphan check); the caller goes on regardless."""
    now = time.time()
    for send in sends:
        try:
            task_notes.send(runtime.redis, send.call, now)
        except Exception as error:  # the broker: this send waits for the orphan check, the pipeline does not
            log.warning("trace send not queued", extra={"task": send.task, "error": type(error).__name__})
            metrics.trace_send(send.tool, "not_queued")
    for send in set(noted) - set(sends):
        task_notes.done(runtime.redis, send.call.id)


def queue_trace_sends(runtime: Runtime, judgment_ids: list[int]) -> None:
    """After judgments (or a second opinion) are stored: their sends. Never raises (queue_sends)."""
    queue_sends(runtime, judgment_sends(runtime, judgment_ids))


def queue_outcome_sends(runtime: Runtime, pair_id: int, signals: list[str], noted: Sequence[Send] = ()) -> None:
    """After outcome signals are recorded (the new ones only: a signal is recorded once per pair): their sends;
    `noted`: what note_sends noted before the commit. Never raises (queue_sends)."""
    queue_sends(runtime, outcome_sends(runtime, pair_id, signals), noted)
