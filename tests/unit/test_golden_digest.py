"""The digest's line on the golden set: how it grew this week, and the last regress run with its pass rate."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from common.messages.digest import digest_message, digest_text
from common.messages.golden import digest_line
from common.reports.golden import GoldenFigures
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, thresholds_for

RUN = datetime(2026, 11, 30, 14, 5, tzinfo=UTC)


def test_the_line_gives_the_sets_growth_with_the_last_runs_pass_rate() -> None:
    assert digest_line(GoldenFigures(12, 3, (RUN, 0.75, 8))) == (
        "*Test set:* 12 question(s), 3 new this week. Last `relmon regress` on 2026-11-30 14:05 UTC: 75% of 8 passed."
    )


def test_the_line_says_when_no_regress_run_happened_yet() -> None:
    assert digest_line(GoldenFigures(0, 0, None)).endswith("No `relmon regress` run yet.")


def test_the_digest_carries_it_even_in_a_quiet_week() -> None:
    report = replace(build_report(PERIOD, [], [], thresholds_for, PRICES), golden=GoldenFigures(4, 1, (RUN, 1.0, 4)))
    message = digest_message(report, {}, {})
    assert "*Test set:* 4 question(s), 1 new this week" in json.dumps(message["blocks"])
    without = build_report(PERIOD, [], [], thresholds_for, PRICES)
    assert "Test set" not in json.dumps(digest_message(without, {}, {})["blocks"])
    assert "Test set" not in digest_text(without, {}, {})
