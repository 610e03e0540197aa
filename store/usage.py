"""The daily counter behind the budget. Each statement is atomic on its own, so concurrent workers (threads or
processes, SQLite or PostgreSQL) can never spend more than the budget or post two notices.

The budget counts judgments, one unit per (pair, judge) however many LLM calls its retries take:
`charge_judgment` records the unit in `budget_charges` under the same key, so a retry finds it and pays nothing."""

from __future__ import annotations

from datetime import date
from functools import cache

from sqlalchemy import bindparam, delete, select, update

from store.db import insert_or_ignore, insert_or_ignore_returning
from store.judgments import Executor
from store.models import BudgetCharge, DailyUsage


def _insert_day_if_missing(session: Executor, day: date) -> None:
    row = {"day": day, "llm_calls": 0, "budget_notice_sent": False}
    session.execute(insert_or_ignore(session, DailyUsage, ["day"], row))


def claim_llm_call(session: Executor, day: date, budget: int) -> bool:
    """Count one LLM call against `day` if the budget allows it; False when the budget is spent."""
    parameters = {"w_day": day, "budget": budget}
    if session.execute(_claim_statement(), parameters).rowcount == 1:
        return True
    # Either the budget is spent or the day has no row yet: create it (a racing worker may too) and try again.
    _insert_day_if_missing(session, day)
    return session.execute(_claim_statement(), parameters).rowcount == 1


@cache
def _claim_statement():  # built once: every judgment runs it
    return (
        update(DailyUsage)
        .where(DailyUsage.day == bindparam("w_day"), DailyUsage.llm_calls < bindparam("budget"))
        .values(llm_calls=DailyUsage.llm_calls + 1)
        .execution_options(synchronize_session=False)
    )


def charge_judgment(session: Executor, pair_id: int, judge: str, day: date, budget: int) -> bool:
    """Spend one unit of `day`'s budget on (pair, judge) unless it was spent already (an earlier attempt of the
    same judgment). False when the unit is not spent yet and the budget is. Run it in one transaction: the charge
    row and the counter move together, and a racing twin waits on the row's key, then finds it paid."""
    charge = {"pair_id": pair_id, "judge": judge, "day": day}
    statement = insert_or_ignore_returning(session, BudgetCharge, ["pair_id", "judge"], "pair_id")
    if session.execute(statement, charge).scalar() is None:
        return True  # paid by an earlier attempt
    if claim_llm_call(session, day, budget):
        return True
    # Budget spent: take the charge back, so the row never claims a unit that was not counted.
    session.execute(
        delete(BudgetCharge)
        .where(BudgetCharge.pair_id == pair_id, BudgetCharge.judge == judge)
        .execution_options(synchronize_session=False)
    )
    return False


def claim_budget_notice(session: Executor, day: date) -> bool:
    """True for exactly one caller per day: that caller posts the 'budget spent' notice."""
    _insert_day_if_missing(session, day)
    claim = (
        update(DailyUsage)
        .where(DailyUsage.day == day, DailyUsage.budget_notice_sent.is_(False))
        .values(budget_notice_sent=True)
        .execution_options(synchronize_session=False)
    )
    return session.execute(claim).rowcount == 1


def release_budget_notice(session: Executor, day: date) -> None:
    """Give the claim back after a failed post, so a later skipped pair can try again."""
    session.execute(
        update(DailyUsage)
        .where(DailyUsage.day == day)
        .values(budget_notice_sent=False)
        .execution_options(synchronize_session=False)
    )


def calls_on(session: Executor, day: date) -> int:
    return session.scalar(select(DailyUsage.llm_calls).where(DailyUsage.day == day)) or 0
