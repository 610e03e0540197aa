"""Outcome figures of the digest and App Home: the pure statistics, their rendering and the chart's daily
resolution rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.messages import blocks as block_kit
from common.messages.digest import MAX_BLOCKS, digest_message, digest_text
from common.messages.home import home_view
from common.messages.outcomes import outcome_line, score_line, teammate_line
from common.reports.costs import Prices
from common.reports.outcomes import OutcomeStats, outcome_change
from common.reports.period import period_for
from common.reports.stats import Report
from store.rules import ChannelRules
from store.settings import Settings
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import build_report, outcome_stats

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
PERIOD = period_for(NOW, "UTC")
PRICES = Prices(input_per_million=0.15, output_per_million=0.60)
SETTINGS = Settings(_env_file=None)
DEFAULT_RULE = ChannelRules().for_channel(None, SETTINGS)
_ids = iter(range(1, 1_000_000))


def thresholds_for(_channel):
    return {"relevancy": 2}


def verdict(score: float, *, judge: str = "relevancy", top: int = 4) -> JudgmentRow:
    return JudgmentRow(
        id=next(_ids), judge=judge, status="ok", score=score, max_score=top, normalized_score=score / top
    )


def answer(
    signals=(), *, channel="C1", closed=True, score=None, correctness=None, reference=False, at=None, source="capture"
) -> PairRow:
    judgments = [] if score is None else [verdict(score)]
    if correctness is not None:
        judgments.append(verdict(correctness, judge="correctness", top=2))
    pair_id = next(_ids)
    return PairRow(
        id=pair_id,
        channel_id=channel,
        created_at=at or NOW - timedelta(days=1),
        status="judged",
        source=source,
        answer_ts=f"1700000000.{pair_id:06d}",
        judgments=tuple(judgments),
        has_reference=reference,
        window_closed=closed,
        signals=tuple(signals),
    )


def this_week() -> list[PairRow]:
    return [
        answer(["resolved"], score=4),
        answer(["resolved", "positive_reaction"], score=3),
        answer(["thanked", "resolved"], score=4, channel="C2"),
        # Failed: a re-ask with a 👎, though the judge scored it well.
        answer(["reask", "negative_reaction"], score=4),
        # Failed: a re-ask and a teammate's reply, which became the reference; correctness at the top score.
        answer(["reask", "human_takeover"], score=1, correctness=2, reference=True, channel="C2"),
        # A teammate stepped in, not at the top score.
        answer(["human_takeover"], score=0, correctness=1, reference=True),
        answer(["escalation"], score=1),
        # Not counted: a window still open (its signals are not final) and an answer never watched.
        answer(["reask", "negative_reaction"], closed=False, score=0),
        answer(score=2, closed=None),
    ]


def last_week() -> list[PairRow]:
    at = NOW - timedelta(days=9)
    return [answer(["resolved"], at=at), answer(["reask"], at=at), answer(["resolved"], at=at, channel="C2")]


def this_weeks_outcomes() -> OutcomeStats:
    return outcome_stats(None, this_week(), "relevancy")


def two_weeks_report() -> Report:
    return build_report(PERIOD, this_week(), last_week(), thresholds_for, PRICES)


def four_times_two_weeks() -> Report:
    """Each week's answers four times over: enough closed windows overall for rates (28 and 12), not in C2 (8)."""
    rows = [row for _ in range(4) for row in this_week()]
    return build_report(PERIOD, rows, [row for _ in range(4) for row in last_week()], thresholds_for, PRICES)


def test_outcomes_count_only_closed_windows() -> None:
    stats = this_weeks_outcomes()
    assert (stats.closed, stats.open) == (7, 1)
    assert stats.rate("resolved") == 3 / 7 and stats.rate("reasked") == 2 / 7
    assert stats.rate("taken_over") == 2 / 7 and stats.rate("escalated") == 1 / 7
    assert (stats.positive, stats.negative, stats.failed) == (1, 1, 2)


def test_scores_are_set_against_outcomes() -> None:
    stats = this_weeks_outcomes()
    assert stats.score_resolved.mean == 11 / 3 and stats.score_resolved.count == 3
    assert stats.score_failed.mean == 5 / 2 and stats.score_failed.count == 2


def test_teammate_correctness_counts_where_a_teammate_stepped_in() -> None:
    stats = this_weeks_outcomes()
    assert (stats.teammate_correct, stats.teammate_judged) == (1, 2) and stats.teammate_correct_rate == 0.5


def a_week_without_closed_windows() -> OutcomeStats:
    return outcome_stats(None, [answer(["reask"], closed=False)], "relevancy")


def test_a_week_without_closed_windows_has_no_rates() -> None:
    empty = a_week_without_closed_windows()
    assert empty.closed == 0 and empty.rate("resolved") is None and empty.teammate_correct_rate is None


def test_a_week_without_closed_windows_has_no_change() -> None:
    assert outcome_change(a_week_without_closed_windows(), outcome_stats(None, last_week(), "relevancy")).rates == {}


def test_a_week_without_closed_windows_says_its_outcomes_are_still_watched() -> None:
    assert outcome_line(a_week_without_closed_windows()) == "no outcomes yet (1 still watched)"


def test_no_outcomes_at_all_render_as_no_lines() -> None:
    assert outcome_line(OutcomeStats(None)) == score_line(OutcomeStats(None), "relevancy") == ""
    assert teammate_line(OutcomeStats(None)) == ""


def test_report_has_the_outcomes_of_all_channels() -> None:
    outcomes = two_weeks_report().outcomes
    assert outcomes.judge == "relevancy" and outcomes.overall.closed == 7


def test_report_has_each_channels_outcomes() -> None:
    outcomes = two_weeks_report().outcomes
    assert outcomes.of("C1").closed == 5 and outcomes.of("C2").closed == 2


def test_report_compares_the_outcomes_with_last_week() -> None:
    outcomes = two_weeks_report().outcomes
    change = outcomes.change(None)
    assert abs(change.rates["resolved"] - (3 / 7 - 2 / 3)) < 1e-9 and change.positive == 1 and change.negative == 1
    assert outcomes.change("C2").rates["resolved"] == 0.5 - 1.0


def test_report_has_the_outcomes_of_each_day() -> None:
    daily = [p for p in two_weeks_report().outcomes.daily if p.closed]
    assert len(daily) == 1 and (daily[0].closed, daily[0].resolved) == (7, 3)


def test_pairs_from_commands_or_imports_have_no_outcomes() -> None:
    rows = [answer(["resolved"], source="command"), answer(closed=None, source="import")]
    assert build_report(PERIOD, rows, [], thresholds_for, PRICES).outcomes.overall.closed == 0


def test_the_digest_message_shows_the_outcome_figures() -> None:
    report = four_times_two_weeks()
    message = digest_message(report, {}, {}, PRICES, chart_in_thread=True)
    overall = next(f["text"] for f in message["blocks"][2]["fields"] if f["text"].startswith("*Outcomes*"))
    # The resolution tiers replace the single resolved rate: 12 resolved alone, 8 by a teammate, 4 escalated, 4
    # re-asked (of 28 closed windows; the 4 open ones are not counted).
    assert (
        "resolution (30-min window): resolved without help 43% (27–61%, n=28), no clear change (n=28 vs 12) · "
        "resolved by a teammate 29% (15–47%, n=28), ▲ 0% → 29% (significant) · escalated 14% (6–31%, n=28), no clear "
        "change (n=28 vs 12) · unresolved 14% (6–31%, n=28), no clear change (n=28 vs 12): re-asked 4 · 4 still in "
        "their window" in overall
    )
    assert (
        "re-asked 29% (15–47%, n=28), no clear change (n=28 vs 12) · taken over 29% (15–47%, n=28), ▲ 0% → 29% "
        "(significant) · escalated 14% (6–31%, n=28), no clear change (n=28 vs 12)" in overall
    )
    assert "reactions 4 positive (+4), 4 negative (+4) · of 28 answers" in overall
    assert "relevancy mean 3.67 (12) resolved vs 2.50 (8) failed" in overall
    assert "correctness top score on 4 of 8 answers (too few for a rate) where a teammate stepped in" in overall
    sections = [b["text"]["text"] for b in message["blocks"] if b.get("text", {}).get("text", "").startswith("*<#C")]
    assert "outcomes: rates: too few (n=8)" in sections[1]  # C2
    assert (
        "outcomes: resolution (30-min window): too few (n=8): 4 resolved without help, 4 resolved by a teammate"
        in (sections[1])
    )
    assert "outcomes: correctness top score on 4 of 4 answers" in sections[1]
    text = str(message["blocks"])
    assert "the daily resolution rate" in text and "count answers whose outcome window has closed" in text


def test_the_dry_run_shows_the_outcome_figures() -> None:
    report = four_times_two_weeks()
    dry = digest_text(report, {}, {}, PRICES)
    overall = dry.split("== #C1 ==")[0]
    assert "Outcomes: resolution (30-min window): resolved without help 43% (27–61%, n=28), no clear change" in overall
    c1 = dry.split("== #C1 ==")[1].split("== #C2 ==")[0]
    assert "resolved without help 40% (22–61%, n=20), too few to compare (n=20 vs 8)" in c1
    assert "Outcomes: rates: too few (n=8)" in dry.split("== #C2 ==")[1]
    assert dry.rstrip().endswith("count answers whose outcome window has closed.")


def test_a_week_without_outcomes_renders_as_before() -> None:
    report = build_report(PERIOD, [answer(score=3, closed=None)], [], thresholds_for, PRICES)
    message = digest_message(report, {}, {}, PRICES)
    assert "Outcomes" not in str(message["blocks"]) and "outcome window" not in str(message["blocks"])
    assert "Outcomes" not in digest_text(report, {}, {}, PRICES)


def test_many_channels_with_outcomes_stay_within_slack_limits() -> None:
    signals = [["resolved", "positive_reaction"], ["reask", "negative_reaction", "human_takeover", "escalation"]]
    rows = [
        answer(signals[i % 2], channel=f"C{c:03d}", score=i % 5, correctness=i % 3, reference=True)
        for c in range(120)
        for i in range(4)
    ]
    report = build_report(PERIOD, rows, rows, thresholds_for, PRICES)
    message = digest_message(report, {}, {}, PRICES, chart_in_thread=True)
    assert len(message["blocks"]) <= MAX_BLOCKS
    assert block_kit.text_length(message["blocks"]) <= block_kit.MAX_MESSAGE_TEXT
    for block in message["blocks"]:
        if "fields" in block:
            assert len(block["fields"]) <= 10 and all(len(f["text"]) <= 2000 for f in block["fields"])
        elif block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
    view = home_view(report, SETTINGS, DEFAULT_RULE, {}, now=NOW)
    assert len(view["blocks"]) <= 100
    assert all(len(b["text"]["text"]) <= 3000 for b in view["blocks"] if b["type"] == "section" and "text" in b)
    home = view["blocks"][2]["text"]["text"]
    assert "outcomes: resolution (30-min window): resolved without help 50% (46–54%, n=480), no clear change" in home


def home_text() -> str:
    return str(home_view(four_times_two_weeks(), SETTINGS, DEFAULT_RULE, {}, now=NOW)["blocks"])


def test_home_shows_the_outcomes_of_all_channels() -> None:
    text = home_text()
    assert "\\noutcomes: resolution (30-min window): resolved without help 43% (27–61%, n=28), no clear change" in text
    assert "outcomes: re-asked 29% (15–47%, n=28)" in text
    assert "outcomes: relevancy mean 3.67 (12) resolved vs 2.50 (8) failed" in text


def test_home_shows_each_channels_outcomes() -> None:
    text = home_text()
    assert "*<#C2>*" in text and "outcomes: rates: too few (n=8)" in text


def test_home_says_which_answers_the_outcomes_count() -> None:
    assert "count answers whose outcome window has closed" in home_text()


def test_chart_draws_the_daily_resolution_rate() -> None:
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from workers.digest.chart import STYLE, chart_figure, render_chart

    rows = [
        answer(["resolved"] if i < day % 3 + 1 else ["reask"], score=3, at=PERIOD.start + timedelta(days=day, hours=2))
        for day in (0, 2, 5)
        for i in range(3)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    with matplotlib.rc_context(STYLE):
        figure = chart_figure(report)
        FigureCanvasAgg(figure).draw()
    (panel,) = [a for a in figure.axes if a.get_title(loc="left") == "Daily resolution rate"]
    (line,) = [line for line in panel.get_lines() if line.get_label() == "resolved"]
    assert list(line.get_xdata()) == [0, 2, 5]  # days without a closed window are left out
    assert [round(y) for y in line.get_ydata()] == [33, 100, 100]
    width, height = figure.get_size_inches()
    assert 0.8 <= width / height <= 1.4
    assert render_chart(report)[:8] == b"\x89PNG\r\n\x1a\n"
    # Without scores, the resolution rate is still drawn under the answers per day.
    unscored = [answer(["resolved"], at=PERIOD.start + timedelta(hours=5))]
    with matplotlib.rc_context(STYLE):
        figure = chart_figure(build_report(PERIOD, unscored, [], thresholds_for, PRICES))
    titles = [a.get_title(loc="left") for a in figure.axes]
    assert titles == ["Answers per day (no relevancy scores)", "Daily resolution rate"]
