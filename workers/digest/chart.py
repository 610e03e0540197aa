"""The digest's chart: daily mean score with answer volume, and the week's score distribution.

Drawn with matplotlib's Agg backend (no display needed) at a size that stays readable in Slack's preview.
"""

from __future__ import annotations

import io
from zoneinfo import ZoneInfo

import matplotlib

matplotlib.use("Agg")  # before pyplot: workers and CI have no display

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from workers.digest.stats import Report

BAR_COLOUR = "#c9d6e3"
LINE_COLOUR = "#1f5f99"
LOW_COLOUR = "#d9534f"
OK_COLOUR = "#5cb85c"
DPI = 110


def render_chart(report: Report) -> bytes:
    """The chart as PNG bytes."""
    judge = report.primary_judge
    stats = report.overall.judge(judge)
    low_end, high_end = stats.scale if stats else (0, 4)
    tz = ZoneInfo(report.period.timezone)

    figure = Figure(figsize=(11, 4.2), dpi=DPI, layout="constrained")
    daily_axes, dist_axes = figure.subplots(1, 2, width_ratios=[1.7, 1])
    figure.suptitle(f"relmon weekly digest · {report.period.week_key}", fontsize=14, fontweight="bold")

    # Left: answers per day as bars (right axis), mean score as a line (left axis).
    positions = list(range(len(report.daily)))
    labels = [point.start.astimezone(tz).strftime("%a\n%d %b") for point in report.daily]
    volume_axes = daily_axes.twinx()
    volume_axes.bar(positions, [p.answers for p in report.daily], color=BAR_COLOUR, width=0.6, label="answers")
    volume_axes.set_ylabel("answers per day", fontsize=11, color="#5a6b7b")
    volume_axes.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    volume_axes.set_ylim(0, max([p.answers for p in report.daily] + [1]) * 1.25)
    # Draw the line above the bars: the score axes in front, with a transparent background.
    daily_axes.set_zorder(volume_axes.get_zorder() + 1)
    daily_axes.patch.set_visible(False)
    means = [(x, p.mean) for x, p in zip(positions, report.daily, strict=True) if p.mean is not None]
    if means:
        xs, ys = zip(*means, strict=True)
        daily_axes.plot(xs, ys, color=LINE_COLOUR, marker="o", linewidth=2.2, markersize=6, label=f"mean {judge}")
        for x, y in means:
            daily_axes.annotate(f"{y:.1f}", (x, y), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=9)
    else:
        daily_axes.text(0.5, 0.5, "no scored answers", transform=daily_axes.transAxes, ha="center", color="#888")
    threshold = _single_threshold(report, judge)
    if threshold is not None:
        daily_axes.axhline(threshold, color=LOW_COLOUR, linestyle="--", linewidth=1, label=f"alert ≤ {threshold:g}")
    daily_axes.set_ylim(low_end - 0.2, high_end + 1.0)  # headroom for the legend
    daily_axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    daily_axes.set_ylabel(f"mean {judge} score ({low_end}–{high_end})", fontsize=11)
    daily_axes.set_xticks(positions, labels, fontsize=9)
    start_time = report.period.start.astimezone(tz).strftime("%H:%M")
    daily_axes.set_xlabel(f"24-hour days from {start_time} {report.period.timezone}", fontsize=10)
    daily_axes.set_title("Daily mean score and answer volume", fontsize=12)
    daily_axes.grid(axis="y", alpha=0.3)
    handles, names = daily_axes.get_legend_handles_labels()
    bar_handles, bar_names = volume_axes.get_legend_handles_labels()
    daily_axes.legend(handles + bar_handles, names + bar_names, loc="upper left", ncol=3, fontsize=9, frameon=False)
    for axes in (daily_axes, volume_axes):
        axes.spines["top"].set_visible(False)

    # Right: how many answers got each score this week.
    scores = list(range(low_end, high_end + 1))
    counts = [stats.distribution.get(s, 0) if stats else 0 for s in scores]
    colours = [LOW_COLOUR if threshold is not None and s <= threshold else OK_COLOUR for s in scores]
    bars = dist_axes.bar(scores, counts, color=colours, width=0.65)
    dist_axes.bar_label(bars, fontsize=9, padding=2)
    dist_axes.set_xticks(scores)
    dist_axes.set_xlabel(f"{judge} score", fontsize=11)
    dist_axes.set_ylabel("answers", fontsize=11)
    dist_axes.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
    dist_axes.set_ylim(0, max([*counts, 1]) * 1.2)
    dist_axes.set_title("Score distribution this week", fontsize=12)
    dist_axes.spines[["top", "right"]].set_visible(False)
    dist_axes.grid(axis="y", alpha=0.3)

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, facecolor="white")
    return buffer.getvalue()


def _single_threshold(report: Report, judge: str) -> float | None:
    """The alert threshold to draw, when every channel uses the same one."""
    stats = report.overall.judge(judge)
    if stats and len(stats.thresholds) == 1:
        return stats.thresholds[0]
    values = {t.get(judge) for t in report.thresholds.values() if t.get(judge) is not None}
    return values.pop() if len(values) == 1 else None
