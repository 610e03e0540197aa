"""The digest's chart: readable at Slack's preview size, its threshold line, and a week without scores."""

from __future__ import annotations

from datetime import timedelta

from store.stats_queries import PairRow
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict


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
