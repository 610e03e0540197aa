"""`relmon import exchanges.jsonl`: past exchanges of a bot relmon cannot read in Slack, one per line in the shape
`POST /v1/exchanges` takes (common.exchanges validates both), imported as an export is: each stored once by the
ingest API's own step (store.exchanges via workers.ingesting: idempotent per bot and id), then judged, counted and
reported by the history's path (relmon.backfill.command: the run's spend, what is left pending and why, the
period's report, the exit codes). A line that is not a valid exchange is named by its number and skipped; the rest
is imported and the exit code (3) says some input was skipped.

History, not live traffic: the stored pair's source is `import` (never alerted on, as an export's pairs) and its
time the exchange's answer, so reports place it on its day. An exchange the ingest API or capture stored first is
left to their flow (its alert already decided)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from common.exchanges import Exchange, Refused, parse_body
from common.runtime import Runtime, set_runtime
from relmon.backfill.command import Run, execute
from relmon.backfill.report import estimate
from store import exchanges as exchange_store
from store.models import Pair, PairSource, PairStatus
from store.settings import Settings
from workers.ingesting import rows_of

SUFFIXES = (".jsonl", ".ndjson")
ZIP_MAGIC = b"PK"
MAX_LINE_BYTES = 2_000_000  # above the largest valid exchange (its texts' bounds): a longer line is not one


def is_exchanges_file(path: str) -> bool:
    """A JSONL file of exchanges rather than a workspace export: by its extension, else by its first byte (a zip
    starts with `PK`, a JSON line with `{`)."""
    suffix = Path(path).suffix.lower()
    if suffix in SUFFIXES:
        return True
    if suffix == ".zip":
        return False
    try:
        with open(path, "rb") as handle:
            start = handle.read(64).lstrip()
    except OSError:
        return False  # the export reader says what is wrong with the path
    return start.startswith(b"{") and not start.startswith(ZIP_MAGIC)


def read_lines(path: str, bad: dict[str, str]) -> Iterator[tuple[int, list[Exchange]]]:
    """(line number, its exchanges) of each valid line; a bad one is noted in `bad` ("line 7" -> why) and skipped.
    A line holds one exchange or a batch (`{"exchanges": [...]}`), as the API's body does."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            where = f"line {number}"
            if len(raw) > MAX_LINE_BYTES:
                bad[where] = f"longer than {MAX_LINE_BYTES:,} bytes: not one exchange"
                continue
            try:
                value = json.loads(raw)
            except RecursionError:
                bad[where] = "JSON nested too deeply"
                continue
            except ValueError as error:  # JSON and UTF-8 errors both
                bad[where] = f"not JSON ({error})"
                continue
            try:
                yield number, parse_body(value)
            except Refused as error:
                bad[where] = "; ".join(error.problems)


def store_imported(session: Session, exchange: Exchange, settings: Settings) -> tuple[int, bool]:
    """Store one exchange with the ingest API's step; (its pair, whether this import judges it). A pair this
    import created becomes history (source `import`, the answer's time); one the API or capture stored is theirs."""
    row, pair = rows_of(exchange, settings)
    stored = exchange_store.record(session, row, pair)
    if stored.created and not stored.joined:
        session.execute(
            update(Pair)
            .where(Pair.id == stored.pair_id)
            .values(source=PairSource.IMPORT, created_at=exchange.answered_at.astimezone(UTC))
        )
        return stored.pair_id, True
    source, status = session.execute(select(Pair.source, Pair.status).where(Pair.id == stored.pair_id)).one()
    return stored.pair_id, source == PairSource.IMPORT and status == PairStatus.PENDING


def run_import_exchanges(args, settings: Settings, *, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    path = args.export
    try:
        Path(path).open("rb").close()
    except OSError as error:
        print(f"relmon import: cannot read {path}: {error.strerror or error}", file=sys.stderr)
        return 2
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        runtime.db.migrate()
        run = Run(runtime, args, PairSource.IMPORT, now)
        run.skipped_unit = f"line(s) of {Path(path).name}"
        bad: dict[str, str] = {}
        oldest = [now]

        def read(_file: str) -> None:
            for _number, exchanges in read_lines(path, bad):
                run.counters.messages += 1
                for exchange in exchanges:
                    if run.full:
                        return
                    run.counters.pairs += 1
                    oldest[0] = min(oldest[0], exchange.answered_at.astimezone(UTC))
                    if args.dry_run:
                        channel = exchange.slack.channel if exchange.slack else None
                        ts = exchange.slack.ts if exchange.slack else f"{exchange.bot}:{exchange.id}"
                        estimate(run.counters, runtime, channel, ts, exchange.question, exchange.answer)
                        continue
                    with runtime.db.session() as session:
                        pair_id, to_judge = store_imported(session, exchange, settings)
                    if to_judge:
                        run.judge(pair_id)

        # One "channel": the file. Leftovers of an earlier run are found again as its lines are (stored, pending).
        return execute(run, [path], None, read, since_of=lambda: oldest[0], bad_days=bad)
    finally:
        runtime.db.dispose()
        set_runtime(None)
