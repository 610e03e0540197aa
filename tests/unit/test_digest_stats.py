"""The digest's statistics, period logic, privacy rule and rendering: pure functions, tested directly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from common.messages import blocks as block_kit
from common.messages.digest import MAX_BLOCKS, digest_message, digest_text
from common.privacy import may_quote
from common.privacy import may_quote_text as alert_may_quote
from common.reports.period import latest_slot, period_for, scheduled_key
from common.reports.stats import ChannelStats, Prices, Report, channel_stats
from store.rules import ChannelRules
from store.settings import Settings
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import build_report, daily_series

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday, ISO week 48
PERIOD = period_for(NOW, "UTC")
PRICES = Prices(input_per_million=0.15, output_per_million=0.60)
THRESHOLDS = {"C1": {"relevancy": 2}, "C2": {"relevancy": 3}}


def thresholds_for(channel):
    return THRESHOLDS.get(channel, {"relevancy": 2})


_ids = iter(range(1, 1_000_000))


def verdict(
    score, *, judge="relevancy", status="ok", right=0, wrong=0, tokens=(100, 10), cached=False, top=4, prompt_cached=0
):
    return JudgmentRow(
        id=next(_ids),
        judge=judge,
        status=status,
        score=score if status == "ok" else None,
        max_score=top,
        normalized_score=score / top if status == "ok" and score is not None else None,
        prompt_tokens=tokens[0],
        cached_tokens=prompt_cached,
        completion_tokens=tokens[1],
        cached=cached,
        votes_right=right,
        votes_wrong=wrong,
    )


def pair(channel="C1", *, at=None, status="judged", judgments=(), source="capture", private=False, superseded=()):
    pair_id = next(_ids)
    return PairRow(
        id=pair_id,
        channel_id=channel,
        created_at=at or NOW - timedelta(days=1),
        status=status,
        source=source,
        channel_is_private=private,
        answer_ts=f"1700000000.{pair_id:06d}",
        judgments=tuple(judgments),
        superseded=tuple(superseded),
    )


def test_period_is_the_seven_days_up_to_now_keyed_by_the_iso_week_sent_in():
    assert PERIOD.key == "2026-W48"
    assert PERIOD.end == NOW and PERIOD.start == NOW - timedelta(days=7)
    assert PERIOD.previous_start == NOW - timedelta(days=14)
    # Sunday 23:30 UTC is already Monday in Tokyo: the week is the digest time zone's.
    sunday_night = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    assert period_for(sunday_night, "UTC").key == "2026-W47"
    assert period_for(sunday_night, "Asia/Tokyo").key == "2026-W48"
    # ISO years: 31 Dec 2026 (Thursday) belongs to 2026-W53, 1 Jan 2027 too.
    assert period_for(datetime(2027, 1, 1, 12, tzinfo=UTC)).key == "2026-W53"
    forced = period_for(NOW, force=True)
    assert forced.key.startswith("2026-W48+force-") and forced.week_key == "2026-W48"
    with pytest.raises(ValueError):
        period_for(datetime(2026, 11, 23, 9, 0))


def test_a_scheduled_run_is_keyed_by_its_slot_not_by_when_it_runs():
    sunday_slot = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)  # Sunday 23:00, the last hour of 2026-W48
    assert latest_slot(sunday_slot, "sun", 23) == sunday_slot
    assert latest_slot(sunday_slot - timedelta(seconds=1), "sun", 23) == sunday_slot - timedelta(days=7)
    late = sunday_slot + timedelta(hours=2)  # Monday 01:00: ISO week 49
    assert period_for(late).key == "2026-W49"
    assert scheduled_key(late, "sun", 23) == "2026-W48"
    # a worker whose clock is a minute behind beat's, which sent the task at the slot: still this week's slot
    assert scheduled_key(datetime(2026, 11, 23, 8, 59, tzinfo=UTC), "mon", 9) == "2026-W48"
    assert scheduled_key(NOW, "mon", 9) == "2026-W48" == scheduled_key(NOW + timedelta(days=6), "mon", 9)
    # The slot is local: Monday 09:00 in Tokyo is Monday 00:00 UTC.
    assert latest_slot(NOW, "mon", 9, "Asia/Tokyo") == datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
    assert scheduled_key(datetime(2026, 11, 22, 23, 40, tzinfo=UTC), "mon", 9, "Asia/Tokyo") == "2026-W47"
    # Across daylight saving (New York falls back on 1 Nov 2026), Monday 09:00 stays 09:00 local.
    assert latest_slot(datetime(2026, 11, 3, tzinfo=UTC), "mon", 9, "America/New_York") == datetime(
        2026, 11, 2, 14, 0, tzinfo=UTC
    )


def test_an_empty_week_has_no_figures():
    report = build_report(PERIOD, [], [], thresholds_for, PRICES)
    assert report.empty
    assert report.overall.seen == 0 and report.overall.judged == 0 and report.overall.errors == 0
    assert report.overall.judges == {} and report.overall.worst == [] and report.overall.agreement is None
    assert [point.answers for point in report.daily] == [0] * 7
    assert all(point.mean is None for point in report.daily)


def test_an_empty_week_renders_a_short_message():
    report = build_report(PERIOD, [], [], thresholds_for, PRICES)
    message = digest_message(report, {}, {})
    assert "No answers were captured" in message["blocks"][-1]["text"]["text"]
    assert "No answers were captured" in digest_text(report, {}, {})


def test_a_week_of_only_errors_has_no_score():
    rows = [pair(judgments=[verdict(None, status="error", tokens=(50, 0))]) for _ in range(4)]
    stats = channel_stats(None, rows, thresholds_for, PRICES)
    assert stats.seen == 4 and stats.judged == 0 and stats.errored == 4 and stats.errors == 4
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 0 and relevancy.mean is None and relevancy.share_low is None
    assert relevancy.distribution == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}
    assert stats.worst == []
    assert stats.tokens.prompt == 200 and stats.tokens.completion == 0
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    text = digest_text(report, {}, {})
    assert "Judge errors: 4" in text and "no scores" in text


def a_mixed_week_in_two_channels() -> ChannelStats:
    """Scored, errored, null, skipped, merged, cached and /judge answers in C1 (threshold 2) and C2 (threshold 3)."""
    rows = [
        pair("C1", judgments=[verdict(4, right=2)]),
        pair("C1", judgments=[verdict(2, wrong=1)]),  # low in C1 (threshold 2)
        pair("C1", judgments=[verdict(3, tokens=(999, 99), cached=True)]),  # cached: no tokens spent
        pair("C2", judgments=[verdict(3, right=1)]),  # low in C2 (threshold 3)
        pair("C2", judgments=[verdict(None, status="error")]),
        pair("C2", judgments=[verdict(None, judge="grounded", status="null", top=5)]),
        pair("C1", status="skipped_sampling"),
        pair("C1", status="skipped_budget"),
        pair("C1", status="no_question"),
        pair("C1", status="merged"),  # absorbed into another answer: not an answer of its own
        pair("C1", source="command", judgments=[verdict(0, tokens=(300, 30))]),  # a /judge request
    ]
    return channel_stats(None, rows, thresholds_for, PRICES)


def test_answers_are_counted_by_what_became_of_them():
    stats = a_mixed_week_in_two_channels()
    assert stats.seen == 9
    assert stats.judged == 5  # four scored, one null (grounded "no document")
    assert (stats.skipped_sampling, stats.skipped_budget, stats.not_judged, stats.errored) == (1, 1, 1, 1)
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 4 and relevancy.errors == 1
    assert stats.judge("grounded").nulls == 1 and stats.judge("grounded").scored == 0


def test_scores_are_summed_up_as_a_mean_over_a_distribution():
    relevancy = a_mixed_week_in_two_channels().judge("relevancy")
    assert relevancy.mean == pytest.approx(3.0)
    assert relevancy.distribution == {0: 0, 1: 0, 2: 1, 3: 2, 4: 1}


def test_a_score_is_low_against_its_own_channels_threshold():
    relevancy = a_mixed_week_in_two_channels().judge("relevancy")
    assert relevancy.low == 2 and relevancy.share_low == pytest.approx(0.5)
    assert relevancy.thresholds == (2.0, 3.0)


def test_votes_give_the_share_of_alerts_people_agreed_with():
    stats = a_mixed_week_in_two_channels()
    assert (stats.votes_right, stats.votes_wrong) == (3, 1) and stats.agreement == pytest.approx(0.75)


def test_tokens_count_every_judgment_not_served_from_cache():
    stats = a_mixed_week_in_two_channels()
    # The /judge request's included.
    assert stats.tokens.prompt == 100 * 5 + 300 and stats.tokens.completion == 10 * 5 + 30
    assert stats.tokens.cost_usd == pytest.approx(800 / 1e6 * 0.15 + 80 / 1e6 * 0.60)


def test_the_worst_answers_are_captured_ones_lowest_first():
    stats = a_mixed_week_in_two_channels()
    # Lowest normalized score first; the /judge request's 0 is not among them.
    assert [w.score for w in stats.worst] == [2.0, 3.0, 3.0]


def a_week_with_a_rejudged_answer() -> ChannelStats:
    rows = [
        pair("C1", judgments=[verdict(4, tokens=(2000, 200))], superseded=[verdict(1, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(2)]),
    ]
    return channel_stats(None, rows, thresholds_for, PRICES)


def test_a_rejudged_answer_scores_only_the_current_judgment():
    stats = a_week_with_a_rejudged_answer()
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 2 and relevancy.mean == pytest.approx(3.0)  # (4 + 2) / 2: the 1 is superseded
    assert relevancy.low == 1 and [w.score for w in stats.worst] == [2.0, 4.0]
    assert stats.judged == 2 and stats.seen == 2


def test_a_rejudged_answer_costs_both_judgments():
    stats = a_week_with_a_rejudged_answer()
    assert (stats.tokens.prompt, stats.tokens.completion) == (3100, 310)
    assert stats.tokens.cost_usd == pytest.approx(3100 / 1e6 * 0.15 + 310 / 1e6 * 0.60)


def a_better_week_than_the_last() -> Report:
    previous = [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(s)]) for s in (1, 2, 4, 4)]
    current = [pair("C1", judgments=[verdict(s)]) for s in (3, 4, 4, 4)]
    return build_report(PERIOD, current, previous, thresholds_for, PRICES)


def test_the_overall_change_against_the_previous_week():
    report = a_better_week_than_the_last()
    change = report.change(report.overall, "relevancy")
    assert change.mean == pytest.approx(3.75 - 2.75)
    assert change.share_low == pytest.approx(0.0 - 0.5)


def test_a_channels_change_against_the_previous_week():
    report = a_better_week_than_the_last()
    assert report.change(report.channels[0], "relevancy").mean == pytest.approx(1.0)


def test_the_dry_run_shows_the_change_against_the_previous_week():
    report = a_better_week_than_the_last()
    assert "(+1.0)" in digest_text(report, {}, {}) and "(−50 pts)" in digest_text(report, {}, {})


def test_daily_series_puts_answers_in_their_24_hour_slice():
    rows = [
        pair(at=PERIOD.start + timedelta(hours=1), judgments=[verdict(4)]),
        pair(at=PERIOD.start + timedelta(hours=2), judgments=[verdict(2)]),
        pair(at=PERIOD.start + timedelta(days=6, hours=23), judgments=[verdict(None, status="error")]),
        pair(at=PERIOD.start - timedelta(minutes=1), judgments=[verdict(0)]),  # the week before
    ]
    points = daily_series(rows, PERIOD, "relevancy")
    assert len(points) == 7 and points[0].start == PERIOD.start
    assert (points[0].answers, points[0].scored, points[0].mean) == (2, 2, 3.0)
    assert (points[6].answers, points[6].scored, points[6].mean) == (1, 0, None)
    assert sum(p.answers for p in points) == 3


def three_channels_one_quiet_one_unwatched() -> Report:
    """C1 answered, C9 configured but quiet, CX answered but no longer watched."""
    rows = [pair("C1", judgments=[verdict(4)]), pair("CX", judgments=[verdict(0)])]
    return build_report(
        PERIOD, rows, [], thresholds_for, PRICES, channels=["C9"], is_watched=lambda channel: channel != "CX"
    )


def test_a_configured_channel_appears_even_when_quiet():
    report = three_channels_one_quiet_one_unwatched()
    assert [stats.channel_id for stats in report.channels] == ["C1", "C9"]
    assert report.channels[1].seen == 0


def test_an_unwatched_channel_never_appears():
    report = three_channels_one_quiet_one_unwatched()
    assert "CX" not in [stats.channel_id for stats in report.channels]
    assert report.overall.seen == 1


def test_private_text_is_quoted_only_in_the_alert_channel_its_rule_allows():
    settings = Settings(_env_file=None, alert_channel="CALERTS")
    rules = ChannelRules.model_validate(
        {"channels": {"GPRIV": {"quote_private": True, "alert_channel": "CQUOTE"}, "GOTHER": {}}}
    )
    assert may_quote("C1", False, rules, settings, "CANY")
    assert not may_quote("GOTHER", True, rules, settings, "CALERTS")
    assert not may_quote("GPRIV", True, rules, settings, "CALERTS")
    assert may_quote("GPRIV", True, rules, settings, "CQUOTE")
    assert not may_quote("GPRIV", True, rules, settings, None)


def test_private_text_needs_the_channels_own_rule_to_name_the_alert_channel_as_alerts_do():
    settings = Settings(_env_file=None, alert_channel="CALERTS")
    # Quoting on, but the channel's rule names no alert channel: its alerts would not quote, nor may the digest.
    own_quote_only = ChannelRules.model_validate({"channels": {"GPRIV": {"quote_private": True}}})
    assert not may_quote("GPRIV", True, own_quote_only, settings, "CALERTS")
    # Quoting on and an alert channel in the defaults: inherited, not chosen by the channel.
    from_defaults = ChannelRules.model_validate(
        {"defaults": {"quote_private": True, "alert_channel": "CALERTS"}, "channels": {"GPRIV": {}}}
    )
    assert not may_quote("GPRIV", True, from_defaults, settings, "CALERTS")
    assert not may_quote("GUNLISTED", True, from_defaults, settings, "CALERTS")
    # The defaults may still turn quoting on for a channel whose own rule names its alert channel.
    named = ChannelRules.model_validate(
        {"defaults": {"quote_private": True}, "channels": {"GPRIV": {"alert_channel": "CQUOTE"}}}
    )
    assert may_quote("GPRIV", True, named, settings, "CQUOTE")
    assert not may_quote("GPRIV", True, named, settings, "CALERTS")
    # Exactly the alerts' answer wherever the destination is the channel's alert channel.
    for rules in (own_quote_only, from_defaults, named):
        effective = rules.for_channel("GPRIV", settings)
        own = rules.channels.get("GPRIV")
        alerts = alert_may_quote(
            True, rule_names_alert_channel=bool(own and own.alert_channel), quote_private=effective.quote_private
        )
        assert may_quote("GPRIV", True, rules, settings, effective.alert_channel) == alerts


def a_message_quoting_only_the_public_answer() -> str:
    """A public and a private answer, both linked; only the public one's question and answer given to quote."""
    public = pair("C1", judgments=[verdict(0)])
    private = pair("GPRIV", private=True, judgments=[verdict(1)])
    report = build_report(PERIOD, [public, private], [], thresholds_for, PRICES)
    quotes = {public.id: ("How do I <reset> it?", "Try & see")}
    links = {public.id: "https://example.slack.com/archives/C1/p1", private.id: "https://example.slack.com/x"}
    message = digest_message(report, links, quotes, PRICES)
    return str(message["blocks"])


def test_message_escapes_what_it_quotes():
    rendered = a_message_quoting_only_the_public_answer()
    assert "How do I &lt;reset&gt; it?" in rendered and "Try &amp; see" in rendered


def test_message_quotes_only_what_it_is_given():
    rendered = a_message_quoting_only_the_public_answer()
    assert "<https://example.slack.com/x|view answer>" in rendered  # the private answer: score and link only
    assert "*1/4* relevancy in <#GPRIV>" in rendered


def test_digest_quotes_mentions_without_pinging():
    public = pair("C1", judgments=[verdict(0)])
    report = build_report(PERIOD, [public], [], thresholds_for, PRICES)
    quotes = {public.id: ("<!here> @channel what now?", "Ask <!subteam^S1|@team> or @everyone")}
    message = digest_message(report, {public.id: "https://example.slack.com/p1"}, quotes, PRICES)
    rendered = json.dumps(message["blocks"], ensure_ascii=False)
    assert "&lt;!here&gt;" in rendered and "&lt;!subteam^S1|@team&gt;" in rendered
    assert "@channel" not in rendered and "@everyone" not in rendered
    assert f"@{block_kit.ZERO_WIDTH_SPACE}channel" in rendered


def two_channels_three_judgments_each_with_tokens():
    rows = [
        pair("C1", judgments=[verdict(4, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(2, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(3, tokens=(1000, 100))]),
        pair("C2", judgments=[verdict(3, tokens=(2000, 0)), verdict(5, judge="grounded", top=5, tokens=(500, 50))]),
    ]
    return build_report(PERIOD, rows, [], thresholds_for, PRICES)


def test_the_message_shows_each_judges_distribution_with_each_channels_tokens_cost():
    report = two_channels_three_judgments_each_with_tokens()
    message = digest_message(report, {}, {}, PRICES)
    fields = {f["text"].split("\n")[0]: f["text"] for f in message["blocks"][2]["fields"]}
    assert "scores 0:0 · 1:0 · 2:1 · 3:2 · 4:1" in fields["*Relevancy*"]
    assert "scores 1:0 · 2:0 · 3:0 · 4:0 · 5:1" in fields["*Grounded*"]
    sections = {b["text"]["text"].split(" ")[0]: b["text"]["text"] for b in message["blocks"] if "text" in b}
    c1, c2 = sections["*<#C1>*"], sections["*<#C2>*"]
    assert "scores 0:0 · 1:0 · 2:1 · 3:1 · 4:1" in c1
    assert "3,300 tokens ≈ $0.0006" in c1  # 3,000 in at $0.15/M + 300 out at $0.60/M
    assert "scores 0:0 · 1:0 · 2:0 · 3:1 · 4:0" in c2 and "scores 1:0 · 2:0 · 3:0 · 4:0 · 5:1" in c2
    assert "2,550 tokens ≈ $0.0004" in c2
    assert "grounded: no scores" in c1  # a judge without scores in a channel gets no distribution


def test_the_dry_run_shows_each_judges_distribution_with_each_channels_tokens_cost():
    report = two_channels_three_judgments_each_with_tokens()
    text = digest_text(report, {}, {}, PRICES)
    channel_c1 = text.split("== #C1 ==")[1].split("== #C2 ==")[0]
    assert "  scores 0:0 · 1:0 · 2:1 · 3:1 · 4:1" in channel_c1
    assert "LLM usage: 3,300 tokens (3,000 in, 300 out) · ≈ $0.0006" in channel_c1
    assert "LLM usage: 2,550 tokens (2,500 in, 50 out) · ≈ $0.0004" in text.split("== #C2 ==")[1]


CACHED_PRICED = Prices(input_per_million=0.15, output_per_million=0.60, cached_input_per_million=0.03)


def mostly_cached_input() -> list[PairRow]:
    """1,000,000 input tokens of which 900,000 cached, 100,000 out."""
    return [pair("C1", judgments=[verdict(4, tokens=(1_000_000, 100_000), prompt_cached=900_000)])]


def test_cached_input_is_priced_at_the_cached_rate():
    """0.1 M x $0.15 + 0.9 M x $0.075 (half the input price when no cached price is set) + 0.1 M x $0.60 = $0.1425;
    with a cached price of $0.03: $0.102."""
    rows = mostly_cached_input()
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    assert report.overall.tokens.cached == 900_000
    assert abs(report.overall.tokens.cost_usd - 0.1425) < 1e-9
    assert abs(build_report(PERIOD, rows, [], thresholds_for, CACHED_PRICED).overall.tokens.cost_usd - 0.102) < 1e-9


def test_the_cost_line_shows_cached_input_with_its_price():
    report = build_report(PERIOD, mostly_cached_input(), [], thresholds_for, PRICES)
    text = digest_text(report, {}, {}, PRICES)
    assert "LLM usage: 1,100,000 tokens (1,000,000 in of which 900,000 cached, 100,000 out) · ≈ $0.14" in text
    assert "Cost estimated at $0.15 / $0.075 / $0.6 per million input / cached input / output tokens." in text
    message = digest_message(report, {}, {}, PRICES)
    assert "$0.15 / $0.075 / $0.6 per million input / cached input / output tokens." in str(message["blocks"][-1])
    assert "$0.15 / $0.03 / $0.6 per million" in digest_text(report, {}, {}, CACHED_PRICED)


def test_unset_prices_are_the_judge_models_list_prices(monkeypatch):
    for name in ("RELMON_PRICE_CACHED_INPUT", "RELMON_COST_INPUT_PER_MTOK", "RELMON_COST_OUTPUT_PER_MTOK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("RELMON_JUDGE_MODEL", raising=False)
    default = Settings(_env_file=None)
    assert (default.judge_model, default.input_price, default.cached_input_price, default.output_price) == (
        "gpt-4.1-mini",
        0.40,
        0.10,
        1.60,
    )
    older = Settings(_env_file=None, judge_model="gpt-4o-mini")
    assert (older.input_price, older.cached_input_price, older.output_price) == (0.15, 0.075, 0.60)
    # A model without a list price here (a local or gateway model) is priced as the default until it is set.
    assert Settings(_env_file=None, judge_model="llama3.1:8b").input_price == 0.40


def test_the_cached_input_price_defaults_to_half_an_input_price_that_is_set(monkeypatch):
    monkeypatch.delenv("RELMON_PRICE_CACHED_INPUT", raising=False)
    assert Settings(_env_file=None, cost_per_million_input_tokens=0.4).cached_input_price == 0.2
    monkeypatch.setenv("RELMON_PRICE_CACHED_INPUT", "0.05")
    assert Settings(_env_file=None).cached_input_price == 0.05


def test_many_channels_stay_within_slack_block_limits():
    rows = [
        pair(
            f"C{i:03d}",
            judgments=[
                verdict(i % 5, tokens=(123_456, 7_890)),
                verdict(i % 3, judge="correctness", top=2),
                verdict(1 + i % 5, judge="grounded", top=5),
            ],
        )
        for i in range(120)
        for _ in range(4)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    long_text = "word " * 400
    quotes = {row.id: (long_text, long_text) for row in rows}
    links = {row.id: "https://example.slack.com/archives/C1/p" + "9" * 60 for row in rows}
    message = digest_message(report, links, quotes, PRICES)
    assert len(message["blocks"]) <= MAX_BLOCKS
    assert block_kit.text_length(message["blocks"]) <= block_kit.MAX_MESSAGE_TEXT
    assert "more channels" in str(message["blocks"][-2])
    channel_sections = [b for b in message["blocks"] if "*<#C" in b.get("text", {}).get("text", "")[:5]]
    assert channel_sections and all("tokens ≈ $" in b["text"]["text"] for b in channel_sections)
    assert all(b["text"]["text"].count("scores ") == 3 for b in channel_sections)
    for block in message["blocks"]:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "section" and "fields" in block:
            assert len(block["fields"]) <= 10
            assert all(len(field["text"]) <= 2000 for field in block["fields"])
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150


def busy_week(channels: int, *, quote_chars: int = 2_000):
    """`channels` channels with three judges each, four answers apiece, every answer quotable at length."""
    rows = [
        pair(
            f"C{i:03d}",
            judgments=[verdict(i % 5), verdict(i % 3, judge="correctness", top=2), verdict(1, judge="grounded", top=5)],
        )
        for i in range(channels)
        for _ in range(4)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    text = "Why is the sky blue on some days and grey on others? " * (quote_chars // 54 + 1)
    quotes = {row.id: (text[:quote_chars], text[:quote_chars]) for row in rows}
    links = {row.id: f"https://example.slack.com/archives/C1/p17000000{row.id:08d}" for row in rows}
    return report, links, quotes


def channel_sections(message: dict) -> list[str]:
    return [b["text"]["text"] for b in message["blocks"] if b.get("text", {}).get("text", "").startswith("*<#C")]


def closing_context(message: dict) -> str:
    return message["blocks"][-2]["elements"][0]["text"]


def thirty_busy_channels() -> dict:
    report, links, quotes = busy_week(30)
    return digest_message(report, links, quotes, PRICES, chart_in_thread=True)


def test_thirty_busy_channels_fit_slacks_total():
    """30 channel sections of up to 2,900 characters (12 channels with three judges were already ≈ 21.5k): Slack
    answered `msg_blocks_too_long`, and the week's digest was never sent."""
    blocks = thirty_busy_channels()["blocks"]
    assert block_kit.text_length(blocks) <= block_kit.MAX_MESSAGE_TEXT and len(blocks) <= MAX_BLOCKS


def test_thirty_busy_channels_keep_the_overall_section_whole():
    blocks = thirty_busy_channels()["blocks"]
    assert blocks[0]["type"] == "header" and "fields" in blocks[2]  # the overall figures, whole
    assert [f["text"].split("\n")[0] for f in blocks[2]["fields"]][:4] == [
        "*Answers*", "*Relevancy*", "*Correctness*", "*Grounded*",
    ]  # fmt: skip
    worst = next(b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("*Worst answers*"))
    assert worst.count("view answer") == 3 and "sky blue" in worst  # the week's worst answers stay whole


def test_thirty_busy_channels_end_with_a_count_of_those_left_out():
    message = thirty_busy_channels()
    shown = channel_sections(message)
    assert 0 < len(shown) < 30
    assert closing_context(message) == (
        f"…and {30 - len(shown)} more channels: see `/judge stats #channel` or the App Home"
    )


def test_thirty_busy_channels_link_to_their_answers_instead_of_quoting_them():
    shown = channel_sections(thirty_busy_channels())
    assert all(s.count("scores ") == 3 and "view answer" in s and "sky blue" not in s for s in shown)


def test_thirty_busy_channels_show_the_first_ones():
    shown = channel_sections(thirty_busy_channels())
    assert [s.split("*")[1] for s in shown] == [f"<#C{i:03d}>" for i in range(len(shown))]


def test_quotes_become_links_before_any_channel_is_left_out():
    """8 channels with quotes were ≈ 14k characters in all: without the quotes of their worst answers, all 8 fit."""
    report, links, quotes = busy_week(8, quote_chars=160)
    full = digest_message(report, links, quotes, PRICES)
    assert block_kit.text_length(full["blocks"]) <= block_kit.MAX_MESSAGE_TEXT
    shown = channel_sections(full)
    assert len(shown) == 8 and "more channels" not in str(full["blocks"])
    assert all("view answer" in s and "sky blue" not in s for s in shown)  # the channels' quotes go first
    assert "sky blue" in str(full["blocks"][3])  # the week's worst answers keep theirs
    # A quiet week fits whole: the quotes stay.
    report, links, quotes = busy_week(2, quote_chars=160)
    small = digest_message(report, links, quotes, PRICES)
    assert all("sky blue" in s for s in channel_sections(small))
    assert "sky blue" in str(small["blocks"][3])  # and in the week's worst answers


def drawn_texts(report) -> tuple[object, list]:
    """The chart's figure, drawn as the PNG is, and its visible non-empty texts."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from workers.digest.chart import STYLE, chart_figure

    with matplotlib.rc_context(STYLE):
        figure = chart_figure(report)
        FigureCanvasAgg(figure).draw()
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return figure, texts


def week_of_scores() -> list[PairRow]:
    return [
        pair(channel, at=PERIOD.start + timedelta(days=day, hours=3), judgments=[verdict((day + i) % 5)])
        for day in range(7)
        for i, channel in enumerate(["C1", "C1", "C2"])
    ]


def test_chart_reads_at_slacks_360_px_preview():
    from matplotlib.axes import Axes

    from workers.digest.chart import day_label

    report = build_report(PERIOD, week_of_scores(), [], thresholds_for, PRICES)
    figure, texts = drawn_texts(report)
    width_in, height_in = figure.get_size_inches()
    assert 0.8 <= width_in / height_in <= 1.4  # stacked panels, not a 2.6:1 strip
    # Every text at least 8 px tall once the image is scaled to 360 px wide.
    for text in texts:
        assert text.get_fontsize() / 72 * 360 / width_in >= 8, text.get_text()
    strings = [t.get_text() for t in texts]
    assert "relmon weekly digest" not in " ".join(strings).lower()  # no title repeating the file's
    daily, distribution = [a for a in figure.axes if isinstance(a, Axes) and a.get_ylabel() != "answers per day"]
    assert daily.get_position().y0 > distribution.get_position().y1  # stacked: daily on top
    assert daily.get_ylabel() and distribution.get_xlabel() == "relevancy score" and distribution.get_ylabel()
    assert [t.get_text() for t in daily.get_xticklabels()] == [day_label(report, i) for i in range(7)]
    assert day_label(report, 0) == "Mon 16"  # the week starts Monday 16 November 09:00 UTC
    assert len(daily.texts) == 1  # the latest mean only, no per-point labels
    # Two channels, two thresholds: the line is still drawn, at the default, and the legend says so.
    assert "alert ≤ 2 (1 of 2 channels)" in strings


def test_chart_threshold_is_the_one_most_channels_use_or_the_default():
    from workers.digest.chart import chart_threshold

    rows = [pair(c, judgments=[verdict(3)]) for c in ("C1", "C2", "C3")]
    same = build_report(PERIOD, rows, [], lambda c: {"relevancy": 2}, PRICES)
    assert chart_threshold(same, "relevancy") == (2, "alert ≤ 2")
    mostly_three = {"C1": 3, "C2": 3, "C3": 1}
    report = build_report(PERIOD, rows, [], lambda c: {"relevancy": mostly_three.get(c, 2)}, PRICES)
    assert chart_threshold(report, "relevancy") == (3, "alert ≤ 3 (2 of 3 channels)")
    assert chart_threshold(build_report(PERIOD, [], [], thresholds_for, PRICES), "relevancy") == (2, "alert ≤ 2")


def test_a_week_with_only_errors_says_so_on_the_chart():
    from workers.digest.chart import no_scores_note, render_chart

    rows = [
        pair(at=PERIOD.start + timedelta(hours=5 + 7 * i), judgments=[verdict(None, status="error")]) for i in range(10)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    assert no_scores_note(report) == "no scores: 10 judgments failed"
    figure, texts = drawn_texts(report)
    assert "no scores: 10 judgments failed" in [t.get_text() for t in texts]
    assert len(figure.axes) == 1 and figure.axes[0].get_ylabel() == "answers per day"  # no empty score panels
    assert render_chart(report)[:8] == b"\x89PNG\r\n\x1a\n"
    unscorable = [pair(judgments=[verdict(None, judge="grounded", status="null", top=5)])]
    assert "could not be scored" in no_scores_note(build_report(PERIOD, unscorable, [], thresholds_for, PRICES))
