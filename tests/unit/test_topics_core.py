"""The topics' pure core: failure reasons, clustering with outliers capped, figures and ranking, stable names,
knowledge gaps and their drafts, and too few questions."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import numpy as np
import pytest

from tests.topics_corpus import FAILING_TOPIC, START, corpus, corpus_questions
from topics.build import KnownTopic, build_topics, named
from topics.clustering import cluster
from topics.figures import RELIABLE_QUESTIONS, figures_of
from topics.gaps import drafts
from topics.local_embeddings import local_vectors
from topics.naming import keyword_names, naming_messages, parse_name
from topics.questions import (
    ESCALATION,
    LOW_SCORE,
    MISSED_FAILURE,
    NEGATIVE_REACTION,
    NO_DOCUMENT,
    REASK,
    CurrentJudgment,
    Question,
    failure_reasons,
    resolution,
)

END = START + timedelta(days=7)


def _build(questions, vectors, **extra):
    return build_topics(questions, vectors, start=START, end=END, now=END, embedding="local TF-IDF + SVD", **extra)


THRESHOLDS = {"relevancy": 2, "grounded": 2}
HIGH = CurrentJudgment("relevancy", "ok", 4)


def test_a_low_score_is_a_failure_reason():
    assert failure_reasons([CurrentJudgment("relevancy", "ok", 1)], [], THRESHOLDS) == (LOW_SCORE,)


def test_a_low_score_the_second_opinion_disputes_is_no_failure_reason():
    disputed = CurrentJudgment("relevancy", "ok", 1, confirmation_status="disputed")
    assert failure_reasons([disputed], [], THRESHOLDS) == ()


def test_a_grounded_null_is_a_missing_document():
    assert failure_reasons([CurrentJudgment("grounded", "null")], [], THRESHOLDS) == (NO_DOCUMENT,)


def test_a_confirmed_failure_after_a_high_score_is_a_missed_failure_with_its_signals():
    reasons = failure_reasons([HIGH], [REASK, ESCALATION, "thanked"], THRESHOLDS)
    assert reasons == (MISSED_FAILURE, REASK, ESCALATION)


def test_an_unconfirmed_failure_signal_is_a_reason_of_its_own():
    assert failure_reasons([HIGH], [NEGATIVE_REACTION], THRESHOLDS) == (NEGATIVE_REACTION,)


def test_a_resolved_well_scored_answer_has_no_failure_reason():
    assert failure_reasons([HIGH], ["resolved"], THRESHOLDS) == ()


def test_resolution_is_decided_only_once_the_window_closed():
    assert resolution(["resolved"], True) is True
    assert resolution([REASK], True) is False
    assert resolution(["resolved"], False) is None


@pytest.fixture(scope="module")
def corpus_report():
    questions = corpus_questions()
    return _build(questions, local_vectors([q.text for q in questions]))


def test_the_corpus_groups_into_its_topics(corpus_report):
    assert len(corpus_report.topics) >= 8
    assert 0 < corpus_report.left_out <= corpus_report.questions // 2
    assert sum(t.figures.questions for t in corpus_report.topics) + corpus_report.left_out == corpus_report.questions


def test_the_planted_failing_topic_ranks_first(corpus_report):
    labels = {row_index + 1: row["topic"] for row_index, row in enumerate(corpus())}
    first = corpus_report.topics[0]
    assert Counter(labels[q.pair_id] for q in first.questions).most_common(1)[0][0] == FAILING_TOPIC


def test_topics_rank_by_their_failed_questions(corpus_report):
    failed = [t.figures.failed for t in corpus_report.topics]
    assert failed == sorted(failed, reverse=True)


def test_the_first_topic_has_its_failure_figures(corpus_report):
    first = corpus_report.topics[0]
    assert first.figures.failed > 0 and first.figures.resolution_rate is not None


def test_the_first_topic_has_its_knowledge_gaps(corpus_report):
    first = corpus_report.topics[0]
    assert first.gaps and first.gaps[0].answer and first.gaps[0].asked >= 1


def test_outliers_never_exceed_half_of_the_questions():
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(200, 40)).astype(np.float32)  # nothing to group: HDBSCAN leaves most out
    blob = rng.normal(size=(1, 40)) + rng.normal(scale=0.02, size=(30, 40))
    clustering = cluster(np.vstack([noise, blob]).astype(np.float32))
    assert clustering.count >= 1
    assert clustering.outliers <= (200 + 30) // 2


def test_a_week_with_too_few_questions_says_so_instead_of_inventing_topics():
    questions = corpus_questions()[:12]
    report = _build(questions, local_vectors([q.text for q in questions]))
    assert report.too_few and report.topics == ()
    assert report.left_out == 12
    assert "too few to group" in report.notes[-1]


def test_the_change_against_the_week_before():
    questions = corpus_questions()
    vectors = local_vectors([q.text for q in questions])
    half = len(questions) // 2
    report = _build(questions, vectors, previous=questions[:half], previous_vectors=vectors[:half])
    topic = report.topics[0]
    assert topic.previous is not None and 0 < topic.previous.questions < topic.figures.questions
    # A week before without a question has nothing to compare with: no "+3 vs the week before" from 0.
    empty = _build(questions, vectors, previous=[], previous_vectors=vectors[:0])
    assert all(topic.previous is None for topic in empty.topics)
    assert _build(questions, vectors).topics[0].previous is None


def test_figures():
    questions = corpus_questions()
    figures = figures_of([q for q in questions if q.failed])
    assert figures.resolution_rate == 0.0 and figures.mean_relevancy == 1.0


@pytest.fixture(scope="module")
def continued_report():
    """The corpus built again with its first topic known from an earlier build, as "k-refunds"."""
    questions = corpus_questions()
    vectors = local_vectors([q.text for q in questions])
    first = _build(questions, vectors)
    top = named(first.topics[0], "k-refunds", "Refunds for annual plans")
    index = {q.pair_id: i for i, q in enumerate(questions)}
    anchors = vectors[[index[pair_id] for pair_id in top.anchors]]
    return _build(questions, vectors, known=[KnownTopic("k-refunds", "Refunds for annual plans", anchors)])


def test_a_continuing_topic_keeps_its_identity(continued_report):
    assert continued_report.topics[0].key == "k-refunds"
    assert continued_report.topics[0].name == "Refunds for annual plans"


def test_a_topic_matching_no_known_one_has_no_key(continued_report):
    assert [t.key for t in continued_report.topics[1:]] == [None] * (len(continued_report.topics) - 1)


def test_gaps_read_as_draft_knowledge_base_entries():
    questions = corpus_questions()
    report = _build(questions, local_vectors([q.text for q in questions]))
    topic = named(report.topics[0], "k", "Refunds for annual plans")
    text = drafts(topic.gaps)
    assert text.startswith("# Knowledge gaps")
    assert "## " in text and "refunded pro rata" in text and "Topic: Refunds for annual plans" in text
    no_document = Question(1, "C1", "1.0", "Where is the SLA document?", START, failures=(NO_DOCUMENT,))
    assert "No document answers this yet" in drafts([type(topic.gaps[0])("no_document", "SLA", no_document, None, 2)])


def test_naming_prompt_puts_the_constant_part_first():
    one, two = naming_messages(["a?", "b?"]), naming_messages(["c?"])
    assert one[0] == two[0] and one[1] != two[1]


def test_names_are_parsed_from_the_reply():
    assert parse_name('"Refunds for annual plans."\n') == "Refunds for annual plans"
    assert parse_name("Name: SSO login") == "SSO login"
    assert parse_name("  \n") is None


def test_keyword_names():
    names = keyword_names([["refund my annual plan", "annual refund"], ["reset password", "password email"]])
    assert names[0].lower().startswith(("annual", "refund")) and "password" in names[1].lower()


@pytest.mark.parametrize("texts", [[], ["the", "a"], ["🙂"]])
def test_the_local_embedding_takes_texts_without_words(texts):
    assert local_vectors(texts).shape[0] == len(texts)


def test_a_week_grouped_below_the_reliable_size_says_its_topics_are_a_first_cut(corpus_report):
    # The corpus (342 questions) is above the measured size: no such note. Its first 120 are grouped, and say so.
    assert not any("first cut" in note for note in corpus_report.notes)
    questions = corpus_questions()[:120]
    small = _build(questions, local_vectors([q.text for q in questions]))
    assert small.topics and RELIABLE_QUESTIONS > 120
    assert f"120 questions in this period: topics are a first cut below about {RELIABLE_QUESTIONS}" in small.notes[-1]
