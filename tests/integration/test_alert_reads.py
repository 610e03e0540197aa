"""What one `consider_alert` run reads, counted on its SQL statements (tests/sql_capture.py) against FakeSlack, the
fake LLM (the second opinion on), real Redis and SQLite/PostgreSQL: the judgment is read once, with its pair, its
alert row's key and its newest version; the alert row a claim writes comes back from its INSERT and is not read
again, but for its status under the lease, with the change stamp of what it shows (the privacy re-check)."""

from __future__ import annotations

import re

import pytest

from tests import alert_helpers
from tests.alert_helpers import ALERTS, add_judgment
from tests.builders import installed_runtime
from tests.sql_capture import statements_run
from workers.alerts import delivery

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py): the caps count per UTC hour

LOW = "offtopic: our office is open 9 to 5."  # the fake LLM grades it 0 at any temperature: a confirmed low score


@pytest.fixture
def make_runtime(settings_for, fake, llm):
    def build(**overrides):
        values = {"confirm": "second_opinion", "openai_base_url": llm.base_url, "judge_model": "fake-judge"}
        return installed_runtime(settings_for(slack_api_url=fake.api_url, **{**values, **overrides}))

    return build


def selects(statements: list[str]) -> list[str]:
    return [s for s in statements if s.lstrip().upper().startswith("SELECT")]


def judgment_reads(statements: list[str]) -> list[str]:
    """Reads of the judgment's verdict (the degradation window reads the channel's scores as `current`)."""
    return [s for s in selects(statements) if "judgments.score" in s]


def key_lookups(statements: list[str]) -> list[str]:
    """Reads of an alert row by its dedupe key (the judgment's low-score key is the only one asked for here)."""
    return [s for s in selects(statements) if re.search(r"alerts\.dedupe_key = ", s)]


def test_a_low_score_alert_reads_its_judgment_once_and_does_not_read_back_its_row(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=LOW)
        with statements_run(runtime.db.engine) as statements:
            assert delivery.consider(runtime, judgment_id).low == "posted"
        assert len(fake.posted(ALERTS)) == 1
    [load] = judgment_reads(statements)
    assert statements[0] == load and "JOIN pairs" in load  # the judgment, its pair and its alert row's key, at once
    # The second opinion is written once, and not read back (RETURNING): only the load reads a stored one.
    assert [s for s in selects(statements) if "judgments.confirmation_status" in s] == [load]
    # The low row's key is looked up twice before the claim: with the judgment, and under the channel locks (a twin
    # task may have claimed it since); the claim's INSERT returns the row.
    assert len(key_lookups(statements)) == 2
    [insert] = [i for i, s in enumerate(statements) if s.lstrip().startswith("INSERT INTO alerts")]
    assert "RETURNING" in statements[insert]
    after = selects(statements[insert + 1 :])
    [guard] = [s for s in after if re.search(r"\balerts\b", s)]
    # Under the lease, one read: the row's status (a twin may have posted it) and the change stamp of what it shows
    # (a deletion since the load), never the row's other columns.
    assert re.match(r"\s*SELECT alerts\.status, pairs\.updated_at, judgments\.reasoning\s+FROM alerts", guard)
    assert not [s for s in after if re.search(r"alerts\.(dedupe_key|details|created_at|kind)", s)]
    assert not [s for s in after if "judgments.score" in s or "pairs.question_text" in s]


def test_a_good_score_reads_its_judgment_once_and_writes_nothing(make_runtime, fake):
    """A good score in a healthy channel is decided without a lock: the judgment read once, the degradation history
    read once, no lock taken, nothing written."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=4, answer="Reset it under Settings, then Password.")
        with statements_run(runtime.db.engine) as statements:
            considered = delivery.consider(runtime, judgment_id)
        assert considered.low == "above_threshold" and not fake.posted(ALERTS)
    [load] = judgment_reads(statements)
    assert statements[0] == load
    assert len(key_lookups(statements)) == 1  # with the judgment only: no locked path
    assert all(s.lstrip().upper().startswith("SELECT") for s in statements), statements  # no SQLite lock write
    assert not any("pg_advisory_xact_lock" in s for s in statements)  # no PostgreSQL lock
