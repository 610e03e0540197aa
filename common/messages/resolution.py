"""Resolution tiers as text, for the digest, App Home, `/judge stats` and the topics: pure functions of
`common.reports.resolution.ResolutionStats` (docs/resolution.md says what each tier means).

    resolved without help 62% (51–72%, n=80), no clear change (n=80 vs 75) · resolved by a teammate 10% (5–19%,
    n=80) · escalated 8% (4–16%, n=80) · unresolved 20% (13–30%, n=80): re-asked 9, abandoned 5, 👎 2 ·
    6 still in their window
"""

from __future__ import annotations

from collections.abc import Mapping

from capture.resolution import ABANDONED, ASSUMED, CONFIRMED, ENDED_UNRESOLVED, NEGATIVE, REASKED, TIERS
from common.messages import rates
from common.reports.intervals import MIN_N, Shift
from common.reports.resolution import ResolutionStats

LABELS = {
    "resolved": "resolved without help",
    "teammate": "resolved by a teammate",
    "escalated": "escalated",
    "unresolved": "unresolved",
}
_REASONS = {REASKED: "re-asked", ABANDONED: "abandoned", NEGATIVE: "👎", ENDED_UNRESOLVED: "bot said unresolved"}


def window_text(seconds: int | None) -> str:
    """`30-min window`, `24-h window`: how long after an answer its tier waits."""
    if not seconds:
        return "window off"
    if seconds % 3600 == 0:
        return f"{seconds // 3600}-h window"
    return f"{max(1, round(seconds / 60))}-min window"


def _open(stats: ResolutionStats) -> str:
    return f"{stats.open} still in their window" if stats.open != 1 else "1 still in its window"


def _why(stats: ResolutionStats) -> str:
    ways = [f"{label} {stats.reasons[reason]}" for reason, label in _REASONS.items() if stats.reasons.get(reason)]
    return f": {', '.join(ways)}" if ways else ""


def _counts(stats: ResolutionStats) -> str:
    return ", ".join(f"{stats.count(tier)} {LABELS[tier]}" for tier in TIERS if stats.count(tier))


def tiers_text(stats: ResolutionStats, shifts: Mapping[str, Shift] | None = None) -> str:
    """Each tier's share with its interval (and its change when `shifts` are given), what unresolved answers did,
    and how many are still open; `too few (n=4): 2 resolved without help, …` below the minimum; empty when there
    is nothing to say."""
    if not stats.n:
        return f"no resolution yet ({_open(stats)})" if stats.open else ""
    if stats.n < MIN_N:
        parts = [f"{rates.too_few(stats.n)}: {_counts(stats)}"]
    else:
        parts = []
        for tier in TIERS:
            text = f"{LABELS[tier]} {rates.rate_text(stats.estimate(tier))}"
            shift = (shifts or {}).get(tier)
            if shift is not None:
                text += f", {rates.shift_text(shift)}"
            if tier == "unresolved":
                text += _why(stats)
            parts.append(text)
    if stats.open:
        parts.append(_open(stats))
    return " · ".join(parts)


def confirmed_text(stats: ResolutionStats) -> str:
    """`resolved without help: 12 confirmed, 38 assumed` (as Fin splits its resolutions)."""
    confirmed, assumed = stats.reasons.get(CONFIRMED, 0), stats.reasons.get(ASSUMED, 0)
    if not confirmed and not assumed:
        return ""
    return f"{LABELS['resolved']}: {confirmed} confirmed, {assumed} assumed"


def bot_lines(bots: Mapping[str, ResolutionStats]) -> list[str]:
    """`helpdesk: resolved without help 70% (…) · …`, one line per bot with something to say."""
    lines = []
    for bot, stats in bots.items():
        text = tiers_text(stats)
        if text:
            lines.append(f"{bot}: {text}")
    return lines


def resolution_lines(stats: ResolutionStats, window_seconds: int | None) -> list[str]:
    """`/judge stats`'s lines: `*Resolution* (30-min window): …` and how many resolutions were confirmed."""
    text = tiers_text(stats)
    if not text:
        return []
    confirmed = confirmed_text(stats)
    return [f"*Resolution* ({window_text(window_seconds)}): {text}", *([confirmed] if confirmed else [])]


def topic_text(tiers: Mapping[str, int]) -> str:
    """A topic's tiers (its closed questions per tier), as `tiers_text` says them."""
    return tiers_text(ResolutionStats(None, {tier: tiers.get(tier, 0) for tier in TIERS}))
