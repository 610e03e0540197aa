"""What people read in a terminal report, as pure functions: a channel's name or, unknown, its ID; a ts as the
team's local time; the comparison period said as long as it is; a history report's title; one block for a
report's only channel, and an ID beside a name two channels share."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from common.messages.digest import digest_message, digest_text, period_text
from common.messages.golden import digest_line
from common.messages.readable import Readable
from common.reports.golden import GoldenFigures
from relmon.backfill.report import backfill_period, history_title
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict

# 2026-12-07 13:02:00 UTC: 14:02 in Paris (CET, +01:00), 08:02 in New York.
TS = f"{datetime(2026, 12, 7, 13, 2, tzinfo=UTC).timestamp():.6f}"


def test_a_channel_is_shown_by_name_and_by_id_only_when_no_name_is_known() -> None:
    readable = Readable("UTC", {"C0SUPPORT1": "support"})
    assert readable.channel("C0SUPPORT1") == "#support" and readable.name("C0SUPPORT1") == "support"
    assert readable.channel("C0OTHER002") == "#C0OTHER002" and readable.name("C0OTHER002") is None
    assert readable.channel(None) == "all channels"


def test_a_ts_is_shown_in_the_teams_zone() -> None:
    assert Readable("Europe/Paris").time(TS) == "Mon 7 Dec 14:02"
    assert Readable("America/New_York").time(TS) == "Mon 7 Dec 08:02"
    assert Readable("UTC").time(TS) == "Mon 7 Dec 13:02"
    assert Readable("Europe/Paris").iso(TS) == "2026-12-07T14:02:00+01:00"
    assert Readable("Europe/Paris").time("not a ts") == "ts not a ts" and Readable().iso(None) is None


def test_a_history_report_says_what_it_is_and_how_long_it_is_compared_with() -> None:
    since, now = datetime(2026, 11, 2, 9, tzinfo=UTC), datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    # In Paris the import ended on 1 December: the team's days, not UTC's.
    period = backfill_period(since, now, "Europe/Paris", "import", "imported from export.zip")
    assert period.title == "History report: 2026-11-02 – 2026-12-01, imported from export.zip"
    assert history_title(since, now, "UTC", "read from Slack's history").endswith(
        "2026-11-30, read from Slack's history"
    )
    report = build_report(period, [pair("C1", at=since + timedelta(days=1), judgments=[verdict(3)])], [],
                          thresholds_for, PRICES)  # fmt: skip
    text = digest_text(report, {}, {})
    assert text.startswith("History report: 2026-11-02") and "Weekly digest" not in text
    assert "compared with the 29 days before" in period_text(report) and "7 days" not in text
    assert "compared with the 7 days before" in period_text(replace(report, period=PERIOD))


def test_a_reports_only_channel_is_printed_once() -> None:
    report = build_report(PERIOD, [pair("C1", judgments=[verdict(1)]), pair("C1", judgments=[verdict(4)])], [],
                          thresholds_for, PRICES)  # fmt: skip
    text = digest_text(report, {}, {}, readable=Readable("Europe/Paris", {"C1": "support"}))
    assert [line for line in text.splitlines() if line.startswith("== ")] == ["== All channels: #support only =="]
    assert text.count("Answers: 2 seen · 2 judged") == 1 and text.count("Worst answers:") == 1
    assert "in #support (Tue 14 Nov 23:13)" in text  # the stats rows' answer ts 1700000000.x (22:13 UTC), in Paris
    assert "ts 17" not in text


def test_two_channels_of_one_name_are_told_apart_by_their_ids() -> None:
    rows = [pair("C1", judgments=[verdict(3)]), pair("C2", judgments=[verdict(2)])]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    text = digest_text(report, {}, {}, readable=Readable("UTC", {"C1": "support", "C2": "support"}))
    heads = [line for line in text.splitlines() if line.startswith("== ")]
    assert heads == ["== All channels ==", "== #support (C1) ==", "== #support (C2) =="]


def test_the_last_regress_run_is_dated_in_the_teams_zone() -> None:
    finished = datetime(2026, 11, 30, 14, 5, tzinfo=UTC)
    line = digest_line(GoldenFigures(12, 3, (finished, 0.75, 8)), "Europe/Paris", span="in this period")
    assert line == (
        "*Test set:* 12 question(s), 3 new in this period. "
        "Last `relmon regress` on 2026-11-30 15:05 Europe/Paris: 75% of 8 passed."
    )


def test_rejudge_says_since_when_in_the_teams_zone() -> None:
    from relmon.rejudge_cli import summary
    from store.rejudging import ErrorVerdict

    verdict = ErrorVerdict(1, 1, "relevancy", "1796477420.000000", "timeout")
    since = datetime(2026, 11, 30, 23, 30, tzinfo=UTC)
    text = summary([verdict], 1, 30, since, "Europe/Paris")
    assert text.startswith("1 error verdict since 2026-12-01 00:30 Europe/Paris (1 answer)")


def test_the_slack_message_of_a_single_channel_shows_its_worst_answers_once() -> None:
    rows = [pair("C1", judgments=[verdict(1)]), pair("C1", judgments=[verdict(4)])]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    message = digest_message(report, {}, {})
    texts = [block["text"]["text"] for block in message["blocks"] if block.get("type") == "section" and "text" in block]
    context = message["blocks"][1]["elements"][0]["text"]
    assert context.endswith(" · <#C1> only")
    assert sum(text.count("1/4* relevancy in <#C1>") for text in texts) == 1  # before: the week's and the channel's
    # Two channels: each keeps its own section.
    two = build_report(PERIOD, [*rows, pair("C2", judgments=[verdict(3)])], [], thresholds_for, PRICES)
    sections = [b["text"]["text"] for b in digest_message(two, {}, {})["blocks"] if b.get("type") == "section"
                and "text" in b]  # fmt: skip
    assert any(text.startswith("*<#C1>*") for text in sections) and any(text.startswith("*<#C2>*") for text in sections)
