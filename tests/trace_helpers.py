"""Judged pairs, outcome signals and the trace-send metric, for the tracing tests (tests/integration/test_traces_*.py,
tests/system/test_traces_phoenix.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from celery import Task
from prometheus_client.parser import text_string_to_metric_families

from common import metrics
from common.runtime import Runtime
from store.models import Judgment, OutcomeSignal
from tests.alert_helpers import add_judgment

CHANNEL, TS = "C_SUPPORT", "1767225600.000100"


def judged(runtime: Runtime, *, confirmation: str | None = None, ts: str = TS, thread_ts: str | None = None) -> int:
    """A relevancy judgment of 1 out of 4 (0.25), maybe with a second opinion's outcome."""
    judgment_id = add_judgment(runtime, score=1, channel_id=CHANNEL, answer_ts=ts, thread_ts=thread_ts)
    if confirmation:
        with runtime.db.session() as session:
            session.get(Judgment, judgment_id).confirmation_status = confirmation
    return judgment_id


def signalled(runtime: Runtime, judgment_id: int, name: str = "reask") -> int:
    """An outcome signal recorded on the judged pair (as workers.outcome_watching records it); returns the pair."""
    with runtime.db.session() as session:
        pair_id = session.get(Judgment, judgment_id).pair_id
        session.add(OutcomeSignal(pair_id=pair_id, name=name, after_seconds=30.0))
    return pair_id


def sends(outcome: str, tool: str = "langfuse") -> float:
    body = metrics.exposition()[0].decode()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "relmon_trace_sends_total" and sample.labels == {"tool": tool, "outcome": outcome}:
                return sample.value
    return 0.0


@dataclass
class Watched:
    """Sends made under watch: what each returned with the requests made by then, how many the metric counted
    under the outcome watched, and the warnings said with the message watched."""

    returned: list[tuple[str, int]]
    counted: float
    said: list[logging.LogRecord]


def watched(
    caplog: pytest.LogCaptureFixture,
    calls: list[tuple[Task, list]],
    *,
    tool: str,
    outcome: str,
    message: str,
    requests: Callable[[], int],
) -> Watched:
    before = sends(outcome, tool)
    with caplog.at_level(logging.WARNING, logger="relmon.traces"):
        returned = [(task.apply(args=args).get(), requests()) for task, args in calls]
    said = [r for r in caplog.records if r.getMessage() == message]
    return Watched(returned, sends(outcome, tool) - before, said)
