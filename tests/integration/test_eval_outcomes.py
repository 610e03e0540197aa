"""`relmon eval --labels-from outcomes`: the stored pairs whose outcome window closed are the labels (resolved →
good, failed → bad), judged again by the fake LLM, with the same agreement report as `relmon eval`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from relmon.cli import main
from store import outcomes as outcome_store
from store.db import Database
from store.models import Pair


def add_pair(database: Database, n: int, answer: str, signals: list[str] | None) -> None:
    """A captured pair; `signals` None: its window is still open."""
    now = datetime.now(UTC)
    with database.session() as session:
        pair = Pair(source="capture", channel_id="C1", answer_ts=f"{1_700_000_000 + n}.000100", status="judged")
        pair.question_text, pair.answer_text = f"Question {n}?", answer
        session.add(pair)
        session.flush()
        outcome_store.insert_window(
            session,
            pair_id=pair.id,
            channel_id="C1",
            answer_ts=pair.answer_ts,
            thread_key=pair.answer_ts,
            asker="U1",
            closes_at=now + timedelta(hours=1),
        )
        outcome_store.record_signals(session, pair.id, [s for s in signals or [] if s != "resolved"], at=now)
        if signals is not None:
            outcome_store.close_window(session, pair.id, now=now, closing=[s for s in signals if s == "resolved"])


def test_eval_with_outcomes_as_labels(db_url, llm, monkeypatch, capsys, tmp_path) -> None:
    database = Database(db_url)
    add_pair(database, 1, "Press Rotate in Settings.", ["thanked", "resolved"])  # good, judged 4: agree
    add_pair(database, 2, "offtopic: our office hours", ["reask", "negative_reaction"])  # bad, judged 0: agree
    add_pair(database, 3, "offtopic again", ["resolved"])  # good, judged 0: the judge was wrong
    add_pair(database, 4, "Still watched.", None)  # window open: no label
    database.dispose()
    for name, value in {
        "DATABASE_URL": db_url,
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": llm.base_url,
        "RELMON_JUDGE_MODEL": "judge-model",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["eval", "--labels-from", "outcomes", "--json", "--threads", "2"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["items"] == report["n"] == 3
    assert report["exact_agreement"] == pytest.approx(2 / 3)
    assert [(w["human"], w["judge"]) for w in report["worst"]] == [(4, 0)]
    assert len(llm.requests) == 3
