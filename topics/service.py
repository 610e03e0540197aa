"""The topics of a period, read from the store and written back: the adapter around `topics.build`.

Loads the period's questions (and the week before's) once, gets their vectors (`topics.vectors`: stored
embeddings, the missing ones asked of the embeddings endpoint a batch at a time and stored; or the local fallback,
and the report says which and why), builds the topics, names the new ones
(`topics.naming_run`: the judge LLM, its name checked, else keywords) only from questions every viewer of where the
run is shown may read (`topics.audience`), and writes once: the topics' names with the private channels they were
made from, and anchors (the cache), each pair's topic, the run's figures when it is a stored run, and the LLM
spend. Every embedding or naming call is paid from the daily budget first (`store.usage.claim_llm_call`). Nothing
here alerts.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

import numpy as np

from capture.resolution import AnswerSignals, judged_failed, resolution_of
from judges import LLMClient
from judges.names import RELEVANCY
from store import sampling
from store import topics as rows
from store.db import Database
from store.models import ANSWER_SOURCES, PairStatus
from store.rules import ChannelRules
from store.settings import Settings
from store.signals import HUMAN_TAKEOVER
from store.stats_queries import PairRow
from store.usage import claim_llm_call
from topics.audience import Place
from topics.build import KnownTopic, TopicsReport, build_topics, too_few_report
from topics.embeddings import EmbeddingClient
from topics.figures import Figures
from topics.naming_run import BudgetSpent, NamingDeps, Spend, name_topics
from topics.questions import CurrentJudgment, Question, failure_reasons, resolution
from topics.vectors import VectorSource

log = logging.getLogger("relmon.topics")

QUESTION_SOURCES = ANSWER_SOURCES  # on-demand /judge requests are not the bot's traffic
_NOT_QUESTIONS = frozenset({PairStatus.MERGED, PairStatus.DELETED, PairStatus.NO_QUESTION, PairStatus.EMPTY})


@dataclass(frozen=True)
class TopicsQuery:
    start: datetime
    end: datetime
    now: datetime
    previous_start: datetime | None = None  # compare with [previous_start, start); None: no comparison
    channel: str | None = None  # only this channel's questions
    run_key: str | None = None  # store the run under this key (the digest's week, App Home's day)


@dataclass
class TopicsDeps:
    db: Database
    settings: Settings
    rules: ChannelRules
    llm: Callable[[], LLMClient] | None = None  # the judge model's client, for names (None: keyword names)
    embedder: Callable[[], EmbeddingClient] | None = None  # None: from the settings
    place: Place | None = None  # where this run is shown (the digest's channel, App Home): whom names are made for


@dataclass
class _Run:
    """What one run spent and must say."""

    notes: list[str] = field(default_factory=list)
    embedding: Spend = field(default_factory=Spend)
    naming: Spend = field(default_factory=Spend)


def question_of(
    row: PairRow,
    text: rows.QuestionText,
    thresholds: dict[str, float],
    *,
    now: datetime | None = None,
    window: timedelta = timedelta(0),
) -> Question | None:
    """A stored pair as a topics question (None: not a question of the bot's traffic); its resolution tier as of
    `now` with `window` (none without `now`)."""
    if row.source not in QUESTION_SOURCES or row.status in _NOT_QUESTIONS or not (text.question or "").strip():
        return None
    verdicts = [CurrentJudgment(j.judge, j.status, j.score, j.confirmation_status) for j in row.judgments]
    failures = failure_reasons(verdicts, row.signals, thresholds)
    relevancy = next((j.score for j in row.judgments if j.judge == RELEVANCY and j.status == "ok"), None)
    teammate = text.reference if HUMAN_TAKEOVER in row.signals and failures else None
    tier = None
    if now is not None and row.window_closed is not None:
        failed_score = judged_failed(row.judgments, thresholds)
        answer = AnswerSignals(row.created_at, row.signals, judged_failed=failed_score, ended=row.window_closed)
        tier = resolution_of(answer, now, window).tier
    # Sampling: a skipped answer's failure is not known (no verdict); a judged one counts 1/π in the failure rate.
    skipped = row.status == PairStatus.SKIPPED_SAMPLING
    probability = sampling.probability_of(row.signals, row.inclusion_probability)
    weight = None if skipped else 1.0 / (probability or 1.0)
    return Question(
        pair_id=row.id,
        channel_id=row.channel_id,
        ts=text.question_ts or row.answer_ts,
        text=text.question or "",
        created_at=row.created_at,
        private=row.channel_is_private,
        failures=failures,
        resolved=resolution(row.signals, row.window_closed),
        relevancy=relevancy,
        teammate_answer=teammate,
        tier=tier,
        weight=weight,
    )


def load_questions(deps: TopicsDeps, start: datetime, end: datetime, channel: str | None) -> list[Question]:
    settings, rules = deps.settings, deps.rules
    window = timedelta(seconds=settings.outcome_window_seconds)
    found = []
    with deps.db.session() as session:  # a transaction: PostgreSQL streams through a server-side cursor
        for row, text in rows.stream_questions(session, start, end):
            if channel is not None and row.channel_id != channel:
                continue
            rule = rules.for_channel(row.channel_id, settings)
            if not rule.watch:
                continue
            question = question_of(row, text, rule.thresholds, now=end, window=window)
            if question is not None:
                found.append(question)
    return found


def compute_topics(deps: TopicsDeps, query: TopicsQuery) -> TopicsReport:
    """The topics of [query.start, query.end), written back (see the module's docstring)."""
    run = _Run()
    current = load_questions(deps, query.start, query.end, query.channel)
    previous = None
    if query.previous_start is not None:
        previous = load_questions(deps, query.previous_start, query.start, query.channel)
    with deps.db.reading() as session:
        known = rows.known_topics(session)
    anchor_texts = _anchor_texts(deps, known, {q.pair_id for q in [*current, *(previous or [])]})
    anchors = [Question(pid, None, None, text, query.now) for pid, text in anchor_texts.items()]
    everyone = [*current, *(previous or []), *anchors]
    enough = len(current) >= max(2, deps.settings.topics_min_questions)  # else nothing to embed: too few to group
    source = VectorSource(deps.db, deps.settings, deps.embedder, lambda: _charge(deps, query.now))
    vectors, embedding = source.vectors(everyone, query.now, run.embedding, run.notes) if enough else (None, "none")
    if vectors is None:
        vectors = np.zeros((len(everyone), 1), dtype=np.float32)
    index = {q.pair_id: i for i, q in enumerate(everyone)}
    n, m = len(current), len(previous or [])
    known_topics = [
        KnownTopic(
            t.key,
            t.name,
            vectors[[index[p] for p in t.anchors if p in index]],
            tuple(t.name_sources) if t.name_sources is not None else None,
        )
        for t in known
        if any(p in index for p in t.anchors)
    ]
    report = build_topics(
        current,
        vectors[:n],
        start=query.start,
        end=query.end,
        now=query.now,
        embedding=embedding,
        previous=previous,
        previous_vectors=vectors[n : n + m] if previous is not None else None,
        known=known_topics,
        min_questions=deps.settings.topics_min_questions,
        smallest=deps.settings.topics_min_size,
    )
    topics = name_topics(
        report.topics,
        NamingDeps(deps.llm, lambda: _charge(deps, query.now), deps.place),
        run.naming,
        run.notes,
        {t.key: t.named_by for t in known},
    )
    report = replace(report, topics=topics, notes=(*run.notes, *report.notes))
    _store(deps, report, query, run)
    return report


def too_few_to_group(deps: TopicsDeps, query: TopicsQuery) -> TopicsReport | None:
    """The period's report when it has too few questions to group (None: enough), read only: nothing is embedded,
    named or written (the digest's dry run)."""
    current = load_questions(deps, query.start, query.end, query.channel)
    needed = max(2, deps.settings.topics_min_questions)
    if len(current) >= needed:
        return None
    return too_few_report(TopicsReport(query.start, query.end, query.now, len(current), 0, (), "none"), current, needed)


def _anchor_texts(deps: TopicsDeps, known, have: set[int]) -> dict[int, str]:
    wanted = [p for t in known for p in t.anchors if p not in have]
    if not wanted:
        return {}
    with deps.db.reading() as session:
        texts = rows.texts_of(session, wanted)
    return {p: t.question for p, t in texts.items() if t.question}


def _charge(deps: TopicsDeps, now: datetime) -> None:
    """One LLM call paid from today's budget (UTC), or BudgetSpent."""
    with deps.db.session() as session:
        if not claim_llm_call(session, now.astimezone(UTC).date(), deps.settings.daily_budget):
            raise BudgetSpent


def _store(deps: TopicsDeps, report: TopicsReport, query: TopicsQuery, run: _Run) -> None:
    settings = deps.settings
    with deps.db.session() as session:
        rows.save_topics(
            session,
            [
                {
                    "key": t.key,
                    "name": t.name,
                    "named_by": t.named_by,
                    "name_sources": list(t.name_sources) if t.name_sources is not None else None,
                    "anchors": list(t.anchors),
                }
                for t in report.topics
            ],
        )
        rows.save_pair_topics(session, {q.pair_id: t.key for t in report.topics for q in t.questions})
        if run.embedding.calls:
            spent = run.embedding
            rows.record_spend(
                session, "embedding", settings.embedding_model, spent.calls, spent.prompt, 0, 0, query.now
            )
        if run.naming.calls:
            spent = run.naming
            rows.record_spend(
                session,
                "naming",
                settings.judge_model,
                spent.calls,
                spent.prompt,
                spent.completion,
                spent.cached,
                query.now,
            )
        if query.run_key:
            rows.save_run(session, run_record(report, query.run_key), period_records(report))


def run_record(report: TopicsReport, run_key: str) -> dict:
    return {
        "run_key": run_key,
        "start": report.start,
        "end": report.end,
        "questions": report.questions,
        "left_out": report.left_out,
        "embedding": report.embedding,
        "notes": list(report.notes),
    }


def _weights_json(figures: Figures | None) -> dict | None:
    return dict(figures.rate_weights) if figures is not None and figures.rate_weights is not None else None


def period_records(report: TopicsReport) -> list[dict]:
    return [
        {
            "topic_key": t.key,
            "rank": rank,
            "name": t.name,
            "name_sources": list(t.name_sources) if t.name_sources is not None else None,
            "questions": t.figures.questions,
            "failed": t.figures.failed,
            "resolved": t.figures.resolved,
            "decided": t.figures.decided,
            "tiers": dict(t.figures.tiers),
            "mean_relevancy": t.figures.mean_relevancy,
            "previous_questions": t.previous.questions if t.previous else None,
            "previous_failed": t.previous.failed if t.previous else None,
            "rate_weights": _weights_json(t.figures),
            "previous_rate_weights": _weights_json(t.previous),
            "channels": sorted(t.channels),
            "private_channels": sorted(t.private_channels),
            "only_private": t.only_private,
            "examples": [q.pair_id for q in t.examples],
        }
        for rank, t in enumerate(report.topics, start=1)
    ]
