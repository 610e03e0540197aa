"""The daily budget of LLM calls: pure rules (which day, what the notice says) and thin adapters over
`store.usage` (the atomic counter) and Slack (the once-a-day notice)."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime

from store.db import Database
from store.usage import claim_budget_notice, claim_llm_call, release_budget_notice

log = logging.getLogger("relmon.budget")


def budget_day(now: datetime | None = None) -> date:
    """Budgets reset at midnight UTC."""
    return (now or datetime.now(UTC)).astimezone(UTC).date()


def notice_text(budget: int, day: date) -> str:
    """What happened and what to do about it, in a line or two."""
    return (
        f":warning: relmon reached its daily budget of {budget:,} LLM calls for {day.isoformat()} (UTC). "
        "Answers are still captured but not judged until midnight UTC; they are recorded as skipped. "
        "To judge more, raise RELMON_DAILY_BUDGET (or lower RELMON_SAMPLE_RATE) and restart the workers."
    )


def spend_one_call(db: Database, budget: int, now: datetime | None = None) -> bool:
    """Take one LLM call from today's budget; False when it is spent."""
    with db.autocommit() as connection:  # one atomic UPDATE (the insert of a new day's row is idempotent)
        return claim_llm_call(connection, budget_day(now), budget)


def announce_exhausted(db: Database, slack, channel: str | None, budget: int, now: datetime | None = None) -> bool:
    """Post the 'budget spent' notice once per UTC day. Returns True if this call posted it.

    The claim is taken in SQL before posting, so two workers never both post; a failed post gives it back."""
    day = budget_day(now)
    if not channel:
        log.warning("daily budget spent; no alert channel to say so", extra={"day": day.isoformat()})
        return False
    with db.session() as session:
        if not claim_budget_notice(session, day):
            return False
    try:
        slack.chat_postMessage(channel=channel, text=notice_text(budget, day))
    except Exception:
        log.exception("could not post the budget notice", extra={"day": day.isoformat()})
        with db.session() as session:
            release_budget_notice(session, day)
        return False
    log.warning("daily budget spent; notice posted", extra={"day": day.isoformat(), "budget": budget})
    return True
