"""Read-only queries behind the digest and App Home: plain rows of pairs with their judgments and votes, streamed.

The statistics themselves are running tallies in `common.reports`; these rows are all they see, a batch at a time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy import Select, String, bindparam, case, func, literal, select, true
from sqlalchemy.orm import Session

from store import bot_groups
from store.exchange_models import Exchange
from store.exchanges import in_report_channel
from store.judgments import is_current
from store.models import Feedback, Judgment, OutcomeSignal, OutcomeWindow, Pair, PairSource

# Ids per IN (...) clause: well under SQLite's and PostgreSQL's parameter limits. Also the pairs a report holds
# at a time (`stream_pair_rows`).
_CHUNK = 500


@dataclass(frozen=True)
class JudgmentRow:
    id: int
    judge: str
    status: str  # ok | null | error
    score: float | None = None
    max_score: float | None = None
    normalized_score: float | None = None
    # As the provider reported them; None: it did not say (common.reports.costs counts those apart).
    prompt_tokens: int | None = 0
    cached_tokens: int | None = 0  # of prompt_tokens, read from the provider's prompt cache
    completion_tokens: int | None = 0
    cached: bool = False
    batch: bool = False  # judged through the Batch API: half price
    votes_right: int = 0  # feedback buttons: "the judge was right"
    votes_wrong: int = 0
    model: str | None = None  # the model that answered
    prompt_version: str | None = None
    confirmation_status: str | None = None  # the second opinion on a low score, if one was asked for
    confirmation_score: float | None = None


@dataclass(frozen=True)
class PairRow:
    id: int
    channel_id: str | None
    created_at: datetime  # aware, UTC
    status: str
    source: str = PairSource.CAPTURE
    channel_is_private: bool = False
    answer_ts: str | None = None
    thread_ts: str | None = None
    judgments: tuple[JudgmentRow, ...] = field(default_factory=tuple)  # the current ones: what scores read
    superseded: tuple[JudgmentRow, ...] = field(default_factory=tuple)  # earlier versions': spent, not scored
    has_reference: bool = False  # a reference answer (a teammate's reply, or one given to /judge)
    window_closed: bool | None = None  # its outcome window: closed, still open, or None when never watched
    signals: tuple[str, ...] = ()  # its outcome signals (capture.outcomes), in the order they came
    question_ts: str | None = None  # the question's Slack ts
    bot: str | None = None  # the bot that answered: its ingest API name (its first exchange's), else its Slack bot ID
    inclusion_probability: float | None = None  # its chance of being judged (sampling); None: certain

    @property
    def asked_at(self) -> datetime:
        """When the question was asked (its Slack ts), else when the pair was made (the answer's time)."""
        try:
            return datetime.fromtimestamp(float(self.question_ts), UTC) if self.question_ts else self.created_at
        except (ValueError, OverflowError, OSError):  # not a Slack ts: the pair's own time
            return self.created_at


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes; everything stored is UTC.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _chunks(ids: list[int]) -> Iterable[list[int]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


_TOKEN_COUNTS = ("prompt_tokens", "cached_tokens", "completion_tokens")


def _judgment_columns(votes) -> list:
    """A judgment's fields as `JudgmentRow` names them (token counts as stored: NULL is unknown), and whether it is
    current."""
    return [
        Judgment.pair_id,
        is_current().label("current"),
        Judgment.id,
        Judgment.judge,
        Judgment.status,
        Judgment.score,
        Judgment.max_score,
        Judgment.normalized_score,
        *(getattr(Judgment, name) for name in _TOKEN_COUNTS),
        func.coalesce(Judgment.cached, False).label("cached"),
        func.coalesce(Judgment.batch, False).label("batch"),
        func.coalesce(votes.c.right, 0).label("votes_right"),
        func.coalesce(votes.c.wrong, 0).label("votes_wrong"),
        Judgment.model,
        Judgment.prompt_version,
        Judgment.confirmation_status,
        Judgment.confirmation_score,
    ]


def report_channel():
    """A pair's channel as the reports group it: its Slack channel, else (an ingested exchange that happened in no
    channel relmon reads) its bot's key, `bot:<name>` (`store.bot_groups`): the one place the reports learn where an
    ingested exchange belongs."""
    return func.coalesce(Pair.channel_id, literal(bot_groups.PREFIX, String) + _first_bot())


def _first_bot():
    return select(Exchange.bot).where(Exchange.pair_id == Pair.id).order_by(Exchange.id).limit(1).scalar_subquery()


def period_pairs(start: datetime, end: datetime, channel: str | None = None) -> Select:
    """The pairs created in [start, end), in id order, with their outcome window's state (no texts); the channel
    (`report_channel`'s) and the bot are made of the pair's Slack channel, its first exchange's bot and its Slack bot
    ID in `_pair_row`: the exchange is looked up once per pair, not once for each."""
    return (
        select(
            Pair.id,
            Pair.channel_id,
            _first_bot().label("exchange_bot"),
            Pair.answer_bot_id,
            Pair.created_at,
            Pair.status,
            Pair.source,
            Pair.channel_is_private,
            Pair.answer_ts,
            Pair.thread_ts,
            Pair.question_ts,
            Pair.inclusion_probability,
            Pair.reference_text.is_not(None).label("has_reference"),
            OutcomeWindow.pair_id.is_not(None).label("watched"),
            OutcomeWindow.closed_at.is_not(None).label("window_closed"),
        )
        .outerjoin(OutcomeWindow, OutcomeWindow.pair_id == Pair.id)
        .where(Pair.created_at >= start, Pair.created_at < end)
        .where(in_report_channel(channel) if channel is not None else true())
        .order_by(Pair.id)
    )


def channel_ids_between(session: Session, start: datetime, end: datetime) -> set[str]:
    """The channels with a pair created in [start, end), and the keys (`report_channel`) of the bots whose exchanges
    in no channel were: two plain reads (the channels' by their index), not a look-up per pair."""
    query = select(Pair.channel_id).where(Pair.created_at >= start, Pair.created_at < end)
    channels = {channel for channel in session.scalars(query.distinct()) if channel}
    bots = (
        select(Exchange.bot)
        .join(Pair, Pair.id == Exchange.pair_id)
        .where(Pair.channel_id.is_(None), Pair.created_at >= start, Pair.created_at < end)
    )
    return channels | {bot_groups.key_of(bot) for bot in session.scalars(bots.distinct())}


def data_version(session: Session) -> str:
    """Changes whenever a pair, a judgment, a vote or an outcome signal is added: a cached view of them is stale."""
    newest = [select(func.max(table.id)).scalar_subquery() for table in (Pair, Judgment, Feedback, OutcomeSignal)]
    return ":".join(str(value) for value in session.execute(select(*newest)).one())


def private_channel_ids(session: Session, start: datetime, end: datetime) -> set[str]:
    """The channels with a pair stored as private (or shared) created in [start, end)."""
    query = select(Pair.channel_id).where(
        Pair.channel_is_private.is_(True), Pair.created_at >= start, Pair.created_at < end
    )
    return {channel for channel in session.scalars(query.distinct()) if channel}


def stream_pair_rows(
    session: Session, start: datetime, end: datetime, *, batch: int | None = None, channel: str | None = None
) -> Iterator[PairRow]:
    """Every pair created in [start, end), in id order, with its judgments and their feedback counts (no texts):
    the current ones (an edited answer's latest of each judge) apart from those a later version superseded; and
    its outcome window's state and signals.

    Streamed: the pairs come through a server-side cursor (PostgreSQL; SQLite steps its own), `batch` of them
    (`_CHUNK` by default) at a time with their judgments and signals read by id, so however long the period only
    a batch is held. `channel`: only that report channel's pairs (`store.exchanges.in_report_channel`)."""
    pairs = session.execute(period_pairs(start, end, channel).execution_options(yield_per=batch or _CHUNK))
    signals_of, judgments_of = _detail_statements()
    for chunk in pairs.partitions():
        of_chunk = {"ids": [row.id for row in chunk], "first": chunk[0].id, "last": chunk[-1].id}
        signals: dict[int, list[str]] = defaultdict(list)
        for pair_id, name in session.execute(signals_of, of_chunk):
            signals[pair_id].append(name)
        judgments: dict[tuple[int, bool], list[JudgmentRow]] = defaultdict(list)
        for found in session.execute(judgments_of, of_chunk):
            fields = dict(found._mapping)
            judgments[(fields.pop("pair_id"), bool(fields.pop("current")))].append(JudgmentRow(**fields))
        for row in chunk:
            yield _pair_row(row, judgments, signals)


def _detail_statements() -> tuple[Select, Select]:
    """The outcome signals and the judgments (with their votes and whether current) of a batch of pairs, the ids
    bound at execution. Built once per stream: statements built per batch are garbage in reference cycles, which
    would pile up between the collector's full passes as the batches go by.

    The batch's id range beside its ids: PostgreSQL without statistics yet (a backfill's history just written)
    guesses 500 ids match most of the table and scans it whole for every batch; the range it reads by index."""
    ids, first, last = bindparam("ids", expanding=True), bindparam("first"), bindparam("last")

    def of_batch(column):
        return column.in_(ids) & column.between(first, last)

    signals = select(OutcomeSignal.pair_id, OutcomeSignal.name).where(of_batch(OutcomeSignal.pair_id))
    votes = (  # the votes on these pairs' judgments only: a batch's work does not grow with the table
        select(
            Feedback.judgment_id,
            func.sum(case((Feedback.vote == "right", 1), else_=0)).label("right"),
            func.sum(case((Feedback.vote == "wrong", 1), else_=0)).label("wrong"),
        )
        .where(Feedback.judgment_id.in_(select(Judgment.id).where(of_batch(Judgment.pair_id))))
        .group_by(Feedback.judgment_id)
        .subquery()
    )
    judgments = (
        select(*_judgment_columns(votes))
        .outerjoin(votes, votes.c.judgment_id == Judgment.id)
        .where(of_batch(Judgment.pair_id))
        .order_by(Judgment.id)
    )
    return signals.order_by(OutcomeSignal.id), judgments


def _pair_row(row, judgments: dict[tuple[int, bool], list[JudgmentRow]], signals: dict[int, list[str]]) -> PairRow:
    fields = row._asdict()
    watched = fields.pop("watched")
    exchange_bot, slack_bot = fields.pop("exchange_bot"), fields.pop("answer_bot_id")
    channel = fields.pop("channel_id")
    if channel is None and exchange_bot is not None:  # as `report_channel` in SQL
        channel = bot_groups.key_of(exchange_bot)
    return PairRow(
        **fields
        | {
            "channel_id": channel,
            "bot": exchange_bot or slack_bot or None,
            "created_at": _aware(row.created_at),
            "channel_is_private": bool(row.channel_is_private),
            "has_reference": bool(row.has_reference),
            "window_closed": bool(row.window_closed) if watched else None,
        },
        judgments=tuple(judgments.get((row.id, True), ())),
        superseded=tuple(judgments.get((row.id, False), ())),
        signals=tuple(signals.get(row.id, ())),
    )


def pair_texts(session: Session, pair_ids: Iterable[int]) -> dict[int, tuple[str | None, str | None]]:
    """Question and answer texts of a few pairs (the worst answers a digest may quote)."""
    ids = sorted(set(pair_ids))
    texts: dict[int, tuple[str | None, str | None]] = {}
    for chunk in _chunks(ids):
        for row in session.execute(
            select(Pair.id, Pair.question_text, Pair.answer_text).where(Pair.id.in_(chunk))
        ).all():
            texts[row.id] = (row.question_text, row.answer_text)
    return texts


def prompt_numbers(session: Session, judges: Iterable[str]) -> dict[str, dict[str, int]]:
    """Each of these judges' prompt versions numbered in the order they first judged (1 the oldest the store still
    holds), so the digest says "v3" rather than a hash. Read only for judges whose version changed: a group-by
    over their judgments."""
    names = sorted(set(judges))
    if not names:
        return {}
    query = (
        select(Judgment.judge, Judgment.prompt_version, func.min(Judgment.created_at).label("first"))
        .where(Judgment.judge.in_(names), Judgment.prompt_version.is_not(None))
        .group_by(Judgment.judge, Judgment.prompt_version)
    )
    numbers: dict[str, dict[str, int]] = defaultdict(dict)
    for judge, version, _first in sorted(session.execute(query), key=lambda row: (row.judge, row.first, row[1])):
        numbers[judge][version] = len(numbers[judge]) + 1
    return dict(numbers)
