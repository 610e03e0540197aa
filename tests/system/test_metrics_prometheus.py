"""relmon's /metrics scraped by a real Prometheus server: a real `relmon bot` and `relmon worker` (its metrics
port), both targets of a `prometheus` binary (the Debian package: scripts/test.sh installs it where apt-get can),
which scrapes them every second; its HTTP API (`/api/v1/query`) then answers with relmon's series. Prometheus
rejects a target whose exposition it cannot parse (`up` 0), so this checks the format as its main reader reads
it. Both ask for RELMON_METRICS_TOKEN: Prometheus sends it as the shipped ops/prometheus/prometheus.yml says
(`authorization`, a credentials file). Without the binary the test is skipped locally and fails in CI; the same
endpoints are parsed with prometheus-client's own parser in tests/system/test_metrics_processes.py."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import yaml

from tests import slack_requests as sr
from tests.conftest import IN_CI
from tests.processes import wait_for
from tests.running_system import CHANNEL, fresh_database, relmon_processes
from tests.services import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "prometheus-scrapes-with-this-token"


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        message = (
            "no prometheus binary (scripts/test.sh installs the Debian package as root: apt-get install prometheus)"
        )
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def shipped_authorization(job: str, token_file: Path) -> dict:
    """The job's `authorization` block as ops/prometheus/prometheus.yml ships it, its credentials file here."""
    shipped = yaml.safe_load((ROOT / "ops" / "prometheus" / "prometheus.yml").read_text())
    authorization = next(item for item in shipped["scrape_configs"] if item["job_name"] == job)["authorization"]
    return {**authorization, "credentials_file": str(token_file)}


@contextmanager
def prometheus(binary: str, targets: dict[str, str], directory: Path) -> Iterator[str]:
    """A Prometheus server on 127.0.0.1 scraping each job's target (host:port) every second, with relmon's token
    as the shipped configuration sends it; yields its URL."""
    token_file = directory / "relmon-metrics-token"
    token_file.write_text(TOKEN)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [
            {
                "job_name": job,
                "authorization": shipped_authorization(job, token_file),
                "static_configs": [{"targets": [target]}],
            }
            for job, target in targets.items()
        ],
    }
    config_file = directory / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(config))
    port = free_port()
    log = (directory / "prometheus.log").open("wb")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={config_file}",
            f"--storage.tsdb.path={directory / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"prometheus exited: {(directory / 'prometheus.log').read_text()[-2000:]}")
            try:
                return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, timeout=60, what="prometheus ready")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        log.close()


def query(url: str, expression: str) -> dict[tuple, float]:
    """An instant query through Prometheus's HTTP API: {sorted labels: value} of the vector it answers."""
    answer = httpx.get(f"{url}/api/v1/query", params={"query": expression}, timeout=5).json()
    assert answer["status"] == "success", answer
    return {tuple(sorted(item["metric"].items())): float(item["value"][1]) for item in answer["data"]["result"]}


def test_a_real_prometheus_scrapes_relmons_processes_for_relmon_series(redis_url: str, tmp_path: Path) -> None:
    binary = prometheus_binary()
    worker_port = free_port()
    with (
        fresh_database(tmp_path) as database_url,
        relmon_processes(
            redis_url=redis_url,
            database_url=database_url,
            directory=tmp_path,
            RELMON_SETTLE_SECONDS="0.3",
            RELMON_WORKER_METRICS_PORT=worker_port,
            RELMON_METRICS_TOKEN=TOKEN,
        ) as system,
    ):
        bot = urlsplit(system.base_url).netloc
        targets = {"relmon-bot": bot, "relmon-worker": f"127.0.0.1:{worker_port}"}
        with prometheus(binary, targets, tmp_path) as url:
            question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
            answer = sr.bot_message(
                CHANNEL, sr.next_ts(), "Open Settings > Security > Reset.", thread_ts=question["ts"]
            )
            for event in (question, answer):
                assert system.post_event(event).status_code == 200
            judged = 'relmon_judgments_total{job="relmon-bot",judge="relevancy",status="ok"}'
            found = wait_for(lambda: query(url, judged) or None, timeout=90, what="the judgment in Prometheus")
            tasks = 'sum(relmon_tasks_total{job="relmon-worker",state="success"})'
            wait_for(lambda: sum(query(url, tasks).values()) >= 2, timeout=30, what="the worker's tasks in Prometheus")
            up = query(url, "up")
            acked = query(url, 'sum(relmon_events_acked_total{job="relmon-bot",transport="http",status="200"})')
        # Prometheus had the token; anyone else is refused.
        without_token = tuple(
            httpx.get(f"http://{target}/metrics", timeout=5).status_code for target in targets.values()
        )
    assert list(found.values()) == [1.0]
    # Both targets parsed whole at every scrape: Prometheus sets `up` to 0 for an exposition it cannot read.
    assert {dict(labels)["job"]: value for labels, value in up.items()} == {"relmon-bot": 1.0, "relmon-worker": 1.0}
    assert list(acked.values()) == [2.0]
    assert without_token == (401, 401)
