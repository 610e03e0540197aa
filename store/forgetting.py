"""Forgetting, the SQL side: read the texts a deleted (or edited) message may have been copied into (the pairs of
its thread and their judgments, the golden set, topics and `relmon regress` runs taken from them), and write what
`capture.forgetting` decided, in one transaction. What is read and written: `store.forget_plan`."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, or_, select, update
from sqlalchemy.orm import Session

from store import alerts as alert_store
from store.forget_plan import (
    JUDGMENT_TEXTS,
    PAIR_TEXTS,
    ForgetPlan,
    RegressPlan,
    StoredCheck,
    StoredJudgment,
    StoredPair,
    StoredReport,
)
from store.golden_models import GoldenItem, GoldenSource, RegressCheck, RegressRun
from store.models import Alert, Judgment, Pair, PairStatus, utcnow
from store.topic_models import PairTopic, QuestionEmbedding, TopicPeriod, TopicRecord


def thread_rows(
    session: Session, channel_id: str, ts: str, thread_key: str
) -> tuple[list[StoredPair], list[StoredJudgment]]:
    """The pairs that may hold the message `ts` of thread `thread_key` (its question, its answer or a part of it,
    an earlier turn, a reference: all from the message's own thread) and their judgments, locked for update."""
    pairs = session.execute(
        select(Pair.id, Pair.question_ts, Pair.answer_ts, *(getattr(Pair, name) for name in PAIR_TEXTS))
        .where(
            Pair.channel_id == channel_id,
            or_(
                Pair.question_ts == ts,
                Pair.answer_ts == ts,
                Pair.thread_ts == thread_key,
                Pair.answer_ts == thread_key,
                Pair.question_ts == thread_key,
            ),
        )
        .order_by(Pair.id)
        .with_for_update()
    ).all()
    ids = [row.id for row in pairs]
    judgments = (
        session.execute(
            select(Judgment.id, Judgment.pair_id, *(getattr(Judgment, name) for name in JUDGMENT_TEXTS))
            .where(Judgment.pair_id.in_(ids))
            .order_by(Judgment.id)
            .with_for_update()
        ).all()
        if ids
        else []
    )
    return [StoredPair(**row._mapping) for row in pairs], [StoredJudgment(**row._mapping) for row in judgments]


def apply_plan(session: Session, plan: ForgetPlan) -> None:
    """Write the plan's columns (a handful of rows: one thread's pairs and their judgments). A changed question's
    embedding (the topics') goes too: it was made from the words, and the next run embeds what is left."""
    now = utcnow()
    for pair_id, values in plan.pairs.items():
        session.execute(update(Pair).where(Pair.id == pair_id).values(**values, updated_at=now))
    questions = [pair_id for pair_id, values in plan.pairs.items() if "question_text" in values]
    if questions:
        session.execute(delete(QuestionEmbedding).where(QuestionEmbedding.pair_id.in_(questions)))
    for judgment_id, values in plan.judgments.items():
        session.execute(update(Judgment).where(Judgment.id == judgment_id).values(**values))


def reopen_waiting(session: Session, channel_id: str, question_ts: str) -> list[tuple[int, int]]:
    """Captured pairs still waiting for their judge whose question was deleted go back to settling, to find their
    question again; returns those (pair id, version) to settle."""
    rows = session.execute(
        update(Pair)
        .where(
            Pair.channel_id == channel_id,
            Pair.question_ts == question_ts,
            Pair.source == "capture",
            Pair.status == PairStatus.PENDING,
        )
        .values(status=PairStatus.SETTLING, version=Pair.version + 1, question_text=None, updated_at=utcnow())
        .returning(Pair.id, Pair.version)
    ).all()
    return [(row.id, row.version) for row in rows]


@dataclass(frozen=True)
class AlertsToRedraw:
    posted: list[int]  # alert ids, redrawn in place (chat.update)
    held: list[tuple[str, object]]  # (alert channel, claimed at) of held ones: their hour's summary is redrawn
    verdicts: list[int] = field(default_factory=list)  # on-demand pairs whose verdict went as a direct message


# What an alert's redraw says went, most telling first: several deletions in one thread (its question, then a
# teammate's reply) each note the alert, and a redraw that runs after both must still say the question went.
_NOTE_ORDER = ("exchange", "question", "answer", "message", "edit")


def telling_note(kept: str | None, new: str) -> str:
    """The note an alert keeps: the new one, unless the one it has already says more (its question or answer
    deleted outranks an earlier turn's deletion or an edit)."""
    if kept not in _NOTE_ORDER or new not in _NOTE_ORDER:
        return new
    return kept if _NOTE_ORDER.index(kept) < _NOTE_ORDER.index(new) else new


def note_on_alerts(session: Session, about: dict[int, str]) -> AlertsToRedraw:
    """Mark the alerts about the changed pairs with what was deleted (their redraw says so), and return those
    to redraw: posted ones, and the summaries that show held ones."""
    if not about:
        return AlertsToRedraw([], [])
    sent = session.execute(
        select(Alert.dedupe_key).where(
            Alert.dedupe_key.in_([f"verdict:{pair_id}" for pair_id in about]),
            Alert.kind == alert_store.KIND_VERDICT,
            Alert.message_ts.is_not(None),
        )
    ).scalars()
    verdicts = [int(key.partition(":")[2]) for key in sent]
    rows = session.execute(
        select(Alert, Judgment.pair_id)
        .join(Judgment, Judgment.id == Alert.judgment_id)
        .where(Judgment.pair_id.in_(list(about)), Alert.kind.in_((alert_store.KIND_LOW, alert_store.KIND_MISSED)))
        .order_by(Alert.id)
    ).all()
    posted, held = [], []
    for alert, pair_id in rows:
        kept = (alert.details or {}).get("forgotten")
        alert.details = {**(alert.details or {}), "forgotten": telling_note(kept, about[pair_id])}
        if alert.status == alert_store.STATUS_POSTED and alert.message_ts:
            posted.append(alert.id)
        elif alert.status == alert_store.STATUS_HELD and alert.alert_channel_id:
            held.append((alert.alert_channel_id, alert.created_at))
    return AlertsToRedraw(posted, held, verdicts)


def force_summary_redraw(session: Session, dedupe_keys: Collection[str]) -> None:
    """A summary shows what its rows say when its count changes: a shown count of -1 makes the next flush redraw
    it with the scrubbed lines."""
    for key in dedupe_keys:
        row = alert_store.by_key(session, key)
        if row is not None:
            alert_store.merge_details(session, row.id, count=-1)


COPIED_TEXTS = ("question", "context", "bot_answer", "expected", "topic", "name")  # golden rows' and topics'
CopyKey = tuple[str, object]  # ("source", id), ("item", id), ("topic", key), ("period", id)
# The copies' texts (row -> column -> text) in, the columns that change out: the rules' `scrub_copies` with the
# message's removal, passed in by the caller (the rules are capture's, above the store).
ScrubCopies = Callable[[dict[CopyKey, dict[str, str | None]]], Mapping[CopyKey, Mapping[str, str | None]]]


def scrub_other_copies(session: Session, channel_id: str, pair_ids: Collection[int], scrub: ScrubCopies) -> int:
    """The copies made from the thread's pairs outside them: the golden-set items and sources taken from them (an
    earlier turn in their context, a word in their question or answer) and the names of the topics their questions
    fell in (named from those questions), scrubbed by `scrub`. Returns how many rows changed."""
    if not pair_ids:
        return 0
    ids = list(pair_ids)
    sources = session.execute(
        select(GoldenSource).where(GoldenSource.channel_id == channel_id, GoldenSource.pair_id.in_(ids))
    ).scalars()
    rows: dict[CopyKey, Any] = {("source", s.id): s for s in sources}
    for item_id in {row.item_id for row in rows.values()}:
        item = session.get(GoldenItem, item_id, with_for_update=True)
        if item is not None:
            rows[("item", item_id)] = item
    keys = set(session.scalars(select(PairTopic.topic_key).where(PairTopic.pair_id.in_(ids))))
    if keys:
        rows.update(
            {("topic", t.key): t for t in session.scalars(select(TopicRecord).where(TopicRecord.key.in_(keys)))}
        )
        periods = session.scalars(select(TopicPeriod).where(TopicPeriod.topic_key.in_(keys)))
        rows.update({("period", p.id): p for p in periods})
    texts = {
        key: {name: getattr(row, name) for name in COPIED_TEXTS if hasattr(row, name)} for key, row in rows.items()
    }
    changed = scrub(texts)
    for key, values in changed.items():
        for name, value in values.items():
            setattr(rows[key], name, value)
    session.flush()
    return len(changed)


def _quoting(ts: str):
    return or_(GoldenSource.question_ts == ts, GoldenSource.answer_ts == ts, GoldenSource.reference_ts == ts)


def regress_rows(
    session: Session, channel_id: str, ts: str, pair_ids: Collection[int], *, deleted: bool
) -> tuple[set[str], list[StoredCheck], list[StoredReport]]:
    """The `relmon regress` rows that may quote the message `ts`: those about the golden items taken from it (a
    source whose question, answer or reference it is) or from its thread's pairs (`pair_ids`: an earlier turn in
    their context), found through the items' sources, so read before a deletion takes the sources away
    (store.golden.forget_sources_quoting). Returns (the keys of the items whose own message it is, when `deleted`;
    their checks; the reports of the runs that judged them), locked for update."""
    own = set(session.scalars(select(GoldenSource.item_id).where(GoldenSource.channel_id == channel_id, _quoting(ts))))
    linked = set(own)
    if pair_ids:
        linked |= set(
            session.scalars(
                select(GoldenSource.item_id).where(
                    GoldenSource.channel_id == channel_id, GoldenSource.pair_id.in_(list(pair_ids))
                )
            )
        )
    return _regress_rows(session, own if deleted else set(), linked)


def regress_rows_of_pair(
    session: Session, pair_id: int, pair_ids: Collection[int]
) -> tuple[set[str], list[StoredCheck], list[StoredReport]]:
    """`regress_rows` for a deleted exchange (no Slack message): the items taken from its pair are its own, those
    taken from the other pairs (`pair_ids`: its conversation's) are linked."""
    own = set(session.scalars(select(GoldenSource.item_id).where(GoldenSource.pair_id == pair_id)))
    linked = set(own)
    if pair_ids:
        linked |= set(session.scalars(select(GoldenSource.item_id).where(GoldenSource.pair_id.in_(list(pair_ids)))))
    return _regress_rows(session, own, linked)


def _regress_rows(
    session: Session, own: set[int], linked: set[int]
) -> tuple[set[str], list[StoredCheck], list[StoredReport]]:
    if not linked:
        return set(), [], []
    # regress_checks.item_key is the item's id as text (relmon.regress.command); a scan of the table's few rows
    # per run and item, no index (regress runs are a person's, a few a day).
    checks = session.execute(
        select(RegressCheck.id, RegressCheck.item_key, RegressCheck.verdict, RegressCheck.run_id)
        .where(RegressCheck.item_key.in_(sorted(str(item_id) for item_id in linked)))
        .order_by(RegressCheck.id)
        .with_for_update()
    ).all()
    runs = sorted({row.run_id for row in checks})
    reports = (
        session.execute(
            select(RegressRun.id, RegressRun.report)
            .where(RegressRun.id.in_(runs), RegressRun.report.is_not(None))
            .order_by(RegressRun.id)
            .with_for_update()
        ).all()
        if runs
        else []
    )
    return (
        {str(item_id) for item_id in own},
        [StoredCheck(row.id, row.item_key, row.verdict) for row in checks],
        [StoredReport(row.id, row.report) for row in reports],
    )


def apply_regress_plan(session: Session, plan: RegressPlan) -> None:
    for check_id, verdict in plan.checks.items():
        session.execute(update(RegressCheck).where(RegressCheck.id == check_id).values(verdict=verdict))
    for run_id, report in plan.reports.items():
        session.execute(update(RegressRun).where(RegressRun.id == run_id).values(report=report))
