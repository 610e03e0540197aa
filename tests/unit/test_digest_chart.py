"""The digest's chart: readable at Slack's preview size, its threshold line, and a week without scores."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise

from common.reports.period import period_for
from common.reports.topics import TopicBar
from store.stats_queries import PairRow
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict


def drawn_texts(report, topics=()) -> tuple[object, list]:
    """The chart's figure, drawn as the PNG is, and its visible non-empty texts."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    from workers.digest.chart import STYLE, chart_figure

    with matplotlib.rc_context(STYLE):
        figure = chart_figure(report, topics)
        FigureCanvasAgg(figure).draw()
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return figure, texts


def week_of_scores() -> list[PairRow]:
    return [
        pair(channel, at=PERIOD.start + timedelta(days=day, hours=3), judgments=[verdict((day + i) % 5)])
        for day in range(7)
        for i, channel in enumerate(["C1", "C1", "C2"])
    ]


def assert_labels_apart(axes) -> None:
    """The day labels, as drawn, do not run into each other."""
    boxes = [t.get_window_extent() for t in axes.get_xticklabels() if t.get_text()]
    assert boxes and all(left.x1 < right.x0 for left, right in pairwise(boxes))


def test_chart_reads_at_slacks_360_px_preview():
    from matplotlib.axes import Axes

    from common.messages.chart_text import day_labels

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
    # Monday 16 November 09:00 UTC to Monday 23 09:00: eight calendar days, both Mondays in part, as the axis says.
    assert [t.get_text() for t in daily.get_xticklabels()] == day_labels(report)
    weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun", "Mon"]
    assert day_labels(report) == [f"{name}\n{16 + i}" for i, name in enumerate(weekdays)]
    assert daily.get_xlabel() == "UTC days · Mon 16 from 09:00 · Mon 23 until 09:00"
    assert_labels_apart(daily)
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


def visible_ticks(axis) -> list[float]:
    """The tick values an axis shows (the locator may place some beyond the view)."""
    low, high = sorted(axis.get_view_interval())
    return [float(t) for t in axis.get_majorticklocs() if low - 1e-9 <= t <= high + 1e-9]


def count_axes(figure) -> dict[str, object]:
    """The figure's count axes by label: answers per day, answers per score, failed questions per topic."""
    found = {}
    for axes in figure.axes:
        for axis, label in ((axes.yaxis, axes.get_ylabel()), (axes.xaxis, axes.get_xlabel())):
            if label in ("answers per day", "answers", "failed questions"):
                found[label] = axis
    return found


def test_counts_are_ticked_in_whole_numbers():
    """Few answers a day and a topic or two with one or two failed questions: where matplotlib's own ticks go
    0, 0.5, 1, 1.5; no half answer or half question on any count axis."""
    rows = [pair(at=PERIOD.start + timedelta(days=day, hours=3), judgments=[verdict(day % 5)]) for day in (0, 2, 3)]
    rows.append(pair(at=PERIOD.start + timedelta(days=2, hours=4), judgments=[verdict(1)]))
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    topics = [TopicBar("Refunds", 2, 1), TopicBar("Single sign-on", 1, 0)]
    figure, _texts = drawn_texts(report, topics)
    axes = count_axes(figure)
    assert set(axes) == {"answers per day", "answers", "failed questions"}
    for label, axis in axes.items():
        ticks = visible_ticks(axis)
        assert len(ticks) >= 2 and all(t == int(t) for t in ticks), (label, ticks)
    assert visible_ticks(axes["failed questions"]) == [0, 1, 2]
    # A week without scores: its one panel, answers per day, too.
    errors = [pair(at=PERIOD.start + timedelta(hours=5), judgments=[verdict(None, status="error")])]
    figure, _texts = drawn_texts(build_report(PERIOD, errors, [], thresholds_for, PRICES))
    ticks = visible_ticks(count_axes(figure)["answers per day"])
    assert len(ticks) >= 2 and all(t == int(t) for t in ticks), ticks


def test_days_are_calendar_days_in_the_team_time_zone():
    """In Los Angeles, a question at 02:00 UTC on Saturday is drawn on Friday's bar, labelled Friday."""
    from matplotlib.axes import Axes

    period = period_for(datetime(2026, 12, 7, 17, tzinfo=UTC), "America/Los_Angeles")  # Monday 09:00 PST
    rows = [
        pair(at=datetime(2026, 12, 5, 2, tzinfo=UTC), judgments=[verdict(1)]),
        pair(at=datetime(2026, 12, 5, 3, tzinfo=UTC), judgments=[verdict(3)]),
        pair(at=datetime(2026, 12, 6, 20, tzinfo=UTC), judgments=[verdict(4)]),  # Sunday noon
    ]
    report = build_report(period, rows, [], thresholds_for, PRICES)
    figure, _texts = drawn_texts(report)
    daily = next(a for a in figure.axes if isinstance(a, Axes) and a.get_ylabel().startswith("mean"))
    volume = next(a for a in figure.axes if a.get_ylabel() == "answers per day")
    labels = [t.get_text() for t in daily.get_xticklabels()]
    assert [label.replace("\n", " ") for label in labels] == [
        "Mon 30", "Tue 1", "Wed 2", "Thu 3", "Fri 4", "Sat 5", "Sun 6", "Mon 7"
    ]  # fmt: skip
    heights = [bar.get_height() for bar in volume.patches]
    assert heights == [0, 0, 0, 0, 2, 0, 1, 0]
    assert daily.get_xlabel() == "America/Los_Angeles days\nMon 30 from 09:00 · Mon 7 until 09:00"
    means = daily.lines[0].get_xydata().tolist()
    assert means == [[4.0, 2.0], [6.0, 4.0]]  # Friday's two answers, Sunday's one


def test_a_week_before_without_questions_is_said_on_the_topics_panel():
    report = build_report(PERIOD, week_of_scores(), [], thresholds_for, PRICES)
    figure, _texts = drawn_texts(report, [TopicBar("Refunds", 3, None), TopicBar("Single sign-on", 1, None)])
    topics = next(a for a in figure.axes if a.get_xlabel() == "failed questions")
    assert topics.get_title() == "Failed questions by topic\n(no data the week before)"
    assert [bar.get_width() for bar in topics.patches] == [1, 3]  # this week's bars only, no bars of 0
    figure, _texts = drawn_texts(report, [TopicBar("Refunds", 3, 1), TopicBar("Single sign-on", 1, 0)])
    topics = next(a for a in figure.axes if a.get_xlabel() == "failed questions")
    assert topics.get_title() == "Failed questions by topic"
    assert [bar.get_width() for bar in topics.patches] == [1, 3, 0, 1]
    assert [t.get_text() for t in topics.get_legend().get_texts()] == ["this week", "week before"]


def test_the_alt_text_says_what_the_chart_shows():
    from common.messages.chart_text import ALT_TEXT_CHARS, chart_alt_text

    period = period_for(datetime(2026, 12, 7, 8, tzinfo=UTC), "Europe/Paris")  # Monday 09:00 CET
    at = datetime(2026, 12, 3, 12, tzinfo=UTC)  # Thursday
    rows = [pair(at=at, judgments=[verdict(score)]) for score in (0, 1, 1, 4)]
    rows.append(pair("C2", at=datetime(2026, 12, 5, 23, 30, tzinfo=UTC), judgments=[verdict(3)]))  # Sunday 00:30
    # Thanked: resolved without help though scored at the threshold (silence after it would be abandoned).
    rows.append(replace(pair(at=at, judgments=[verdict(2)]), window_closed=True, signals=("thanked", "resolved")))
    rows.append(replace(pair(at=at + timedelta(days=1), judgments=[verdict(2)]), window_closed=True))
    report = build_report(period, rows, [], thresholds_for, PRICES)
    topics = [TopicBar("Refunds", 3, None), TopicBar("Single sign-on", 1, None)]
    assert chart_alt_text(report, topics) == (
        "Chart: answers per day (bars) and the daily mean relevancy (line), Mon 30 Nov – Mon 7 Dec "
        "(Europe/Paris; Mon 30 from 09:00, Mon 7 until 09:00). "
        "Most answers on Thu 3 Dec (5 of 7); lowest daily mean relevancy 1.6 / 4 on Thu 3 Dec, "
        "the alert threshold dashed at ≤ 2 (1 of 2 channels). "
        "Daily resolution rate 0% to 100%, 0% on Fri 4 Dec. "
        "Relevancy scores this week (7 scored): 0: 1, 1: 2, 2: 2, 3: 1, 4: 1; 6 at or below the alert threshold. "
        "Failed questions by topic this week (no data the week before): Refunds 3, Single sign-on 1."
    )
    compared = chart_alt_text(report, [TopicBar("Refunds", 3, 5)])
    assert compared.endswith("Failed questions by topic, this week (the week before): Refunds 3 (5).")
    # Slack refuses alt text over 1,000 characters: many long topic names are cut to fit.
    many = [TopicBar(f"A topic with a long name number {i}", i, i) for i in range(60)]
    long = chart_alt_text(report, many)
    assert len(long) == ALT_TEXT_CHARS and long.endswith("…")
    errors = [pair(at=at, judgments=[verdict(None, status="error")])]
    assert chart_alt_text(build_report(period, errors, [], thresholds_for, PRICES)) == (
        "Chart: answers per day, Mon 30 Nov – Mon 7 Dec (Europe/Paris; Mon 30 from 09:00, Mon 7 until 09:00); "
        "no scores: 1 judgment failed. Most answers on Thu 3 Dec (1 of 1)."
    )


def test_a_backfills_month_labels_every_few_days():
    from matplotlib.axes import Axes

    from common.messages.chart_text import day_labels
    from relmon.backfill.report import backfill_period

    now = datetime(2026, 11, 23, 9, tzinfo=UTC)
    period = backfill_period(now - timedelta(days=30), now, "UTC", "backfill")
    rows = [pair(at=period.start + timedelta(days=day, hours=3), judgments=[verdict(day % 5)]) for day in range(30)]
    report = build_report(period, rows, [], thresholds_for, PRICES)
    labels = day_labels(report)
    assert len(labels) == 31 and labels[0] == "Sat\n24" and labels[4] == "Wed\n28" and labels[1] == ""
    figure, _texts = drawn_texts(report)
    daily = next(a for a in figure.axes if isinstance(a, Axes) and a.get_ylabel().startswith("mean"))
    assert_labels_apart(daily)
