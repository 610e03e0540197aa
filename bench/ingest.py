"""How many exchanges a second the ingest API (`POST /v1/exchanges`) takes while a worker judges beside it: sender
*processes* post exchanges (one per request by default, as a bot forwarding each turn does), each request sent as
soon as the sender's last one was answered (16 senders by default: with 8, each waiting for its answer, the rate
measured is the senders', not the server's), at `relmon bot` (gunicorn, as users run it). A `relmon worker` judges
a backlog of pairs all the while (the fake LLM answering at once: the worker CPU-bound, the worst case for the
bot); every process shares this machine's cores. Settings are relmon's defaults but the per-token request limit
(RELMON_INGEST_PER_MINUTE, 600 by default), raised so that the bench measures the server, not the limit.

A share of the exchanges (`--resend`) is sent twice, as a client retrying after a timeout does. Prints the rate
accepted (202s a second over the burst), the ack latency p50/p99/max, the non-202 answers; then, once the worker
has drained its queue, what was stored: lost (accepted, never stored), duplicated (pairs beyond one per exchange).
Targets: 200 exchanges/s accepted, p99 under 1 s, 0 lost, 0 duplicated.

    python -m bench.ingest                          # 4,000 exchanges from 16 sender processes
    python -m bench.ingest --exchanges 1000 --batch 10
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import redis
from sqlalchemy import func, select

from bench.measure import percentile
from bench.processes import from_processes, judged_pairs, services
from common import task_notes
from store.db import Database
from store.exchange_models import Exchange
from store.models import Pair, PairSource
from tests.processes import wait_for

TOKEN = "bench-ingest-token"
TARGET_RATE = 200.0  # exchanges accepted a second
TARGET_P99_MS = 1000.0

# The exchanges --------------------------------------------------------------------------------------------------


def exchange(number: int, tag: str) -> dict:
    asked = datetime(2026, 12, 7, 8, 0, tzinfo=UTC) + timedelta(seconds=number)
    return {
        "id": f"{tag}-{number}",
        "bot": "bench-agent",
        "conversation_id": f"{tag}-conv-{number // 4}",
        "turn": number % 4,
        "question": f"How do I export report {number} to a spreadsheet?",
        "answer": f"Open Reports, pick report {number}, press Export and choose CSV.",
        "earlier_turns": [{"role": "user", "text": "Hello"}, {"role": "assistant", "text": "Hi! How can I help?"}],
        "documents": [{"text": "Reports export to CSV from the Export button.", "source": "kb/reports.md"}],
        "asked_at": asked.isoformat(),
        "answered_at": (asked + timedelta(seconds=2)).isoformat(),
        "visibility": "dm",
        "asker": "U0BENCH01",
    }


def bodies_for(count: int, batch: int, resend: float, tag: str) -> tuple[list[bytes], int]:
    """Request bodies for `count` exchanges, `batch` a request; every 1/resend-th request sent again at the end
    (a client's retry). Returns (bodies, exchanges sent in all, resends included)."""
    requests = []
    for start in range(0, count, batch):
        items = [exchange(n, tag) for n in range(start, min(start + batch, count))]
        requests.append(items[0] if batch == 1 else {"exchanges": items})
    every = round(1 / resend) if resend > 0 else 0
    again = requests[::every] if every else []
    sent = sum(1 if "id" in r else len(r["exchanges"]) for r in requests + again)
    return [json.dumps(r).encode() for r in requests + again], sent


# Senders -------------------------------------------------------------------------------------------------------


def _send_all(url: str, bodies: list[bytes], ready, go, results) -> None:
    """One sender process on one keep-alive connection: waits for the go, then sends its bodies one after the
    other; puts (latencies in ms, exchanges accepted, non-202 answers) on `results`."""
    target = urlsplit(url)
    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    ready.release()
    go.wait()
    latencies, accepted, failures = [], 0, 0
    for body in bodies:
        sent = time.perf_counter()
        try:
            connection.request("POST", target.path, body=body, headers=headers)
            response = connection.getresponse()
            answer = response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            connection.close()
            connection = http.client.HTTPConnection(target.hostname, target.port, timeout=10)
            status, answer = 599, b""
        latencies.append((time.perf_counter() - sent) * 1000)
        if status == 202:
            accepted += json.loads(answer)["accepted"]
        else:
            failures += 1
    connection.close()
    results.put((latencies, accepted, failures))


def burst(url: str, bodies: list[bytes], senders: int) -> tuple[list[float], int, int, float]:
    """(latencies in ms, exchanges accepted, non-202 answers, seconds from the go to the last answer)."""
    measured, elapsed = from_processes(_send_all, url, bodies, senders, timeout=600)
    latencies = [ms for got, _, _ in measured for ms in got]
    return latencies, sum(took for _, took, _ in measured), sum(failed for _, _, failed in measured), elapsed


# What was stored -----------------------------------------------------------------------------------------------


def stored(database: Database) -> tuple[int, int, int]:
    """(exchanges stored, distinct (bot, id) among them, ingested pairs)."""
    with database.session() as session:
        rows = session.scalar(select(func.count()).select_from(Exchange))
        distinct = session.scalar(
            select(func.count()).select_from(select(Exchange.bot, Exchange.client_id).distinct().subquery())
        )
        pairs = session.scalar(select(func.count()).select_from(Pair).where(Pair.source == PairSource.INGEST))
    return rows, distinct, pairs


def drained(client: redis.Redis, database: Database, unique: int) -> bool:
    return client.hlen(task_notes.KEY) == 0 and stored(database)[0] >= unique


# The run -------------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    bodies, sent = bodies_for(args.exchanges, args.batch, args.resend, "bench")
    settings = {"RELMON_INGEST_TOKENS": TOKEN, "RELMON_INGEST_PER_MINUTE": 1_000_000}
    with services("relmon-bench-ingest-", **settings) as running:
        database, client = running.database, running.broker
        bot, base_url = running.start_bot()
        with bot, running.start_worker():
            running.judge_backlog(args.backlog)
            before = judged_pairs(database)
            latencies, accepted, failures, elapsed = burst(base_url + "/v1/exchanges", bodies, args.senders)
            judged_meanwhile = judged_pairs(database) - before
            if judged_pairs(database) >= args.backlog:
                print("warning: the worker ran out of backlog during the burst: raise --backlog", flush=True)
            wait_started = time.monotonic()
            try:
                wait_for(lambda: drained(client, database, args.exchanges), timeout=900, interval=0.5, what="drain")
            except AssertionError as error:
                print(f"warning: {error}", flush=True)
            waited = time.monotonic() - wait_started
            rows, distinct, pairs = stored(database)
            notes_left = client.hlen(task_notes.KEY)
    rate = accepted / elapsed
    lost = args.exchanges - distinct if accepted == sent else None  # every exchange sent was accepted: all due
    duplicated = (rows - distinct) + (pairs - distinct)
    p50, p99, worst = statistics.median(latencies), percentile(latencies, 0.99), max(latencies)
    print(
        f"sent {sent} exchanges ({args.exchanges} distinct, {sent - args.exchanges} resent) in {len(bodies)} "
        f"requests of {args.batch} from {args.senders} senders: {accepted} accepted in {elapsed:.1f} s = "
        f"{rate:.0f} exchanges/s; {failures} non-202; ack p50 {p50:.1f} ms  p99 {p99:.1f} ms  max {worst:.1f} ms; "
        f"the worker judged {judged_meanwhile} backlog pairs meanwhile; cores {os.cpu_count()}"
    )
    print(
        f"after the worker drained ({waited:.0f} s after the burst): {rows} exchanges stored ({distinct} distinct), "
        f"{pairs} ingested pairs, {notes_left} task notes left; lost {lost}, duplicated {duplicated}"
    )
    met = rate >= TARGET_RATE and p99 < TARGET_P99_MS and failures == 0 and lost == 0 and duplicated == 0
    print(
        f"target ({TARGET_RATE:.0f}/s: {rate:.0f}; p99 < {TARGET_P99_MS:.0f} ms: {p99:.0f}; 0 non-202: {failures}; "
        f"0 lost: {lost}; 0 duplicated: {duplicated}): {'met' if met else 'NOT met'}"
    )
    return 0 if met else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--exchanges", type=int, default=4000, help="distinct exchanges to send (default 4000)")
    parser.add_argument("--batch", type=int, default=1, help="exchanges a request, 1 to 100 (default 1)")
    parser.add_argument("--senders", type=int, default=16, help="sender processes (default 16)")
    parser.add_argument("--resend", type=float, default=0.05, help="share of requests sent twice (default 0.05)")
    parser.add_argument("--backlog", type=int, default=3000, help="pairs for the worker to judge (default 3000)")
    raise SystemExit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
