"""The conversation so far, as part of the question a judge reads: a follow-up ("and on Android?") only makes
sense with the turns before it.

The earlier turns are labelled and put before the question inside the question's placeholder, so the judge's
system message and seed template (the cached prefix) stay word for word and the turns sit in the variable part.
Bounded in characters: the oldest turns are dropped first."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

CUSTOMER = "customer"
BOT = "bot"
SPEAKERS = (CUSTOMER, BOT)
# Of the question placeholder, at most this many characters go to the earlier turns.
MAX_CONTEXT_CHARS = 2_000
# One turn longer than this is cut (its start kept): a long earlier answer must not crowd out the rest.
MAX_TURN_CHARS = 800
HEADING = "Earlier in this conversation:"
QUESTION_LABEL = "Question:"


@dataclass(frozen=True)
class Turn:
    speaker: str  # customer | bot
    text: str


def _turn_line(turn: Turn) -> str:
    text = " ".join(turn.text.split())
    if len(text) > MAX_TURN_CHARS:
        text = text[: MAX_TURN_CHARS - 1].rstrip() + "…"
    return f"[{turn.speaker}] {text}"


def format_turns(turns: Sequence[Turn], max_turns: int, max_chars: int = MAX_CONTEXT_CHARS) -> str:
    """The last `max_turns` turns with words, one line each, oldest first; the oldest dropped until the lines fit
    in `max_chars`. Empty when there is nothing to show (or `max_turns` is 0)."""
    if max_turns <= 0:
        return ""
    lines = [_turn_line(turn) for turn in turns if turn.text.strip()][-max_turns:]
    while lines and sum(len(line) + 1 for line in lines) - 1 > max_chars:
        lines.pop(0)
    return "\n".join(lines)


def with_context(question: str, context: str | None) -> str:
    """The question as the judge reads it: unchanged without earlier turns, else the turns labelled, then the
    question labelled."""
    if not context or not context.strip():
        return question
    return f"{HEADING}\n{context.strip()}\n\n{QUESTION_LABEL} {question}"


@dataclass(frozen=True)
class JudgeInput:
    """What a judge reads of one answer: the question with the conversation's earlier turns before it, the answer,
    and the reference answer, if any. Built once per judgment (`of`) and read by every verdict on it, the first
    and a second opinion alike, so both judge the same texts and share one cache key."""

    question: str  # as the judge reads it: with the earlier turns (with_context)
    answer: str
    reference: str | None = None

    @classmethod
    def of(cls, question: str, answer: str, reference: str | None = None, context: str | None = None) -> JudgeInput:
        return cls(with_context(question, context), answer, reference or None)

    @property
    def texts(self) -> tuple[str, str, str | None]:
        """(question, answer, reference): the order in which `Judge.evaluate`, `cache_key` and `messages` take them."""
        return self.question, self.answer, self.reference


def parse_turns(text: str) -> list[Turn]:
    """Turns from a file: one per line, either `customer: …` / `bot: …` or a JSON object
    `{"speaker": "customer" | "bot", "text": "…"}` (`role` is accepted for `speaker`, `user`/`assistant` for
    customer/bot). Blank lines are skipped; anything else raises ValueError naming the line."""
    turns: list[Turn] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        turns.append(_parse_line(line, number))
    return turns


_ALIASES = {"user": CUSTOMER, "assistant": BOT, CUSTOMER: CUSTOMER, BOT: BOT}


def _parse_line(line: str, number: int) -> Turn:
    if line.startswith("{"):
        try:
            item = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"line {number}: not valid JSON ({error.msg})") from error
        except RecursionError:
            raise ValueError(f"line {number}: JSON nested too deeply: not a turn") from None
        if not isinstance(item, dict):
            raise ValueError(f'line {number}: needs "speaker" (customer or bot) and "text"')
        speaker = _ALIASES.get(str(item.get("speaker") or item.get("role") or "").lower())
        text = item.get("text", item.get("content"))
        if speaker is None or not isinstance(text, str):
            raise ValueError(f'line {number}: needs "speaker" (customer or bot) and "text"')
        return Turn(speaker, text)
    speaker, colon, rest = line.partition(":")
    name = _ALIASES.get(speaker.strip().lower())
    if not colon or name is None:
        raise ValueError(f"line {number}: start it with 'customer:' or 'bot:'")
    return Turn(name, rest.strip())


def split_context(question: str) -> tuple[str | None, str]:
    """`with_context` undone: (the earlier turns or None, the bare question). A custom judge's prompt may place
    them apart ({context}, {question})."""
    prefix = HEADING + "\n"
    if not question.startswith(prefix):
        return None, question
    turns, separator, rest = question[len(prefix) :].partition(f"\n\n{QUESTION_LABEL} ")
    if not separator:
        return None, question
    return turns, rest


# How an ingested exchange's retrieved passages head the reference text the grounded judge reads
# (workers.ingesting); a custom judge reads them as {documents}, apart from a reference answer.
DOCUMENTS_HEADING = "Documents the bot retrieved:"


def split_documents(reference: str | None) -> tuple[str | None, str | None]:
    """(the retrieved passages or None, a reference answer or None) of a pair's reference text."""
    if reference is None or not reference.strip():
        return None, None
    if reference.startswith(DOCUMENTS_HEADING):
        return reference[len(DOCUMENTS_HEADING) :].strip() or None, None
    return None, reference
