"""`relmon import exchanges.jsonl` through the real CLI (in process), on SQLite and PostgreSQL, with the fake LLM:
each valid line stored once by the ingest API's own step (its `exchanges` row and its pair, history: never
alerted), judged by the history path and reported like an export's import (its spend, what it left pending, the
period's report); a bad line named by its number and skipped, exit code 3; a second run stores and judges nothing
again; an exchange the API stored first is left to the live flow; a dry run stores nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select

from common.exchanges import Exchange
from store import exchanges as exchange_store
from store.db import Database
from store.exchange_models import Exchange as ExchangeRow
from store.models import Alert, Judgment, Pair, PairSource, PairStatus
from tests import relmon_cli
from tests.builders import make_settings
from workers.ingesting import rows_of

server, fake, cli = relmon_cli.server, relmon_cli.fake, relmon_cli.cli


def exchange(number: int, days_ago: int = 3, **fields: object) -> dict:
    asked = datetime.now(UTC).replace(microsecond=0) - timedelta(days=days_ago, hours=number)
    return {
        "id": f"ex-{number}",
        "bot": "helpdesk",
        "conversation_id": f"conv-{number}",
        "turn": 1,
        "question": f"How do I export report {number}?",
        "answer": f"Open Reports, pick report {number}, then Export.",
        "asked_at": asked.isoformat(),
        "answered_at": (asked + timedelta(seconds=3)).isoformat(),
        "visibility": "dm",
        **fields,
    }


def write(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines) + "\n")
    return path


def environment(tmp_path: Path, db_url: str, base_url: str) -> dict[str, str]:
    return {"DATABASE_URL": db_url, "RELMON_DATA_DIR": str(tmp_path), "base_url": base_url}


def stored(db_url: str) -> dict[str, object]:
    database = Database(db_url)
    try:
        with database.session() as session:
            return {
                "pairs": session.execute(select(Pair.source, Pair.status, Pair.created_at).order_by(Pair.id)).all(),
                "exchanges": sorted(session.scalars(select(ExchangeRow.client_id))),
                "judgments": session.scalar(select(func.count()).select_from(Judgment)),
                "alerts": session.scalar(select(func.count()).select_from(Alert)),
            }
    finally:
        database.dispose()


def test_an_exchanges_file_is_stored_once_judged_and_reported_with_its_bad_lines_named(
    cli, fake, tmp_path, db_url
) -> None:
    env = environment(tmp_path, db_url, fake.base_url)
    lines = [
        exchange(1),
        "{not json",
        exchange(2),
        {key: value for key, value in exchange(3).items() if key != "answer"},
        "",
        exchange(4, visibility="everyone"),
        exchange(5, slack={"channel": "C0SUPPORT", "ts": "1765094400.000100"}, visibility="public"),
    ]
    path = write(tmp_path / "exchanges.jsonl", lines)
    answered = datetime.fromisoformat(lines[0]["answered_at"])

    done = cli("import", str(path), **env)

    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "skipped line 2: not JSON" in done.stderr
    assert "skipped line 4: answer: field required" in done.stderr
    assert "skipped line 6: visibility: input should be 'public', 'private' or 'dm'" in done.stderr
    assert "3 line(s) of exchanges.jsonl skipped, the rest imported (exit code 3)" in done.stderr
    assert "3 pairs found, 3 judged, 0 skipped, 0 left pending" in done.stderr
    spent = float(done.stderr.split(" spent by this run")[0].rsplit("$", 1)[1])
    assert spent > 0
    assert "History report:" in done.stdout and "imported from exchanges.jsonl" in done.stdout
    rows = stored(db_url)
    assert rows["exchanges"] == ["ex-1", "ex-2", "ex-5"]
    assert [(source, status) for source, status, _ in rows["pairs"]] == [(PairSource.IMPORT, PairStatus.JUDGED)] * 3
    # Each pair dated by its answer (reports place it on its day), not by the import.
    first = rows["pairs"][0][2].replace(tzinfo=UTC)
    assert abs(first - answered) < timedelta(seconds=1)
    assert rows["judgments"] > 0 and rows["alerts"] == 0  # history: never alerted on
    calls = len(fake.requests)

    again = cli("import", str(path), **env)

    assert again.returncode == 3, again.stderr
    assert "3 pairs found, 0 judged" in again.stderr
    assert len(fake.requests) == calls  # nothing judged twice
    after = stored(db_url)
    assert after["exchanges"] == rows["exchanges"] and len(after["pairs"]) == 3
    assert after["judgments"] == rows["judgments"]


def test_what_the_llm_left_pending_is_judged_by_the_next_run(cli, fake, tmp_path, db_url) -> None:
    env = environment(tmp_path, db_url, fake.base_url)
    path = write(tmp_path / "history.jsonl", [exchange(1), exchange(2)])
    fake.set_behavior(always_status=503)
    down = cli("import", str(path), **env, RELMON_LLM_MAX_RETRIES="0")
    assert down.returncode == 0, down.stderr
    assert "the LLM endpoint did not answer: 2 left pending" in down.stderr
    fake.set_behavior()
    up = cli("import", str(path), **env)
    assert up.returncode == 0, up.stderr
    assert "2 judged" in up.stderr and "0 left pending" in up.stderr
    assert {status for _, status, _ in stored(db_url)["pairs"]} == {PairStatus.JUDGED}


def test_an_exchange_the_api_stored_first_is_not_stored_again_nor_judged_by_the_import(
    cli, fake, tmp_path, db_url, redis_url
) -> None:
    settings = make_settings(database_url=db_url, redis_url=redis_url)
    database = Database(db_url)
    try:
        with database.session() as session:  # what the ingest API's worker step stores (workers.ingesting)
            exchange_store.record(session, *rows_of(Exchange.model_validate(exchange(1)), settings))
    finally:
        database.dispose()
    env = environment(tmp_path, db_url, fake.base_url)
    done = cli("import", str(write(tmp_path / "exchanges.jsonl", [exchange(1), exchange(2)])), **env)
    assert done.returncode == 0, done.stderr
    rows = stored(db_url)
    assert rows["exchanges"] == ["ex-1", "ex-2"]
    assert [(source, status) for source, status, _ in rows["pairs"]] == [
        (PairSource.INGEST, PairStatus.PENDING),  # the live flow's: the worker judges it, and may alert
        (PairSource.IMPORT, PairStatus.JUDGED),
    ]


def test_the_file_is_told_from_an_export_by_its_content_and_a_dry_run_stores_nothing(
    cli, fake, tmp_path, db_url
) -> None:
    env = environment(tmp_path, db_url, fake.base_url)
    path = write(tmp_path / "history.txt", [exchange(1), {"exchanges": [exchange(2), exchange(3)]}])
    dry = cli("import", str(path), "--dry-run", **env)
    assert dry.returncode == 0, dry.stderr
    assert "would judge 3 pair(s)" in dry.stdout and "(dry run: nothing was judged, stored or posted)" in dry.stdout
    assert stored(db_url)["exchanges"] == [] and not fake.requests
    missing = cli("import", str(tmp_path / "nowhere.jsonl"), **env)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
