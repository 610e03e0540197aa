"""The metrics' state on a real database and Redis (`common.metrics.StateCollector`), read back with
prometheus-client's parser, and read once for many scrapes (`common.metrics_cache`); the door's small server
(`common.metrics_door`) and where the worker's port listens; `relmon doctor`'s check of a real /metrics endpoint
(with the token); the shipped Grafana dashboard asks only for series relmon serves. Through real processes:
tests/system/test_metrics_processes.py, tests/system/test_metrics_door.py."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from common import metrics, metrics_door
from common.celery_app import QUEUES
from common.runtime import Runtime
from relmon.doctor.metrics_check import check_metrics
from store.models import Alert, Judgment, OutcomeSignal, Pair, PairStatus
from tests.builders import make_settings
from tests.services import free_port

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created")


def samples_of(body: bytes) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def add_pair(runtime: Runtime, channel: str, ts: str, *, score: float | None, error: str | None = None) -> int:
    with runtime.db.session() as session:
        pair = Pair(channel_id=channel, answer_ts=ts, question_text="q", answer_text="a", status=PairStatus.JUDGED)
        session.add(pair)
        session.flush()
        status = "error" if error else "ok"
        judgment = Judgment(
            pair_id=pair.id,
            judge="relevancy",
            status=status,
            score=score,
            normalized_score=None if score is None else score / 4,
            prompt_tokens=1000,
            cached_tokens=200,
            completion_tokens=100,
            latency_ms=1500,
            error=error,
            confirmation_status="confirmed" if score == 1 else None,
        )
        session.add(judgment)
        session.flush()
        if score == 1:
            session.add(
                Alert(dedupe_key=f"low:{judgment.id}", kind="low_score", source_channel_id=channel, status="posted")
            )
            session.add(OutcomeSignal(pair_id=pair.id, name="reask"))
        return pair.id


def test_the_state_is_counted_with_bounded_channel_labels(settings_for, runtime_for: Callable[..., Runtime]) -> None:
    settings = settings_for(
        metrics_channel_labels=["C_ALLOWED"],
        cost_per_million_input_tokens=1.0,
        cost_per_million_output_tokens=2.0,
        daily_budget=10,
    )
    runtime = runtime_for(settings)
    add_pair(runtime, "C_ALLOWED", "1.1", score=1)
    add_pair(runtime, "C_SECRET", "1.2", score=4)
    add_pair(runtime, "C_SECRET", "1.3", score=None, error="LLM request timed out after 60 s")
    runtime.redis.rpush("relmon.judge", "task-1", "task-2")

    body, content_type = metrics.exposition(runtime)
    assert content_type.startswith("text/plain")
    samples = samples_of(body)

    def value(metric: str, **labels: str) -> float:
        return samples[(metric, tuple(sorted(labels.items())))]

    assert value("relmon_state_up") == 1
    assert value("relmon_judgments_total", judge="relevancy", status="ok") == 2
    assert value("relmon_judgments_total", judge="relevancy", status="error") == 1
    assert value("relmon_score_bucket", judge="relevancy", le="0.4") == 1  # 1/4
    assert value("relmon_score_bucket", judge="relevancy", le="+Inf") == 2
    assert value("relmon_score_sum", judge="relevancy") == 1.25
    assert value("relmon_confirmations_total", outcome="confirmed") == 1
    assert value("relmon_alerts_total", kind="low_score", status="posted", channel="C_ALLOWED") == 1
    assert value("relmon_pairs", status="judged", channel="C_ALLOWED") == 1
    assert value("relmon_pairs", status="judged", channel="other") == 2  # not allowed as a label
    assert value("relmon_llm_calls_total", judge="relevancy") == 3
    assert value("relmon_llm_errors_total", kind="timeout") == 1
    assert value("relmon_llm_latency_seconds_bucket", le="2.0") == 3
    assert value("relmon_llm_tokens_total", kind="prompt") == 3000
    # 2,400 uncached input at $1, 600 cached at half that, 300 output at $2 (per million).
    assert abs(value("relmon_llm_cost_usd_total") - (2400 * 1 + 600 * 0.5 + 300 * 2) / 1e6) < 1e-12
    assert value("relmon_outcome_signals_total", name="reask") == 1
    assert value("relmon_queue_depth", queue="relmon.judge") == 2
    assert value("relmon_budget_left") == 10
    assert b"C_SECRET" not in body


def test_a_database_that_does_not_answer_gives_state_up_0_not_a_failed_scrape(
    redis_url: str, tmp_path: Path, runtime_for: Callable[..., Runtime]
) -> None:
    settings = make_settings(
        redis_url=redis_url,
        database_url="postgresql://nobody@127.0.0.1:9/none?connect_timeout=2",
    )
    body, _ = metrics.exposition(runtime_for(settings))
    samples = samples_of(body)
    assert samples[("relmon_state_up", ())] == 0
    assert not [key for key in samples if key[0].startswith("relmon_judgments")]


TOKEN = "doctor-and-bot-share-this-token"


def bot_port_server(port: int, runtime: Runtime, *, token: str | None):
    """/healthz and /metrics behind the door, as on a bot's --port (not a metrics port of its own)."""
    return metrics_door.start_server(
        "127.0.0.1",
        port,
        token=token,
        scrape=lambda: metrics.exposition(runtime),
        own_port=False,
        health=lambda: (200, {}),
    )


def test_doctor_checks_a_real_metrics_endpoint(settings_for, runtime_for: Callable[..., Runtime]) -> None:
    settings = settings_for(metrics_token=TOKEN)
    runtime = runtime_for(settings)
    port = free_port()
    server = bot_port_server(port, runtime, token=TOKEN)
    try:
        served = check_metrics(settings.model_copy(update={"metrics_url": f"http://127.0.0.1:{port}/metrics"}))
        assert served.status == "ok" and "metric families" in served.detail
        wrong = check_metrics(settings.model_copy(update={"metrics_url": f"http://127.0.0.1:{port}/nothing"}))
        assert wrong.status == "FAIL" and "404" in wrong.detail
        health = check_metrics(settings.model_copy(update={"metrics_url": f"http://127.0.0.1:{port}/healthz"}))
        assert health.status == "FAIL"  # JSON, not relmon's metrics
        other_token = settings_for(metrics_token="not-the-bots-token")
        refused = check_metrics(other_token.model_copy(update={"metrics_url": f"http://127.0.0.1:{port}/metrics"}))
        assert refused.status == "FAIL" and "401" in refused.detail and "RELMON_METRICS_TOKEN" in refused.fix
        no_token = settings_for(metrics_url=f"http://127.0.0.1:{port}/metrics")
        assert check_metrics(no_token).status == "FAIL"  # the bot asks for one
    finally:
        server.shutdown()
        server.server_close()
    down = check_metrics(settings.model_copy(update={"metrics_url": f"http://127.0.0.1:{free_port()}/metrics"}))
    assert down.status == "skip" and "no answer" in down.detail


def test_doctor_skips_a_bot_port_that_serves_no_metrics_without_a_token(
    settings_for, runtime_for: Callable[..., Runtime]
) -> None:
    settings = settings_for(metrics_url="")
    runtime = runtime_for(settings)
    port = free_port()
    server = bot_port_server(port, runtime, token=None)
    try:
        closed = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert closed.status_code == 404 and "RELMON_METRICS_TOKEN" in closed.json()["hint"]
        check = check_metrics(settings.model_copy(update={"metrics_url": f"http://127.0.0.1:{port}/metrics"}))
    finally:
        server.shutdown()
        server.server_close()
    assert check.status == "skip" and "RELMON_METRICS_PORT" in check.detail


def listening_address(port: int) -> str:
    """The local address a socket LISTENs on at `port`, from the kernel's own table (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":
            return ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
    raise AssertionError(f"nothing listens on {port}")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="no /proc/net/tcp (Linux only)")
def test_the_workers_port_listens_on_loopback_alone_unless_the_token_guards_it(settings_for) -> None:
    open_port, guarded_port = free_port(), free_port()
    assert metrics.serve_metrics_port(settings_for(), open_port, lambda: metrics.exposition()) == open_port
    guarded = settings_for(metrics_token=TOKEN)
    assert metrics.serve_metrics_port(guarded, guarded_port, lambda: metrics.exposition()) == guarded_port
    assert listening_address(open_port) == "127.0.0.1"
    assert httpx.get(f"http://127.0.0.1:{open_port}/metrics", timeout=5).status_code == 200
    assert listening_address(guarded_port) == "0.0.0.0"
    assert httpx.get(f"http://127.0.0.1:{guarded_port}/metrics", timeout=5).status_code == 401
    with_token = httpx.get(
        f"http://127.0.0.1:{guarded_port}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5
    )
    assert with_token.status_code == 200 and "relmon_events_acked" in with_token.text
    assert metrics.serve_metrics_port(settings_for(), open_port, lambda: metrics.exposition()) is None  # taken


def test_the_small_server_over_http() -> None:
    """The worker's and beat's port (own_port) and Socket Mode's --port (not own_port, with /healthz)."""

    def scrape_ok() -> tuple[bytes, str]:
        return b"relmon_up 1\n", "text/plain; version=0.0.4"

    own, shared = free_port(), free_port()
    servers = [
        metrics_door.start_server("127.0.0.1", own, token=None, scrape=scrape_ok, own_port=True),
        metrics_door.start_server(
            "127.0.0.1", shared, token=TOKEN, scrape=scrape_ok, own_port=False, health=lambda: (200, {"status": "ok"})
        ),
    ]
    try:
        assert httpx.get(f"http://127.0.0.1:{own}/metrics").text == "relmon_up 1\n"
        assert httpx.get(f"http://127.0.0.1:{own}/healthz").status_code == 404
        assert httpx.get(f"http://127.0.0.1:{own}/slack/events").status_code == 404
        assert httpx.get(f"http://127.0.0.1:{shared}/healthz").json() == {"status": "ok"}
        refused = httpx.get(f"http://127.0.0.1:{shared}/metrics")
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        wrong = httpx.get(f"http://127.0.0.1:{shared}/metrics", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        served = httpx.get(f"http://127.0.0.1:{shared}/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert served.status_code == 200 and served.headers["content-type"].startswith("text/plain")
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_many_scrapes_read_the_state_once(settings_for, runtime_for: Callable[..., Runtime]) -> None:
    """Twenty scrapes at once through the cache: one reading of the database and Redis (Redis's own count of
    LLEN, one per queue per reading, says so too), then the same answer while it is younger than 15 s."""
    runtime = runtime_for(settings_for())
    add_pair(runtime, "C1", "1.1", score=3)
    state = metrics.state_cache(runtime)
    reads_before = samples_of(metrics.exposition()[0]).get(("relmon_state_reads_total", ()), 0.0)
    runtime.redis.config_resetstat()
    bodies: list[bytes] = []
    threads = [threading.Thread(target=lambda: bodies.append(metrics.exposition(runtime, state)[0])) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(bodies) == 20
    llen = runtime.redis.info("commandstats").get("cmdstat_llen", {}).get("calls", 0)
    assert llen == len(QUEUES)
    samples = samples_of(bodies[-1])
    assert samples[("relmon_state_reads_total", ())] - reads_before == 1
    assert samples[("relmon_state_up", ())] == 1
    assert samples[("relmon_judgments_total", (("judge", "relevancy"), ("status", "ok")))] == 1
    assert 0 <= samples[("relmon_state_age_seconds", ())] < 15
    add_pair(runtime, "C1", "1.2", score=4)  # not seen until the reading is 15 s old
    again = samples_of(metrics.exposition(runtime, state)[0])
    assert again[("relmon_judgments_total", (("judge", "relevancy"), ("status", "ok")))] == 1


def test_the_shipped_dashboard_asks_only_for_series_relmon_serves(
    settings_for, runtime_for: Callable[..., Runtime]
) -> None:
    dashboard = json.loads((ROOT / "ops" / "grafana" / "dashboards" / "relmon.json").read_text())
    assert dashboard["uid"] == "relmon" and dashboard["panels"]
    settings = settings_for()
    metrics.event_acked("http", 200, 0.01)  # the process counters exist once used
    metrics.event_spooled()
    metrics.trace_send("langfuse", "sent")
    metrics._process_metrics().tasks.labels("workers.tasks.judging.judge_pair", "success").inc()
    served = {
        family.name for family in text_string_to_metric_families(metrics.exposition(runtime_for(settings))[0].decode())
    }
    for panel in dashboard["panels"]:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            for name in re.findall(r"\brelmon_\w+", target["expr"]):
                base = next((name[: -len(suffix)] for suffix in SUFFIXES if name.endswith(suffix)), name)
                assert base in served, f"panel {panel['title']!r} asks for {name}, which relmon does not serve"


def test_error_kinds_are_a_bounded_vocabulary() -> None:
    assert metrics.error_kind("LLM request timed out") == "timeout"
    assert metrics.error_kind("Error code: 429 rate limit") == "rate_limit"
    assert metrics.error_kind("could not parse the verdict") == "unparseable"
    assert metrics.error_kind("something odd") == "other"
    assert metrics.channel_label("C1", frozenset({"C1"})) == "C1"
    assert metrics.channel_label("C2", frozenset({"C1"})) == metrics.OTHER_CHANNEL
