"""`relmon topics` and `relmon gaps` in process, on a stored week of the labelled corpus and the fake LLM."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from relmon.cli import main
from store import channel_names
from store.db import Database
from tests.fakes.openai_server import FakeOpenAI
from tests.topics_corpus import corpus_questions, store_questions

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
