"""Topics from the store: embeddings from the fake endpoint stored once per pair (and deleted with it), names from
the judge LLM cached and stable across runs, every call paid from the daily budget and recorded for the digest's
cost, the local fallback when the endpoint has no embeddings or the budget is spent, and too few questions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import delete, func, select, update

from judges import LLMClient
from store.golden import topics_of_pairs
from store.models import DailyUsage, Pair
from store.rules import ChannelRules
from store.topic_models import PairTopic, QuestionEmbedding, TopicRecord, TopicSpend
from store.topics import histories
from tests.builders import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.topics_corpus import FAILING_TOPIC, START, corpus, corpus_questions, store_questions
from topics.naming import keyword_names, name_problem
from topics.naming_run import closest_first
from topics.service import TopicsDeps, TopicsQuery, TopicsReport, compute_topics

END = START + timedelta(days=7)
QUERY = TopicsQuery(start=START, end=END, now=END, previous_start=START - timedelta(days=7), run_key="test:week")


@pytest.fixture
def fake_llm():
    with FakeOpenAI() as fake:
        yield fake


def _deps(db_url: str, database, fake: FakeOpenAI, **overrides) -> TopicsDeps:
    settings = make_settings(**{"database_url": db_url, "openai_base_url": fake.base_url, **overrides})
    return TopicsDeps(
        database,
        settings,
        ChannelRules(),
        llm=lambda: LLMClient(model=settings.judge_model, base_url=fake.base_url, api_key="sk-test", max_retries=0),
    )


def _count(database, model) -> int:
    with database.session() as session:
        return session.scalar(select(func.count()).select_from(model))


def test_topics_from_the_endpoint_are_paid_for_once_while_their_pairs_last(db_url, database, fake_llm):
    """One scenario, as computing the topics is the slow part: the first run embeds each question and names each
    topic once, paying and recording every call; the next run asks nothing again and keeps the names; a deleted
    pair's embedding and topic go with it."""
    questions = corpus_questions()
    store_questions(database, questions)
    deps = _deps(db_url, database, fake_llm)
    first = compute_topics(deps, QUERY)
    assert first.embedding == "text-embedding-3-small" and not first.too_few
    assert first.notes == ()
    assert _count(database, QuestionEmbedding) == len(questions)
    calls = len(fake_llm.embedding_requests)
    assert calls == 2  # 342 questions, 256 a call
    assert all(request["model"] == "text-embedding-3-small" for request in fake_llm.embedding_requests)
    named = len(fake_llm.requests)
    assert named == len(first.topics) and all(t.named_by == "llm" for t in first.topics)
    assert first.topics[0].name and first.topics[0].key
    labels = {i + 1: row["topic"] for i, row in enumerate(corpus())}
    assert labels[first.topics[0].questions[0].pair_id] == FAILING_TOPIC
    with database.session() as session:
        assert session.scalar(select(DailyUsage.llm_calls)) == calls + named
        spend = {row.kind: row for row in session.scalars(select(TopicSpend))}
    assert spend["embedding"].calls == 2 and spend["embedding"].prompt_tokens > 0
    assert spend["naming"].calls == named and spend["naming"].completion_tokens > 0

    again = compute_topics(deps, QUERY)
    assert len(fake_llm.embedding_requests) == calls and len(fake_llm.requests) == named  # nothing asked again
    assert [(t.key, t.name) for t in again.topics] == [(t.key, t.name) for t in first.topics]
    assert all(t.named_by == "history" for t in again.topics)
    with database.session() as session:  # the run is stored once under its key: a repeat replaces it
        history = histories(session, [first.topics[0].key])[first.topics[0].key]
    assert [(h["run"], h["failed"]) for h in history] == [("test:week", first.topics[0].figures.failed)]

    pair_id = first.topics[0].questions[0].pair_id
    with database.session() as session:  # the topic the golden set gives an item of this question
        assert topics_of_pairs(session, [pair_id]) == {pair_id: first.topics[0].name}
        session.execute(delete(Pair).where(Pair.id == pair_id))
    with database.session() as session:
        assert session.get(QuestionEmbedding, pair_id) is None and session.get(PairTopic, pair_id) is None
        assert topics_of_pairs(session, [pair_id]) == {}


def test_vectors_of_one_model_name_from_another_endpoint_are_not_reused(db_url, database, fake_llm):
    """Stored vectors are kept per model name and endpoint: a team that moves its embeddings to another server
    serving the same model name has its questions embedded again there, never grouped with the old server's."""
    store_questions(database, corpus_questions()[:60])
    compute_topics(_deps(db_url, database, fake_llm), QUERY)
    with FakeOpenAI() as elsewhere:
        compute_topics(_deps(db_url, database, fake_llm, embedding_base_url=elsewhere.base_url), QUERY)
        assert len(elsewhere.embedding_requests) == 1  # 60 questions, all embedded again by the new endpoint
        compute_topics(_deps(db_url, database, fake_llm, embedding_base_url=elsewhere.base_url), QUERY)
        assert len(elsewhere.embedding_requests) == 1  # and kept for it
    with database.session() as session:
        spaces = set(session.scalars(select(QuestionEmbedding.model)))
    assert len(spaces) == 1 and next(iter(spaces)).startswith("text-embedding-3-small@")


def without_embeddings(db_url: str, database, fake_llm: FakeOpenAI) -> TopicsReport:
    """The topics of the corpus from an endpoint that has no embeddings."""
    store_questions(database, corpus_questions())
    fake_llm.set_behavior(embeddings=False)
    return compute_topics(_deps(db_url, database, fake_llm), QUERY)


def test_an_endpoint_without_embeddings_falls_back_to_the_local_embedding(db_url, database, fake_llm):
    report = without_embeddings(db_url, database, fake_llm)
    assert report.embedding == "local TF-IDF + SVD"
    assert len(report.topics) >= 8 and _count(database, QuestionEmbedding) == 0


def test_an_endpoint_without_embeddings_is_named_in_the_notes(db_url, database, fake_llm):
    report = without_embeddings(db_url, database, fake_llm)
    assert (
        report.notes[0]
        == "Grouped with the local embedding (local TF-IDF + SVD): embeddings endpoint error (HTTP 404 not found)."
    )


def with_the_budget_spent(db_url: str, database, fake_llm: FakeOpenAI) -> TopicsReport:
    """The topics of the corpus on a day whose budget is spent."""
    store_questions(database, corpus_questions())
    return compute_topics(_deps(db_url, database, fake_llm, daily_budget=0), QUERY)


def test_a_spent_budget_falls_back_to_the_local_embedding(db_url, database, fake_llm):
    report = with_the_budget_spent(db_url, database, fake_llm)
    assert report.embedding == "local TF-IDF + SVD"
    assert any("daily budget is spent" in note for note in report.notes)
    assert fake_llm.embedding_requests == []


def test_a_spent_budget_names_the_topics_by_their_keywords(db_url, database, fake_llm):
    report = with_the_budget_spent(db_url, database, fake_llm)
    assert fake_llm.requests == []
    assert report.topics and all(t.named_by == "keywords" for t in report.topics)


def test_an_unknown_embedding_model_falls_back(db_url, database, fake_llm):
    store_questions(database, corpus_questions())
    report = compute_topics(_deps(db_url, database, fake_llm, embedding_model="no-such-model"), QUERY)
    assert report.embedding == "local TF-IDF + SVD" and "model_not_found" not in report.notes[0]
    # The kind only: the provider's words ("The model `no-such-model` does not exist") may echo what it was sent.
    assert "HTTP 404 not found" in report.notes[0] and "does not exist" not in report.notes[0]


def test_a_quiet_week_says_it_has_too_few_questions(db_url, database, fake_llm):
    store_questions(database, corpus_questions()[:10])
    report = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    assert report.too_few and report.topics == () and "too few" in report.notes[-1]
    assert fake_llm.requests == [] and fake_llm.embedding_requests == []


def test_names_made_of_keywords_are_asked_of_the_llm_once_it_can_be(db_url, database, fake_llm):
    store_questions(database, corpus_questions())
    spent = compute_topics(_deps(db_url, database, fake_llm, daily_budget=0, embedding_model="local"), QUERY)
    assert spent.topics and all(t.named_by == "keywords" for t in spent.topics)
    later = compute_topics(_deps(db_url, database, fake_llm, embedding_model="local"), QUERY)
    assert [t.key for t in later.topics] == [t.key for t in spent.topics]  # the same topics, continuing
    assert all(t.named_by == "llm" for t in later.topics) and len(fake_llm.requests) == len(later.topics)
    assert [t.name for t in later.topics] != [t.name for t in spent.topics]
    again = compute_topics(_deps(db_url, database, fake_llm, embedding_model="local"), QUERY)
    assert all(t.named_by == "history" for t in again.topics) and len(fake_llm.requests) == len(later.topics)


def test_a_name_failing_the_check_is_asked_again_saying_what_was_wrong(db_url, database, fake_llm):
    store_questions(database, corpus_questions())
    fake_llm.set_behavior(bad_names_first=1, bad_name="A")  # the first topic's first reply: one letter
    report = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    assert report.topics and all(t.named_by == "llm" for t in report.topics) and report.notes == ()
    assert all(name_problem(t.name) is None for t in report.topics)
    naming = fake_llm.requests
    assert len(naming) == len(report.topics) + 1  # one topic asked twice
    again = naming[1]["messages"]
    assert again[:2] == naming[0]["messages"]  # the same beginning: the provider's prompt cache serves it
    assert again[2] == {"role": "assistant", "content": "A"}
    assert again[3]["role"] == "user" and "cannot be used: it is a stop word" in again[3]["content"]
    with database.session() as session:  # the second ask is paid and counted as well
        assert session.scalar(select(DailyUsage.llm_calls)) == len(fake_llm.embedding_requests) + len(naming)
        assert session.scalar(select(TopicSpend.calls).where(TopicSpend.kind == "naming")) == len(naming)


def test_a_name_failing_the_check_twice_gives_the_keyword_name(db_url, database, fake_llm):
    store_questions(database, corpus_questions())
    fake_llm.set_behavior(bad_names_first=2, bad_name="C0SUPPORT1")  # the first topic's both replies: an ID
    report = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    first, *others = report.topics
    keywords = keyword_names([[q.text for q in closest_first(first) if not q.private][:50]])[0]
    assert first.named_by == "keywords" and first.name == keywords and "C0SUPPORT1" not in first.name
    assert others and all(t.named_by == "llm" and name_problem(t.name) is None for t in others)
    assert len(fake_llm.requests) == len(report.topics) + 1
    assert "an ID" in fake_llm.requests[1]["messages"][3]["content"]
    assert report.notes == (
        "1 topic is named by its keywords: the LLM's name for it failed the check twice (2 to 6 words, no IDs).",
    )
    # A later run asks the LLM again for the topic it named by keywords, and keeps its key.
    later = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    assert later.topics[0].key == first.key and later.topics[0].named_by == "llm"


def test_a_stored_name_failing_the_check_is_made_again(db_url, database, fake_llm):
    """A name stored before names were checked (a one-letter name had reached a digest) is not kept."""
    store_questions(database, corpus_questions())
    first = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    with database.session() as session:
        session.execute(update(TopicRecord).where(TopicRecord.key == first.topics[0].key).values(name="A"))
    asked = len(fake_llm.requests)
    again = compute_topics(_deps(db_url, database, fake_llm), QUERY)
    assert again.topics[0].key == first.topics[0].key and again.topics[0].named_by == "llm"
    assert again.topics[0].name == first.topics[0].name and len(fake_llm.requests) == asked + 1
    assert all(t.named_by == "history" for t in again.topics[1:])
    with database.session() as session:
        assert session.get(TopicRecord, first.topics[0].key).name == first.topics[0].name
