"""A period's topics from its questions and their vectors: pure (no store, no LLM, `now` passed in).

`build_topics` clusters this period's questions, measures each topic against the same topic's questions of the
week before (placed by the clustering's own rule), carries over the key and name of an earlier topic it continues
(`matching`), ranks the topics by failed questions and lists each failing topic's knowledge gaps. Topics it could
not match have no key and no name yet: the caller names them (`naming`) and stores them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from topics.clustering import MAX_OUTLIER_SHARE, MIN_TOPIC_SIZE, SAMPLE, assign, cluster, unit_rows
from topics.figures import RELIABLE_QUESTIONS, Figures, approximate_note, figures_of, rank_key, too_few_note
from topics.gaps import Gap, gaps_of
from topics.matching import match
from topics.questions import Question
from topics.small_groups import FailedGroup, failed_groups

# Fewer questions than this in a period: too few to group, and the report says so instead of inventing topics.
MIN_QUESTIONS = 30
EXAMPLES = 5
ANCHORS = 20


@dataclass(frozen=True)
class KnownTopic:
    """An earlier topic: its key and name (made from the private channels `name_sources`, `topics.audience`), and
    the vectors of its anchor questions in this run's space."""

    key: str
    name: str
    vectors: np.ndarray
    name_sources: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Topic:
    key: str | None  # None: new this run (the caller gives it one)
    name: str | None  # None: not named yet
    questions: tuple[Question, ...]
    figures: Figures
    previous: Figures | None  # the same topic's questions of the week before (None: no question that week)
    examples: tuple[Question, ...]  # closest to the topic's centre, failed ones first
    anchors: tuple[int, ...]  # pair ids of the questions closest to its centre: how a later run knows it
    gaps: tuple[Gap, ...] = ()
    named_by: str = "history"  # history (an earlier run's name) | llm | keywords | neutral
    name_sources: tuple[str, ...] | None = None  # private channels its name was made from (None: unknown)
    centroid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32), repr=False, compare=False)

    @property
    def channels(self) -> frozenset[str]:
        return frozenset(q.channel_id for q in self.questions if q.channel_id)

    @property
    def private_channels(self) -> frozenset[str]:
        return frozenset(q.channel_id for q in self.questions if q.channel_id and q.private)

    @property
    def only_private(self) -> bool:
        """Every question comes from a private channel: shown only where those channels' people see it."""
        return all(q.private for q in self.questions)


@dataclass(frozen=True)
class TopicsReport:
    start: datetime
    end: datetime
    made_at: datetime
    questions: int  # the period's questions
    left_out: int  # outliers: in no topic (never more than half)
    topics: tuple[Topic, ...]  # ranked: most failed questions first
    embedding: str  # which embedding grouped them ("text-embedding-3-small", "local TF-IDF + SVD")
    notes: tuple[str, ...] = ()  # what a reader should know: too few questions, a fallback and why
    too_few: bool = False
    # Too few questions to group: the gaps of every question, each on its own (a small history still teaches).
    ungrouped_gaps: tuple[Gap, ...] = ()
    needed: int = 0  # too few: how many questions grouping needs
    failed_questions: tuple[Question, ...] = ()  # too few: the period's failed questions, in `failed_groups`' order
    failed_groups: tuple[FailedGroup, ...] = ()  # too few: the failed questions grouped by a keyword they share

    @property
    def gaps(self) -> list[Gap]:
        """Every failing topic's gaps, the most asked first (teammate answers before missing documents)."""
        found = [gap for topic in self.topics for gap in topic.gaps] + list(self.ungrouped_gaps)
        return sorted(found, key=lambda gap: (-gap.asked, gap.kind != "teammate_answer"))


UNGROUPED = "not grouped (too few questions)"  # the topic a gap names when there were too few to group


def too_few_report(report: TopicsReport, current: Sequence[Question], needed: int) -> TopicsReport:
    """`report` for a period of too few questions to group: no topics, a note saying so, and its failed questions
    (and their gaps) each on its own, so a quiet week or a small import still says what to fix."""
    # No vectors for so few (nothing was embedded): each question stands for itself, no paraphrase merged.
    ungrouped = tuple(gaps_of(UNGROUPED, current, np.eye(len(current)))) if current else ()
    # Too few to embed and cluster reliably (bench.topics_size), but never a flat list: a keyword they share.
    groups = failed_groups([q for q in current if q.failed])
    return replace(
        report,
        left_out=len(current),
        notes=(*report.notes, too_few_note(len(current), needed)),
        too_few=True,
        ungrouped_gaps=ungrouped,
        needed=needed,
        failed_questions=tuple(q for group in groups for q in group.questions),
        failed_groups=groups,
    )


def build_topics(
    current: Sequence[Question],
    vectors: np.ndarray,
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    embedding: str,
    previous: Sequence[Question] | None = None,
    previous_vectors: np.ndarray | None = None,
    known: Sequence[KnownTopic] = (),
    notes: Sequence[str] = (),
    min_questions: int = MIN_QUESTIONS,
    smallest: int = MIN_TOPIC_SIZE,
    sample: int = SAMPLE,
    max_outlier_share: float = MAX_OUTLIER_SHARE,
) -> TopicsReport:
    """The topics of `current` (rows of `vectors`, same order). `previous` (the week before, rows of
    `previous_vectors` in the same space) gives each topic's change; None (or empty) when there is no week before to
    compare (each topic's `previous` is then None).
    `known`: earlier topics whose key and name a continuing topic keeps."""
    report = TopicsReport(start, end, now, len(current), 0, (), embedding, tuple(notes))
    if len(current) < max(min_questions, 2):
        return too_few_report(report, current, max(min_questions, 2))
    clustering = cluster(
        vectors,
        smallest=smallest,
        sample=sample,
        max_outlier_share=max_outlier_share,
        failed=np.array([q.failed for q in current], dtype=bool),
    )
    if clustering.count == 0:
        note = f"No topic found among {len(current)} questions: they are too varied to group."
        return replace(report, left_out=len(current), notes=(*report.notes, note))
    earlier_labels = None
    if previous is not None and previous_vectors is not None and len(previous):
        earlier_labels = assign(clustering, clustering.reduction(previous_vectors))
    continues: dict[int, int] = {}
    if known:
        centres = unit_rows(np.stack([clustering.reduction(k.vectors).mean(axis=0) for k in known]))
        continues = match(clustering.centroids, centres)
    topics = []
    for index in range(clustering.count):
        members = np.flatnonzero(clustering.labels == index)
        reduced = clustering.reduced[members]
        closeness = reduced @ clustering.centroids[index]
        order = members[np.argsort(-closeness, kind="stable")]
        questions = tuple(current[i] for i in order)
        figures = figures_of(questions)
        # A week before without a question has nothing to compare with: None, said as such, not a change from 0.
        before = None
        if earlier_labels is not None:
            before = figures_of(previous[i] for i in np.flatnonzero(earlier_labels == index))
        examples = tuple(sorted(questions, key=lambda q: not q.failed)[:EXAMPLES])
        earlier = known[continues[index]] if index in continues else None
        name = earlier.name if earlier else None
        topic = Topic(
            key=earlier.key if earlier else None,
            name=name,
            name_sources=earlier.name_sources if earlier else None,
            questions=questions,
            figures=figures,
            previous=before,
            examples=examples,
            anchors=tuple(q.pair_id for q in questions[:ANCHORS]),
            centroid=clustering.centroids[index],
        )
        if figures.failed:
            ordered = clustering.reduced[order]
            topic = replace(topic, gaps=tuple(gaps_of(name or "", questions, ordered)))
        topics.append(topic)
    topics.sort(key=lambda topic: rank_key(topic.figures))
    notes = report.notes if len(current) >= RELIABLE_QUESTIONS else (*report.notes, approximate_note(len(current)))
    return replace(report, left_out=clustering.outliers, topics=tuple(topics), notes=notes)


def named(topic: Topic, key: str, name: str, named_by: str = "history", sources: tuple[str, ...] | None = ()) -> Topic:
    """The topic with its key and name, made from the private channels `sources` (its gaps carry the name too)."""
    gaps = tuple(replace(gap, topic=name) for gap in topic.gaps)
    return replace(topic, key=key, name=name, gaps=gaps, named_by=named_by, name_sources=sources)
