"""The daily counter behind the budget. Each statement is atomic on its own, so concurrent workers (threads or
processes, SQLite or PostgreSQL) can never spend more than the budget or post two notices.

The budget counts judgments, one unit per (pair, judge) however many LLM calls its retries take:
`charge_judgment` records the unit in `budget_charges` under the same key, so a retry finds it and pays nothing."""

from __future__ import annotations

from datetime import UTC, date, datetime
from functools import cache

from sqlalchemy import Connection, bindparam, delete, exists, func, select, update
from sqlalchemy.dialects import postgresql

from store.db import insert_or_ignore, insert_or_ignore_returning
from store.judgments import Executor
from store.models import BudgetCharge, DailyUsage


def budget_day(now: datetime | None = None) -> date:
    """The day a judgment is counted against: budgets reset at midnight UTC."""
    return (now or datetime.now(UTC)).astimezone(UTC).date()


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


def charge_in_one_statement(connection: Connection, pair_id: int, judge: str, day: date, budget: int) -> bool:
    """PostgreSQL, in autocommit: `charge_judgment` in one statement (one round trip instead of four) as a rule;
    the day's first judgment adds its row first. True when the unit is paid, now or by an earlier attempt; False
    when the budget is spent.

    The statement locks the day's counter first (`FOR UPDATE`, which reads its latest value, not the statement's
    snapshot), inserts the charge row only while the counter is under the budget, and counts only a row it
    inserted. So the counter and the charge rows move together in one commit: a twin of the same judgment waits on
    the counter, then meets the committed charge row and counts nothing, and no one ever sees a count that is
    given back later (another judgment refused meanwhile would leave the budget one short)."""
    parameters = {"pair_id": pair_id, "judge": judge, "w_day": day, "budget": budget}
    row = connection.execute(_one_statement_charge(), parameters).one()
    if row.calls is None:  # the day's first judgment: its row, then again
        _insert_day_if_missing(connection, day)
        row = connection.execute(_one_statement_charge(), parameters).one()
    if row.paid_before or row.charged:
        return True
    if row.calls < budget:  # under the budget, yet no row inserted: the judgment's charge row was there
        return True
    # Spent, unless this judgment was paid for by an earlier attempt that committed after this statement began.
    return bool(connection.execute(select(_paid()), parameters).scalar())


def _paid():
    charges = BudgetCharge.__table__
    return exists().where(
        charges.c.pair_id == bindparam("pair_id", type_=charges.c.pair_id.type),
        charges.c.judge == bindparam("judge", type_=charges.c.judge.type),
    )


@cache
def _one_statement_charge():  # built once: every judgment runs it
    charges, usage = BudgetCharge.__table__, DailyUsage.__table__
    day = bindparam("w_day", type_=usage.c.day.type)
    locked = select(usage.c.day, usage.c.llm_calls).where(usage.c.day == day).with_for_update().cte("locked")
    charged = (
        postgresql.insert(charges)
        .from_select(
            ["pair_id", "judge", "day"],
            select(bindparam("pair_id"), bindparam("judge"), locked.c.day).where(
                locked.c.llm_calls < bindparam("budget")
            ),
        )
        .on_conflict_do_nothing(index_elements=["pair_id", "judge"])
        .returning(charges.c.pair_id)
        .cte("charged")
    )
    counted = (
        update(usage)
        .where(usage.c.day == day, exists(select(charged.c.pair_id)))
        .values(llm_calls=usage.c.llm_calls + 1)
        .returning(usage.c.day)
        .cte("counted")
    )
    return select(
        _paid().label("paid_before"),
        select(locked.c.llm_calls).scalar_subquery().label("calls"),  # before this charge; None: no row for the day
        select(func.count()).select_from(charged).scalar_subquery().label("charged"),
    ).add_cte(counted)  # unread: PostgreSQL runs a data-modifying WITH whether or not the query reads it


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
