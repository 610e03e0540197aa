"""`relmon doctor` itself: every check in order, each line printed as it completes, and the exit code."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TextIO

from common.telemetry.scrub import SecretMasker
from relmon.doctor.checks import Check, check_database, check_llm, check_redis, check_settings
from relmon.doctor.embeddings_check import check_embeddings
from relmon.doctor.judges_check import check_judges
from relmon.doctor.metrics_check import check_metrics
from relmon.doctor.port_checks import check_metrics_ports
from relmon.doctor.slack_checks import check_slack
from relmon.doctor.trace_checks import check_traces
from store.settings import Settings


def all_checks(settings: Settings) -> Iterator[Check]:
    yield from check_settings(settings)
    yield from check_slack(settings)
    yield check_redis(settings)
    yield check_database(settings)
    yield check_llm(settings)
    yield from check_judges(settings)
    yield check_embeddings(settings)
    yield check_metrics(settings)
    yield from check_metrics_ports(settings)
    yield from check_traces(settings)


def report(checks: Iterable[Check], settings: Settings, out: TextIO) -> int:
    """Print each check as it completes (secrets masked again, in case an error message echoed one)."""
    masker = SecretMasker.from_settings(settings)
    failures = warnings = 0
    for check in checks:
        failures += check.failed
        warnings += check.warned
        print(masker(check.line()), file=out, flush=True)
    summary = f"{failures} problem(s) found" if failures else "all checks passed"
    if warnings:
        summary += f", {warnings} warning{'s' if warnings > 1 else ''}"
    print(masker(f"\n{summary}"), file=out)
    return 1 if failures else 0


def run_doctor(settings: Settings, out: TextIO | None = None) -> int:
    return report(all_checks(settings), settings, out or sys.stdout)
