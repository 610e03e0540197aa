"""`relmon regress` runs in SQL: each check's verdict stored as soon as it came (a resumed run judges nothing twice),
the budget charged once per check, and each finished run's report kept as the next run's baseline."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.db import insert_or_ignore
from store.forget_plan import DELETED_MARK, FORGOTTEN, blanked_verdict
from store.golden_models import GoldenItem, RegressCheck, RegressRun
from store.models import utcnow
from store.usage import claim_llm_call


def latest_of(session: Session, input_sha: str, *, finished_too: bool = True) -> RegressRun | None:
    """The latest run of these candidates: one that stopped before its end (an LLM outage, a budget spent, ^C) is
    resumed; a finished one (`finished_too`) is reused, its verdicts kept."""
    query = select(RegressRun).where(RegressRun.input_sha == input_sha)
    if not finished_too:
        query = query.where(RegressRun.finished_at.is_(None))
    return session.execute(query.order_by(RegressRun.id.desc()).limit(1)).scalar()


def start(session: Session, input_sha: str, source_name: str, items: int) -> int:
    run = RegressRun(input_sha=input_sha, source_name=source_name, items=items, created_at=utcnow())
    session.add(run)
    session.flush()
    return run.id


def stored_checks(session: Session, run_id: int) -> dict[tuple[str, str], tuple[bool, dict | None]]:
    """(item key, check) → (charged, verdict or None) of every check the run started. A verdict whose texts went
    with a deleted message (store.forget_plan.FORGOTTEN) counts as none: a run that reuses it judges it again (the
    grounded judge's grades are read from its raw output), paid already."""
    rows = session.execute(
        select(RegressCheck.item_key, RegressCheck.check_name, RegressCheck.charged, RegressCheck.verdict).where(
            RegressCheck.run_id == run_id
        )
    )
    return {(key, check): (charged, _kept(verdict)) for key, check, charged, verdict in rows}


def _kept(verdict: dict | None) -> dict | None:
    return None if not isinstance(verdict, dict) or verdict.get(FORGOTTEN) else verdict


def charge_check(session: Session, run_id: int, item_key: str, check: str, day: date, budget: int) -> bool:
    """Pay one unit of the daily budget for a check, once: False when the budget is spent."""
    if not claim_llm_call(session, day, budget):
        return False
    row = {"run_id": run_id, "item_key": item_key, "check_name": check, "charged": True, "created_at": utcnow()}
    session.execute(insert_or_ignore(session, RegressCheck, ["run_id", "item_key", "check_name"], row))
    return True


def store_verdict(session: Session, run_id: int, item_key: str, check: str, verdict: dict[str, Any]) -> None:
    session.execute(
        update(RegressCheck)
        .where(RegressCheck.run_id == run_id, RegressCheck.item_key == item_key, RegressCheck.check_name == check)
        .values(verdict=verdict)
    )


def finish_run(session: Session, run_id: int, *, passed: int, pass_rate: float, report: dict[str, Any]) -> None:
    """Keep the run's report. An item deleted while the run judged it (a message it was taken from was deleted in
    Slack: forget_message ran meanwhile and scrubbed the verdicts stored by then) keeps neither its question in the
    report nor its judges' words in the checks stored since."""
    report = _without_items_gone(session, run_id, report)
    session.execute(
        update(RegressRun)
        .where(RegressRun.id == run_id)
        .values(passed=passed, pass_rate=pass_rate, report=report, finished_at=utcnow())
    )


def _without_items_gone(session: Session, run_id: int, report: dict[str, Any]) -> dict[str, Any]:
    lines = report.get("items") or []
    keys = {str(line.get("id")) for line in lines if isinstance(line, dict)}
    ids = [int(key) for key in keys if key.isdigit()]
    active = select(GoldenItem.id).where(GoldenItem.id.in_(ids), GoldenItem.removed_at.is_(None)).with_for_update()
    gone = keys - {str(item_id) for item_id in session.scalars(active)}
    if not gone:
        return report
    checks = select(RegressCheck).where(RegressCheck.run_id == run_id, RegressCheck.item_key.in_(sorted(gone)))
    for check in session.scalars(checks):
        if isinstance(check.verdict, dict) and not check.verdict.get(FORGOTTEN):
            check.verdict = blanked_verdict(check.verdict)
    marked = [
        {**line, "question": DELETED_MARK} if isinstance(line, dict) and str(line.get("id")) in gone else line
        for line in lines
    ]
    return {**report, "items": marked}


def finished_run(session: Session, run_id: int | None = None, *, before: int | None = None) -> RegressRun | None:
    """A finished run by id, or the latest finished one (before run `before`, if given)."""
    query = select(RegressRun).where(RegressRun.finished_at.is_not(None))
    if run_id is not None:
        query = query.where(RegressRun.id == run_id)
    if before is not None:
        query = query.where(RegressRun.id < before)
    return session.execute(query.order_by(RegressRun.id.desc()).limit(1)).scalar()


def last_finished_summary(session: Session) -> tuple[datetime, float | None, int] | None:
    """(when, pass rate, items) of the last finished run, for the digest."""
    run = finished_run(session)
    return (run.finished_at, run.pass_rate, run.items) if run is not None else None
