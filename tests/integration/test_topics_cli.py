"""`relmon topics` and `relmon gaps` in process, on a stored week of the labelled corpus and the fake LLM; a week
of too few questions to group, in `relmon topics` and the digest's dry run; `relmon topics --refresh`, whose run
the dry run shows."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from common.reports.intervals import wilson
from relmon.cli import main
from store import channel_names
from store.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.topics_corpus import corpus_questions, store_questions
from topics.questions import HUMAN_TAKEOVER, LOW_SCORE, REASK

SINCE = ["--since", "2026-11-23"]  # the corpus's week starts then


@pytest.fixture
def stored_week(db_url, monkeypatch, tmp_path):
    database = Database(db_url)
    store_questions(database, corpus_questions())
    database.dispose()
    with FakeOpenAI() as fake:
        environment = {"DATABASE_URL": db_url, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url}
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        yield fake


def test_topics_as_json(stored_week, capsys, db_url, monkeypatch):
    database = Database(db_url)
    with database.session() as session:  # as an import of the channel's export would have stored it
        channel_names.remember(session, {"C0SUPPORT": "support"}, channel_names.EXPORT)
    database.dispose()
    monkeypatch.setenv("RELMON_TIMEZONE", "Europe/Paris")
    capsys.readouterr()
    assert main(["topics", *SINCE, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["embedding"] == "text-embedding-3-small"
    assert report["questions"] == 342 and 0 < report["left_out"] <= 171
    listed = [item for topic in report["topics"] for item in topic["questions_ids"]]
    assert len(listed) + report["left_out"] == report["questions"]
    assert all(item["channel"] == "C0SUPPORT" and item["ts"] for item in listed)  # the IDs scripts read
    # The name and the local time are extra fields beside them.
    assert all(item["channel_name"] == "support" for item in listed)
    paris = ZoneInfo("Europe/Paris")
    assert all(item["time"] == datetime.fromtimestamp(float(item["ts"]), paris).isoformat(timespec="seconds")
               for item in listed)  # fmt: skip
    first = report["topics"][0]
    assert first["name"] and first["failed"] >= max(t["failed"] for t in report["topics"])
    assert {"questions", "failed", "failure_reasons", "resolution_rate", "mean_relevancy", "previous"} <= set(first)
    assert first["history"] == []  # the command stores no run: the digest's and the daily ones are the history
    # Each rate with its n and 95% Wilson interval; the failure rate's change as the change rule says.
    for topic in report["topics"]:
        rate = topic["failure_rate"]
        assert rate["n"] == topic["questions"] and rate["value"] == topic["failed"] / topic["questions"]
        low, high = wilson(topic["failed"], topic["questions"]).low, wilson(topic["failed"], topic["questions"]).high
        assert (rate["low"], rate["high"]) == (low, high) and low <= rate["value"] <= high
        assert topic["resolution"]["n"] == topic["decided"]
        # The tiers of the same closed windows (docs/resolution.md): a teammate's reply is its own tier.
        tiers = topic["resolution_tiers"]
        assert tiers["n"] == topic["decided"] == sum(tier["count"] for tier in tiers["tiers"].values())
        assert tiers["tiers"]["teammate"]["count"] == topic["failure_reasons"].get(HUMAN_TAKEOVER, 0)
        teammate = tiers["tiers"]["teammate"]
        if tiers["n"]:
            assert (teammate["low"], teammate["high"]) == (
                wilson(teammate["count"], tiers["n"]).low,
                wilson(teammate["count"], tiers["n"]).high,
            )
        assert topic["failure_rate_change"] in (None, "up", "down", "none", "too_few")


def test_topics_as_text(stored_week, capsys):
    capsys.readouterr()
    assert main(["topics", *SINCE]) == 0
    text = capsys.readouterr().out
    assert text.startswith("== What to fix first ==") and "left out (outliers)" in text and "1. " in text


def test_gaps_as_markdown(stored_week, capsys):
    capsys.readouterr()
    assert main(["gaps", *SINCE]) == 0
    markdown = capsys.readouterr().out
    assert markdown.startswith("# Knowledge gaps") and "refunded pro rata" in markdown and "\n## " in markdown


def test_gaps_as_json(stored_week, capsys):
    capsys.readouterr()
    assert main(["gaps", *SINCE, "--format", "json"]) == 0
    gaps = json.loads(capsys.readouterr().out)["gaps"]
    assert gaps and gaps[0]["answer"] and gaps[0]["asked"] >= 1 and gaps[0]["channel"] == "C0SUPPORT"


def test_bad_input_is_a_short_message(stored_week, capsys):
    assert main(["topics", "--since", "soon"]) == 2
    assert "--since takes" in capsys.readouterr().err
    assert main(["topics", *SINCE, "--channel", "C0QUIET"]) == 0
    assert "too few to group" in capsys.readouterr().out


def _recent(questions):
    """The questions as asked in the last few days (the digest's dry run reads the last 7)."""
    start = datetime.now(UTC) - timedelta(days=5)
    return [replace(q, created_at=start + timedelta(minutes=i)) for i, q in enumerate(questions)]


@pytest.fixture
def environment(db_url, monkeypatch, tmp_path):
    with FakeOpenAI() as fake:
        values = {"DATABASE_URL": db_url, "OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": fake.base_url}
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(tmp_path)
        yield fake


@pytest.fixture
def quiet_week(db_url, environment):
    """12 questions in the last 7 days, 4 of them failed."""
    questions = [
        replace(q, failures=(LOW_SCORE, REASK, HUMAN_TAKEOVER) if i % 3 == 0 else (), teammate_answer=None)
        for i, q in enumerate(_recent(corpus_questions()[:12]))
    ]
    database = Database(db_url)
    store_questions(database, questions)
    database.dispose()
    return questions


def _out(capsys, args: list[str], code: int = 0) -> str:
    capsys.readouterr()
    assert main(args) == code
    return capsys.readouterr().out


def test_too_few_to_group_lists_the_failed_questions(quiet_week, capsys):
    text = _out(capsys, ["topics"])
    assert text.startswith(
        "== What to fix first ==\n12 questions in this period: too few to group into topics (needs 30); "
        "the 4 failed ones are listed below.\n"
    )
    for question in quiet_week:
        assert (question.text in text) == question.failed
    assert text.count("  failed: low score, re-asked, taken over") == 4
    assert "Only" not in text and text.count("too few") == 1  # said once, not again among the notes
    report = json.loads(_out(capsys, ["topics", "--json"]))
    assert report["too_few"] is True and report["needed"] == 30
    # In the order of the keyword groups they fall in, each with its group's keyword (null: on its own).
    assert sorted(item["ts"] for item in report["failed_questions"]) == sorted(q.ts for q in quiet_week if q.failed)
    assert all("group" in item for item in report["failed_questions"])


def test_the_dry_run_says_too_few_to_group_and_lists_the_failed_questions(quiet_week, environment, capsys):
    _out(capsys, ["migrate"])
    text = _out(capsys, ["digest", "--dry-run"])
    section = text.split("== What to fix first ==\n", 1)[1]
    assert section.startswith(
        "12 questions in this period: too few to group into topics (needs 30); the 4 failed ones are listed below."
    )
    assert all(question.text in section for question in quiet_week if question.failed)
    assert "No topics stored" not in text
    assert environment.requests == [] and environment.embedding_requests == []  # read only: nothing asked


def test_the_dry_run_groups_the_topics_when_none_are_stored_and_refresh_makes_them(db_url, environment, capsys):
    database = Database(db_url)
    store_questions(database, _recent(corpus_questions()))
    database.dispose()
    _out(capsys, ["migrate"])
    first = _out(capsys, ["digest", "--dry-run"])  # none stored: grouped now and stored as today's run
    assert "\n1. " in first and "the topics were grouped now and stored as today's run" in first
    assert environment.embedding_requests != []
    environment.reset()
    again = _out(capsys, ["digest", "--dry-run"])  # read back: nothing embedded or named again
    assert "\n1. " in again and "nothing was posted or recorded" in again
    assert environment.requests == [] and environment.embedding_requests == []
    made = _out(capsys, ["topics", "--refresh"])
    assert made.startswith("== What to fix first ==") and "1. " in made
    after = _out(capsys, ["digest", "--dry-run"])
    assert "\n1. " in after and "left out (outliers)" in after


def test_refresh_takes_neither_a_period_nor_a_channel(quiet_week, capsys):
    capsys.readouterr()
    assert main(["topics", "--refresh", "--since", "30d"]) == 2
    assert "leave out --since and --channel" in capsys.readouterr().err
