"""`relmon export`: judgments with their pairs as JSON lines or CSV, filtered by date, on SQLite and PostgreSQL."""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from relmon.export import parse_timestamp, run_export
from store.db import Database
from store.judgments import EXPORT_COLUMNS
from store.models import Judgment, Pair, PairStatus
from tests.builders import make_settings
from tests.processes import relmon_command, relmon_env


def _seed(database: Database) -> None:
    with database.session() as session:
        old = Pair(
            source="capture",
            channel_id="C1",
            answer_ts="1700000000.000100",
            thread_ts="1700000000.000001",
            question_text='How do I reset, "quickly"?',
            answer_text="Press Reset.\nThen wait, please.",
            status=PairStatus.JUDGED,
        )
        new = Pair(
            source="command",
            channel_id="C2",
            answer_ts="1700000000.000200",
            question_text="Où est le bureau ?",
            answer_text="Au 3ᵉ étage.",
            reference_text="3rd floor",
            status=PairStatus.JUDGED,
        )
        session.add_all([old, new])
        session.flush()
        session.add_all(
            [
                Judgment(
                    pair_id=old.id,
                    judge="relevancy",
                    status="ok",
                    score=3,
                    max_score=4,
                    normalized_score=0.75,
                    reasoning="mostly relevant",
                    model="gpt-4o-mini",
                    prompt_tokens=1200,
                    cached_tokens=1152,
                    completion_tokens=30,
                    created_at=datetime(2025, 1, 10, 12, 0, tzinfo=UTC),
                ),
                Judgment(
                    pair_id=new.id,
                    judge="relevancy",
                    status="ok",
                    score=4,
                    max_score=4,
                    normalized_score=1.0,
                    reasoning="on point",
                    model="gpt-4o-mini",
                    prompt_tokens=90,
                    completion_tokens=20,
                    created_at=datetime(2025, 2, 1, 8, 30, tzinfo=UTC),
                ),
                Judgment(
                    pair_id=new.id,
                    judge="correctness",
                    status="error",
                    max_score=2,
                    error="unreadable reply",
                    model="gpt-4o-mini",
                    created_at=datetime(2025, 2, 1, 8, 31, tzinfo=UTC),
                ),
            ]
        )


def _export(db_url: str, tmp_path: Path, **options) -> str:
    output = tmp_path / f"export-{options.get('format', 'jsonl')}-{options.get('since')}.out"
    args = argparse.Namespace(format="jsonl", since=None, output=str(output))
    for name, value in options.items():
        setattr(args, name, value)
    assert run_export(args, make_settings(database_url=db_url, data_dir=tmp_path)) == 0
    return output.read_text(encoding="utf-8")


def test_jsonl_has_every_judgment_with_its_pair(database: Database, db_url: str, tmp_path: Path) -> None:
    _seed(database)
    rows = [json.loads(line) for line in _export(db_url, tmp_path).splitlines()]
    assert [(r["channel_id"], r["judge"], r["status"]) for r in rows] == [
        ("C1", "relevancy", "ok"),
        ("C2", "relevancy", "ok"),
        ("C2", "correctness", "error"),
    ]
    first = rows[0]
    assert set(first) == set(EXPORT_COLUMNS)
    assert first["message_ts"] == "1700000000.000100" and first["thread_ts"] == "1700000000.000001"
    assert first["question"] == 'How do I reset, "quickly"?' and first["answer"] == "Press Reset.\nThen wait, please."
    assert (first["score"], first["max_score"], first["reasoning"], first["model"]) == (
        3,
        4,
        "mostly relevant",
        "gpt-4o-mini",
    )
    assert (first["prompt_tokens"], first["cached_tokens"], first["completion_tokens"]) == (1200, 1152, 30)
    assert rows[1]["cached_tokens"] is None  # stored without a figure: unknown, not "nothing cached"
    assert datetime.fromisoformat(first["created_at"]) == datetime(2025, 1, 10, 12, 0, tzinfo=UTC)
    assert rows[1]["answer"] == "Au 3ᵉ étage."
    assert rows[2]["score"] is None and rows[2]["error"] == "unreadable reply"


def test_csv_round_trips_through_a_csv_reader(database: Database, db_url: str, tmp_path: Path) -> None:
    _seed(database)
    rows = list(csv.DictReader(io.StringIO(_export(db_url, tmp_path, format="csv"))))
    assert len(rows) == 3
    assert list(rows[0]) == list(EXPORT_COLUMNS)
    assert rows[0]["answer"] == "Press Reset.\nThen wait, please."  # quoted newline survives
    assert rows[0]["question"] == 'How do I reset, "quickly"?'
    assert float(rows[1]["score"]) == 4.0 and rows[2]["score"] == ""
    assert (rows[0]["prompt_tokens"], rows[0]["cached_tokens"], rows[1]["cached_tokens"]) == ("1200", "1152", "")


FORMULAS = ['=HYPERLINK("https://evil")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd"]


def test_csv_cells_that_a_spreadsheet_would_run_are_neutralised(database: Database, db_url: str, tmp_path: Path):
    with database.session() as session:
        for number, formula in enumerate(FORMULAS):
            pair = Pair(
                source="capture", channel_id="C1", answer_ts=f"1700000001.{number:06d}", question_text=formula,
                answer_text=f"{formula} and more", status=PairStatus.JUDGED,
            )  # fmt: skip
            session.add(pair)
            session.flush()
            at = datetime(2025, 1, 10, tzinfo=UTC)
            session.add(
                Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=1, reasoning=formula, created_at=at)
            )
    _export(db_url, tmp_path, format="csv")
    written = (tmp_path / "export-csv-None.out").read_bytes().decode("utf-8")  # read_text would turn \r into \n
    rows = list(csv.DictReader(io.StringIO(written, newline="")))
    assert [(row["question"], row["reasoning"]) for row in rows] == [("'" + f, "'" + f) for f in FORMULAS]
    assert all(row["answer"].startswith("'") for row in rows) and float(rows[0]["score"]) == 1.0
    # JSON lines keep the text as it was.
    lines = [json.loads(line) for line in _export(db_url, tmp_path).splitlines()]
    assert [line["question"] for line in lines] == FORMULAS


def test_since_keeps_judgments_from_that_day_on(database: Database, db_url: str, tmp_path: Path) -> None:
    _seed(database)
    rows = [json.loads(line) for line in _export(db_url, tmp_path, since="2025-02-01").splitlines()]
    assert [r["judge"] for r in rows] == ["relevancy", "correctness"]
    assert _export(db_url, tmp_path, since="2025-03-01") == ""


def test_since_parsing() -> None:
    assert parse_timestamp("2025-02-01") == datetime(2025, 2, 1, tzinfo=UTC)
    assert parse_timestamp("2025-02-01T10:00:00+02:00") == datetime(2025, 2, 1, 8, tzinfo=UTC)
    assert parse_timestamp(None) is None
    with pytest.raises(ValueError):
        parse_timestamp("last tuesday")


def test_the_command_writes_to_stdout(database: Database, db_url: str, tmp_path: Path, redis_url: str) -> None:
    _seed(database)
    env = relmon_env(redis_url=redis_url, database_url=db_url, data_dir=tmp_path)
    done = subprocess.run(
        relmon_command("export", "--format", "jsonl"), env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert "3 judgment(s)" in done.stderr


def test_the_command_rejects_a_bad_date(database: Database, db_url: str, tmp_path: Path, redis_url: str) -> None:
    _seed(database)
    env = relmon_env(redis_url=redis_url, database_url=db_url, data_dir=tmp_path)
    bad = subprocess.run(
        relmon_command("export", "--since", "soon"), env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "--since" in bad.stderr
