"""The labelled corpus of support questions (tests/data/topics_corpus.jsonl): 10 known topics of paraphrased
questions and a few outliers (topic null), for the topics' quality tests and bench."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from topics.questions import HUMAN_TAKEOVER, LOW_SCORE, REASK, Question

CORPUS = Path(__file__).parent / "data" / "topics_corpus.jsonl"
# The quality tests' corpus (tests/make_labelled_corpus.py writes it): 508 questions, 13 topics, several styles, and
# whether each failed; its small `sso_login` topic fails most.
LABELLED = Path(__file__).parent / "data" / "topics_labelled.jsonl"
LABELLED_FAILING = "sso_login"
FAILING_TOPIC = "refunds_annual"  # planted: most of its questions failed
START = datetime(2026, 11, 23, tzinfo=UTC)


def corpus(path: Path = CORPUS) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def labelled() -> list[dict]:
    return corpus(LABELLED)


def labelled_questions(rows: list[dict], channel: str = "C0SUPPORT") -> list[Question]:
    """Rows of the labelled corpus as a week's questions, failed as each row says (a re-ask and a takeover)."""
    return [
        Question(
            pair_id=index + 1,
            channel_id=channel,
            ts=f"{1764000000 + index}.000100",
            text=row["question"],
            created_at=START + timedelta(minutes=index),
            failures=(LOW_SCORE, REASK, HUMAN_TAKEOVER) if row["failed"] else (),
            resolved=not row["failed"],
            relevancy=1.0 if row["failed"] else 4.0,
        )
        for index, row in enumerate(rows)
    ]


def corpus_questions(failing: str = FAILING_TOPIC, channel: str = "C0SUPPORT") -> list[Question]:
    """The corpus as a week's questions: the planted topic's questions mostly failed (a teammate answered three
    in four), the others failed now and then."""
    questions = []
    for index, row in enumerate(corpus()):
        failed = (row["topic"] == failing and index % 5 != 0) or index % 17 == 0
        teammate = f"Annual plans are refunded pro rata within 30 days (case {index % 3})." if failed else None
        questions.append(
            Question(
                pair_id=index + 1,
                channel_id=channel,
                ts=f"{1764000000 + index}.000100",
                text=row["question"],
                created_at=START + timedelta(minutes=index),
                failures=(LOW_SCORE, REASK, HUMAN_TAKEOVER) if failed else (),
                resolved=not failed,
                relevancy=1.0 if failed else 4.0,
                teammate_answer=teammate if row["topic"] == failing and index % 4 else None,
            )
        )
    return questions


def store_questions(database, questions: list[Question], *, private_channels: frozenset[str] = frozenset()) -> None:
    """The questions as captured pairs with what their answers became: a relevancy judgment (1 when failed, else
    4), closed outcome windows (resolved, or a re-ask with a takeover whose reply is the reference). Bulk inserts,
    so a bench can store tens of thousands."""
    from sqlalchemy import insert

    from store.models import Judgment, OutcomeSignal, OutcomeWindow, Pair, PairStatus

    pairs, judgments, windows, signals = [], [], [], []
    for q in questions:
        pairs.append(
            {
                "id": q.pair_id,
                "source": "capture",
                "channel_id": q.channel_id,
                "channel_is_private": q.channel_id in private_channels,
                "answer_ts": q.ts,
                "question_ts": q.ts,
                "thread_ts": q.ts,
                "question_text": q.text,
                "answer_text": "An answer.",
                "reference_text": q.teammate_answer,
                "status": PairStatus.JUDGED,
                "version": 1,
                "created_at": q.created_at,
                "updated_at": q.created_at,
            }
        )
        score = 1.0 if q.failed else 4.0
        judgments.append(
            {
                "pair_id": q.pair_id,
                "judge": "relevancy",
                "pair_version": 1,
                "status": "ok",
                "score": score,
                "max_score": 4.0,
                "normalized_score": score / 4,
                "created_at": q.created_at,
            }
        )
        windows.append(
            {
                "pair_id": q.pair_id,
                "channel_id": q.channel_id,
                "answer_ts": q.ts,
                "thread_key": q.ts,
                "closes_at": q.created_at,
                "closed_at": q.created_at,
            }
        )
        names = ["reask", "human_takeover"] if q.failed else ["resolved"]
        signals += [{"pair_id": q.pair_id, "name": name, "created_at": q.created_at} for name in names]
    with database.session() as session:
        for model, rows in ((Pair, pairs), (Judgment, judgments), (OutcomeWindow, windows), (OutcomeSignal, signals)):
            for start in range(0, len(rows), 2000):
                session.execute(insert(model), rows[start : start + 2000])


@dataclass(frozen=True)
class Quality:
    topics: int
    ari: float  # adjusted Rand index over the questions put in a topic, against the known topics
    ari_all: float  # the same over every question, each outlier a group of its own (stricter)
    outliers: float  # share of the questions left out
    first_topic: str | None  # the known topic most of the first-ranked topic's questions belong to


def quality(vectors, embedding: str = "test", rows: list[dict] | None = None, **build) -> Quality:
    """How well the topics of the corpus (rows of `vectors`, in corpus order) match its labels: the older corpus
    with its planted failures, or `rows` of the labelled one (a subsample, say) with theirs."""
    import numpy as np
    from sklearn.metrics import adjusted_rand_score

    from topics.build import build_topics

    questions = corpus_questions() if rows is None else labelled_questions(rows)
    rows = corpus() if rows is None else rows
    end = START + timedelta(days=7)
    report = build_topics(questions, vectors, start=START, end=end, now=end, embedding=embedding, **build)
    topic_of = {q.pair_id: rank for rank, topic in enumerate(report.topics) for q in topic.questions}
    truth = np.array([row["topic"] or f"outlier-{i}" for i, row in enumerate(rows)])
    found = np.array([topic_of.get(q.pair_id, -1) for q in questions])
    inside = found >= 0
    singletons = np.where(inside, found, -1 - np.arange(len(found)))
    first = None
    if report.topics:
        labels = Counter(rows[q.pair_id - 1]["topic"] for q in report.topics[0].questions)
        first = labels.most_common(1)[0][0]
    return Quality(
        topics=len(report.topics),
        ari=float(adjusted_rand_score(truth[inside], found[inside])) if inside.any() else 0.0,
        ari_all=float(adjusted_rand_score(truth, singletons)),
        outliers=float((~inside).mean()),
        first_topic=first,
    )
