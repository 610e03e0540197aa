"""OpenTelemetry spans → exchanges (`POST /v1/traces`, bot.otlp_ingest): pure conversion of an OTLP
ExportTraceServiceRequest (opentelemetry-proto's classes) into the exchanges `POST /v1/exchanges` takes
(common.exchanges.Exchange, validated the same way).

A chat generation is a span with `gen_ai.operation.name` chat / text_completion / generate_content, or
OpenInference's `openinference.span.kind` LLM. Its messages are read from, first found wins:
1. the semantic conventions' `gen_ai.input.messages` / `gen_ai.output.messages` (JSON: messages with parts);
2. the older span events `gen_ai.system|user|assistant|tool.message` and `gen_ai.choice` (`content`, `message`);
3. OpenInference's `llm.input_messages.N.message.*` / `llm.output_messages.N.message.*`, else `input.value` /
   `output.value` (a chat request's JSON, or plain text).
Every other span (HTTP, database, embeddings, agents, tools) is dropped unread; OpenInference RETRIEVER spans of the
same trace, ended before the chat span ended, give its documents (`retrieval.documents.N.document.*`).

The exchange: id `otlp-<trace id>-<span id>` (a batch sent again is stored once), bot `service.name`, version
`service.version`, conversation `gen_ai.conversation.id` (or OpenInference's `session.id`, else the trace id), turn
the number of earlier user messages, asked and answered at the span's start and end. Nothing in a span says who
could read it: `visibility` is the span's or the resource's `relmon.visibility`, else `private` (never quoted).
A chat span that makes no valid exchange (no captured content, say) is rejected with the reason."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from pydantic import ValidationError

from common.exchanges import MAX_DOCUMENT_CHARS, MAX_DOCUMENTS, MAX_EARLIER_TURNS, MAX_TURN_CHARS, Exchange, problems

CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_KIND_KEYS = frozenset({"gen_ai.operation.name", "openinference.span.kind"})
VISIBILITIES = frozenset({"public", "private", "dm"})
NO_CONTENT_HINT = (
    "turn on message content capture (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT; OpenInference records "
    "it unless OPENINFERENCE_HIDE_INPUTS/OUTPUTS)"
)


@dataclass(frozen=True)
class Message:
    role: str
    text: str


@dataclass
class Converted:
    """What a request's spans became: the exchanges, and the chat spans rejected with their reasons."""

    exchanges: list[Exchange] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


def plain(value: AnyValue) -> Any:
    """An AnyValue as plain Python: arrays as lists, key-value lists as dicts, bytes as hex."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: plain(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind) if kind else None


def attributes(items: Iterable[KeyValue]) -> dict[str, Any]:
    return {item.key: plain(item.value) for item in items}


def is_chat(attrs: dict[str, Any]) -> bool:
    """Whether a span's attributes say it is a chat generation (read before anything else of the span)."""
    operation = attrs.get("gen_ai.operation.name")
    return (isinstance(operation, str) and operation in CHAT_OPERATIONS) or attrs.get(
        "openinference.span.kind"
    ) == "LLM"


def _loads(value: Any) -> Any:
    """A JSON string's value; anything else (already structured, or not JSON) as it is."""
    if isinstance(value, str | bytes):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def content_text(content: Any) -> str:
    """The text of a message's content: a string, the semconv's parts ({"type": "text", "content"}), OpenAI's
    content parts ({"type": "text", "text"}); images, tool calls and other parts carry no text."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        if content.get("type", "text") not in ("text", "input_text", "output_text"):
            return ""
        text = content.get("content", content.get("text"))
        return content_text(text) if text is not None else ""
    if isinstance(content, list):
        return "\n".join(text for text in (content_text(part) for part in content) if text)
    return ""


def message_of(value: Any, default_role: str = "user") -> Message | None:
    value = _loads(value)
    if isinstance(value, str):
        return Message(default_role, value)
    if not isinstance(value, dict):
        return None
    if "message" in value and isinstance(_loads(value["message"]), dict):  # a choice: {"index", "message"}
        return message_of(value["message"], default_role)
    body = value.get("parts", value.get("content", value.get("text")))
    return Message(str(value.get("role") or default_role), content_text(_loads(body)))


def messages_of(value: Any, default_role: str) -> list[Message]:
    value = _loads(value)
    items = value if isinstance(value, list) else [value]
    return [message for message in (message_of(item, default_role) for item in items) if message is not None]


def _semconv(attrs: dict[str, Any]) -> tuple[list[Message], list[Message]] | None:
    if "gen_ai.input.messages" not in attrs and "gen_ai.output.messages" not in attrs:
        return None
    return (
        messages_of(attrs.get("gen_ai.input.messages", []), "user"),
        messages_of(attrs.get("gen_ai.output.messages", []), "assistant"),
    )


def _events(span: Span) -> tuple[list[Message], list[Message]] | None:
    asked: list[Message] = []
    answered: list[Message] = []
    for event in span.events:
        if event.name not in MESSAGE_EVENTS and event.name != "gen_ai.choice":
            continue
        attrs = attributes(event.attributes)
        if event.name == "gen_ai.choice":
            message = message_of(attrs.get("message", attrs.get("content", "")), "assistant")
            answered += [message] if message else []
        else:
            role = str(attrs.get("role") or MESSAGE_EVENTS[event.name])
            asked.append(Message(role, content_text(_loads(attrs.get("content", "")))))
    return (asked, answered) if asked or answered else None


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """OpenInference's flattened lists (`prefix.N.rest` → [{rest: value}] in N's order)."""
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        number, _, rest = key[len(prefix) :].partition(".")
        if number.isdigit() and rest:
            items.setdefault(int(number), {})[rest] = value
    return [items[number] for number in sorted(items)]


def _openinference_messages(attrs: dict[str, Any], prefix: str, default_role: str) -> list[Message]:
    messages = []
    for item in _indexed(attrs, prefix):
        text = item.get("message.content")
        if text is None:  # multimodal: message.contents.M.message_content.{type,text}
            parts = _indexed(item, "message.contents.")
            text = "\n".join(str(part.get("message_content.text", "")) for part in parts if part)
        messages.append(Message(str(item.get("message.role") or default_role), str(text or "")))
    return messages


def _value_messages(value: Any, default_role: str) -> list[Message]:
    """`input.value` / `output.value`: a chat request ({"messages"}), a chat completion ({"choices"}), or text."""
    loaded = _loads(value)
    if isinstance(loaded, dict) and "messages" in loaded:
        return messages_of(loaded["messages"], default_role)
    if isinstance(loaded, dict) and isinstance(loaded.get("choices"), list):
        return messages_of(loaded["choices"][:1], default_role)
    if value is None:
        return []
    return [Message(default_role, value if isinstance(value, str) else json.dumps(value))]


def _openinference(attrs: dict[str, Any]) -> tuple[list[Message], list[Message]] | None:
    asked = _openinference_messages(attrs, "llm.input_messages.", "user") or _value_messages(
        attrs.get("input.value"), "user"
    )
    answered = _openinference_messages(attrs, "llm.output_messages.", "assistant") or _value_messages(
        attrs.get("output.value"), "assistant"
    )
    return (asked, answered) if asked or answered else None


def conversation(span: Span, attrs: dict[str, Any]) -> tuple[list[Message], list[Message]]:
    """A chat span's input and output messages, from whichever convention it carries."""
    return _semconv(attrs) or _events(span) or _openinference(attrs) or ([], [])


def documents(retrievals: list[tuple[Span, dict[str, Any]]], before_ns: int) -> list[dict[str, str]]:
    """The retrieved passages of the trace's RETRIEVER spans ended by `before_ns`, in order, at most MAX_DOCUMENTS."""
    found: list[dict[str, str]] = []
    for span, attrs in sorted(retrievals, key=lambda pair: pair[0].start_time_unix_nano):
        if span.end_time_unix_nano > before_ns:
            continue
        for item in _indexed(attrs, "retrieval.documents."):
            text = str(item.get("document.content") or "").strip()
            if not text:
                continue
            doc_id = str(item.get("document.id") or "").strip()[:200] or None
            metadata = _loads(item.get("document.metadata"))
            named = metadata if isinstance(metadata, dict) else {}
            source = next(
                (str(named[key]) for key in ("source", "url", "file_path", "title") if named.get(key)),
                doc_id or span.name or "retrieval",
            )
            document = {"text": text[:MAX_DOCUMENT_CHARS], "source": source[:1_000]}
            found.append({**document, "id": doc_id} if doc_id else document)
    return found[:MAX_DOCUMENTS]


def iso(unix_nano: int) -> str:
    return datetime.fromtimestamp(unix_nano / 1e9, tz=UTC).isoformat()


def exchange_fields(
    span: Span, attrs: dict[str, Any], resource: dict[str, Any], docs: list[dict[str, str]]
) -> dict[str, Any]:
    """The exchange a chat span makes, as `POST /v1/exchanges` would take it (validated by the caller)."""
    asked, answered = conversation(span, attrs)
    spoken = [message for message in asked if message.role in ("user", "assistant") and message.text.strip()]
    last_user = max((n for n, message in enumerate(spoken) if message.role == "user"), default=None)
    question = spoken[last_user].text if last_user is not None else ""
    earlier = spoken[:last_user] if last_user is not None else []
    answer = next((message.text for message in answered if message.text.strip()), "")
    trace_id, span_id = span.trace_id.hex(), span.span_id.hex()
    conversation_id = attrs.get("gen_ai.conversation.id") or attrs.get("session.id") or trace_id
    visibility = attrs.get("relmon.visibility", resource.get("relmon.visibility", "private"))
    fields: dict[str, Any] = {
        "id": f"otlp-{trace_id}-{span_id}",
        "bot": str(resource.get("service.name") or "unknown_service")[:80],
        "conversation_id": str(conversation_id)[:200],
        "turn": sum(1 for message in earlier if message.role == "user"),
        "question": question,
        "answer": answer,
        "earlier_turns": [
            {"role": message.role, "text": message.text[:MAX_TURN_CHARS]} for message in earlier[-MAX_EARLIER_TURNS:]
        ],
        "documents": docs,
        "asked_at": iso(span.start_time_unix_nano),
        "answered_at": iso(max(span.end_time_unix_nano, span.start_time_unix_nano)),
        "visibility": visibility if isinstance(visibility, str) and visibility in VISIBILITIES else "private",
    }
    if len(trace_id) == 32 and trace_id.strip("0"):  # its verdict goes back onto this span (none on an invalid id)
        fields["trace"] = {"trace_id": trace_id}
        if len(span_id) == 16 and span_id.strip("0"):
            fields["trace"]["span_id"] = span_id
    if resource.get("service.version"):
        fields["bot_version"] = str(resource["service.version"])[:100]
    return fields


def _reason(span: Span, fields: dict[str, Any], error: ValidationError | None) -> str:
    name = f"span {span.span_id.hex()} ({span.name})"
    if not fields["question"].strip() or not fields["answer"].strip():
        missing = "question" if not fields["question"].strip() else "answer"
        return f"{name}: no {missing} text: {NO_CONTENT_HINT}"
    return f"{name}: {problems(error)[0]}" if error else name


def _spans(request: ExportTraceServiceRequest) -> Iterator[tuple[dict[str, Any], Span, dict[str, Any]]]:
    """The chat and RETRIEVER spans, each with its resource's attributes and its own."""
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                # Only the two attributes that name a span's kind are read first: most spans stop there.
                kinds = attributes(item for item in span.attributes if item.key in _KIND_KEYS)
                if is_chat(kinds) or kinds.get("openinference.span.kind") == "RETRIEVER":
                    yield resource, span, attributes(span.attributes)


def convert(request: ExportTraceServiceRequest) -> Converted:
    """The exchanges of a request's chat spans (in the request's order), and a reason for each rejected one."""
    chats: list[tuple[dict[str, Any], Span, dict[str, Any]]] = []
    retrievals: dict[bytes, list[tuple[Span, dict[str, Any]]]] = {}
    for resource, span, attrs in _spans(request):
        if is_chat(attrs):
            chats.append((resource, span, attrs))
        elif attrs.get("openinference.span.kind") == "RETRIEVER":
            retrievals.setdefault(span.trace_id, []).append((span, attrs))
    converted = Converted()
    for resource, span, attrs in chats:
        if len(span.trace_id) != 16 or len(span.span_id) != 8:
            converted.rejected.append(f"span {span.name!r}: give a 16-byte trace id and an 8-byte span id")
            continue
        fields = exchange_fields(
            span, attrs, resource, documents(retrievals.get(span.trace_id, []), span.end_time_unix_nano)
        )
        try:
            converted.exchanges.append(Exchange.model_validate(fields))
        except ValidationError as error:
            converted.rejected.append(_reason(span, fields, error))
    return converted
