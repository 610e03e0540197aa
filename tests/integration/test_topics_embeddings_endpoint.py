"""Embeddings from an endpoint of their own, through the real `relmon` CLI (in process) and a real database: two fake
OpenAI-compatible servers, the judge's (which names the topics) and the embeddings' (RELMON_EMBEDDING_BASE_URL, its
own key RELMON_EMBEDDING_API_KEY). The judge's endpoint gets no embeddings call; the other gets them all, with its
key and within the batch size. A dead or failing embeddings endpoint falls back to the local keyword vectors once,
said once in the output and once in the log. And `relmon digest --dry-run` with no topics stored groups them now."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from store.db import Database
from tests import relmon_cli
from tests.fakes.openai_server import FakeOpenAI
from tests.services import free_port
from tests.topics_corpus import corpus_questions, store_questions

cli = relmon_cli.cli

JUDGE_KEY = "sk-judge-0123456789"
EMBED_KEY = "sk-embed-9876543210"
SINCE = ["--since", "2026-11-23"]  # the corpus's week starts then
FALLBACK = "Grouped with the local embedding (local TF-IDF + SVD)"


@pytest.fixture
def judge() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=JUDGE_KEY) as fake:
        yield fake


@pytest.fixture
def embedder() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=EMBED_KEY) as fake:
        yield fake


def env(db_url: str, judge: FakeOpenAI, embeddings_url: str, **extra: str) -> dict[str, str]:
    return {
        "base_url": judge.base_url,
        "DATABASE_URL": db_url,
        "OPENAI_API_KEY": JUDGE_KEY,
        "RELMON_EMBEDDING_BASE_URL": embeddings_url,
        "RELMON_EMBEDDING_API_KEY": EMBED_KEY,
        **extra,
    }


def fallbacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "relmon.topics" and "fell back" in r.getMessage()]


def test_topics_embed_at_their_own_endpoint_with_its_key(cli, db_url, database, judge, embedder) -> None:
    store_questions(database, corpus_questions())
    done = cli("topics", *SINCE, "--json", **env(db_url, judge, embedder.base_url, RELMON_EMBEDDING_BATCH_SIZE="100"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["embedding"] == "text-embedding-3-small" and report["notes"] == []
    assert report["questions"] == 342 and report["topics"]
    assert judge.embedding_requests == []  # the judge's endpoint: names only
    assert judge.requests and len(judge.requests) == len(report["topics"])
    sent = embedder.embedding_requests
    assert [len(request["input"]) for request in sent] == [100, 100, 100, 42]
    assert embedder.embedding_authorizations == [f"Bearer {EMBED_KEY}"] * 4
    assert embedder.requests == []  # and no chat completion

    # A second run reads the stored embeddings: neither endpoint is asked to embed again.
    again = cli("topics", *SINCE, "--json", **env(db_url, judge, embedder.base_url))
    assert json.loads(again.stdout)["embedding"] == "text-embedding-3-small"
    assert len(embedder.embedding_requests) == 4 and judge.embedding_requests == []


def test_inputs_are_cut_to_the_max_characters(cli, db_url, database, judge, embedder) -> None:
    long = [replace(q, text=q.text + " and more" * 200) for q in corpus_questions()[:40]]
    store_questions(database, long)
    done = cli("topics", *SINCE, "--json", **env(db_url, judge, embedder.base_url, RELMON_EMBEDDING_MAX_CHARS="300"))
    assert done.returncode == 0, done.stderr
    texts = [text for request in embedder.embedding_requests for text in request["input"]]
    assert len(texts) == 40 and max(map(len, texts)) == 300


def test_a_dead_embeddings_endpoint_falls_back_once(cli, db_url, database, judge, caplog) -> None:
    store_questions(database, corpus_questions())
    dead = f"http://127.0.0.1:{free_port()}/v1"
    caplog.set_level(logging.WARNING, logger="relmon.topics")
    done = cli("topics", *SINCE, "--json", **env(db_url, judge, dead, RELMON_EMBEDDING_BATCH_SIZE="50"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["embedding"] == "local TF-IDF + SVD" and report["topics"]
    assert report["notes"] == [f"{FALLBACK}: embeddings endpoint error (connection error)."]
    assert fallbacks(caplog) == [
        f"topics fell back to the local embedding: embeddings endpoint error (connection error) from {dead} "
        "(text-embedding-3-small)"
    ]
    assert judge.embedding_requests == []  # not asked instead: the fallback is local


def test_an_embeddings_endpoint_answering_503_falls_back_once(cli, db_url, database, judge, embedder, caplog):
    store_questions(database, corpus_questions())
    embedder.set_behavior(api_key=EMBED_KEY, always_status=503)
    caplog.set_level(logging.WARNING, logger="relmon.topics")
    done = cli("topics", *SINCE, "--json", **env(db_url, judge, embedder.base_url))
    report = json.loads(done.stdout)
    assert report["notes"] == [f"{FALLBACK}: embeddings endpoint error (HTTP 503 server error)."]
    assert len(fallbacks(caplog)) == 1
    assert len(embedder.embedding_requests) == 3  # the first batch, with the SDK's two retries; no other batch
    assert judge.embedding_requests == []


def test_without_a_key_of_its_own_the_other_endpoint_is_not_sent_the_judges(cli, db_url, database, judge, embedder):
    store_questions(database, corpus_questions())
    settings = env(db_url, judge, embedder.base_url)
    del settings["RELMON_EMBEDDING_API_KEY"]
    done = cli("topics", *SINCE, "--json", **settings)
    report = json.loads(done.stdout)
    assert report["notes"] == [f"{FALLBACK}: embeddings endpoint error (HTTP 401 access refused)."]
    assert embedder.embedding_authorizations and f"Bearer {JUDGE_KEY}" not in embedder.embedding_authorizations


def this_week(database: Database, now: datetime) -> None:
    """The labelled corpus, asked in the last few days (the dry run's digest covers the seven days to now)."""
    start = now - timedelta(days=3)
    store_questions(database, [replace(q, created_at=start + timedelta(minutes=q.pair_id)) for q in corpus_questions()])


def test_the_first_dry_run_groups_the_weeks_topics(cli, db_url, database, judge, embedder, tmp_path) -> None:
    this_week(database, datetime.now(UTC))
    settings = env(db_url, judge, embedder.base_url, RELMON_DATA_DIR=str(tmp_path / "data"))
    first = cli("digest", "--dry-run", **settings)
    assert first.returncode == 0, first.stderr
    opening = first.stdout.split("== What to fix first ==", 1)
    assert len(opening) == 2 and "\n1. " in opening[1] and "grouped with text-embedding-3-small" in opening[1]
    assert "the topics were grouped now and stored as today's run" in first.stdout
    embedded = len(embedder.embedding_requests)
    assert embedded == 2 and judge.embedding_requests == [] and judge.requests  # embedded there, named here
    # The next dry run reads what the first stored: nothing asked, nothing recorded.
    second = cli("digest", "--dry-run", **settings)
    assert "== What to fix first ==" in second.stdout and "nothing was posted or recorded" in second.stdout
    assert len(embedder.embedding_requests) == embedded


def test_a_dry_run_with_the_embeddings_endpoint_down_says_so(cli, db_url, database, judge, tmp_path) -> None:
    this_week(database, datetime.now(UTC))
    dead = f"http://127.0.0.1:{free_port()}/v1"
    done = cli("digest", "--dry-run", **env(db_url, judge, dead, RELMON_DATA_DIR=str(tmp_path / "data")))
    assert done.returncode == 0, done.stderr
    assert "== What to fix first ==" in done.stdout and "grouped with local TF-IDF + SVD" in done.stdout
    assert done.stdout.count(FALLBACK) == 1 and "embeddings endpoint error (connection error)" in done.stdout
