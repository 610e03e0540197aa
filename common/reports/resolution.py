"""Resolution tiers counted: per bot, per channel and per topic, each tier's share with its n and Wilson interval,
against the week before (`capture.resolution` gives one answer's tier; docs/resolution.md defines them).

Only answers whose window is over are counted: an open one is reported as still watched, never as resolved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from capture.resolution import OPEN, TIERS, AnswerSignals, Resolution, judged_failed, resolution_of
from common.reports.intervals import Estimate, Shift, proportion, proportion_change
from store.stats_queries import PairRow

ThresholdsOf = Callable[[str | None], Mapping[str, float]]


@dataclass(frozen=True)
class ResolutionRules:
    """What an answer's tier is read with: the time of the report, the window after an answer, and each channel's
    judge thresholds (a failed answer nobody followed up is abandoned, not resolved)."""

    now: datetime
    window: timedelta
    thresholds_for: ThresholdsOf = field(default=lambda _channel: {}, compare=False)

    def of(self, row: PairRow) -> Resolution | None:
        """The tier of a captured answer's row; None when it was never watched (no question to follow)."""
        if row.window_closed is None:
            return None
        answer = AnswerSignals(
            answered_at=row.created_at,
            signals=row.signals,
            judged_failed=judged_failed(row.judgments, self.thresholds_for(row.channel_id)),
            ended=row.window_closed,
        )
        return resolution_of(answer, self.now, self.window)


@dataclass(frozen=True)
class ResolutionStats:
    """The tiers of some answers (a bot's, a channel's, a topic's, or all of them: `key` None)."""

    key: str | None = None
    counts: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    reasons: Mapping[str, int] = field(default_factory=dict)  # unresolved ones' ways, resolved ones' confirmed/assumed
    open: int = 0  # still inside their window: not counted

    @property
    def n(self) -> int:
        """Answers whose window is over: the base of every share."""
        return sum(self.counts.values())

    def count(self, tier: str) -> int:
        return self.counts.get(tier, 0)

    def estimate(self, tier: str) -> Estimate:
        """The tier's share of the closed answers with its Wilson interval."""
        return proportion(self.count(tier), self.n)

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "open": self.open,
            "tiers": {tier: {"count": self.count(tier)} | self.estimate(tier).as_json() for tier in TIERS},
            "reasons": dict(self.reasons),
        }


def resolution_changes(current: ResolutionStats, previous: ResolutionStats) -> dict[str, Shift]:
    """Each tier's share against the period before (Newcombe's interval: "up"/"down" only when significant); empty
    when either period has no closed answer."""
    if not current.n or not previous.n:
        return {}
    return {
        tier: proportion_change((previous.count(tier), previous.n), (current.count(tier), current.n)) for tier in TIERS
    }


class ResolutionTally:
    """Tiers counted one answer at a time."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.open = 0

    def add(self, found: Resolution | None) -> None:
        if found is None:
            return
        if found.tier == OPEN:
            self.open += 1
            return
        self.counts[found.tier] += 1
        if found.reason is not None:
            self.reasons[found.reason] += 1

    def stats(self, key: str | None = None) -> ResolutionStats:
        return ResolutionStats(
            key, {tier: self.counts[tier] for tier in TIERS}, {r: c for r, c in self.reasons.items() if c}, self.open
        )


class KeyedTallies:
    """A `ResolutionTally` per key (bot, channel or topic), made on first use."""

    def __init__(self) -> None:
        self.tallies: dict[str, ResolutionTally] = {}

    def add(self, key: str | None, found: Resolution | None) -> None:
        if key is None or found is None:
            return
        tally = self.tallies.get(key) or self.tallies.setdefault(key, ResolutionTally())
        tally.add(found)

    def stats(self) -> dict[str, ResolutionStats]:
        return {key: tally.stats(key) for key, tally in sorted(self.tallies.items())}
