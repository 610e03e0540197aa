"""Acknowledgement latency of the bot under a steady stream of signed message events, twice: with no worker
running, then with one `relmon worker` judging at full speed beside the bot (as `relmon run` and small
deployments share one machine).

Starts a real `relmon bot` (gunicorn, gthread) with its own Redis, a SQLite (or --database-url) database, the
fake Slack and the fake LLM (its own process, answering at once: the worker is CPU-bound, the worst case for the
bot); sends signed Events API requests at a fixed rate (open loop: each request has its slot, lateness is
counted) from sender threads in this process, half human questions and half support-bot answers in their
threads (each answer upserts a pair and enqueues a settle task, RELMON_SETTLE_SECONDS=1). For the second run
the worker starts with a backlog of --backlog pending pairs, so it is judging flat out while the events arrive.
Then it waits for the pipeline to drain and checks the database: every answer sent is one pair, every pair
judged exactly once (no event lost or judged twice), and the LLM saw one call per judgment.

Prints, for each run, p50/p90/p99/max ack latency; the server's memory (PSS of gunicorn master + workers).

    python -m bench.events                      # 200 events/s for 20 s, each run
    python -m bench.events --rate 400 --seconds 10
    python -m bench.events --no-worker          # only the run without a worker
    python -m bench.events --postgresql         # on a fresh PostgreSQL database (127.0.0.1:5432)
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import func, select

from bench.measure import SignedEventPoster, percentile
from bench.pipeline import add_pairs
from bench.processes import judged_pairs, services
from store.db import Database
from store.models import Judgment, Pair, PairStatus
from tests import slack_requests as sr
from tests.processes import wait_for

SECRET = "test-signing-secret"


def rss_kib(pid: int) -> int:
    """Memory of the server: a process and its children (gunicorn's workers), in KiB. Summed as PSS
    (proportional set size), so pages the forked workers share with the master count once."""
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


def make_events(count: int, channels: int, tag: str) -> tuple[list[bytes], list[tuple[str, str]]]:
    """Pre-built, pre-encoded envelopes: question, answer, question, answer ... (signing happens at send); and
    the (channel, ts) of each answer. `tag` makes each run's texts its own (no judgment cache hits)."""
    bodies, answers = [], []
    now = time.time()
    for i in range(count // 2 + 1):
        channel = f"C{i % channels:08d}"
        asker = f"U{i % 1000:07d}"  # many askers (see bench.load)
        q = sr.human_message(channel, sr.next_ts(now), f"question {tag}-{i}: how do I do thing {i}?", user=asker)
        a = sr.bot_message(channel, sr.next_ts(now), f"answer {tag}-{i}: open settings and do it.", thread_ts=q["ts"])
        bodies += [sr.body_of(sr.envelope(q))[0], sr.body_of(sr.envelope(a))[0]]
        answers.append((channel, a["ts"]))
    return bodies[:count], answers[: count // 2]


def drive(url: str, server_pid: int, rate: float, seconds: float, senders: int, tag: str) -> dict:
    total = int(rate * seconds)
    bodies, answers = make_events(total, channels=20, tag=tag)
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
        "answers": answers,
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
        "load": os.getloadavg()[0],
    }


def print_run(title: str, result: dict) -> None:
    print(
        f"{title}: events {result['events']} at {result['rate_achieved']:.0f}/s (asked {result['rate_asked']:.0f}/s), "
        f"failures {result['failures']}\n"
        f"  ack latency ms: p50 {result['p50_ms']:.1f}  p90 {result['p90_ms']:.1f}  p99 {result['p99_ms']:.1f}  "
        f"max {result['max_ms']:.1f}  (sender lateness p99 {result['late_p99_ms']:.1f})\n"
        f"  server memory MiB (PSS, master + workers): peak {result['rss_mib_peak']:.0f}  "
        f"end {result['rss_mib_end']:.0f}; load average {result['load']:.1f} (cores: {os.cpu_count()})",
        flush=True,
    )


def check_counts(database: Database, answers: list[tuple[str, str]], backlog_ids: list[int], llm_url: str) -> dict:
    """Every answer sent is one pair, every pair (and the backlog) judged exactly once, one LLM call each."""
    with database.session() as session:
        rows = session.execute(select(Pair.id, Pair.channel_id, Pair.answer_ts, Pair.status)).all()
        per_pair = dict(session.execute(select(Judgment.pair_id, func.count()).group_by(Judgment.pair_id)).all())
        judgments = session.scalar(select(func.count(Judgment.id)))
    pair_of = {(row.channel_id, row.answer_ts): row.id for row in rows}
    captured = [pair_of[a] for a in answers if a in pair_of]
    expected = captured + backlog_ids
    llm_calls = httpx.get(f"{llm_url.removesuffix('/v1')}/_admin/stats", timeout=5).json()["requests"]
    return {
        "answers": len(answers),
        "captured": len(captured),
        "judged": sum(1 for pair_id in expected if per_pair.get(pair_id)),
        "judged_twice": sum(1 for pair_id in expected if per_pair.get(pair_id, 0) > 1),
        "not_judged": [row.status for row in rows if row.id in set(expected) and not per_pair.get(row.id)][:5],
        "expected": len(expected),
        "judgments": judgments,
        "llm_calls": llm_calls,
        "judged_status": sum(1 for row in rows if row.status == PairStatus.JUDGED),
    }


def run(args: argparse.Namespace) -> int:
    results: dict[str, dict] = {}
    with services(
        "relmon-bench-",
        llm_latency_ms=args.llm_latency_ms,
        llm_niceness=args.llm_niceness,
        postgresql=args.postgresql,
        database_url=args.database_url,
        RELMON_LOG_LEVEL="WARNING",
        # A second: the senders run concurrently, so an answer's event may come before its question's.
        RELMON_SETTLE_SECONDS=1,
        RELMON_HISTORY_FALLBACK="false",
        RELMON_ALERT_CHANNEL_CAP_PER_HOUR=1_000_000,
    ) as running:
        database = running.database
        bot, base_url = running.start_bot()
        url = base_url + "/slack/events"
        with bot:
            answers: list[tuple[str, str]] = []
            results["no worker"] = drive(url, bot.pid, args.rate, args.seconds, args.senders, "idle")
            answers += results["no worker"]["answers"]
            print_run("no worker", results["no worker"])
            if args.no_worker:
                return 0
            backlog_ids = add_pairs(database, args.backlog, start=0)
            worker_settings: dict[str, object] = {"RELMON_LOG_LEVEL": "INFO"}
            if args.worker_niceness is not None:
                worker_settings["RELMON_WORKER_NICENESS"] = args.worker_niceness
            with running.start_worker(**worker_settings):
                running.judge(backlog_ids, started=50)
                results["busy worker"] = drive(url, bot.pid, args.rate, args.seconds, args.senders, "busy")
                answers += results["busy worker"]["answers"]
                judged_during = judged_pairs(database)
                print_run("busy worker", results["busy worker"])
                print(f"  the worker judged {judged_during} pairs by the end of the run", flush=True)
                expected = len(answers) + len(backlog_ids)
                try:
                    wait_for(lambda: judged_pairs(database) >= expected, timeout=300, interval=0.5, what="the drain")
                except AssertionError as error:
                    print(f"warning: {error}", flush=True)
                time.sleep(2.0)  # late duplicates would land now
                counts = check_counts(database, answers, backlog_ids, running.openai_url)
            print(
                f"database: {counts['answers']} answers sent, {counts['captured']} captured; "
                f"{counts['judged']} of {counts['expected']} pairs judged (backlog included), "
                f"{counts['judged_twice']} judged twice; {counts['judgments']} judgments, "
                f"{counts['llm_calls']} LLM calls"
            )
            ok = (
                counts["captured"] == counts["answers"]
                and counts["judged"] == counts["expected"]
                and counts["judged_twice"] == 0
                and counts["llm_calls"] == counts["judgments"]
                and all(r["failures"] == 0 for r in results.values())
            )
            met = ok and all(r["p99_ms"] <= 25 for r in results.values())
            print(f"nothing lost or judged twice: {'yes' if ok else 'NO'}; p99 <= 25 ms in both: "
                  f"{'met' if met else 'NOT met'}")  # fmt: skip
            return 0 if ok else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200.0, help="events per second (default 200)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long to send, each run (default 20)")
    parser.add_argument("--senders", type=int, default=8, help="sender threads (default 8)")
    parser.add_argument("--backlog", type=int, default=3000, help="pairs waiting for the busy worker (default 3000)")
    parser.add_argument("--llm-latency-ms", type=float, default=0.0, help="fake LLM latency (default 0)")
    parser.add_argument(
        "--llm-niceness",
        type=int,
        default=0,
        help="CPU niceness of the fake LLM (default 0: it competes with the bot for the cores, the worst case)",
    )
    parser.add_argument("--no-worker", action="store_true", help="only the run without a worker")
    parser.add_argument("--worker-niceness", type=int, help="RELMON_WORKER_NICENESS (default: relmon's default)")
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument("--postgresql", action="store_true", help="a fresh PostgreSQL database instead of SQLite")
    raise SystemExit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
