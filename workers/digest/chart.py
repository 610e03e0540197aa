"""The digest's chart: daily mean score with answer volume on top, the daily resolution rate (when outcome
windows closed this week) below it, and the week's score distribution at the bottom.

Days are calendar days in the team's time zone (`common.reports.period.calendar_days`): a digest sent Monday at 09:00
covers eight of them, the first from 09:00 and the last until 09:00, and the axis says so. Its words (labels, notes,
the alt text the upload carries) are `common.messages.chart_text`'s. Counts (answers,
scores, failed questions) are drawn on whole-number axes.

`chart_figure` builds the figure (what tests read), `render_chart` makes the PNG the digest uploads.

Drawn with matplotlib's Agg backend (no display needed). Slack previews an image about 360 px wide, so the
figure is nearly square (its thumbnail keeps the panels' height), the two panels are stacked and the text is
set large for the figure's size (14–16 pt at 7.5 in wide stays about 9–11 px tall at 360 px).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: workers and CI have no display

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from common.messages.chart_text import DAYS_NOTE_SIZE, chart_threshold, day_labels, days_note, no_scores_note
from common.reports.stats import Report
from common.reports.topics import TopicBar
from workers.digest.topics_panel import panel_height, topics_panel

BAR_COLOUR = "#c9d6e3"
LINE_COLOUR = "#1f5f99"
LOW_COLOUR = "#d9534f"
OK_COLOUR = "#5cb85c"
MUTED = "#5a6b7b"
DPI = 100
SIZE = (7.5, 7.2)  # inches: 750 × 720 px
NO_SCORES_SIZE = (7.5, 4.4)  # one panel when nothing was scored
OUTCOME_PANEL_HEIGHT = 2.0  # inches added for the resolution panel
RESOLVED_COLOUR = "#2e8b57"
STYLE = {
    "font.size": 14,
    "axes.titlesize": 16,
    "axes.labelsize": 14,
    "xtick.labelsize": 14,
    "ytick.labelsize": 13,
    "legend.fontsize": 13,
    "axes.spines.top": False,
}


def render_chart(report: Report, topics: Sequence[TopicBar] = ()) -> bytes:
    """The chart as PNG bytes; `topics` adds the failed questions by topic at the bottom."""
    with matplotlib.rc_context(STYLE):
        figure = chart_figure(report, topics)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    return buffer.getvalue()


def chart_figure(report: Report, topics: Sequence[TopicBar] = ()) -> Figure:
    """The chart as a matplotlib figure (call under `matplotlib.rc_context(STYLE)` for its fonts)."""
    judge = report.primary_judge
    stats = report.overall.judge(judge)
    scored = stats is not None and stats.scored > 0
    outcomes = report.outcomes.any_closed
    width, height = SIZE if scored else NO_SCORES_SIZE
    height += (OUTCOME_PANEL_HEIGHT if outcomes else 0) + panel_height(topics)
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    ratios = ([1.15] if scored else [1]) + ([0.8] if outcomes else []) + ([1] if scored else [])
    ratios += [panel_height(topics) / 2.4] if topics else []
    panels = list(figure.subplots(len(ratios), 1, height_ratios=ratios, squeeze=False)[:, 0])
    if topics:
        topics_panel(panels.pop(), topics)
    if not scored:
        _volume_panel(panels.pop(0), report, no_scores_note(report))
    else:
        threshold = chart_threshold(report, judge)
        _daily_panel(panels.pop(0), report, threshold)
        _distribution_panel(panels.pop(), report, threshold)
    if outcomes:
        _resolution_panel(panels.pop(), report)
    return figure


def whole_numbers(nbins: int | str = "auto") -> MaxNLocator:
    """Ticks for a count: integers only (no half question), even when the axis spans a single one."""
    return MaxNLocator(integer=True, nbins=nbins, min_n_ticks=1)


def _daily_panel(axes: Axes, report: Report, threshold: tuple[float, str] | None) -> None:
    """Answers per day as bars (right axis) behind the judge's daily mean as a line (left axis)."""
    judge = report.primary_judge
    stats = report.overall.judge(judge)
    low_end, high_end = stats.scale if stats else (0, 4)
    positions = list(range(len(report.daily)))
    answers = [point.answers for point in report.daily]

    volume = axes.twinx()
    volume.bar(positions, answers, color=BAR_COLOUR, width=0.6, label="answers")
    volume.set_ylabel("answers per day", color=MUTED)
    volume.tick_params(axis="y", colors=MUTED)
    volume.yaxis.set_major_locator(whole_numbers(4))
    volume.set_ylim(0, max([*answers, 1]) * 1.15)
    volume.spines["top"].set_visible(False)
    # The score axes in front of the bars, with a transparent background, so the line is drawn over them.
    axes.set_zorder(volume.get_zorder() + 1)
    axes.patch.set_visible(False)

    means = [(x, p.mean) for x, p in zip(positions, report.daily, strict=True) if p.mean is not None]
    if means:
        xs, ys = zip(*means, strict=True)
        axes.plot(xs, ys, color=LINE_COLOUR, marker="o", linewidth=2.5, markersize=7, label=f"mean {judge}")
        # Only the latest value is labelled: the axis reads the rest, and seven labels crowd the preview.
        last_x, last_y = means[-1]
        axes.annotate(
            f"{last_y:.1f}", (last_x, last_y), textcoords="offset points", xytext=(0, 10), ha="center",
            color=LINE_COLOUR, fontweight="bold",
        )  # fmt: skip
    if threshold is not None:
        axes.axhline(threshold[0], color=LOW_COLOUR, linestyle="--", linewidth=1.5, label=threshold[1])
    axes.set_ylim(low_end - 0.3, high_end + 0.4)
    axes.yaxis.set_major_locator(whole_numbers())
    axes.set_ylabel(f"mean {judge} ({low_end}–{high_end})")
    axes.set_xticks(positions, day_labels(report))
    axes.set_xlabel(days_note(report.period), fontsize=DAYS_NOTE_SIZE, color=MUTED)
    axes.set_xlim(-0.6, len(positions) - 0.4)
    axes.grid(axis="y", alpha=0.3)
    # Room under the title for the legend row.
    axes.set_title(f"Daily mean {judge} and answers", loc="left", pad=34)
    handles, names = axes.get_legend_handles_labels()
    bar_handles, bar_names = volume.get_legend_handles_labels()
    # Above the plot area, so it never sits on the line or the bars.
    axes.legend(
        handles + bar_handles, names + bar_names, loc="lower left", bbox_to_anchor=(0, 1.01), ncol=3,
        frameon=False, borderaxespad=0, handlelength=1.5, columnspacing=1.0,
    )  # fmt: skip


def _resolution_panel(axes: Axes, report: Report) -> None:
    """The share of each day's answers whose window closed resolved (days without a closed window left out)."""
    positions = list(range(len(report.outcomes.daily)))
    points = [
        (x, p.resolution_rate * 100) for x, p in enumerate(report.outcomes.daily) if p.resolution_rate is not None
    ]
    if points:
        xs, ys = zip(*points, strict=True)
        axes.plot(xs, ys, color=RESOLVED_COLOUR, marker="o", linewidth=2.5, markersize=7, label="resolved")
        last_x, last_y = points[-1]
        axes.annotate(
            f"{last_y:.0f}%", (last_x, last_y), textcoords="offset points", xytext=(0, 10), ha="center",
            color=RESOLVED_COLOUR, fontweight="bold",
        )  # fmt: skip
    axes.set_ylim(-5, 115)  # room above 100% for the label
    axes.set_yticks([0, 50, 100], ["0%", "50%", "100%"])
    axes.set_ylabel("resolved")
    axes.set_xticks(positions, day_labels(report))
    axes.set_xlim(-0.6, len(positions) - 0.4)
    axes.spines["right"].set_visible(False)
    axes.grid(axis="y", alpha=0.3)
    axes.set_title("Daily resolution rate", loc="left")


def _volume_panel(axes: Axes, report: Report, note: str) -> None:
    """A week without scores: the answers per day, and the reason there is nothing else to draw."""
    positions = list(range(len(report.daily)))
    answers = [point.answers for point in report.daily]
    axes.bar(positions, answers, color=BAR_COLOUR, width=0.6)
    axes.set_ylabel("answers per day")
    axes.yaxis.set_major_locator(whole_numbers(4))
    axes.set_ylim(0, max([*answers, 1]) * 1.6)  # headroom: the note sits above the bars
    axes.set_xticks(positions, day_labels(report))
    axes.set_xlabel(days_note(report.period), fontsize=DAYS_NOTE_SIZE, color=MUTED)
    axes.set_xlim(-0.6, len(positions) - 0.4)
    axes.spines["right"].set_visible(False)
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(f"Answers per day (no {report.primary_judge} scores)", loc="left")
    axes.text(
        0.5, 0.82, note, transform=axes.transAxes, ha="center", va="center", fontsize=16, color="#333",
        bbox={"boxstyle": "round,pad=0.5", "facecolor": "#fff4f3", "edgecolor": LOW_COLOUR},
    )  # fmt: skip


def _distribution_panel(axes: Axes, report: Report, threshold: tuple[float, str] | None) -> None:
    """How many answers got each score this week; scores at or below the threshold in red."""
    judge = report.primary_judge
    stats = report.overall.judge(judge)
    assert stats is not None  # only drawn when the judge scored something
    low_end, high_end = stats.scale
    scores = list(range(low_end, high_end + 1))
    counts = [stats.distribution.get(score, 0) for score in scores]
    colours = [LOW_COLOUR if threshold is not None and s <= threshold[0] else OK_COLOUR for s in scores]
    bars = axes.bar(scores, counts, color=colours, width=0.65)
    axes.bar_label(bars, padding=3)
    axes.set_xticks(scores)
    axes.set_xlabel(f"{judge} score")
    axes.set_ylabel("answers")
    axes.yaxis.set_major_locator(whole_numbers(4))
    axes.set_ylim(0, max([*counts, 1]) * 1.22)  # room for the count above the tallest bar
    axes.spines["right"].set_visible(False)
    axes.grid(axis="y", alpha=0.3)
    axes.set_title(f"{judge.capitalize()} scores this week ({stats.scored} scored)", loc="left")
