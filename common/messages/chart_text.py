"""The digest chart's words, pure (no matplotlib): its day labels, the note on what its days are, what it says
instead of empty panels, the threshold it draws, and its alt text, the description Slack gives screen readers
(and anyone whose image did not load) with the uploaded PNG (`files.getUploadURLExternal`'s `alt_txt`).

The alt text says what the chart shows, from the same figures the chart draws: its days and time zone, the busiest
day and the lowest daily mean, the score distribution, the resolution rate and the topics' failed questions against
the week before, e.g. `Chart: answers per day (bars) and the daily mean relevancy (line), Mon 30 Nov – Mon 7 Dec
(Europe/Paris; Mon 30 from 09:00, Mon 7 until 09:00). Most answers on Thu 3 Dec (22 of 96); ...`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import date, time

from common.messages.blocks import no_data
from common.reports.period import Period
from common.reports.stats import Report
from common.reports.topics import TopicBar

MAX_DAY_LABELS = 10  # a backfill's month labels every few days: 31 labels would run into each other
DAYS_NOTE_CHARS = 50  # a longer note (a long zone name) goes on two lines
DAYS_NOTE_SIZE = 12  # points: still 8 px tall in Slack's 360 px preview
ALT_TEXT_CHARS = 1000  # Slack refuses a longer alt_txt (alt_txt_too_large)


def day_labels(report: Report) -> list[str]:
    """The day axis's labels, `Mon` over `30` (eight one-line labels run into each other at Slack's preview size);
    a long period labels every few days, from the first."""
    step = -(-len(report.daily) // MAX_DAY_LABELS)
    return [f"{point.day:%a}\n{point.day.day}" if index % step == 0 else "" for index, point in enumerate(report.daily)]


def _partial_days(period: Period) -> list[str]:
    """`Mon 16 from 09:00`, `Mon 23 until 09:00`: the first and last days, when the period holds only part of them."""
    start, end = period.start.astimezone(period.tz), period.end.astimezone(period.tz)
    parts = []
    if start.time() != time.min:
        parts.append(f"{start:%a} {start.day} from {start:%H:%M}")
    if end.time() != time.min:
        parts.append(f"{end:%a} {end.day} until {end:%H:%M}")
    return parts


def days_note(period: Period) -> str:
    """What the day axis counts: `UTC days · Mon 16 from 09:00 · Mon 23 until 09:00` (the first and last days are
    partly in the period unless it starts and ends at midnight there)."""
    text = " · ".join([f"{period.timezone} days", *_partial_days(period)])
    return text.replace(" · ", "\n", 1) if len(text) > DAYS_NOTE_CHARS else text


def no_scores_note(report: Report) -> str:
    """What the chart says instead of empty panels, e.g. `no scores: 10 judgments failed`."""
    overall = report.overall
    if overall.seen == 0:
        return "no answers this week"
    if overall.errors:
        return f"no scores: {overall.errors} judgment{'s' if overall.errors != 1 else ''} failed"
    stats = overall.judge(report.primary_judge)
    if stats is not None and stats.nulls:
        return f"no scores: {stats.nulls} answer{'s' if stats.nulls != 1 else ''} could not be scored"
    return "no scores yet"


def chart_threshold(report: Report, judge: str) -> tuple[float, str] | None:
    """The alert threshold to draw and its legend label. When channels differ, the one most channels use
    (ties: the default), and the label says how many channels that is."""
    default = report.thresholds.get(None, {}).get(judge)
    per_channel = [t[judge] for channel, t in report.thresholds.items() if channel is not None and judge in t]
    if not per_channel:
        return (default, f"alert ≤ {default:g}") if default is not None else None
    counts = Counter(per_channel)
    if len(counts) == 1:
        value = per_channel[0]
        return value, f"alert ≤ {value:g}"
    top = max(counts.values())
    value = default if default is not None and counts.get(default) == top else max(counts, key=counts.__getitem__)
    return value, f"alert ≤ {value:g} ({counts[value]} of {len(per_channel)} channels)"


def _day(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b}"


def _span(report: Report) -> str:
    """`Mon 16 Nov – Mon 23 Nov (UTC; Mon 16 from 09:00, Mon 23 until 09:00)`."""
    days = [point.day for point in report.daily]
    partial = _partial_days(report.period)
    zone = report.period.timezone + (f"; {', '.join(partial)}" if partial else "")
    return f"{_day(days[0])} – {_day(days[-1])} ({zone})"


def _daily_sentences(report: Report, scored: bool) -> list[str]:
    judge = report.primary_judge
    total = sum(point.answers for point in report.daily)
    if scored:
        head = f"Chart: answers per day (bars) and the daily mean {judge} (line), {_span(report)}"
    else:
        head = f"Chart: answers per day, {_span(report)}; {no_scores_note(report)}"
    busiest = max(report.daily, key=lambda point: point.answers)  # the first of equals: the earliest
    said = [head, f"Most answers on {_day(busiest.day)} ({busiest.answers} of {total})"]
    stats = report.overall.judge(judge)
    means = [point for point in report.daily if point.mean is not None]
    if scored and stats is not None and means:
        lowest = min(means, key=lambda point: point.mean)
        low = f"lowest daily mean {judge} {lowest.mean:.1f} / {stats.scale[1]} on {_day(lowest.day)}"
        threshold = chart_threshold(report, judge)
        line = f", the alert threshold dashed at {threshold[1].removeprefix('alert ')}" if threshold is not None else ""
        said[-1] += f"; {low}{line}"
    return said


def _distribution_sentence(report: Report) -> str:
    stats = report.overall.judge(report.primary_judge)
    assert stats is not None  # only said when the judge scored something
    counts = ", ".join(f"{score}: {count}" for score, count in stats.distribution.items())
    low = f"; {stats.low} at or below the alert threshold" if stats.thresholds else ""
    return f"{report.primary_judge.capitalize()} scores this week ({stats.scored} scored): {counts}{low}"


def _resolution_sentence(report: Report) -> str | None:
    rated = [(point.day, point.resolution_rate) for point in report.outcomes.daily if point.resolution_rate is not None]
    if not rated:
        return None
    rates = [round(rate * 100) for _, rate in rated]
    day, latest = rated[-1]
    return f"Daily resolution rate {min(rates)}% to {max(rates)}%, {latest * 100:.0f}% on {_day(day)}"


def _topics_sentence(topics: Sequence[TopicBar]) -> str:
    if not any(bar.previous_failed is not None for bar in topics):
        bars = ", ".join(f"{bar.name} {bar.failed}" for bar in topics)
        return f"Failed questions by topic this week ({no_data()}): {bars}"
    bars = ", ".join(f"{bar.name} {bar.failed} ({bar.previous_failed or 0})" for bar in topics)
    return f"Failed questions by topic, this week (the week before): {bars}"


def chart_alt_text(report: Report, topics: Sequence[TopicBar] = ()) -> str:
    """What the chart `workers.digest.chart.chart_figure(report, topics)` shows, in words, at most 1,000 characters."""
    stats = report.overall.judge(report.primary_judge)
    scored = stats is not None and stats.scored > 0
    sentences = _daily_sentences(report, scored)
    resolution = _resolution_sentence(report) if report.outcomes.any_closed else None
    if resolution:
        sentences.append(resolution)
    if scored:
        sentences.append(_distribution_sentence(report))
    if topics:
        sentences.append(_topics_sentence(topics))
    text = ". ".join(sentences) + "."
    return text if len(text) <= ALT_TEXT_CHARS else text[: ALT_TEXT_CHARS - 1] + "…"
