"""What the trace tests share: a judged answer in the database (a real row), the sends counted in the process's
metrics, and a runtime whose settings point at a tracing tool."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

from common import metrics
from common.runtime import Runtime
from store.models import Judgment, OutcomeSignal, Pair, PairStatus
from tests.alert_helpers import make_settings

CHANNEL, TS = "C_SUPPORT", "1767225600.000100"


def judged(runtime: Runtime, *, confirmation: str | None = None, ts: str = TS, thread_ts: str | None = None) -> int:
    with runtime.db.session() as session:
        pair = Pair(channel_id=CHANNEL, answer_ts=ts, thread_ts=thread_ts, status=PairStatus.JUDGED)
        session.add(pair)
        session.flush()
        judgment = Judgment(
            pair_id=pair.id,
            judge="relevancy",
            status="ok",
            score=1,
            normalized_score=0.25,
            reasoning="The answer is about billing; the question was about passwords.",
            confirmation_status=confirmation,
        )
        session.add(judgment)
        if confirmation:  # a low score confirmed or disputed: the asker asked again
            session.add(OutcomeSignal(pair_id=pair.id, name="reask"))
        session.flush()
        return judgment.id


def sends(outcome: str, tool: str = "langfuse") -> float:
    body = metrics.exposition()[0].decode()
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "relmon_trace_sends_total" and sample.labels == {"tool": tool, "outcome": outcome}:
                return sample.value
    return 0.0


def runtime_on(
    runtime_for: Callable[..., Runtime], redis_url: str, db_url: str, url: str, slack_url: str = "", **overrides
) -> Runtime:
    tracing = {
        "trace_id_from": "slack_ts",
        "langfuse_host": url,
        "langfuse_public_key": "pk-lf-test",
        "langfuse_secret_key": "sk-lf-test",
        "trace_send_retries": 3,
    }
    settings = make_settings(
        redis_url=redis_url,
        database_url=db_url,
        slack_api_url=slack_url or "http://127.0.0.1:9/api/",
        **{**tracing, **overrides},
    )
    return runtime_for(settings)
