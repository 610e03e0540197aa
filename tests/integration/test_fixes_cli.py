"""`relmon topics fixed KEY [--at TIME] [--candidates FILE] [--json]` through the `relmon` command (relmon.cli.main)
on a real database and the fake LLM over HTTP: the mark is stored at the time given (RELMON_TIMEZONE), the verdict
so far printed with its counts; with --candidates only the topic's test-set items are judged and the run is given
with the verdict; a wrong key, time or usage is a clear error (exit 2)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from store import golden
from store import topics as topic_rows
from store.db import Database
from store.golden_rules import ORIGIN_TAKEOVER, Occurrence
from store.topic_models import TopicFix
from tests import relmon_cli
from tests.topics_corpus import corpus_questions, store_questions
from topics.questions import HUMAN_TAKEOVER, LOW_SCORE, REASK

server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli

KEY = "t-refunds-annual-0001"
MARK = datetime(2026, 11, 30, 10, tzinfo=UTC)
FAILED = (LOW_SCORE, REASK, HUMAN_TAKEOVER)


@pytest.fixture
def topic(database: Database) -> dict[str, int]:
    """A topic of 20 questions in the week before the mark, 15 of them failed, and two golden items asked in it
    (a third one elsewhere)."""
    questions = [
        replace(q, created_at=MARK - timedelta(days=3, minutes=-q.pair_id), failures=FAILED if i < 15 else ())
        for i, q in enumerate(corpus_questions()[:20])
    ]
    store_questions(database, questions)
    ids = {}
    with database.session() as session:
        topic_rows.save_topics(session, [{"key": KEY, "name": "Annual plan refunds", "named_by": "llm",
                                          "name_sources": [], "anchors": []}])  # fmt: skip
        topic_rows.save_pair_topics(session, {q.pair_id: KEY for q in questions[:18]})
        for n, (name, pair_id) in enumerate((("refund", 1), ("prorata", 2), ("other", 19)), start=1):
            occurrence = Occurrence("C0SUPPORT", f"{n}.0", f"{n}.1", f"{n}.2", f"Question {name}?", None, "offtopic",
                                    f"Expected {name}.", None, False, ORIGIN_TAKEOVER, pair_id=pair_id)  # fmt: skip
            ids[name] = golden.add_occurrence(session, occurrence)[0]
        topic_rows.save_pair_topics(session, {19: "t-other"})
    return ids


def stored_fixes(database: Database) -> list[TopicFix]:
    with database.session() as session:
        found = list(session.scalars(select(TopicFix)))
        session.expunge_all()
    return found


def test_marking_a_topic_fixed_stores_the_mark_and_prints_the_verdict(topic, database, db_url, cli, server):
    outcome = cli("topics", "fixed", KEY[:10], "--at", "2026-11-30T11:00", "--json", base_url=server.base_url,
                  DATABASE_URL=db_url, RELMON_TIMEZONE="Europe/Paris")  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert report["topic"] == KEY and report["verdict"] == "no_evidence"
    assert report["before"]["n"] == 18 and report["before"]["value"] == pytest.approx(15 / 18)
    assert report["after"]["n"] == 0 and report["answers_needed"] >= 10 and report["golden"] is None
    [fix] = stored_fixes(database)
    assert fix.topic_key == KEY and fix.marked_by == "cli"
    assert fix.marked_at.replace(tzinfo=UTC) == MARK  # 11:00 in Paris
    plain = cli("topics", "fixed", KEY, base_url=server.base_url, DATABASE_URL=db_url)
    assert plain.returncode == 0 and "Annual plan refunds: no evidence yet · failed 83% (" in plain.stdout
    assert "more answers needed" in plain.stdout


def test_candidates_re_run_only_the_topics_test_set_items(topic, database, db_url, cli, server, fake, tmp_path):
    path = tmp_path / "candidates.jsonl"
    answers = {"refund": "Annual plans are refunded pro rata.", "prorata": "Pro rata.", "other": "Something else."}
    path.write_text("".join(json.dumps({"id": topic[name], "answer": text}) + "\n" for name, text in answers.items()))
    outcome = cli("topics", "fixed", KEY, "--candidates", str(path), "--json", base_url=server.base_url,
                  DATABASE_URL=db_url)  # fmt: skip
    assert outcome.returncode == 0, outcome.stderr
    report = json.loads(outcome.stdout)
    assert report["golden"]["total"] == 2 and 0 <= report["golden"]["passed"] <= 2
    judged = "".join(json.dumps(request) for request in fake.requests)
    assert "Something else." not in judged and "Pro rata." in judged  # the other topic's item was not judged
    [fix] = stored_fixes(database)
    assert fix.regress_run_id == report["golden"]["run_id"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["topics", "fixed", "t-nope-nope"], "no topic has the key 't-nope-nope'"),
        (["topics", "fixed"], "write `relmon topics fixed KEY`"),
        (["topics", "fixed", KEY, "--at", "yesterday"], "write a date YYYY-MM-DD"),
        (["topics", "fixed", KEY, "--at", "2999-01-01"], "in the future"),
        (["topics", "fixed", KEY, "--channel", "C1"], "are for listing topics"),
    ],
)
def test_a_wrong_mark_is_a_clear_error(topic, database, db_url, cli, server, args, said) -> None:
    outcome = cli(*args, base_url=server.base_url, DATABASE_URL=db_url)
    assert outcome.returncode == 2 and said in outcome.stderr and outcome.stdout == ""
    assert stored_fixes(database) == []
