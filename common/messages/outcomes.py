"""Outcome figures as text, for the digest (Block Kit and its terminal form) and App Home: pure functions of a
`common.reports.outcomes.OutcomeReport`."""

from __future__ import annotations

from common.messages import rates, resolution
from common.messages.blocks import WEEK_BEFORE, no_data
from common.reports.intervals import MIN_N, Estimate, Shift, proportion
from common.reports.outcomes import OutcomeChange, OutcomeReport, OutcomeStats, ScoreMean

NOTE = "Outcome figures count answers whose outcome window has closed."
# The signals' rates shown: resolution itself is shown as its tiers (`common.messages.resolution`).
_SHOWN = {"reasked": "re-asked", "taken_over": "taken over", "escalated": "escalated"}


def _rate(label: str, found: Estimate, shift: Shift | None) -> str:
    return f"{label} {rates.rate_text(found)}" + (f", {rates.shift_text(shift)}" if shift is not None else "")


def _count(count: int, label: str, change: int | None) -> str:
    return f"{count} {label}" + (f" ({'+' if change >= 0 else '−'}{abs(change)})" if change is not None else "")


def outcome_line(stats: OutcomeStats, change: OutcomeChange | None = None, before: str = WEEK_BEFORE) -> str:
    """`re-asked 18% (11–28%, n=80), ▼ 35% → 18% (significant) · taken over 9% (…), no clear change (n=80 vs 75) ·
    escalated … · reactions 12 positive (+3), 4 negative (−1) · of 80 answers`: what the signals said, ending
    `· no data the week before` instead of the changes when the week (`before`: the period) compared with had no
    closed window; `rates: too few (n=4)` instead of the rates below the minimum; empty when no window
    closed."""
    if not stats.closed:
        return f"no outcomes yet ({stats.open} still watched)" if stats.open else ""
    change = change or OutcomeChange()
    rated = [_rate(label, stats.estimate(name), change.shifts.get(name)) for name, label in _SHOWN.items()]
    if stats.closed < MIN_N:
        rated = [f"rates: {rates.too_few(stats.closed)}"]
    parts = [
        *rated,
        f"reactions {_count(stats.positive, 'positive', change.positive)}, "
        + _count(stats.negative, "negative", change.negative),
        f"of {stats.closed} answer{'s' if stats.closed != 1 else ''}",
    ]
    if change.no_previous:
        parts.append(no_data(before))
    return " · ".join(parts)


def _mean(score: ScoreMean) -> str:
    return "–" if score.mean is None else f"{score.mean:.2f} ({score.count})"


def score_line(stats: OutcomeStats, judge: str) -> str:
    """How the judge's scores agree with the outcomes: `relevancy mean 3.40 (40) resolved vs 1.50 (6) failed`."""
    if not stats.score_resolved.count and not stats.score_failed.count:
        return ""
    return f"{judge} mean {_mean(stats.score_resolved)} resolved vs {_mean(stats.score_failed)} failed"


def teammate_line(stats: OutcomeStats) -> str:
    """`correctness top score on 62% (39–81%, n=16) of answers where a teammate stepped in`: the correctness
    verdicts at the top of the scale on answers a teammate's reply is the reference of."""
    if not stats.teammate_judged:
        return ""
    found = proportion(stats.teammate_correct, stats.teammate_judged)
    if not found.enough:
        top = f"{stats.teammate_correct} of {stats.teammate_judged} answers (too few for a rate)"
    else:
        top = f"{rates.rate_text(found)} of answers"
    return f"correctness top score on {top} where a teammate stepped in"


def resolution_line(report: OutcomeReport, channel_id: str | None) -> str:
    """`resolution (30-min window): resolved without help 62% (…), no clear change (…) · …`: the tiers of a channel's
    answers (or, with None, of all), against the week before; empty when there is nothing to say."""
    stats = report.of(channel_id)
    text = resolution.tiers_text(stats.tiers, report.change(channel_id).tiers)
    return f"resolution ({resolution.window_text(report.window_seconds)}): {text}" if text else ""


def outcome_lines(report: OutcomeReport, channel_id: str | None, before: str = WEEK_BEFORE) -> list[str]:
    """Every outcome line of a channel (or, with None, of all channels) that has something to say: its resolution
    tiers first."""
    stats = report.of(channel_id)
    lines = [
        resolution_line(report, channel_id),
        outcome_line(stats, report.change(channel_id), before),
        score_line(stats, report.judge),
        teammate_line(stats),
    ]
    if channel_id is None and len(report.bots) > 1:  # with one bot its tiers are the overall ones
        lines += [f"bot {line}" for line in resolution.bot_lines(report.bots)]
    return [line for line in lines if line]
