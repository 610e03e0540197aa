"""What the bot's side says of an exchange after it (`POST /v1/exchanges/{id}/signals`, bot.ingest): what only the
bot sees. Pure validation, strict like common.exchanges (unknown fields refused, `problems` name the field at
fault); the bot validates before it answers 202, the worker again (workers.bot_signals).

    {"bot": "helpdesk", "type": "feedback", "value": "positive" | "negative"}   Slack's feedback_buttons
    {"bot": "helpdesk", "type": "handoff", "reply": "..."?}                    handed to a person (their reply)
    {"bot": "helpdesk", "type": "resolution", "value": "resolved" | "unresolved"}

each with an optional `at` (ISO 8601; default: when the bot's server received it)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, ValidationError

from common.exchanges import MAX_ANSWER_CHARS, IsoTime, Name, Refused, _Strict, _text, problems

BotName = _text(80)


class _Signal(_Strict):
    bot: BotName
    at: IsoTime | None = None


class Feedback(_Signal):
    """The thumbs of Slack's `feedback_buttons` on the answer."""

    type: Literal["feedback"]
    value: Literal["positive", "negative"]


class Handoff(_Signal):
    """The conversation went to a person; `reply`: what they answered (the pair's reference answer)."""

    type: Literal["handoff"]
    reply: _text(MAX_ANSWER_CHARS) | None = None


class Resolution(_Signal):
    """The bot's side knows how the conversation ended."""

    type: Literal["resolution"]
    value: Literal["resolved", "unresolved"]


Signal = Annotated[Feedback | Handoff | Resolution, Field(discriminator="type")]
_SIGNAL = TypeAdapter(Signal)
SIGNAL_TYPES = ("feedback", "handoff", "resolution")


def parse_signal(value: object) -> Feedback | Handoff | Resolution:
    """A decoded JSON body as a signal; Refused names the fields at fault (as `value`, not pydantic's
    `feedback.value`: the type's tag is left out of the path)."""
    if not isinstance(value, dict):
        raise Refused(['body: send a JSON object such as {"bot": "helpdesk", "type": "feedback", "value": "negative"}'])
    if value.get("type") not in SIGNAL_TYPES:
        raise Refused([f"type: give one of {', '.join(SIGNAL_TYPES)}"])
    try:
        return _SIGNAL.validate_python(value)
    except ValidationError as error:
        raise Refused([line.removeprefix(f"{value['type']}.") for line in problems(error)]) from None


def signal_task(exchange_id: str, signal: Feedback | Handoff | Resolution, received_at: str) -> dict[str, Any]:
    """The worker's task's kwargs (JSON): the exchange, and the signal with its time (received, when not given)."""
    body = signal.model_dump(mode="json", exclude_none=True)
    body.setdefault("at", received_at)
    return {"exchange_id": exchange_id, "signal": body}


ExchangeId = Name  # an exchange's id as the path gives it: as `id` of common.exchanges.Exchange
_EXCHANGE_ID = TypeAdapter(ExchangeId)
_BOT = TypeAdapter(BotName)


def exchange_key(exchange_id: str, bot: str | None) -> tuple[str, str]:
    """(bot, id) of the exchange a path and its `bot` name, checked as common.exchanges checks them."""
    found = []
    for name, adapter, value in (("id", _EXCHANGE_ID, exchange_id), ("bot", _BOT, bot)):
        if value is None:
            found.append(f"{name}: field required")
            continue
        try:
            adapter.validate_python(value)
        except ValidationError as error:
            found.extend(f"{name}: {line.partition(': ')[2]}" for line in problems(error))
    if found:
        raise Refused(found)
    return bot.strip(), exchange_id.strip()
