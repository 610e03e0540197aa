"""An exchange sent to the ingest API (`POST /v1/exchanges`, bot.ingest): one turn of a bot's conversation that
relmon cannot read in Slack itself (an agent's own DMs, a web widget). Pure validation: strict types, every field
bounded, unknown fields refused; `problems` turns pydantic's errors into lines naming the field at fault
(`exchanges[3].answer: field required`). The bot validates before it answers 202; the worker validates again
(a spooled or noted message is only trusted as far as this model says)."""

from __future__ import annotations

import re
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

MAX_BATCH = 100
MAX_QUESTION_CHARS = 20_000
MAX_ANSWER_CHARS = 40_000
MAX_TURN_CHARS = 20_000
MAX_EARLIER_TURNS = 50
MAX_DOCUMENTS = 20
MAX_DOCUMENT_CHARS = 20_000


def _storable(value: str) -> str:
    """No NUL character: a valid JSON escape that no PostgreSQL text column takes, which would fail the worker's
    store after the 202. (A lone surrogate, the other such escape, pydantic refuses as no valid string.)"""
    if "\x00" in value:
        raise ValueError("holds a NUL character (\\u0000), which cannot be stored")
    return value


def _text(max_length: int, *, min_length: int = 1) -> Any:
    constraints = StringConstraints(strict=True, strip_whitespace=True, min_length=min_length, max_length=max_length)
    return Annotated[str, constraints, AfterValidator(_storable)]


def _iso_text_only(value: object) -> object:
    """A time is an ISO 8601 string with its offset ("2026-12-07T08:15:00Z"), never a bare number."""
    if not isinstance(value, str):
        raise ValueError("give an ISO 8601 time as a string, e.g. 2026-12-07T08:15:00Z")
    return value


# Lax here (strict mode takes no string for a time): the BeforeValidator keeps it to strings.
def _matching(pattern: str, what: str) -> Any:
    """A string of `pattern`, refused as "give <what>" (the pattern itself would tell a person nothing)."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"give {what}")
        return value

    return Annotated[str, StringConstraints(strict=True, max_length=40), AfterValidator(check)]


SlackChannel = _matching(r"[CGD][A-Z0-9]{2,30}", "a Slack channel id, such as C012AB3CD")
SlackTs = _matching(r"\d{1,12}\.\d{1,9}", "a Slack message ts, such as 1765094400.000100")
SlackUser = _matching(r"[UW][A-Z0-9]{2,30}", "a Slack user id, such as U012AB3CD")
IsoTime = Annotated[AwareDatetime, Field(strict=False), BeforeValidator(_iso_text_only)]
Name = _text(200)


class Visibility(StrEnum):
    """Who could read the exchange where it happened: `public` may be quoted in the alert channel; `private` and
    `dm` never are (common.privacy)."""

    PUBLIC = "public"
    PRIVATE = "private"
    DM = "dm"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class EarlierTurn(_Strict):
    role: Literal["user", "assistant"]
    text: _text(MAX_TURN_CHARS)


class Document(_Strict):
    """A passage the bot retrieved for its answer: what the grounded judge reads as its source."""

    text: _text(MAX_DOCUMENT_CHARS)
    source: _text(1_000)
    id: _text(200) | None = None


class SlackPlace(_Strict):
    """Where the exchange happened when it was in a Slack channel relmon may also read: its answer's message."""

    channel: SlackChannel
    ts: SlackTs


def _not_all_zeros(value: str) -> str:
    """OpenTelemetry's invalid id: no tool keeps a verdict on it."""
    if not value.strip("0"):
        raise ValueError("give an id that is not all zeros")
    return value


TraceId = Annotated[_matching(r"[0-9a-f]{32}", "a trace id: 32 lowercase hex digits"), AfterValidator(_not_all_zeros)]
SpanId = Annotated[_matching(r"[0-9a-f]{16}", "a span id: 16 lowercase hex digits"), AfterValidator(_not_all_zeros)]


class TracePlace(_Strict):
    """The bot's own trace of the exchange (OpenTelemetry ids): its verdict is sent onto that trace (and span)."""

    trace_id: TraceId
    span_id: SpanId | None = None


class Exchange(_Strict):
    id: Name  # the client's own, idempotent per bot: the same (bot, id) twice is one exchange
    bot: _text(80)
    conversation_id: Name
    turn: int = Field(ge=0, le=1_000_000)
    question: _text(MAX_QUESTION_CHARS)
    answer: _text(MAX_ANSWER_CHARS)
    earlier_turns: list[EarlierTurn] = Field(default_factory=list, max_length=MAX_EARLIER_TURNS)
    documents: list[Document] = Field(default_factory=list, max_length=MAX_DOCUMENTS)
    bot_version: _text(100) | None = None
    asked_at: IsoTime
    answered_at: IsoTime
    visibility: Visibility = Field(strict=False)  # its value, as JSON gives it
    asker: SlackUser | None = None
    slack: SlackPlace | None = None
    trace: TracePlace | None = None

    @model_validator(mode="after")
    def _answered_after_asked(self) -> Exchange:
        if self.answered_at < self.asked_at:
            raise ValueError("answered_at is before asked_at")
        return self

    @property
    def private(self) -> bool:
        """Whether its text may never be quoted in a shared channel."""
        return self.visibility is not Visibility.PUBLIC

    def to_task(self) -> dict[str, Any]:
        """As the worker's task carries it (JSON)."""
        return self.model_dump(mode="json", exclude_none=True)


class Batch(_Strict):
    exchanges: list[Exchange] = Field(min_length=1, max_length=MAX_BATCH)


class Refused(ValueError):
    """A request body that is not a valid exchange or batch: `problems` name the fields at fault."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def where(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as a path: ("exchanges", 3, "answer") -> "exchanges[3].answer"."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part not in ("function-after", "[key]") and not str(part).startswith("function-"):
            path += f".{part}" if path else str(part)
    return path or "body"


def problems(error: ValidationError, limit: int = 20) -> list[str]:
    """Each error as `field: what is wrong` (pydantic's message, first letter lower-cased), at most `limit`."""
    lines = []
    for item in error.errors(include_url=False, include_input=False)[:limit]:
        message = item["msg"].removeprefix("Value error, ")
        lines.append(f"{where(item['loc'])}: {message[:1].lower()}{message[1:]}")
    return lines


def parse_body(value: object) -> list[Exchange]:
    """A decoded JSON body: one exchange, or {"exchanges": [...]}; all or nothing (Refused names what is wrong)."""
    if not isinstance(value, dict):
        raise Refused(['body: send a JSON object: one exchange, or {"exchanges": [...]}'])
    try:
        if "exchanges" in value:
            return list(Batch.model_validate(value).exchanges)
        return [Exchange.model_validate(value)]
    except ValidationError as error:
        raise Refused(problems(error)) from None


def answered_at(exchange: dict[str, Any]) -> datetime:
    """The answer's time of an exchange as a task carries it."""
    return datetime.fromisoformat(exchange["answered_at"])
