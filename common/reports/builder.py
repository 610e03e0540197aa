"""The whole report of a period in one pass over its pairs: overall and per channel, this week and the one before,
the daily series, the trust and the outcome figures and each judge's agreement with the team.

Each pair is handed to running tallies (`common.reports.tallies`, `.trust`, `.outcomes`) and dropped, so a report
holds counts per channel, judge, score and day and the few worst answers, never a row per pair: a backfill's year
of history is reported in the memory of a week (`common.reports.figures` streams the rows from the store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import timedelta
from typing import TypeVar

from capture.resolution import Resolution
from common.reports.agreement import AgreementReport, AgreementTally
from common.reports.costs import Prices
from common.reports.outcomes import DailyOutcomeTally, OutcomeReport, OutcomeTally
from common.reports.period import Period
from common.reports.resolution import KeyedTallies, ResolutionRules
from common.reports.stats import PRIMARY_JUDGE, SCALES, Report, ordered_judges, primary_judge
from common.reports.tallies import ChannelTally, DailyTally, Scales, ThresholdsFor, is_answer
from common.reports.trust import CanaryPoint, TrustTally
from store.stats_queries import PairRow

Value = TypeVar("Value")
DEFAULT_WINDOW = timedelta(seconds=1800)  # RELMON_OUTCOME_WINDOW's default


def _memo(function: Callable[[str | None], Value]) -> Callable[[str | None], Value]:
    """Asked once per channel, not once per pair (the App Home's may_see may ask Slack)."""
    known: dict[str | None, Value] = {}

    def memoized(channel: str | None) -> Value:
        if channel not in known:
            known[channel] = function(channel)
        return known[channel]

    return memoized


class _Week:
    """One week's (or period's) tallies: every channel together, each channel, and their outcomes."""

    def __init__(
        self, thresholds_for: ThresholdsFor, prices: Prices, worst: int, scales: Scales, rules: ResolutionRules
    ) -> None:
        self.rules = rules
        self.new_channel = lambda: ChannelTally(thresholds_for, prices, worst, scales)
        self.overall = self.new_channel()
        self.channels: dict[str, ChannelTally] = {}
        self.outcomes = OutcomeTally()
        self.agreement = AgreementTally(thresholds_for)
        self.channel_outcomes: dict[str, OutcomeTally] = {}
        self.answer_channels: set[str] = set()  # the channels of its captured answers
        self.bots = KeyedTallies()  # each bot's resolution tiers

    def add(self, row: PairRow) -> Resolution | None:
        """Count the row; returns its resolution tier (None: not an answer, or never watched)."""
        self.overall.add(row)
        channel = row.channel_id
        if channel is not None:
            tally = self.channels.get(channel) or self.channels.setdefault(channel, self.new_channel())
            tally.add(row)
        if not is_answer(row):
            return None
        resolution = self.rules.of(row)
        self.outcomes.add(row, resolution)
        self.agreement.add(row)
        self.bots.add(row.bot, resolution)
        if channel is not None:
            self.answer_channels.add(channel)
            outcomes = self.channel_outcomes.get(channel) or self.channel_outcomes.setdefault(channel, OutcomeTally())
            outcomes.add(row, resolution)
        return resolution

    def channel(self, channel: str) -> ChannelTally:
        return self.channels.get(channel) or self.new_channel()

    def outcomes_of(self, channel: str) -> OutcomeTally:
        return self.channel_outcomes.get(channel) or OutcomeTally()


class ReportBuilder:
    """Feed it this week's pairs (`add_current`) and the week before's (`add_previous`), in any number and in
    id order, then ask for the `report`.

    `channels` are reported even without data (a watched channel that went quiet is news);
    channels `is_watched` rejects are left out entirely.
    """

    def __init__(
        self,
        period: Period,
        thresholds_for: ThresholdsFor,
        prices: Prices,
        *,
        channels: Iterable[str] = (),
        is_watched: Callable[[str], bool] = lambda _channel: True,
        worst: int = 3,
        canary_runs: Sequence[CanaryPoint] = (),
        resolution: ResolutionRules | None = None,
        scales: Scales | None = None,
    ) -> None:
        """`scales`: the team judges' scales from their files (the seed judges' are `SCALES`)."""
        self.period = period
        self.thresholds_for: Callable[[str | None], Mapping[str, float]] = _memo(thresholds_for)
        self.is_watched = _memo(is_watched)
        self.channels = list(channels)
        self.canary_runs = list(canary_runs)
        self.scales = {**(scales or {}), **SCALES}
        # Without rules of its own (a test, a preview), an answer's tier is read at the period's end with the
        # default window; the digest and App Home pass the real time and RELMON_OUTCOME_WINDOW.
        self.resolution = resolution or ResolutionRules(period.end, DEFAULT_WINDOW, self.thresholds_for)
        self.current = _Week(self.thresholds_for, prices, worst, self.scales, self.resolution)
        self.previous = _Week(self.thresholds_for, prices, worst, self.scales, self.resolution)
        self.daily = DailyTally(period)
        self.daily_outcomes = DailyOutcomeTally(period)
        self.trust = TrustTally()
        self.captured_channels: set[str] = set()  # this week's answers' channels, watched or not

    def _kept(self, row: PairRow) -> bool:
        return row.channel_id is None or self.is_watched(row.channel_id)

    def add_current(self, row: PairRow) -> None:
        if row.channel_id and is_answer(row):
            self.captured_channels.add(row.channel_id)
        if not self._kept(row):
            return
        resolution = self.current.add(row)
        if is_answer(row):
            self.daily.add(row)
            self.daily_outcomes.add(row, resolution)
            self.trust.add_current(row)

    def add_previous(self, row: PairRow) -> None:
        if not self._kept(row):
            return
        self.previous.add(row)
        if is_answer(row):
            self.trust.add_previous(row)

    def report(self) -> Report:
        current, previous = self.current, self.previous
        judges = ordered_judges([*current.overall.judges, *previous.overall.judges])
        ids = current.answer_channels | {c for c in self.channels if self.is_watched(c)}
        channel_ids = sorted(ids)
        main = primary_judge(current.overall.judges) if judges else PRIMARY_JUDGE
        return Report(
            period=self.period,
            overall=current.overall.stats(None, judges),
            previous_overall=previous.overall.stats(None, judges),
            channels=[current.channel(channel).stats(channel, judges) for channel in channel_ids],
            previous_channels={channel: previous.channel(channel).stats(channel, judges) for channel in channel_ids},
            daily=self.daily.points(main),
            primary_judge=main,
            thresholds={channel: dict(self.thresholds_for(channel)) for channel in [None, *channel_ids]},
            trust=self.trust.trust(judges, self.thresholds_for, self.scales, self.canary_runs),
            outcomes=OutcomeReport(
                judge=main,
                overall=current.outcomes.stats(None, main),
                previous_overall=previous.outcomes.stats(None, main),
                channels={channel: current.outcomes_of(channel).stats(channel, main) for channel in channel_ids},
                previous_channels={
                    channel: previous.outcomes_of(channel).stats(channel, main) for channel in channel_ids
                },
                daily=self.daily_outcomes.points(),
                bots=current.bots.stats(),
                previous_bots=previous.bots.stats(),
                window_seconds=int(self.resolution.window.total_seconds()),
            ),
            agreement=AgreementReport(current.agreement.result(), previous.agreement.result()),
        )
