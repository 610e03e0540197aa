"""GET /metrics through real processes: a real `relmon bot` (gunicorn, two worker processes) and `relmon worker`,
scraped over HTTP and read with prometheus-client's own parser; a signed event and a judged pair move the
counters, and no text or user ID is in what is served."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from common import task_names
from tests import slack_requests as sr
from tests.processes import wait_for
from tests.running_system import CHANNEL, relmon_processes
from tests.services import free_port

pytestmark = pytest.mark.slow


TOKEN = "processes-metrics-token-0123456789"


def scrape(url: str) -> tuple[dict[tuple[str, tuple], float], str]:
    """(sample name, sorted labels) -> value, and the body as served (asked with the token)."""
    response = httpx.get(url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples, response.text


def value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_the_processes_counters_move_with_the_work_they_do(redis_url: str, db_url: str, tmp_path: Path) -> None:
    worker_port = free_port()
    with relmon_processes(
        redis_url=redis_url,
        database_url=db_url,
        directory=tmp_path,
        RELMON_SETTLE_SECONDS="0.3",
        RELMON_WORKER_METRICS_PORT=worker_port,
        RELMON_METRICS_TOKEN=TOKEN,
        RELMON_METRICS_CHANNEL_LABELS=CHANNEL,
        RELMON_DAILY_BUDGET=50,
    ) as system:
        bot_metrics = system.base_url + "/metrics"
        before, _ = scrape(bot_metrics)
        assert value(before, "relmon_state_up") == 1
        assert value(before, "relmon_budget_left") == 50

        question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
        answer = sr.bot_message(CHANNEL, sr.next_ts(), "Open Settings > Security > Reset.", thread_ts=question["ts"])
        for event in (question, answer):
            assert system.post_event(event).status_code == 200

        def judged() -> dict | None:
            samples, _ = scrape(bot_metrics)
            return samples if value(samples, "relmon_judgments_total", judge="relevancy", status="ok") == 1 else None

        after = wait_for(judged, timeout=60, what="the judgment counted on /metrics")
        _, body = scrape(bot_metrics)
        # Both gunicorn processes write to one directory: every ack is counted, whichever process answered.
        acked = value(after, "relmon_events_acked_total", transport="http", status="200")
        assert acked - value(before, "relmon_events_acked_total", transport="http", status="200") == 2
        assert value(after, "relmon_ack_seconds_count", transport="http") >= 2
        assert value(after, "relmon_pairs", status="judged", channel=CHANNEL) == 1  # a channel allowed as a label
        assert value(after, "relmon_score_count", judge="relevancy") == 1
        assert value(after, "relmon_score_bucket", judge="relevancy", le="+Inf") == 1
        assert value(after, "relmon_llm_calls_total", judge="relevancy") == 1
        assert value(after, "relmon_llm_tokens_total", kind="prompt") > 0
        assert value(after, "relmon_llm_latency_seconds_count") == 1
        assert value(after, "relmon_budget_left") == 49
        assert ("relmon_queue_depth", (("queue", "relmon.judge"),)) in after
        assert value(after, "relmon_oldest_unjudged_seconds") == 0
        for private in ("U_ASKER", "password", "Security"):  # no user, no text
            assert private not in body

        def worker_counted() -> dict | None:
            samples, _ = scrape(f"http://127.0.0.1:{worker_port}/metrics")
            judged_tasks = [key for key, count in samples.items() if key[0] == "relmon_tasks_total" and count > 0]
            return samples if judged_tasks else None

        worker = wait_for(worker_counted, timeout=20, what="the worker's task counters")
        assert any(
            # The settle task ran and handed its pair to judge_pair (workers.pairs.settling.settle).
            dict(labels).get("state") == "success" and dict(labels)["task"] == task_names.SETTLE_PAIR
            for name, labels in worker
            if name == "relmon_tasks_total"
        )
