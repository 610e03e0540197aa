"""`relmon export`: stored judgments with their pairs, as JSON lines or CSV, streamed (constant memory)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from typing import IO, Any

from judges.safe_text import json_text
from store.db import Database
from store.judgments import EXPORT_COLUMNS, export_rows
from store.outcomes import signals_of
from store.settings import Settings


def parse_timestamp(text: str | None) -> datetime | None:
    """YYYY-MM-DD (midnight UTC) or a full ISO timestamp; None for no lower bound."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        moment = datetime.combine(date.fromisoformat(text), datetime.min.time())
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def with_signals(session, rows: Iterable[dict[str, Any]], batch: int = 500) -> Iterator[dict[str, Any]]:
    """Each row with its pair's outcome signals (a list of names), read a batch of rows at a time."""
    pending: list[dict[str, Any]] = []

    def flush() -> Iterator[dict[str, Any]]:
        found = signals_of(session, {row["pair_id"] for row in pending})
        for row in pending:
            yield {**row, "signals": found.get(row["pair_id"], [])}
        pending.clear()

    for row in rows:
        pending.append(row)
        if len(pending) >= batch:
            yield from flush()
    yield from flush()


def plain_row(row: dict[str, Any], *, csv_lists: bool = False) -> dict[str, Any]:
    """JSON/CSV-ready values: timestamps as ISO 8601 in UTC (SQLite returns them without a zone); in CSV, lists
    joined by ";"."""
    out = dict(row)
    if csv_lists and isinstance(out.get("signals"), list):
        out["signals"] = ";".join(out["signals"])
    created = out.get("created_at")
    if isinstance(created, datetime):
        created = created if created.tzinfo else created.replace(tzinfo=UTC)
        out["created_at"] = created.astimezone(UTC).isoformat()
    return out


def write_jsonl(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    count = 0
    for row in rows:
        out.write(json_text(plain_row(row)) + "\n")  # the same strings back, no control character raw
        count += 1
    return count


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection): quoted text could.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """A text cell a spreadsheet shows as written: a leading formula character gets a single quote before it."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def write_csv(rows: Iterable[dict[str, Any]], out: IO[str]) -> int:
    writer = csv.DictWriter(out, fieldnames=list(EXPORT_COLUMNS), extrasaction="ignore")
    writer.writeheader()
    count = 0
    for row in rows:
        writer.writerow({key: safe_cell(value) for key, value in plain_row(row, csv_lists=True).items()})
        count += 1
    return count


@contextmanager
def open_output(path: str | None) -> Iterator[IO[str]]:
    if not path or path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    with open(path, "w", encoding="utf-8", newline="") as handle:
        yield handle


def run_export(args, settings: Settings) -> int:
    try:
        since = parse_timestamp(getattr(args, "since", None))
    except ValueError:
        print(f"relmon export: --since must be a date such as 2025-01-31, not {args.since!r}", file=sys.stderr)
        return 2
    database = Database(settings.resolved_database_url, pool_size=1)
    try:
        database.migrate()  # an empty or older database exports what it has
        writer = write_csv if args.format == "csv" else write_jsonl
        with database.session() as session, open_output(getattr(args, "output", None)) as out:
            count = writer(with_signals(session, export_rows(session, since=since)), out)
    finally:
        database.dispose()
    print(f"relmon export: {count} judgment(s)", file=sys.stderr)
    return 0
