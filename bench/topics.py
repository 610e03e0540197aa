"""Topics bench: quality on the labelled corpus, and time and memory at scale.

    python -m bench.topics --quality                   # ARI and outliers: local fallback and fake endpoint
    python -m bench.topics --sizes 5000,20000,50000    # compute_topics with the embeddings already stored

Quality: the corpus (tests/data/topics_corpus.jsonl: 342 support questions in 10 known topics and 22 outliers)
grouped with the local TF-IDF + SVD embedding and with the fake endpoint's (hashed bag of words, 1,536 values,
asked over HTTP); prints the adjusted Rand index over the questions put in a topic and over all of them (each
outlier a group of its own), the share left out, and whether the planted failing topic ranks first.

Scale: for each size, a fresh process stores that many questions (the corpus's, each with a unique order number,
20% failed) with their fake 1,536-value embeddings in a SQLite file; then another fresh process runs
`topics.service.compute_topics` on the week (naming by the fake LLM, in process) and reports its wall time and
its peak RSS (the whole process: Python, numpy, scikit-learn included). Target: 20,000 in < 60 s and < 500 MB on
2 cores.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
import time
from datetime import timedelta
from pathlib import Path

EMBEDDING_MODEL = "text-embedding-3-small"
SUFFIXES = ("", " on my phone", " for my team", " again", " since the update", " for our company account")


def print_quality() -> None:
    import numpy as np

    from tests.fakes.openai_server import FakeOpenAI
    from tests.topics_corpus import FAILING_TOPIC, corpus, quality
    from topics.embeddings import BATCH, EmbeddingClient
    from topics.local_embeddings import NAME, local_vectors

    texts = [row["question"] for row in corpus()]
    with FakeOpenAI() as fake:
        client = EmbeddingClient(EMBEDDING_MODEL, fake.base_url, "sk-bench", max_retries=0)
        endpoint = np.vstack([client.embed(texts[i : i + BATCH])[0] for i in range(0, len(texts), BATCH)])
    print(f"corpus: {len(texts)} questions, 10 known topics, {sum(1 for r in corpus() if r['topic'] is None)} outliers")
    print(f"{'embedding':<40}{'topics':>7}{'ARI':>8}{'ARI all':>9}{'left out':>10}  planted topic first")
    for name, vectors in ((NAME, local_vectors(texts)), (f"fake endpoint ({EMBEDDING_MODEL})", endpoint)):
        q = quality(vectors, name)
        first = "yes" if q.first_topic == FAILING_TOPIC else f"no ({q.first_topic})"
        print(f"{name:<40}{q.topics:>7}{q.ari:>8.3f}{q.ari_all:>9.3f}{q.outliers:>9.1%}  {first}")


def _questions(size: int):
    from tests.topics_corpus import START, corpus_questions
    from topics.questions import Question

    base = corpus_questions()
    out = []
    for i in range(size):
        q = base[i % len(base)]
        failed = i % 5 == 0 or bool(q.failures)
        out.append(
            Question(
                pair_id=i + 1,
                channel_id=f"C{i % 4}",
                ts=f"{1764000000 + i}.{i % 1000000:06d}",
                text=f"{q.text.rstrip('?')}{SUFFIXES[i % len(SUFFIXES)]} (order #{100000 + i})?",
                created_at=START + timedelta(seconds=(i * 7 * 86400) // size),
                failures=q.failures if failed else (),
                resolved=not failed,
                relevancy=1.0 if failed else 4.0,
                teammate_answer=q.teammate_answer,
            )
        )
    return out


def _prepare(url: str, size: int) -> None:
    from sqlalchemy import insert

    from store.db import Database
    from store.topic_models import QuestionEmbedding
    from tests.fakes.openai_embeddings import MODELS, vector
    from tests.topics_corpus import store_questions
    from topics.embeddings import text_sha, to_bytes

    database = Database(url)
    database.migrate()
    questions = _questions(size)
    store_questions(database, questions)
    rows = [
        {
            "pair_id": q.pair_id,
            "model": EMBEDDING_MODEL,
            "text_sha": text_sha(q.text),
            "vector": to_bytes(vector(q.text, MODELS[EMBEDDING_MODEL])),
        }
        for q in questions
    ]
    with database.session() as session:
        for start in range(0, len(rows), 2000):
            session.execute(insert(QuestionEmbedding), rows[start : start + 2000])
    database.dispose()


def _run(url: str, pipe) -> None:
    from judges import LLMClient
    from store.db import Database
    from store.rules import ChannelRules
    from store.settings import Settings
    from tests.fakes.openai_server import FakeOpenAI
    from tests.topics_corpus import START
    from topics.service import TopicsDeps, TopicsQuery, compute_topics

    with FakeOpenAI() as fake:
        settings = Settings(_env_file=None, database_url=url, openai_base_url=fake.base_url, openai_api_key="sk")
        database = Database(url)
        deps = TopicsDeps(
            database,
            settings,
            ChannelRules(),
            llm=lambda: LLMClient(settings.judge_model, base_url=fake.base_url, api_key="sk", max_retries=0),
        )
        end = START + timedelta(days=7)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        report = compute_topics(deps, TopicsQuery(START, end, end, previous_start=START - timedelta(days=7)))
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        database.dispose()
        asked = len(fake.embedding_requests)
    pipe.send((seconds, before / 1024, peak / 1024, len(report.topics), report.left_out, report.embedding, asked))


def print_scale(sizes: list[int]) -> None:
    context = multiprocessing.get_context("spawn")
    print(
        f"{'questions':>9}{'seconds':>9}{'peak RSS MB':>13}{'at start MB':>13}{'topics':>8}{'left out':>10}  embedding"
    )
    for size in sizes:
        with tempfile.TemporaryDirectory() as directory:
            url = f"sqlite:///{Path(directory) / 'topics.sqlite3'}"
            setup = context.Process(target=_prepare, args=(url, size))
            setup.start()
            setup.join()
            receive, send = context.Pipe(duplex=False)
            worker = context.Process(target=_run, args=(url, send))
            worker.start()
            seconds, start_mb, peak_mb, topics, left_out, embedding, asked = receive.recv()
            worker.join()
        note = "" if asked == 0 else f" ({asked} embedding calls: not all were stored)"
        print(
            f"{size:>9,}{seconds:>9.1f}{peak_mb:>13.0f}{start_mb:>13.0f}{topics:>8}{left_out:>10,}  {embedding}{note}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quality", action="store_true", help="ARI and outliers on the labelled corpus")
    parser.add_argument("--sizes", help="comma-separated question counts for the scale run, e.g. 5000,20000")
    args = parser.parse_args()
    if not args.quality and not args.sizes:
        parser.error("give --quality, --sizes or both")
    if args.quality:
        print_quality()
    if args.sizes:
        print_scale([int(size) for size in args.sizes.split(",")])


if __name__ == "__main__":
    main()
