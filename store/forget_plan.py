"""What forgetting reads from the store and writes back, as plain data: the texts of a thread's pairs and judgments
that may hold a deleted (or edited) message's words, and the columns to write. The rules that decide the writes
are `capture.forgetting`; the SQL that reads and writes these is `store.forgetting`. A leaf (no SQL), so the pure
rules build on it without loading the store."""

from __future__ import annotations

from dataclasses import dataclass, field

PAIR_TEXTS = ("question_text", "answer_text", "context_text", "reference_text")
JUDGMENT_TEXTS = ("reasoning", "raw_output", "confirmation_reasoning")


@dataclass(frozen=True)
class StoredPair:
    """A pair of the message's thread as stored: the texts that may hold its words, and where its message was."""

    id: int
    question_ts: str | None
    answer_ts: str | None
    question_text: str | None = None
    answer_text: str | None = None
    context_text: str | None = None
    reference_text: str | None = None


@dataclass(frozen=True)
class StoredJudgment:
    id: int
    pair_id: int
    reasoning: str | None = None
    raw_output: str | None = None
    confirmation_reasoning: str | None = None


@dataclass(frozen=True)
class ForgetPlan:
    """The columns to write: per pair and per judgment id, only those that change. `about`: for each changed pair,
    what of it was deleted or edited ("question", "answer", "earlier turn", "edit"), for its alerts' notice."""

    pairs: dict[int, dict[str, str | None]] = field(default_factory=dict)
    judgments: dict[int, dict[str, str | None]] = field(default_factory=dict)
    about: dict[int, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.pairs or self.judgments)
