"""`GET /metrics` is no open door, through a real `relmon bot` (gunicorn, two processes): with RELMON_METRICS_TOKEN
only the bearer token opens it (a short 401 otherwise, never a 500), on --port and on RELMON_METRICS_PORT;
without a token --port serves none (404 and a hint) and the metrics port listens on 127.0.0.1 alone (the kernel's
own table says so), and never serves /slack/events. A flood of scrapes while signed Slack events arrive: every
ack under 1 s, and the state read at most once per 15 s (the bot's own count, and the readings' times as the
scrapers saw them)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert, select

from common.metrics_cache import STATE_MAX_AGE_SECONDS
from store.db import Database
from store.models import Judgment, Pair
from tests import slack_requests as sr
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.fakes.socket_mode_server import FakeSocketMode
from tests.processes import relmon_env
from tests.running_system import CHANNEL, fresh_database, relmon_processes
from tests.services import free_port
from tests.system.test_bot_socket_mode import start_socket_mode_bot

pytestmark = pytest.mark.slow

TOKEN = "a-door-token-only-prometheus-knows-4711"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
SEEDED_PAIRS = 10_000
FLOOD_SECONDS = 20.0
FLOOD_PROCESSES = 2
# 16 scrapers, each scraping every 0.25 s: 64 scrapes a second where Prometheus asks once per 15 s. Reading the
# state of SEEDED_PAIRS at each (a tenth of a second and more) would take several cores.
FLOOD_THREADS = 8
FLOOD = """
import collections, json, re, sys, threading, time
import httpx
url, token, seconds, threads = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
statuses = collections.Counter()
read_at = set()  # when each reading served was made: now - relmon_state_age_seconds, to a tenth of a second
lock = threading.Lock()
deadline = time.monotonic() + seconds
def flood():
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10) as client:
        while time.monotonic() < deadline:
            response = client.get(url)
            age = re.search(r"^relmon_state_age_seconds (\\S+)$", response.text, re.M)
            with lock:
                statuses[response.status_code] += 1
                if age:
                    read_at.add(round(time.time() - float(age.group(1)), 1))
            time.sleep(0.25)
workers = [threading.Thread(target=flood) for _ in range(threads)]
for worker in workers:
    worker.start()
for worker in workers:
    worker.join()
print(json.dumps({"statuses": statuses, "read_at": sorted(read_at)}))
"""


def listening_address(port: int) -> str:
    """The local address a socket LISTENs on at `port`, from /proc/net/tcp (IPv4)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        address, hex_port = fields[1].split(":")
        if int(hex_port, 16) == port and fields[3] == "0A":
            return ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
    raise AssertionError(f"nothing listens on {port}")


def samples(body: str) -> dict[str, float]:
    """Unlabelled samples by name."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if not sample.labels
    }


def signed_event_to(url: str) -> httpx.Response:
    event = sr.human_message(CHANNEL, sr.next_ts(), "Where is my invoice?")
    return sr.post(url + "/slack/events", sr.envelope(event), SECRET)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="no /proc/net/tcp (Linux only)")
def test_with_a_token_only_the_token_opens_metrics_on_either_port(redis_url: str, tmp_path: Path) -> None:
    metrics_port = free_port()
    with (
        fresh_database(tmp_path) as database_url,
        relmon_processes(
            redis_url=redis_url,
            database_url=database_url,
            directory=tmp_path,
            start=("bot",),
            RELMON_METRICS_TOKEN=TOKEN,
            RELMON_METRICS_PORT=metrics_port,
        ) as system,
    ):
        own = f"http://127.0.0.1:{metrics_port}"
        for base in (system.base_url, own):
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"X-Token": TOKEN}):
                refused = httpx.get(f"{base}/metrics", headers=headers, timeout=10)
                assert refused.status_code == 401, (base, headers)
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert "Authorization: Bearer" in refused.json()["error"] and len(refused.content) < 200
                assert "relmon_" not in refused.text
            served = httpx.get(f"{base}/metrics", headers=BEARER, timeout=10)
            assert served.status_code == 200 and samples(served.text)["relmon_state_up"] == 1
        # Slack's endpoint lives on --port alone.
        assert signed_event_to(system.base_url).status_code == 200
        assert signed_event_to(own).status_code == 404
        assert listening_address(metrics_port) == "0.0.0.0"  # reachable from elsewhere: the token guards it


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="no /proc/net/tcp (Linux only)")
def test_without_a_token_metrics_is_served_on_loopback_alone(redis_url: str, tmp_path: Path) -> None:
    metrics_port = free_port()
    with (
        fresh_database(tmp_path) as database_url,
        relmon_processes(
            redis_url=redis_url,
            database_url=database_url,
            directory=tmp_path,
            start=("bot",),
            RELMON_METRICS_PORT=metrics_port,
        ) as system,
    ):
        closed = httpx.get(f"{system.base_url}/metrics", headers=BEARER, timeout=10)
        assert closed.status_code == 404
        assert "RELMON_METRICS_TOKEN" in closed.json()["hint"] and "relmon_" not in closed.text
        assert listening_address(metrics_port) == "127.0.0.1"
        own = f"http://127.0.0.1:{metrics_port}"
        served = httpx.get(f"{own}/metrics", timeout=10)
        assert served.status_code == 200 and samples(served.text)["relmon_state_up"] == 1
        assert httpx.get(f"{own}/healthz", timeout=10).status_code == 404
        assert signed_event_to(own).status_code == 404
        assert signed_event_to(system.base_url).status_code == 200


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="no /proc/net/tcp (Linux only)")
def test_socket_mode_keeps_the_same_door(redis_url: str, tmp_path: Path) -> None:
    """In Socket Mode the bot's --port serves /healthz (and /metrics only with the token), and its metrics port
    obeys the same rule."""
    socket_mode = FakeSocketMode().start()
    with fresh_database(tmp_path) as database_url, FakeSlack(socket_mode_url=socket_mode.url) as slack:
        env = relmon_env(
            redis_url=redis_url,
            database_url=database_url,
            slack_api_url=slack.api_url,
            data_dir=tmp_path / "data",
            SLACK_APP_TOKEN="xapp-test-token",
            RELMON_METRICS_TOKEN=TOKEN,
            RELMON_METRICS_PORT=str(metrics_port := free_port()),
        )
        del env["SLACK_SIGNING_SECRET"]
        port = free_port()
        bot = start_socket_mode_bot(env, socket_mode, tmp_path, port=port)
        try:
            bot.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=30)
            for base in (f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}"):
                refused = httpx.get(f"{base}/metrics", headers={"Authorization": "Bearer wrong"}, timeout=10)
                assert refused.status_code == 401 and "relmon_" not in refused.text
                served = httpx.get(f"{base}/metrics", headers=BEARER, timeout=10)
                assert served.status_code == 200 and samples(served.text)["relmon_state_up"] == 1
            assert listening_address(metrics_port) == "0.0.0.0"
        finally:
            bot.stop()
            socket_mode.stop()


def seed(database_url: str, count: int) -> None:
    """`count` judged pairs: enough that reading the state is real work (a tenth of a second and more)."""
    database = Database(database_url)
    with database.session() as session:
        rows = [{"channel_id": f"C{i % 20}", "answer_ts": f"{i}.0", "status": "judged"} for i in range(count)]
        session.execute(insert(Pair), rows)
        ids = session.scalars(select(Pair.id)).all()
        judgments = [
            {
                "pair_id": pair_id,
                "judge": "relevancy",
                "status": "ok",
                "score": pair_id % 5,
                "normalized_score": (pair_id % 5) / 4,
                "prompt_tokens": 900,
                "completion_tokens": 60,
                "latency_ms": 800 + pair_id % 2000,
            }
            for pair_id in ids
        ]
        session.execute(insert(Judgment), judgments)
    database.dispose()


@pytest.mark.timeout(300)
# Run alone, after the parallel run: it times Slack's acks against the 1 s bound, which three other test workers'
# processes on two cores pushed past (one ack of 40 at 1.3 s in a full run), whatever the scrapes did.
@pytest.mark.serial
def test_a_flood_of_scrapes_does_not_delay_slacks_acks(redis_url: str, tmp_path: Path) -> None:
    with fresh_database(tmp_path) as database_url:
        seed(database_url, SEEDED_PAIRS)
        with relmon_processes(
            redis_url=redis_url,
            database_url=database_url,
            directory=tmp_path,
            start=("bot",),
            RELMON_METRICS_TOKEN=TOKEN,
        ) as system:
            url = system.base_url
            started = time.monotonic()
            # The scrapers in processes of their own: the one sending Slack's events measures its acks undisturbed.
            scrapers = [
                subprocess.Popen(
                    [sys.executable, "-c", FLOOD, f"{url}/metrics", TOKEN, str(FLOOD_SECONDS), str(FLOOD_THREADS)],
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(FLOOD_PROCESSES)
            ]
            acks: list[tuple[int, float]] = []
            try:
                time.sleep(1.0)  # the flood is on
                while time.monotonic() - started < FLOOD_SECONDS - 1:
                    sent = time.monotonic()
                    status = signed_event_to(url).status_code
                    acks.append((status, time.monotonic() - sent))
                    time.sleep(0.2)
            finally:
                outputs = [scraper.communicate(timeout=60)[0] for scraper in scrapers]
            statuses: Counter[int] = Counter()
            read_at: list[float] = []
            for output in outputs:
                flooded = json.loads(output)
                statuses.update({int(status): count for status, count in flooded["statuses"].items()})
                read_at += flooded["read_at"]
            final = httpx.get(f"{url}/metrics", headers=BEARER, timeout=10)
            elapsed = time.monotonic() - started

    ack_times = sorted(seconds for _, seconds in acks)
    reads = samples(final.text)["relmon_state_reads_total"]
    most = math.floor(elapsed / STATE_MAX_AGE_SECONDS) + 1  # readings 15 s apart that fit in the test's time
    report = json.dumps(
        {
            "acks": len(acks),
            "median_ack": round(ack_times[len(ack_times) // 2], 3),
            "slowest_acks": [round(seconds, 3) for seconds in ack_times[-5:]],
            "scrapes": dict(statuses),
            "seconds": round(elapsed, 1),
            "state_reads": reads,
            "readings_seen": readings(read_at),
            "most_reads": most,
            "state_read_seconds": samples(final.text)["relmon_state_scrape_seconds"],
        }
    )
    print(report)
    assert {status for status, _ in acks} == {200}, report
    assert ack_times[-1] < 1.0, report
    # Scrapes were served (200), or told to retry at once (503) when two were already being served in that
    # process: never a 500, never a refusal of the token.
    assert set(statuses) <= {200, 503} and statuses[200] >= 100, report
    assert 1 <= reads <= most, report
    # What the scrapers saw: each answer says how old its reading is, so when it was made. The readings served
    # were made at least 15 s apart (less a second: an answer is reused for a second, and the clocks' rounding).
    seen = readings(read_at)
    assert 1 <= len(seen) <= reads, report
    assert all(later - earlier >= STATE_MAX_AGE_SECONDS - 1.5 for earlier, later in itertools.pairwise(seen)), report


def readings(read_at: list[float]) -> list[float]:
    """The distinct readings among the times the scrapers derived (each within a second or so of the truth)."""
    distinct: list[float] = []
    for moment in sorted(read_at):
        if not distinct or moment - distinct[-1] > 3.0:
            distinct.append(moment)
    return distinct
