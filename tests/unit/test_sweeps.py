"""The sweeps' pure decisions (workers.sweeps): which waiting pairs are orphans, which noted tasks are lost, which
judges a given-up pair gets an error judgment from, and when a failure is too recent to give up on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from judges.names import RELEVANCY
from store.models import PairStatus
from workers.sweeps import Waiting, error_judges, give_up_reason, lost_notes, orphans_of, quiet_since


def test_an_orphan_is_a_waiting_pair_with_neither_a_message_nor_a_counted_failure() -> None:
    waiting = [Waiting(1, PairStatus.PENDING, 1), Waiting(2, PairStatus.SETTLING, 3), Waiting(3, PairStatus.PENDING, 1)]
    assert orphans_of(waiting, queued={1}, failed={3}) == [Waiting(2, PairStatus.SETTLING, 3)]
    assert orphans_of(waiting, queued=set(), failed=set()) == waiting


def test_a_noted_task_is_lost_when_no_message_names_it() -> None:
    assert lost_notes({"a": 1, "b": 2, "c": 3}, {"b"}) == ["a", "c"]


def test_a_given_up_pair_gets_errors_from_the_judges_that_stored_none() -> None:
    assert error_judges(["relevancy", "tone"], stored={"tone"}) == ["relevancy"]
    assert error_judges([], stored=set()) == [RELEVANCY]
    assert give_up_reason(3, None) == "gave up after 3 failed attempts (an error in relmon, not the LLM): unknown"


def test_quiet_since_is_a_sweep_interval_ago() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert quiet_since(600, now) == now - timedelta(minutes=5)
    assert quiet_since(20_000, now) == now - timedelta(minutes=5)  # at most 5 minutes
    assert quiet_since(60, now) == now - timedelta(seconds=30)
