"""The whole system under a steady load: signed Slack events over HTTP to a real `relmon bot` (gunicorn), a real
Redis (AOF, fsync always), `relmon worker` processes, the fake OpenAI server as a subprocess answering in 500 ms,
the fake Slack (alerts land there), PostgreSQL (a fresh database) or SQLite when no server answers.

Open loop: answer i has its slot at start + i/rate, whatever happened to the others. Each answer is a question event
then the monitored bot's answer in its thread (at top level with --top-level), judged once it settled; every
--offtopic-every-th answer contains "offtopic", which the fake LLM scores 0, so it alerts.
Then it waits for the pipeline to drain and prints:

- answers sent, captured (pairs stored), judged (a judgment stored), queued at the end (still waiting in the
  queue when --drain-seconds ran out), lost (neither judged nor queued), duplicated
  (extra judgments per pair and judge, extra alert posts per judgment, LLM calls beyond one per judgment);
- alert latency p50/p99: answer event sent → alert posted at the fake Slack, minus the LLM's 500 ms and the settle
  time;
- the bot's event acknowledgement latency p50/p99;
- peak RSS of each process (VmHWM from /proc, summed over each process's children).

Two runs, each on fresh processes and a fresh database: at relmon's default RELMON_SETTLE_SECONDS (5), what users
run, then at 0 (answers judged at once, as the figures before 2026-12-03 were measured), side by side at the end.

    python -m bench.load --seconds 30 --rate 100 [--top-level]    # default: 50 answers/s for 2 minutes
    python -m bench.load --seconds 15 --rate 30 --no-settle-0     # only the default settle time
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import redis
from sqlalchemy import func, select

from bench.load_report import command_counts, print_report, print_side_by_side
from bench.measure import (
    SignedEventPoster,
    cpu_seconds,
    fresh_database,
    machine_busy_seconds,
    percentile,
    process_tree,
    reference_loop_ms,
    round_trip_us,
    status_mb,
)
from common.messages.alerts import ACTION_RIGHT
from store.db import Database
from store.models import Judgment, Pair, PairStatus
from store.settings import Settings
from tests import slack_requests as sr
from tests.bursts import burst
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, wait_for
from tests.services import (
    RedisProcess,
    drop_postgres_database,
    free_port,
    postgres_admin_url,
)

CHANNEL = "C_SUPPORT"
ALERTS = "C_ALERTS"
SECRET = "bench-signing-secret"
ASKERS = 1000


class TimedSlack(FakeSlack):
    """The fake Slack, noting when each low-score alert (by judgment ID) was posted."""

    def __init__(self) -> None:
        super().__init__()
        self.alert_times: dict[int, list[float]] = {}

    def _api_chat_postMessage(self, params: dict) -> dict:
        answer = super()._api_chat_postMessage(params)
        blocks = answer["message"].get("blocks") or []
        for block in blocks if isinstance(blocks, list) else []:
            for element in block.get("elements") or []:
                if isinstance(element, dict) and element.get("action_id") == ACTION_RIGHT:
                    self.alert_times.setdefault(int(element["value"]), []).append(time.time())
        return answer


def peak_rss_mb(pid: int, *, children: bool = True) -> float:
    """VmHWM (peak resident set) of a process and (by default) its descendants, in MB."""
    return status_mb(pid, "VmHWM", children=children)


def postgres_pids() -> list[int]:
    """The PostgreSQL server's processes (every backend counts: the bench's database is the only busy one)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() in ("postgres", "postmaster"):
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50.0, help="answers per second (default 50)")
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to send (default 120)")
    parser.add_argument("--workers", type=int, default=2, help="relmon worker processes (default 2)")
    parser.add_argument("--concurrency", type=int, default=64, help="threads per worker (default 64)")
    parser.add_argument("--llm-latency-ms", type=float, default=500.0)
    parser.add_argument("--offtopic-every", type=int, default=10, help="every n-th answer alerts (default 10)")
    parser.add_argument("--senders", type=int, default=48, help="concurrent HTTP senders (default 48)")
    parser.add_argument("--drain-seconds", type=float, default=120.0, help="longest wait for the backlog")
    parser.add_argument("--database-url", help="default: a fresh PostgreSQL database, or SQLite")
    parser.add_argument("--top-level", action="store_true", help="the bot answers at top level, not in the thread")
    parser.add_argument("--no-settle-0", action="store_true", help="only the run at the default settle time")
    args = parser.parse_args(argv)
    default_settle = Settings.model_fields["settle_seconds"].default
    reports = [run(args, settle) for settle in ((default_settle,) if args.no_settle_0 else (default_settle, 0))]
    print_side_by_side(reports)
    met = all(report["target_met"] for report in reports)
    return 0 if met else 1


def run(args: argparse.Namespace, settle_seconds: float) -> dict[str, Any]:
    """One run of the whole system at RELMON_SETTLE_SECONDS=`settle_seconds`; prints and returns its report."""
    workdir = Path(tempfile.mkdtemp(prefix="relmon-load-"))
    redis_server = RedisProcess(workdir / "redis")
    redis_server.start()
    admin = None if args.database_url else postgres_admin_url()
    if args.database_url:
        database_url, database_name = args.database_url, None
    else:
        database_url, database_name = fresh_database(admin, workdir / "relmon.sqlite3")
    database = Database(database_url)
    database.migrate()

    llm_port = free_port()
    llm = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", str(llm_port), "--latency-ms",
         str(args.llm_latency_ms)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    llm_url = f"http://127.0.0.1:{llm_port}"
    wait_for(lambda: httpx.get(f"{llm_url}/_admin/stats", timeout=1).status_code == 200, timeout=30, what="fake LLM")

    slack = TimedSlack().start()
    slack.add_user("U_ASKER", "ana", "Ana Diaz")
    slack.add_channel(CHANNEL, "support", members=["U_ASKER", "U_RELMON", "U_SUPPORT"])
    slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])

    env = relmon_env(
        redis_url=redis_server.url,
        database_url=database_url,
        slack_api_url=slack.api_url,
        openai_base_url=f"{llm_url}/v1",
        data_dir=workdir / "data",
        SLACK_SIGNING_SECRET=SECRET,
        RELMON_SETTLE_SECONDS=settle_seconds,
        RELMON_WORKER_CONCURRENCY=args.concurrency,
        RELMON_ALERT_CAP_PER_HOUR=1_000_000,
        RELMON_ALERT_CHANNEL_CAP_PER_HOUR=1_000_000,
        RELMON_HISTORY_FALLBACK="false",
        RELMON_LOG_LEVEL="INFO",  # the processes' readiness lines are INFO
    )
    processes: list[tuple[str, RelmonProcess]] = []
    try:
        workers = [RelmonProcess("worker", env=env, log_dir=workdir / "logs").start() for _ in range(args.workers)]
        for index, worker in enumerate(workers):
            processes.append((f"worker {index + 1}", worker))
        for worker in workers:
            worker.wait_for_log("ready", timeout=120)
        processes.append(("beat", RelmonProcess("beat", env=env, log_dir=workdir / "logs").start()))
        bot, base_url = start_bot(env, log_dir=workdir / "logs", timeout=120)
        processes.insert(0, ("bot", bot))
        events_url = f"{base_url}/slack/events"

        total = int(args.rate * args.seconds)
        sent_at: dict[str, float] = {}  # answer ts → when its event was sent
        offtopic: set[str] = set()
        ack_seconds: list[float] = []
        failures: Counter[str] = Counter()
        lock = threading.Lock()
        poster = SignedEventPoster(events_url, SECRET, timeout=30)

        def deliver(event: dict) -> None:
            body = json.dumps(sr.envelope(event)).encode()
            for _attempt in range(4):  # as Slack does: retry what was not acknowledged
                started = time.perf_counter()
                try:
                    status = poster.post(body)
                except (OSError, http.client.HTTPException) as error:
                    with lock:
                        failures[type(error).__name__] += 1
                    continue
                with lock:
                    ack_seconds.append(time.perf_counter() - started)
                if status < 300:
                    return
                with lock:
                    failures[str(status)] += 1
            with lock:
                failures["gave up"] += 1

        start = time.monotonic() + 1.0

        def send(i: int) -> None:
            delay = start + i / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            question_ts = sr.next_ts()
            # Many askers, as in a busy support channel: each asker's later top-level messages are news for their
            # earlier answers' outcome watches, so one asker for everything would make that work quadratic.
            asker = f"U{i % ASKERS:07d}"
            deliver(sr.human_message(CHANNEL, question_ts, f"How do I reset the password on device {i}?", user=asker))
            is_offtopic = i % args.offtopic_every == 0
            text = (
                f"Our offtopic cafeteria menu for day {i} is pasta."
                if is_offtopic
                else f"Open Settings, then Security, then Reset on device {i}."
            )
            answer_ts = sr.next_ts()
            with lock:
                sent_at[answer_ts] = time.time()
                if is_offtopic:
                    offtopic.add(answer_ts)
            deliver(sr.bot_message(CHANNEL, answer_ts, text, thread_ts=None if args.top_level else question_ts))

        def cpu_snapshot() -> dict[str, dict[int, float]]:
            groups = {name: process_tree(process.pid) for name, process in processes}
            groups["fake LLM"] = [llm.pid]
            groups["redis"] = [redis_server.process.pid]
            groups["postgresql"] = postgres_pids() if database_url.startswith("postgresql") else []
            groups["bench (fake Slack, senders)"] = [os.getpid()]
            return {name: {pid: cpu_seconds([pid]) for pid in pids} for name, pids in groups.items()}

        loop_before = reference_loop_ms()
        counter = redis.Redis.from_url(redis_server.url)
        ping_us = round_trip_us(counter)
        commands_before = command_counts(counter)
        cpu_before, busy_before, wall_before = cpu_snapshot(), machine_busy_seconds(), time.monotonic()
        print(f"sending {total} answers at {args.rate:g}/s for {args.seconds:g} s ...", flush=True)
        burst(send, range(total), workers=args.senders)
        sending_took = time.monotonic() - start
        print(f"sent in {sending_took:.1f} s; waiting for the pipeline to drain ...", flush=True)

        def judged_count() -> int:
            with database.session() as session:
                return session.execute(select(func.count(func.distinct(Judgment.pair_id)))).scalar_one()

        def drained() -> bool:
            with lock:
                expected_alerts = len(offtopic)
            return judged_count() >= total and len(slack.alert_times) >= expected_alerts

        try:
            wait_for(drained, timeout=args.drain_seconds, interval=0.5, what="the pipeline to drain")
        except AssertionError as error:
            print(f"warning: {error}", flush=True)
        cpu_after, busy_after, wall_after = cpu_snapshot(), machine_busy_seconds(), time.monotonic()
        commands = Counter(command_counts(counter))
        commands.subtract(commands_before)
        cpu_ms_per_answer = {
            name: round(
                1000 * sum(t - cpu_before.get(name, {}).get(pid, 0.0) for pid, t in cpu_after[name].items()) / total, 2
            )
            for name in cpu_after
        }
        relmon_cpu = sum(
            value for name, value in cpu_ms_per_answer.items() if name in ("bot", "beat") or name.startswith("worker")
        )
        machine_busy = (busy_after - busy_before) / (wall_after - wall_before) / (os.cpu_count() or 1)
        loop_after = reference_loop_ms()  # the load is over: the host's own speed, as before it
        time.sleep(2.0)  # late duplicates would land now
        rss = {name: peak_rss_mb(process.pid) for name, process in processes}

        with database.session() as session:
            rows = list(session.execute(select(Pair.answer_ts, Pair.id, Pair.status)))
            pairs = {row.answer_ts: row.id for row in rows}
            waiting = {row.id for row in rows if row.status in (PairStatus.SETTLING, PairStatus.PENDING)}
            judgments = list(session.execute(select(Judgment.id, Judgment.pair_id, Judgment.judge, Judgment.score)))
        per_pair_judge = Counter((j.pair_id, j.judge) for j in judgments)
        judged_pairs = {j.pair_id for j in judgments}
        captured = sum(1 for ts in sent_at if ts in pairs)
        judged = sum(1 for ts in sent_at if pairs.get(ts) in judged_pairs)
        duplicate_judgments = sum(n - 1 for n in per_pair_judge.values())
        duplicate_alerts = sum(len(times) - 1 for times in slack.alert_times.values())
        llm_stats = httpx.get(f"{llm_url}/_admin/stats", timeout=5).json()
        extra_llm_calls = max(0, llm_stats["requests"] - len(judgments))

        judgment_of_pair = {j.pair_id: j.id for j in judgments}
        latencies = []
        for ts in offtopic:
            judgment_id = judgment_of_pair.get(pairs.get(ts))
            times = slack.alert_times.get(judgment_id) if judgment_id else None
            if times:
                latencies.append(times[0] - sent_at[ts] - args.llm_latency_ms / 1000 - settle_seconds)
        missing_alerts = len(offtopic) - len(latencies)

        report: dict[str, Any] = {
            "rate_per_s": args.rate,
            "settle_seconds": settle_seconds,
            "answers": "at top level" if args.top_level else "in threads",
            "seconds": args.seconds,
            "workers": args.workers,
            "concurrency": args.concurrency,
            "database": database_url.split(":", 1)[0],
            "answers_sent": len(sent_at),
            "captured": captured,
            "judged": judged,
            # Still settling or pending when the drain window closed: queued in Redis, not lost.
            "queued_at_end": sum(1 for ts in sent_at if pairs.get(ts) in waiting and pairs[ts] not in judged_pairs),
            "lost": sum(1 for ts in sent_at if pairs.get(ts) not in judged_pairs and pairs.get(ts) not in waiting),
            "duplicated": duplicate_judgments + duplicate_alerts,
            "duplicate_judgments": duplicate_judgments,
            "duplicate_alert_posts": duplicate_alerts,
            "llm_calls": llm_stats["requests"],
            "llm_calls_beyond_judgments": extra_llm_calls,
            "alerts_expected": len(offtopic),
            "alerts_posted": len(latencies),
            "alerts_missing": missing_alerts,
            "alert_latency_minus_llm_p50_s": round(percentile(latencies, 0.50), 3),
            "alert_latency_minus_llm_p99_s": round(percentile(latencies, 0.99), 3),
            "ack_p50_ms": round(1000 * percentile(ack_seconds, 0.50), 1),
            "ack_p99_ms": round(1000 * percentile(ack_seconds, 0.99), 1),
            "send_failures": dict(failures),
            "sending_took_s": round(sending_took, 1),
            "peak_rss_mb": {name: round(value, 1) for name, value in rss.items()},
            "cpu_ms_per_answer": cpu_ms_per_answer,
            "relmon_cpu_ms_per_answer": round(relmon_cpu, 2),
            "machine_busy_percent": round(100 * machine_busy, 1),
            "reference_loop_ms": [round(loop_before), round(loop_after)],
            "redis_ping_cpu_us": round(ping_us, 1),
            "redis_commands_per_answer": round(commands.total() / total, 2),
            "redis_commands_top": {name: round(n / total, 2) for name, n in commands.most_common(8)},
        }
        report["peak_rss_mb"]["fake LLM"] = round(peak_rss_mb(llm.pid), 1)
        report["peak_rss_mb"]["redis"] = round(peak_rss_mb(redis_server.process.pid), 1)
        report["peak_rss_mb"]["bench (fake Slack, senders)"] = round(peak_rss_mb(os.getpid(), children=False), 1)
        print_report(report)
        target = report["lost"] == 0 and report["duplicated"] == 0 and report["alert_latency_minus_llm_p99_s"] <= 2
        print(f"target (0 lost, 0 duplicated, alert p99 within settle + LLM + 2 s): {'met' if target else 'NOT met'}")
        print(json.dumps(report))
        return dict(report, target_met=target)
    finally:
        for _name, process in processes:
            process.stop()
        slack.stop()
        llm.terminate()
        llm.wait(timeout=10)
        database.dispose()
        redis_server.stop()
        if database_name is not None and admin is not None:
            drop_postgres_database(admin, database_name)


if __name__ == "__main__":
    sys.exit(main())
