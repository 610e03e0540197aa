"""How the trust figures read: precision with its counts and 95% interval, disputed low scores with both scores,
the threshold the votes suggest (from 20 votes), the canary's kappa and its change, "the judge moved", and the
like-with-like notice, in the digest (Block Kit and terminal), the App Home and `/judge stats`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from common.messages.digest import digest_message, digest_text
from common.messages.home import home_view
from common.messages.trust import canary_text, precision_text, second_opinion_text, suggestion_text, trust_lines
from common.messages.verdicts import StatsRow, stats_message
from common.reports.costs import Prices
from common.reports.period import period_for
from common.reports.stats import Report
from common.reports.trust import CanaryFigures, CanaryPoint, Disputed, Precision, Suggestion, Trust
from store.rules import ChannelRules
from store.settings import Settings
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import build_report
from workers.canary import moved_text

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
PERIOD = period_for(NOW, "UTC")
PRICES = Prices(input_per_million=0.15, output_per_million=0.60)
_ids = iter(range(1, 1_000_000))


def thresholds_for(_channel):
    return {"relevancy": 2}


def judged(score, *, right=0, wrong=0, model="m1", prompt="p1", status=None, second=None, channel="C1", days=1):
    pair_id = next(_ids)
    judgment = JudgmentRow(
        next(_ids),
        "relevancy",
        "ok",
        score,
        4,
        score / 4,
        votes_right=right,
        votes_wrong=wrong,
        model=model,
        prompt_version=prompt,
        confirmation_status=status,
        confirmation_score=second,
    )
    at = NOW - timedelta(days=days)
    return PairRow(pair_id, channel, at, "judged", answer_ts=f"1.{pair_id:06d}", judgments=(judgment,))


def voted_week(wrong_at_two: int = 10, right_below: int = 10) -> list[PairRow]:
    """Alerts at 2 people disagreed with, alerts at 0 and 1 they agreed with."""
    rows = [judged(2, wrong=1) for _ in range(wrong_at_two)]
    rows += [judged(i % 2, right=2, wrong=1) for i in range(right_below)]  # a majority agreed
    return rows


CANARY = [
    CanaryPoint(NOW - timedelta(days=8), "relevancy", "m1", "p1", 0.82, 0.9),
    CanaryPoint(NOW - timedelta(hours=1), "relevancy", "m1", "p1", 0.62, 0.7, moved="kappa fell from 0.82 to 0.62"),
]


def week_report(current, previous=(), canary=()):
    return build_report(PERIOD, list(current), list(previous), thresholds_for, PRICES, canary_runs=list(canary))


# The lines themselves ----------------------------------------------------------------------------------------


def test_precision_says_its_counts_with_its_95_percent_interval():
    assert precision_text(Precision(None, "relevancy", 8, 2)) == (
        "8 of 10 voted alerts agreed with: 80% (49–94%, n=10)"
    )
    assert precision_text(Precision("C1", "relevancy", 1, 0)) == "1 of 1 voted alert agreed with (too few for a rate)"
    assert precision_text(Precision("C1", "relevancy", 6, 3)) == "6 of 9 voted alerts agreed with (too few for a rate)"


def test_precision_without_votes_says_there_are_none_yet():
    assert precision_text(None) == precision_text(Precision(None, "relevancy", 0, 0)) == "no votes on alerts yet"


def test_disputed_low_scores_show_both_scores():
    trust = Trust(
        disputed=[Disputed(1, "C1", "relevancy", 1, 4), Disputed(2, "C1", "relevancy", 0, None)],
        confirmed=5,
        unconfirmed=1,
    )
    assert second_opinion_text(trust) == (
        "Second opinions: 2 low scores disputed (1 → 4, 0 → ?) · 5 confirmed · "
        "1 unconfirmed (no second opinion: not alerted)"
    )
    one = Trust(disputed=[Disputed(1, "C1", "relevancy", 2, 3)])
    assert second_opinion_text(one) == "Second opinions: 1 low score disputed (2 → 3) · 0 confirmed"
    assert second_opinion_text(Trust()) is None


def test_the_threshold_suggestion_compares_two_thresholds_by_their_precision():
    found = Suggestion("C1", "relevancy", 2, 1, 0.5, 1.0, 20)
    expected = (
        "relevancy in {where}: an alert threshold of ≤ 1 instead of ≤ 2 would have been 100% precise instead of 50% "
        "on 20 votes, missing none of the answers people marked bad"
    )
    assert suggestion_text(found) == expected.format(where="<#C1>")
    assert suggestion_text(found, slack=False) == expected.format(where="#C1")
    assert "in all channels:" in suggestion_text(Suggestion(None, "relevancy", 2, 1, 0.5, 1.0, 20))


def test_the_canary_line_says_the_judge_moved():
    latest, previous = CANARY[1], CANARY[0]
    assert canary_text(CanaryFigures(latest, previous)) == (
        "Canary (relevancy, model `m1`): κ 0.62 (−0.20), exact agreement 70% · "
        ":warning: the judge moved: kappa fell from 0.82 to 0.62"
    )


def test_the_canary_line_shows_kappa_with_its_change():
    up = CanaryFigures(CanaryPoint(NOW, "relevancy", "m1", "p1", 0.9, None), CANARY[0])
    assert canary_text(up) == "Canary (relevancy, model `m1`): κ 0.90 (+0.08)"


def test_a_first_canary_run_without_kappa_shows_its_exact_agreement():
    alone = CanaryFigures(CanaryPoint(NOW, "relevancy", None, None, None, 0.5), None)
    assert canary_text(alone) == "Canary (relevancy, model `?`): no kappa, exact agreement 50%"


def test_no_canary_run_means_no_canary_line():
    assert canary_text(None) is None


def test_the_judge_moved_alert_explains_itself():
    moved = "kappa fell from 0.82 to 0.62"
    run = SimpleNamespace(examples=40, judge="relevancy", moved=moved, kappa=0.62, exact_agreement=None)
    assert moved_text(run) == (
        ":warning: *The judge moved.* The canary (40 labelled answers, relevancy) was re-judged: kappa fell from "
        "0.82 to 0.62. Kappa 0.62, exact agreement n/a. Low scores and degradation alerts this week may reflect "
        "the judge rather than the bot."
    )


def test_trust_lines_from_a_week_of_rows():
    rows = [*voted_week(), judged(1, status="disputed", second=4), judged(0, status="confirmed", second=0)]
    report = week_report(rows, canary=CANARY)
    lines = trust_lines(report.trust, ["relevancy"])
    assert lines == [
        "Alert precision, relevancy: 10 of 20 voted alerts agreed with: 50% (30–70%, n=20)",
        "Second opinions: 1 low score disputed (1 → 4) · 1 confirmed",
        "Threshold: relevancy in <#C1>: an alert threshold of ≤ 1 instead of ≤ 2 would have been 100% precise "
        "instead of 50% on 20 votes, missing none of the answers people marked bad",
        "Canary (relevancy, model `m1`): κ 0.62 (−0.20), exact agreement 70% · "
        ":warning: the judge moved: kappa fell from 0.82 to 0.62",
    ]


def test_no_threshold_suggestion_under_twenty_votes():
    report = week_report(voted_week(wrong_at_two=10, right_below=9))  # 19 votes
    assert report.trust.suggestions == []
    assert not any(line.startswith("Threshold:") for line in trust_lines(report.trust, ["relevancy"]))
    assert week_report(voted_week(wrong_at_two=10, right_below=10)).trust.suggestions  # 20 votes


def judged_by_m1_last_week() -> list[PairRow]:
    return [judged(4, model="m1", days=9) for _ in range(3)]


def judged_by_m2_this_week() -> Report:
    return week_report([judged(1, model="m2") for _ in range(3)], judged_by_m1_last_week())


def test_a_changed_model_is_said():
    report = judged_by_m2_this_week()
    notice = "Judge changed: relevancy: model `m2` this week; last week's figures were `m1`: not compared"
    assert notice in trust_lines(report.trust, ["relevancy"])


def test_a_changed_model_leaves_the_change_figures_out():
    report = judged_by_m2_this_week()
    assert report.change(report.overall, "relevancy").mean is None  # like with like only


def test_the_same_model_is_compared_without_a_notice():
    same = week_report([judged(1, model="m1") for _ in range(3)], judged_by_m1_last_week())
    assert same.change(same.overall, "relevancy").mean is not None
    assert not any(line.startswith("Judge changed") for line in trust_lines(same.trust, ["relevancy"]))


def test_a_prompt_changed_during_the_week_is_said():
    within = week_report([judged(1, prompt="p1"), judged(1, prompt="p2")])
    said = "Judge changed: relevancy prompt p2 since Sun 10:00 (prompt p1 before: this week's figures mix them)"
    assert said + ": not compared with last week" in trust_lines(within.trust, ["relevancy"], timezone="Europe/Paris")


# Where they are shown ----------------------------------------------------------------------------------------


def busy_report():
    previous = [judged(4, model="m0", days=9)]
    rows = [*voted_week(), judged(1, status="disputed", second=4)]
    return week_report(rows, previous, CANARY)


def test_the_digest_shows_every_trust_line():
    report = busy_report()
    message = digest_message(report, {}, {})
    shown = json.dumps(message["blocks"], ensure_ascii=False)
    assert "*Can the alerts be trusted?*" in shown
    for line in trust_lines(report.trust, ["relevancy"]):
        assert json.dumps(line, ensure_ascii=False)[1:-1] in shown
    assert "(30–70%, n=20)" in shown and "(1 → 4)" in shown and "≤ 1 instead of ≤ 2" in shown
    assert "κ 0.62 (−0.20)" in shown and "the judge moved: kappa fell" in shown
    assert "last week's figures were `m0`: not compared" in shown
    # per channel too: the channel's own precision
    assert "relevancy alerts: 10 of 20 voted alerts agreed with" in shown

    text = digest_text(report, {}, {})
    assert "== Can the alerts be trusted? ==" in text
    for line in trust_lines(report.trust, ["relevancy"], slack=False):
        assert line in text
    assert "in #C1:" in text and "<#C1>" not in text.split("== Can the alerts be trusted? ==")[1].split("==")[0]


def home_blocks(report: Report) -> str:
    """The App Home's blocks as JSON text, every channel under the default rule."""
    settings = Settings(_env_file=None, judge_model="m1")
    default = ChannelRules().for_channel(None, settings)
    view = home_view(report, settings, default, {}, now=NOW)
    return json.dumps(view["blocks"], ensure_ascii=False)


def test_the_app_home_shows_the_trust_lines():
    report = busy_report()
    shown = home_blocks(report)
    assert "*Can the alerts be trusted?*" in shown
    for line in trust_lines(report.trust, ["relevancy"]):
        assert json.dumps(line, ensure_ascii=False)[1:-1] in shown


def test_the_app_home_shows_each_channels_precision():
    shown = home_blocks(busy_report())
    assert "relevancy alerts: 10 of 20 voted alerts agreed with: 50% (30–70%, n=20)" in shown


def test_the_app_home_says_low_scores_get_a_second_opinion_before_alerting():
    assert "by a second opinion before alerting" in home_blocks(busy_report())


def test_a_quiet_weeks_app_home_leaves_the_trust_lines_out():
    assert "Can the alerts be trusted?" not in home_blocks(week_report([judged(4)]))


VOTED = StatsRow("relevancy", 10, 2.5, 4, 2, 4, 0, precision=Precision("C1", "relevancy", 8, 2), disputed=2)
UNVOTED = StatsRow("relevancy", 3, 2.0, 1, 2, 4, 0, disputed=1)


def judge_stats_text(row: StatsRow) -> str:
    """What `/judge stats` says of the judge in `row`."""
    return stats_message("C1", [row])["blocks"][-1]["text"]["text"]


def test_judge_stats_shows_precision_only_where_there_are_votes():
    assert "8 of 10 voted alerts agreed with: 80% (49–94%, n=10)" in judge_stats_text(VOTED)
    assert "voted" not in judge_stats_text(UNVOTED)


def test_judge_stats_shows_disputed_low_scores():
    assert "2 low scores disputed by a second opinion" in judge_stats_text(VOTED)
    assert "1 low score disputed by a second opinion" in judge_stats_text(UNVOTED)
