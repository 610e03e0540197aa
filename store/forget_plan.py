"""What forgetting reads from the store and writes back, as plain data: the texts of a thread's pairs and judgments
that may hold a deleted (or edited) message's words, and the columns to write. The rules that decide the writes
are `capture.forgetting`; the SQL that reads and writes these is `store.forgetting`. A leaf (no SQL), so the pure
rules build on it without loading the store."""

from __future__ import annotations

from dataclasses import dataclass, field

PAIR_TEXTS = ("question_text", "answer_text", "context_text", "reference_text")
JUDGMENT_TEXTS = ("reasoning", "raw_output", "confirmation_reasoning")
# A `relmon regress` check's verdict (JSON) keeps what its judge read and said: these keys can quote a golden
# item's question, earlier turns and expected answer (an LLM's error can quote its reply).
CHECK_TEXTS = ("reasoning", "raw_output", "error")
# The key a check's verdict gets when its texts went with a deleted message (`CHECK_TEXTS` blanked): not a verdict
# any more, so the run that reuses it judges it again (store.regress_runs.stored_checks).
FORGOTTEN = "forgotten"
DELETED_MARK = "[deleted]"  # what stands where a deleted message's text was


def blanked_verdict(verdict: dict) -> dict:
    """A check's verdict without what its judge read or said (its scores and status stay), marked FORGOTTEN."""
    return {**verdict, **dict.fromkeys(CHECK_TEXTS), FORGOTTEN: True}


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


@dataclass(frozen=True)
class StoredCheck:
    """A `relmon regress` check (store.golden_models.RegressCheck) on a golden item the message's copies reached:
    its verdict as stored (JSON), whose texts may quote the item."""

    id: int
    item_key: str  # the golden item's id, as text
    verdict: dict | None = None


@dataclass(frozen=True)
class StoredReport:
    """A finished `relmon regress` run's report (golden.regress's JSON), which quotes each item's question."""

    run_id: int
    report: dict | None = None


@dataclass(frozen=True)
class RegressPlan:
    """The regress rows to write: per check id its new verdict, per run id its new report (only those that
    change)."""

    checks: dict[int, dict] = field(default_factory=dict)
    reports: dict[int, dict] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.checks or self.reports)
