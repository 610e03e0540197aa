"""The report of a period, read from the store: the same figures for the weekly digest, App Home and the
`/judge digest` preview (the viewer's `may_see` leaves out what they may not see)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta

from common.reports.builder import ReportBuilder
from common.reports.costs import Prices
from common.reports.golden import golden_figures
from common.reports.period import Period
from common.reports.resolution import ResolutionRules
from common.reports.stats import Report
from common.reports.trust import CanaryPoint
from common.runtime import Runtime
from judges.names import JUDGE_NAMES
from store.canary import recent_runs
from store.judge_catalog import judge_catalog
from store.models import as_utc
from store.stats_queries import prompt_numbers, stream_pair_rows


def prices_for(runtime: Runtime) -> Prices:
    settings = runtime.settings
    return Prices(settings.input_price, settings.output_price, settings.cached_input_price)


def resolution_rules(runtime: Runtime, period: Period) -> ResolutionRules:
    """Tiers as of the period's end (the moment the report is made), with the outcome window in force."""
    settings, rules = runtime.settings, runtime.rules
    return ResolutionRules(
        period.end,
        timedelta(seconds=settings.outcome_window_seconds),
        lambda channel: rules.for_channel(channel, settings).thresholds,
    )


def load_report(runtime: Runtime, period: Period, may_see: Callable[[str], bool] = lambda _channel: True) -> Report:
    """The report of the watched channels; `may_see` leaves out channels a viewer may not see (the App Home)."""
    report = read_report(runtime, period, may_see).report()
    with runtime.db.reading() as session:
        changed = [c.judge for c in report.trust.comparability.values() if c.change is not None]
        if changed:  # the versions are named as people number them ("v3"), not by their hash
            trust = replace(report.trust, version_numbers=prompt_numbers(session, changed))
            report = replace(report, trust=trust)
        return replace(report, golden=golden_figures(session, period.start))


def read_report(
    runtime: Runtime, period: Period, may_see: Callable[[str], bool] = lambda _channel: True
) -> ReportBuilder:
    """The pairs of the period and of the period before it, streamed through a report's tallies (a batch of
    pairs in memory at a time, however long the period)."""
    settings, rules = runtime.settings, runtime.rules
    with runtime.db.session() as session:
        runs = recent_runs(session, before=period.end, judges=JUDGE_NAMES)  # the seed canary's two newest
        for name in judge_catalog(settings).specs:  # and each team judge's, when it has labels
            runs += recent_runs(session, before=period.end, judges=[name])
        builder = ReportBuilder(
            period,
            lambda channel: rules.for_channel(channel, settings).thresholds,
            prices_for(runtime),
            channels=set(settings.watched_channels) | set(rules.channels),
            is_watched=lambda channel: rules.for_channel(channel, settings).watch and may_see(channel),
            canary_runs=[canary_point(run) for run in runs],
            resolution=resolution_rules(runtime, period),
            scales=team_scales(settings),
        )
        for row in stream_pair_rows(session, period.start, period.end):
            builder.add_current(row)
        for row in stream_pair_rows(session, period.previous_start, period.start):
            builder.add_previous(row)
    return builder


def team_scales(settings) -> dict[str, tuple[int, int]]:
    """The team judges' scales, from their files (a judge whose file is gone keeps what it stored)."""
    specs = judge_catalog(settings).specs
    return {name: (spec.scale.low, spec.scale.high) for name, spec in specs.items()}


def canary_point(run) -> CanaryPoint:
    """A stored canary run (`store.models.CanaryRun`) as the reports see it."""
    return CanaryPoint(
        as_utc(run.created_at),
        run.judge,
        run.model,
        run.prompt_version,
        run.kappa,
        run.exact_agreement,
        run.moved,
        run.configured_model,
    )
