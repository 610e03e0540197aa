"""The labelled corpus of support questions (tests/data/topics_corpus.jsonl): 10 known topics of paraphrased
questions and a few outliers (topic null), for the topics' quality tests and bench."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from topics.questions import HUMAN_TAKEOVER, LOW_SCORE, REASK, Question

CORPUS = Path(__file__).parent / "data" / "topics_corpus.jsonl"
FAILING_TOPIC = "refunds_annual"  # planted: most of its questions failed
START = datetime(2026, 11, 23, tzinfo=UTC)


def corpus() -> list[dict]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


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
