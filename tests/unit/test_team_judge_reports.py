"""A team's own judge in the digest and App Home: its pass rate with its n and 95% Wilson interval, overall and in
each channel where it runs (not in the others), and a change of its prompt version said, never compared across."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.messages.digest import digest_message, digest_text
from common.messages.home import home_view
from common.messages.trust import trust_lines
from common.messages.versions import change_text
from common.reports.costs import Prices
from common.reports.intervals import wilson
from common.reports.period import period_for
from common.reports.trust import VersionChange
from store.rules import ChannelRules
from store.settings import Settings
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import build_report

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=UTC)  # a Thursday
PERIOD = period_for(NOW, "UTC")
PRICES = Prices(input_per_million=0.15, output_per_million=0.60)
_ids = iter(range(1, 1_000_000))


def thresholds_for(_channel):
    return {"relevancy": 2, "refund_policy": 0, "tone": 2}


def row(channel, judgments, at):
    pair_id = next(_ids)
    return PairRow(pair_id, channel, at, "judged", answer_ts=f"1.{pair_id:06d}", judgments=tuple(judgments))


def verdict(judge, score, top, prompt="p1"):
    return JudgmentRow(next(_ids), judge, "ok", score, top, score / top, model="m1", prompt_version=prompt)


def week(passed: int, failed: int, *, days: float = 1, prompt="p1", channel="C1"):
    """Answers in `channel` judged by relevancy and by the team's refund_policy (pass/fail); relevancy alone in C2."""
    at = NOW - timedelta(days=days)
    rows = []
    for i in range(passed + failed):
        score = 1 if i < passed else 0
        rows.append(row(channel, [verdict("relevancy", 3, 4), verdict("refund_policy", score, 1, prompt)], at))
    rows += [row("C2", [verdict("relevancy", 2, 4)], at) for _ in range(12)]
    return rows


def report_of(current, previous=()):
    return build_report(PERIOD, current, list(previous), thresholds_for, PRICES, scales={"refund_policy": (0, 1)})


def test_a_team_judge_shows_its_pass_rate_with_n_and_wilson_interval_where_it_runs():
    report = report_of(week(40, 10), week(45, 5, days=9))
    interval = wilson(40, 50)
    rate = f"80% passed ({interval.low * 100:.0f}–{interval.high * 100:.0f}%, n=50)"
    text = digest_text(report, {}, {})
    overall, c1, c2 = text.split("== All channels ==")[1].split("\n== ")[:3]
    assert f"refund_policy: {rate}, no clear change (n=50 vs 50)" in overall
    assert f"refund_policy: {rate}" in c1 and c1.startswith("#C1")
    assert c2.startswith("#C2") and "refund_policy" not in c2  # it does not run there
    assert "relevancy" in c2

    message = str(digest_message(report, {}, {})["blocks"])
    assert f"*Your judges*\\nrefund_policy: {rate}" in message
    assert f"<#C1> {rate}" in message and "<#C2> " not in message.split("*Your judges*")[1].split("}")[0]


def test_a_significant_drop_of_the_pass_rate_has_its_arrow():
    report = report_of(week(20, 30), week(48, 2, days=9))
    assert "refund_policy: 40% passed" in digest_text(report, {}, {})
    assert "▼ 96% → 40% (significant)" in digest_text(report, {}, {})


def test_too_few_verdicts_say_so():
    report = report_of(week(3, 1))
    assert "refund_policy: passed: too few (n=4)" in digest_text(report, {}, {})


def test_the_app_home_shows_the_pass_rate_in_the_channels_where_it_runs():
    report = report_of(week(40, 10))
    settings = Settings(_env_file=None)
    default = ChannelRules().for_channel(None, settings)
    view = home_view(report, settings, default, {}, now=NOW)
    sections = [b["text"]["text"] for b in view["blocks"] if b["type"] == "section" and "text" in b]
    [c1] = [s for s in sections if s.startswith("*<#C1>*")]
    [c2] = [s for s in sections if s.startswith("*<#C2>*")]
    assert "refund_policy 80% passed (67–89%, n=50)" in c1
    assert "refund_policy" not in c2


def test_a_prompt_changed_during_the_week_is_said_and_not_compared():
    current = week(10, 2, days=3, prompt="p2") + week(30, 8, days=1, prompt="p3")
    report = report_of(current, week(45, 5, days=9, prompt="p2"))
    change = report.change(report.overall, "refund_policy")
    assert change.pass_shift is None and change.share_low is None  # never set against another version's rate
    numbers = {"p1": 1, "p2": 2, "p3": 3}
    trust = report.trust.comparability["refund_policy"]
    assert change_text("refund_policy", trust.change, numbers, "UTC") == (
        "refund_policy v3 since Wed 09:00 (v2 before: this week's rate mixes them); last week's rate was v2: "
        "not compared"
    )
    from dataclasses import replace

    named = replace(report, trust=replace(report.trust, version_numbers={"refund_policy": numbers}))
    lines = trust_lines(named.trust, ["relevancy", "refund_policy"], timezone="UTC")
    assert any(line.startswith("Judge changed: refund_policy v3 since Wed 09:00") for line in lines)
    assert "no clear change" not in digest_text(named, {}, {}).split("refund_policy:")[1].split("\n")[0]


def test_a_new_version_since_last_week_names_both():
    change = VersionChange("prompt", ((("m1", "b"), NOW),), (("m1", "a"),))
    assert change_text("tone", change, {"a": 1, "b": 2}) == "tone v2 this week; last week's rate was v1: not compared"
    unnumbered = change_text("tone", change, {})
    assert unnumbered == "tone prompt b this week; last week's rate was prompt a: not compared"
    model = VersionChange("model", ((("m2", "a"), NOW),), (("m1", "a"),))
    assert change_text("relevancy", model, {}) == (
        "relevancy: model `m2` this week; last week's figures were `m1`: not compared"
    )
