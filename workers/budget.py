"""The daily budget of judgments (one unit per pair and judge, however many LLM calls its retries take): the
notice's text, and thin adapters over `store.usage` (the atomic counter, and which day a judgment counts against)
and Slack (the once-a-day notice)."""

from __future__ import annotations

import logging
from datetime import date, datetime

from common.post_once import PostOnce, Receipts
from store.db import Database, dialect_name
from store.usage import (
    budget_day,
    charge_in_one_statement,
    charge_judgment,
    claim_budget_notice,
    release_budget_notice,
)

log = logging.getLogger("relmon.budget")


def notice_text(budget: int, day: date) -> str:
    """What happened and what to do about it, in a line or two."""
    return (
        f":warning: relmon reached its daily budget of {budget:,} judgments for {day.isoformat()} (UTC). "
        "Answers are still captured but not judged until midnight UTC; they are recorded as skipped. "
        "To judge more, raise RELMON_DAILY_BUDGET (or lower RELMON_SAMPLE_RATE) and restart the workers."
    )


def charge(db: Database, pair_id: int, judge: str, budget: int, now: datetime | None = None) -> bool:
    """Pay for one judgment from today's budget, once per (pair, judge): True if it is paid (now or by an
    earlier attempt), False when the budget is spent."""
    day = budget_day(now)
    if dialect_name(db.engine) == "postgresql":  # every judgment runs it: one statement as a rule
        with db.autocommit() as connection:
            return charge_in_one_statement(connection, pair_id, judge, day, budget)
    with db.engine.begin() as connection:  # SQLite: the charge row and the counter in one transaction
        return charge_judgment(connection, pair_id, judge, day, budget)


def announce_exhausted(db: Database, slack, channel: str | None, budget: int, now: datetime | None = None) -> bool:
    """Post the 'budget spent' notice once per UTC day. Returns True if this call posted it.

    The claim is taken in SQL before posting, so two workers never both post; a failed post gives it back (a
    later skipped pair tries again). The claim is its only record: the notice keeps no receipt and no mark."""
    day = budget_day(now)
    if not channel:
        log.warning("daily budget spent; no alert channel to say so", extra={"day": day.isoformat()})
        return False
    with db.session() as session:
        if not claim_budget_notice(session, day):
            return False
    try:
        once = PostOnce(slack, Receipts(None), f"budget:{day.isoformat()}", notes_attempts=False)
        once.post(channel, text=notice_text(budget, day))
    except Exception:
        log.exception("could not post the budget notice", extra={"day": day.isoformat()})
        with db.session() as session:
            release_budget_notice(session, day)
        return False
    log.warning("daily budget spent; notice posted", extra={"day": day.isoformat(), "budget": budget})
    return True
