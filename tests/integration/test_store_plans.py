"""The query that runs after every judgment (the degradation window, `store.channel_scores.recent_scores`) must
not grow with the tables faster than one read of each, even on a young database: PostgreSQL without statistics (a
new database, or autovacuum off) once planned it to fetch the whole judgments table for every pair, which took a core at
50 answers/s (bench.load). Checked on the plans the databases actually run: rows touched on PostgreSQL (EXPLAIN
ANALYZE), index use on SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import delete, event, insert, select

from store.channel_scores import TIME_WINDOW_MOST, recent_scores
from store.exchange_models import Exchange
from store.models import Judgment, JudgmentStatus, Pair, PairSource, PairStatus

WINDOW = 20
BUSY, OTHER = "C_BUSY", "C_OTHER"
JUDGED_PER_CHANNEL = 2_000
PENDING = 500  # a burst: the newest pairs of the busy channel are still waiting for the LLM


def fill(database) -> list[float]:
    """Two channels of judged answers, interleaved in time, then a burst of pending ones; no ANALYZE (a young
    database). Returns the busy channel's scores, newest first."""
    base = datetime(2026, 11, 1, tzinfo=UTC)
    pairs, busy_scores = [], []
    for i in range(2 * JUDGED_PER_CHANNEL):
        channel = BUSY if i % 2 == 0 else OTHER
        pairs.append(
            {
                "channel_id": channel,
                "answer_ts": f"{1_790_000_000 + i}.000100",
                "status": PairStatus.JUDGED,
                "created_at": base + timedelta(seconds=i),
            }
        )
    for i in range(PENDING):
        pairs.append(
            {
                "channel_id": BUSY,
                "answer_ts": f"{1_800_000_000 + i}.000100",
                "status": PairStatus.PENDING,
                "created_at": base + timedelta(days=1, seconds=i),
            }
        )
    with database.engine.begin() as connection:
        connection.execute(insert(Pair), pairs)
        judged = connection.execute(
            select(Pair.id, Pair.channel_id).where(Pair.status == PairStatus.JUDGED).order_by(Pair.created_at)
        ).all()
        judgments = []
        for n, (pair_id, channel) in enumerate(judged):
            score = float(n % 5)
            judgments.append({"pair_id": pair_id, "judge": "relevancy", "status": JudgmentStatus.OK, "score": score})
            if channel == BUSY:
                busy_scores.append(score)
        connection.execute(insert(Judgment), judgments)
    return busy_scores[::-1]


def run_recording_statements(database, **window) -> tuple[list[float], list[tuple[str, object]]]:
    scores: list[float] = []

    def read(connection) -> None:
        scores.extend(score for score, _ in recent_scores(connection, BUSY, "relevancy", last=WINDOW, **window))

    statements = statements_of(database, read)
    return scores, statements


def statements_of(database, call) -> list[tuple[str, object]]:
    """The statements (and parameters, as the driver got them) that `call(connection)` ran."""
    statements: list[tuple[str, object]] = []

    def record(_conn, _cursor, statement, parameters, _context, _executemany) -> None:
        statements.append((statement, parameters))

    event.listen(database.engine, "before_cursor_execute", record)
    try:
        with database.autocommit() as connection:
            call(connection)
    finally:
        event.remove(database.engine, "before_cursor_execute", record)
    return statements


def explained(database, statement: str, parameters) -> dict | list[str]:
    """PostgreSQL's plan as it ran (EXPLAIN ANALYZE), or SQLite's query plan lines."""
    with database.autocommit() as connection:
        if database.engine.dialect.name == "postgresql":
            raw = connection.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters).scalar_one()
            return (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
        return [row[-1] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)]


def rows_touched(plan: dict) -> float:
    """Rows a plan node and its children produced or threw away, over all their loops."""
    loops = plan.get("Actual Loops", 1)
    own = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
    own += plan.get("Rows Removed by Index Recheck", 0)
    return own * loops + sum(rows_touched(child) for child in plan.get("Plans", []))


# The time window: none; the busy channel's last 100 seconds (50 answers); a whole day (capped at TIME_WINDOW_MOST).
NEWEST_JUDGED = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(seconds=2 * JUDGED_PER_CHANNEL - 2)
TIME_WINDOWS = [
    (None, WINDOW),
    (NEWEST_JUDGED - timedelta(seconds=98), 50),
    (NEWEST_JUDGED - timedelta(days=1), TIME_WINDOW_MOST),
]


def take_stale_statistics(database) -> None:
    """What autovacuum leaves on a fresh PostgreSQL between two tests: statistics taken while another judge
    filled the tables, then a second ANALYZE after they were emptied (no live row: the column statistics stay, the
    row count drops to 0). The planner then believes a relevancy judgment is rare, and planned the `is_current`
    anti-join as a scan of the whole judgments table for every pair: 244,680 rows touched here."""
    with database.engine.begin() as connection:
        connection.execute(
            insert(Pair),
            [{"channel_id": "C_EARLIER", "answer_ts": f"1.{i:06d}", "status": PairStatus.JUDGED} for i in range(50)],
        )
        earlier = connection.execute(select(Pair.id)).scalars().all()
        connection.execute(
            insert(Judgment),
            [{"pair_id": pair_id, "judge": "completeness", "status": JudgmentStatus.OK} for pair_id in earlier],
        )
    with database.autocommit() as connection:
        connection.exec_driver_sql("ANALYZE")
    with database.engine.begin() as connection:
        connection.execute(delete(Judgment))
        connection.execute(delete(Pair))
    with database.autocommit() as connection:
        connection.exec_driver_sql("ANALYZE")


@pytest.mark.parametrize("statistics", ["none", "stale"])
@pytest.mark.parametrize(("since", "expected"), TIME_WINDOWS)
def test_the_degradation_window_reads_a_bounded_number_of_rows(database, since, expected, statistics) -> None:
    if statistics == "stale":
        if database.engine.dialect.name != "postgresql":
            pytest.skip("SQLite keeps statistics only when ANALYZE is run, which relmon never does")
        take_stale_statistics(database)
    newest_first = fill(database)
    scores, statements = run_recording_statements(database, since=since)
    assert scores == newest_first[:expected]  # the busy channel's newest judged answers, pending ones skipped
    assert 1 <= len(statements) <= (1 if since is None else 2)  # one statement per batch of pairs

    if database.engine.dialect.name == "postgresql":
        total = 0.0
        with database.autocommit() as connection:
            for statement, parameters in statements:
                explained = connection.exec_driver_sql(
                    "EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters
                ).scalar_one()
                plan = (json.loads(explained) if isinstance(explained, str) else explained)[0]["Plan"]
                total += rows_touched(plan)
        # Without statistics (a young database, or autovacuum off) PostgreSQL may read each table once: fine. The
        # plan this replaced read the judgments table again for every pair, hundreds of thousands of rows here. A
        # time window that outgrows the first batch reads a second, whose longer id list may scan judgments once.
        table_rows = 2 * JUDGED_PER_CHANNEL + PENDING + 2 * JUDGED_PER_CHANNEL
        bound = (1.5 if since is None else 2.5) * table_rows
        assert total <= bound, f"{total:.0f} rows touched for {table_rows} rows in the tables"
    else:
        with database.autocommit() as connection:
            for statement, parameters in statements:
                plan = connection.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
                details = [row[-1] for row in plan]
                assert all("SEARCH" in d or "USING" in d for d in details if d.startswith(("SCAN", "SEARCH"))), details
                assert not any(d.startswith("SCAN") for d in details), details  # no full table scan
                assert not any("TEMP B-TREE" in d for d in details), details  # the order comes from the index


def test_the_degradation_window_counts_only_the_current_version_of_an_edited_answer(database) -> None:
    """An edited answer is judged again: the window counts its newest version's judgment, whatever its status."""
    base = datetime(2026, 11, 1, tzinfo=UTC)
    with database.engine.begin() as connection:
        ids = (
            connection.execute(
                insert(Pair).returning(Pair.id, sort_by_parameter_order=True),  # ids in the rows' order
                [
                    {
                        "channel_id": BUSY,
                        "answer_ts": f"{1_790_000_000 + i}.000100",
                        "status": PairStatus.JUDGED,
                        "created_at": base + timedelta(seconds=i),
                    }
                    for i in range(3)
                ],
            )
            .scalars()
            .all()
        )
        ok, error = JudgmentStatus.OK, JudgmentStatus.ERROR
        versions = [  # (pair, version, status, score)
            (ids[0], 1, ok, 1.0),  # never edited: counted
            (ids[1], 1, ok, 2.0),
            (ids[1], 2, error, None),  # its edit failed to judge: neither version counts
            (ids[2], 1, error, None),
            (ids[2], 2, ok, 4.0),  # its edit was judged: the new score counts
        ]
        connection.execute(
            insert(Judgment),
            [
                {"pair_id": pair_id, "judge": "relevancy", "pair_version": version, "status": status, "score": score}
                for pair_id, version, status, score in versions
            ],
        )
    with database.autocommit() as connection:
        scores = recent_scores(connection, BUSY, "relevancy", last=WINDOW)
    assert [score for score, _ in scores] == [4.0, 1.0]


def test_a_pairs_alerts_are_found_without_reading_every_alert(database) -> None:
    """An outcome signal asks whether an alert is about its pair (`store.alerts.pairs_with_alerts`): with many alerts
    stored that read stays a few index look-ups, on a young database too (no statistics)."""
    from store.alerts import KIND_LOW, pairs_with_alerts
    from store.models import Alert

    fill(database)
    with database.engine.begin() as connection:
        judged = connection.execute(select(Judgment.id, Judgment.pair_id).order_by(Judgment.id)).all()
        alerted = judged[::5]  # one answer in five alerted: 800 alerts
        connection.execute(
            insert(Alert),
            [{"dedupe_key": f"low:{j.id}", "kind": KIND_LOW, "judgment_id": j.id, "status": "posted"} for j in alerted],
        )
    asked = [alerted[3].pair_id, judged[1].pair_id]  # one pair with an alert, one without
    found: list[set[int]] = []
    [(statement, parameters)] = statements_of(database, lambda c: found.append(pairs_with_alerts(c, asked)))
    assert found == [{alerted[3].pair_id}]
    plan = explained(database, statement, parameters)
    if isinstance(plan, dict):
        assert rows_touched(plan) <= 50, f"{rows_touched(plan):.0f} rows touched for {len(alerted)} alerts"
    else:
        assert not any(d.startswith("SCAN") for d in plan), plan  # no full table scan


def test_a_channels_latest_degradation_alert_is_one_index_row_however_many_alerts_it_had(database) -> None:
    """`store.alerts.degradation_history` runs after every judgment: with thousands of low-score alerts in the
    channel, its read of the latest degradation alert stays a look-up, on a young database too."""
    from store.alerts import KIND_DEGRADATION, KIND_LOW, degradation_history
    from store.models import Alert

    with database.engine.begin() as connection:
        rows = [{"dedupe_key": f"low:{i}", "kind": KIND_LOW, "source_channel_id": BUSY} for i in range(2000)]
        rows.insert(100, {"dedupe_key": "degradation:1", "kind": KIND_DEGRADATION, "source_channel_id": BUSY})
        connection.execute(insert(Alert), rows)
    found = []
    statements = statements_of(database, lambda c: found.append(degradation_history(c, BUSY)))
    assert found[0].episodes == 1 and found[0].open_alert_id is not None
    statement, parameters = statements[0]  # the latest degradation alert (then the count of episodes)
    plan = explained(database, statement, parameters)
    if isinstance(plan, dict):
        assert rows_touched(plan) <= 10, f"{rows_touched(plan):.0f} rows touched for 2,001 alerts"
    else:
        assert any("ix_alerts_channel_kind" in d for d in plan), plan


def fill_bots(database, per_channel: int = JUDGED_PER_CHANNEL) -> list[float]:
    """Two bots' exchanges in no channel, interleaved in time, among a channel's captured answers. Returns the
    first bot's scores, newest first."""
    base = datetime(2026, 11, 1, tzinfo=UTC)
    owners = ["helpdesk", "widget", None]  # None: a captured answer in BUSY
    pairs = [
        {
            "channel_id": None if owners[i % 3] else BUSY,
            "answer_ts": None if owners[i % 3] else f"{1_790_000_000 + i}.000100",
            "source": PairSource.INGEST if owners[i % 3] else PairSource.CAPTURE,
            "status": PairStatus.JUDGED,
            "created_at": base + timedelta(seconds=i),
        }
        for i in range(3 * per_channel)
    ]
    helpdesk_scores = []
    with database.engine.begin() as connection:
        connection.execute(insert(Pair), pairs)
        rows = connection.execute(select(Pair.id).order_by(Pair.created_at)).scalars().all()
        judgments, exchanges = [], []
        for n, pair_id in enumerate(rows):
            score = float(n % 5)
            judgments.append({"pair_id": pair_id, "judge": "relevancy", "status": JudgmentStatus.OK, "score": score})
            if owners[n % 3]:
                exchanges.append(
                    {"client_id": f"x{n}", "bot": owners[n % 3], "conversation_id": "c", "turn": 0,
                     "visibility": "dm", "asked_at": base, "answered_at": base, "pair_id": pair_id}
                )  # fmt: skip
            if owners[n % 3] == "helpdesk":
                helpdesk_scores.append(score)
        connection.execute(insert(Judgment), judgments)
        connection.execute(insert(Exchange), exchanges)
    return helpdesk_scores[::-1]


@pytest.mark.parametrize("statistics", ["none", "taken_young"])
def test_a_bots_degradation_window_reads_its_own_exchanges_in_a_bounded_number_of_rows(database, statistics) -> None:
    if statistics == "taken_young":  # autovacuum's ANALYZE ran while the tables were nearly empty (seen in CI)
        if database.engine.dialect.name != "postgresql":
            pytest.skip("SQLite keeps statistics only when ANALYZE is run, which relmon never does")
        young = fill_bots(database, per_channel=5)
        with database.autocommit() as connection:
            connection.exec_driver_sql("ANALYZE")
        assert young
        with database.engine.begin() as connection:
            for model in (Exchange, Judgment, Pair):
                connection.execute(delete(model))
    newest_first = fill_bots(database)
    scores: list[float] = []

    def read(connection) -> None:
        scores.extend(score for score, _ in recent_scores(connection, "bot:helpdesk", "relevancy", last=WINDOW))

    statements = statements_of(database, read)
    assert scores == newest_first[:WINDOW]  # the bot's own, not the other bot's nor the channel's
    assert len(statements) == 1
    [(statement, parameters)] = statements
    plan = explained(database, statement, parameters)
    if database.engine.dialect.name == "postgresql":
        table_rows = 3 * JUDGED_PER_CHANNEL * 3  # pairs, judgments, exchanges
        assert rows_touched(plan) <= 1.5 * table_rows, plan
    else:
        scans = [line for line in plan if line.startswith("SCAN")]
        assert not scans, plan  # no full table scan
