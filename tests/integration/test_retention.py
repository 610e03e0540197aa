"""Retention: purge_old deletes pairs older than RELMON_RETENTION_DAYS with their judgments, alerts and
feedback (ON DELETE CASCADE), and `relmon regress` runs as old with their checks, in batches, on SQLite and
PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import func, select

from common.runtime import Runtime
from store.golden_models import RegressCheck, RegressRun
from store.models import Alert, Feedback, Judgment, Pair
from tests.builders import make_settings
from workers.tasks.maintenance import purge, purge_old


def seed(runtime: Runtime, created_at: datetime, count: int, tag: str) -> None:
    with runtime.db.session() as session:
        for i in range(count):
            pair = Pair(channel_id="C1", answer_ts=f"{tag}.{i:06d}", status="judged", created_at=created_at)
            session.add(pair)
            session.flush()
            judgment = Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=1, created_at=created_at)
            session.add(judgment)
            session.flush()
            session.add(Feedback(judgment_id=judgment.id, user_id="U1", vote="wrong", created_at=created_at))
            session.add(
                Alert(dedupe_key=f"low:{tag}:{i}", kind="low_score", judgment_id=judgment.id, created_at=created_at)
            )
        # An alert with no judgment (a degradation alert) has no cascade to follow.
        session.add(Alert(dedupe_key=f"degradation:{tag}", kind="degradation", created_at=created_at))


def counts(runtime: Runtime) -> dict[str, int]:
    with runtime.db.session() as session:
        return {
            model.__tablename__: session.execute(select(func.count()).select_from(model)).scalar_one()
            for model in (Pair, Judgment, Feedback, Alert)
        }


def test_purge_deletes_what_is_older_than_retention_in_batches(db_url: str, tmp_path: Path, runtime_for) -> None:
    runtime = runtime_for(make_settings(database_url=db_url, retention_days=30, data_dir=tmp_path))
    now = datetime.now(UTC)
    seed(runtime, now - timedelta(days=31), 7, "old")
    seed(runtime, now - timedelta(days=29), 3, "recent")
    assert purge(runtime, now, batch_size=2) == {
        "pairs": 7,
        "alerts": 1,
        "regress_runs": 0,
        "response_urls": 0,
        "posts": 0,
    }
    assert counts(runtime) == {"pairs": 3, "judgments": 3, "feedback": 3, "alerts": 4}
    with runtime.db.session() as session:
        assert set(session.execute(select(Pair.answer_ts)).scalars()) == {f"recent.{i:06d}" for i in range(3)}
    # Nothing left to purge: a second run deletes nothing.
    assert purge(runtime, now, batch_size=2) == {
        "pairs": 0,
        "alerts": 0,
        "regress_runs": 0,
        "response_urls": 0,
        "posts": 0,
    }


def test_the_beat_task_uses_the_retention_setting(db_url: str, tmp_path: Path, runtime_for) -> None:
    runtime = runtime_for(make_settings(database_url=db_url, data_dir=tmp_path))  # default: 90 days
    now = datetime.now(UTC)
    seed(runtime, now - timedelta(days=91), 2, "old")
    seed(runtime, now - timedelta(days=89), 2, "kept")
    assert purge_old.apply().get() == {"pairs": 2, "alerts": 1, "regress_runs": 0, "response_urls": 0, "posts": 0}
    assert counts(runtime)["pairs"] == 2


def regress_run(runtime: Runtime, created_at: datetime, finished_at: datetime | None, quoted: str) -> int:
    """A `relmon regress` run whose report and two checks quote `quoted` (a golden question)."""
    item = {
        "id": "7",
        "question": quoted,
        "outcome": "fail",
        "change": None,
        "scores": {},
        "failed_by": [],
        "notes": [],
    }
    with runtime.db.session() as session:
        run = RegressRun(input_sha="s" * 64, items=1, report={"items": [item]} if finished_at else None,
                         created_at=created_at, finished_at=finished_at)  # fmt: skip
        session.add(run)
        session.flush()
        for check in ("relevancy", "correctness"):
            verdict = {"status": "ok", "score": 0, "reasoning": f"It asks {quoted}", "raw_output": quoted}
            session.add(RegressCheck(run_id=run.id, item_key="7", check_name=check, charged=True, verdict=verdict,
                                     created_at=created_at))  # fmt: skip
        return run.id


def test_purge_deletes_regress_runs_older_than_retention_with_their_checks(
    db_url: str, tmp_path: Path, runtime_for
) -> None:
    runtime = runtime_for(make_settings(database_url=db_url, retention_days=30, data_dir=tmp_path))
    now = datetime.now(UTC)
    old = now - timedelta(days=31)
    for n in range(3):  # finished long ago
        regress_run(runtime, old, old + timedelta(hours=1), f"OLDMARK{n} How do I reset?")
    regress_run(runtime, old, None, "OLDMARK3 stopped by an outage, never resumed")
    resumed = regress_run(runtime, old, now - timedelta(days=1), "KEPT finished yesterday")  # its report is recent
    recent = regress_run(runtime, now - timedelta(days=2), now - timedelta(days=2), "KEPT recent")
    assert purge(runtime, now, batch_size=2)["regress_runs"] == 4
    with runtime.db.session() as session:
        assert set(session.execute(select(RegressRun.id)).scalars()) == {resumed, recent}
        assert set(session.execute(select(RegressCheck.run_id)).scalars()) == {resumed, recent}
        left = repr(session.execute(select(RegressRun.report)).all()) + repr(
            session.execute(select(RegressCheck.verdict)).all()
        )
    assert "OLDMARK" not in left and "KEPT" in left
    assert purge(runtime, now, batch_size=2)["regress_runs"] == 0
