"""Acknowledgement latency of the bot under a steady stream of signed message events.

Starts a real `relmon bot` (gunicorn, gthread) with its own Redis, a SQLite (or --database-url) database
and the fake Slack; sends signed Events API requests at a fixed rate (open loop: each request has its
slot, lateness is counted) from sender threads in this process, half human questions and half support-bot
answers in their threads (each answer upserts a pair and enqueues a settle task); prints p50/p90/p99/max
ack latency and the server's RSS (gunicorn master + worker).

    python -m bench.events                      # 200 events/s for 30 s
    python -m bench.events --rate 400 --seconds 10
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.measure import SignedEventPoster, percentile
from tests import slack_requests as sr
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_bot
from tests.services import RedisProcess


class BenchRedis(RedisProcess):
    """The test Redis, but with `appendfsync everysec` (Redis's default and the usual production setting)
    instead of the tests' fsync on every write."""

    def start(self) -> None:
        super().start()
        import redis

        redis.Redis.from_url(self.url).config_set("appendfsync", "everysec")


SECRET = "test-signing-secret"


def rss_kib(pid: int) -> int:
    """Memory of the server: a process and its children (gunicorn's worker), in KiB. Summed as PSS
    (proportional set size), so pages the forked worker shares with the master count once."""
    total = 0
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    for each in pids:
        for line in Path(f"/proc/{each}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
    return total


def make_events(count: int, channels: int) -> list[bytes]:
    """Pre-built, pre-encoded envelopes: question, answer, question, answer ... (signing happens at send)."""
    bodies = []
    now = time.time()
    for i in range(count // 2 + 1):
        channel = f"C{i % channels:08d}"
        q = sr.human_message(channel, sr.next_ts(now), f"question number {i}: how do I do thing {i}?")
        a = sr.bot_message(channel, sr.next_ts(now), f"answer {i}: open settings and do it.", thread_ts=q["ts"])
        bodies += [sr.body_of(sr.envelope(q))[0], sr.body_of(sr.envelope(a))[0]]
    return bodies[:count]


def run(rate: float, seconds: float, senders: int, database_url: str | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix="relmon-bench-"))
    redis_server = BenchRedis(work / "redis")
    redis_server.start()
    try:
        with FakeSlack() as slack:
            env = relmon_env(
                redis_url=redis_server.url,
                database_url=database_url or f"sqlite:///{work / 'relmon.sqlite3'}",
                slack_api_url=slack.api_url,
                data_dir=work / "data",
                RELMON_LOG_LEVEL="WARNING",
            )
            bot, base_url = start_bot(env, log_dir=work)
            with bot:
                return _drive(base_url + "/slack/events", bot.pid, rate, seconds, senders)
    finally:
        redis_server.stop()


def _drive(url: str, server_pid: int, rate: float, seconds: float, senders: int) -> dict:
    total = int(rate * seconds)
    bodies = make_events(total, channels=20)
    latencies: list[float] = []
    lateness: list[float] = []
    failures: list[int] = []
    next_index = 0
    lock = threading.Lock()
    rss_samples: list[int] = []
    finished: list[float] = []  # when each answer came back
    start = time.monotonic() + 0.5

    poster = SignedEventPoster(url, SECRET, timeout=10)

    def sender() -> None:
        nonlocal next_index
        try:
            while True:
                with lock:
                    index = next_index
                    next_index += 1
                if index >= total:
                    return
                slot = start + index / rate
                delay = slot - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                sent = time.monotonic()
                try:
                    status = poster.post(bodies[index])
                except (OSError, http.client.HTTPException):
                    status = 599  # reconnects on the next request
                done = time.monotonic()
                with lock:
                    finished.append(done)
                    latencies.append((done - sent) * 1000)
                    lateness.append(max(0.0, sent - slot) * 1000)
                    if status != 200:
                        failures.append(status)
        finally:
            poster.close()

    def sample_rss() -> None:
        while any(t.is_alive() for t in threads):
            rss_samples.append(rss_kib(server_pid))
            time.sleep(1)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for thread in threads:
        thread.start()
    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    for thread in threads:
        thread.join()
    sampler.join(timeout=2)
    elapsed = max(finished) - start  # first slot to last answer (not the memory sampler's last sleep)
    return {
        "events": len(latencies),
        "rate_asked": rate,
        "rate_achieved": len(latencies) / elapsed,
        "failures": len(failures),
        "p50_ms": statistics.median(latencies),
        "p90_ms": percentile(latencies, 0.90),
        "p99_ms": percentile(latencies, 0.99),
        "max_ms": max(latencies),
        "late_p99_ms": percentile(lateness, 0.99),
        "rss_mib_peak": max(rss_samples) / 1024 if rss_samples else 0.0,
        "rss_mib_end": rss_kib(server_pid) / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to send (default 30)")
    parser.add_argument("--senders", type=int, default=16, help="sender threads (default 16)")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    args = parser.parse_args()
    result = run(args.rate, args.seconds, args.senders, args.database_url)
    print(
        f"events {result['events']} at {result['rate_achieved']:.0f}/s (asked {result['rate_asked']:.0f}/s), "
        f"failures {result['failures']}\n"
        f"ack latency ms: p50 {result['p50_ms']:.1f}  p90 {result['p90_ms']:.1f}  p99 {result['p99_ms']:.1f}  "
        f"max {result['max_ms']:.1f}  (sender lateness p99 {result['late_p99_ms']:.1f})\n"
        f"server memory MiB (PSS, master + worker): peak {result['rss_mib_peak']:.0f}  "
        f"end {result['rss_mib_end']:.0f}  (cores: {os.cpu_count()})"
    )


if __name__ == "__main__":
    main()
