"""PairView: a stored pair as the judges read it (its judge input) and as the steps after judging show it, as plain
data: shared by judging, the alert path (its second opinion judges the same input) and the sweeps, so none of them
reaches into another's package for it."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from common.telemetry.logs import event_fields
from judges.context import JudgeInput
from store.models import ON_DEMAND_SOURCES, PairSource, as_utc


@dataclass(frozen=True)
class PairView:
    """What judging needs from a pair, read once (plain data: no session kept across the LLM call)."""

    id: int
    status: str
    source: str
    channel_id: str | None
    answer_ts: str | None
    question: str
    answer: str
    reference: str | None
    judges: list[str] | None
    version: int = 1  # of the answer's text: its judgments are stored under it
    rejudges: int = 0  # times an edit re-opened it after it was judged
    context: str | None = None  # the conversation's earlier turns (judges.context.format_turns)
    # What an alert about the pair shows besides its texts:
    channel_is_private: bool = False
    stream_errored: bool = False  # the bot's stream ended in an error: judged on what was shown
    created_at: datetime | None = None
    updated_at: datetime | None = None  # as read: every change to the pair's row moves it

    @classmethod
    def of(cls, fields: dict[str, Any]) -> PairView:
        return cls(
            id=fields["id"],
            status=fields["status"],
            source=fields["source"] or PairSource.CAPTURE,
            channel_id=fields["channel_id"],
            answer_ts=fields["answer_ts"],
            question=fields["question_text"] or "",
            answer=fields["answer_text"] or "",
            reference=fields["reference_text"] or None,
            judges=list(fields["judges"]) if fields["judges"] else None,
            version=fields.get("version") or 1,
            rejudges=fields.get("rejudges") or 0,
            context=fields.get("context_text") or None,
            channel_is_private=bool(fields.get("channel_is_private")),
            stream_errored=bool(fields.get("stream_errored")),
            created_at=fields.get("created_at"),
            updated_at=fields.get("updated_at"),
        )

    @property
    def judge_input(self) -> JudgeInput:
        """What every verdict on this version of the pair reads (the first and a second opinion alike)."""
        return JudgeInput.of(self.question, self.answer, self.reference, self.context)

    @property
    def answered_at(self) -> datetime:
        """When the answer was posted: its Slack ts, else when it was captured."""
        if self.answer_ts:
            with suppress(ValueError):
                return datetime.fromtimestamp(float(self.answer_ts), UTC)
        assert self.created_at is not None, "a pair read from the database has its capture time"
        return as_utc(self.created_at)

    def budget_unit(self, judge: str) -> str:
        """The budget's key for this judgment: each re-judgment of an edited answer is a unit of its own."""
        return judge if self.rejudges == 0 else f"{judge}@{self.rejudges}"

    @property
    def on_demand(self) -> bool:
        return self.source in ON_DEMAND_SOURCES

    def log_fields(self, **fields: Any) -> dict[str, Any]:
        """The `extra=` of a log line about this pair: its identifiers and `fields`."""
        return event_fields(channel=self.channel_id, message_ts=self.answer_ts, pair_id=self.id, **fields)
