"""Recovery from each fault, against the default settings: how long until every answer the fault held is judged
(and alerted where low), and how many were lost or duplicated.

The system is the fault tests' (tests/running_system.py): signed Slack events over HTTP to the bot, a real
Redis (AOF, fsync always), `relmon worker` and `relmon beat` processes, the fake LLM (800 ms) and Slack, PostgreSQL
(a fresh database; SQLite when no server answers). Recovery timings are relmon's defaults (the 30 s task lease, the
orphan check, the 5 s settle wait, the 2 s first LLM retry). One worker at the default concurrency (64); a worker
that exits is replaced at once, as a supervisor does. Faults:

- worker-kill: the only worker SIGKILLed while 40 answers are in flight; a replacement starts.
- redis-restart: Redis SIGKILLed and restarted (1 s down) half-way through 40 answers.
- postgres-restart: the machine's PostgreSQL restarted half-way through (needs root and its own cluster).
- llm-faults: the LLM answers 429, 500, timeouts or garbage on 30% of calls, 40 answers.
- broker-outage: Redis down for --outage-seconds (default 600) while an answer arrives every 2 s.

Recovery is measured from the fault (for the LLM, from the last answer sent) to the last held answer judged and
alerted. Lost: answers sent but never judged; duplicated: extra judgments per answer and judge plus extra alert
posts per judgment; refused: deliveries that got anything but 200 (Slack counts those as failures).

    python -m bench.faults                       # every fault, a 10-minute outage
    python -m bench.faults --outage-seconds 30   # a quick run
    python -m bench.faults --only worker-kill
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from common import celery_app
from store.models import JudgmentStatus, PairStatus
from tests.processes import wait_for
from tests.running_system import (
    THRESHOLD,
    System,
    fresh_database,
    running_system,
)
from tests.services import RedisProcess
from tests.system.test_reliability_services import _restart_postgres_command

LLM_LATENCY_MS = 800
DEFAULT_TIMINGS = {"RELMON_SETTLE_SECONDS": 5.0, "RELMON_RETRY_BASE_SECONDS": 2.0, "RELMON_LLM_TIMEOUT": 60.0}
RECOVERY_TIMEOUT = 300.0


@dataclass
class Outcome:
    fault: str
    answers: int
    recovery_s: float | None  # None: not recovered within RECOVERY_TIMEOUT
    lost: int
    duplicated: int
    refused: int = 0


def tally(system: System, fault: str, recovery_s: float | None, refused: int = 0) -> Outcome:
    judged = {p.answer_ts for p in system.pairs() if p.status == PairStatus.JUDGED}
    per_judge = Counter((j.pair_id, j.judge) for j in system.judgments())
    duplicated = sum(n - 1 for n in per_judge.values()) + sum(n - 1 for n in system.posted_low_alerts().values())
    lost = len(set(system.answers) - judged)
    return Outcome(fault, len(system.answers), recovery_s, lost, duplicated, refused)


def handled(system: System) -> bool:
    """Every answer judged and every low score alerted: posted, or held for the hour's summary (a long outage
    brings more low scores at once than the alert channel's hourly cap lets through one by one)."""
    system.revive_dead_workers()
    pairs = system.pairs()
    if len(pairs) < len(system.answers) or any(p.status != PairStatus.JUDGED for p in pairs):
        return False
    low = {j.id for j in system.judgments() if j.status == JudgmentStatus.OK and j.score <= THRESHOLD}
    settled = {a.judgment_id for a in system.alert_rows() if a.kind == "low_score" and a.status in ("posted", "held")}
    return low <= settled


def recovered_after(system: System, since: float) -> float | None:
    try:
        wait_for(lambda: handled(system), timeout=RECOVERY_TIMEOUT, interval=0.25, what="recovery")
    except AssertionError:
        return None
    return time.monotonic() - since


def worker_kill(system: System, redis: RedisProcess, _options: argparse.Namespace) -> Outcome:
    system.send_answers(40)
    wait_for(lambda: len(system.llm.requests) >= 10, timeout=60, what="LLM calls in flight")
    system.workers[0].kill()
    fault_at = time.monotonic()
    return tally(system, "worker-kill", recovered_after(system, fault_at))


def redis_restart(system: System, redis: RedisProcess, _options: argparse.Namespace) -> Outcome:
    system.send_answers(20)
    fault_at = time.monotonic()
    redis.restart(kill=True, down_seconds=1.0)
    system.send_answers(20, start=20)
    return tally(system, "redis-restart", recovered_after(system, fault_at))


def postgres_restart(system: System, redis: RedisProcess, options: argparse.Namespace) -> Outcome | None:
    command = _restart_postgres_command(options.database_url)
    if command is None:
        return None
    system.send_answers(20)
    fault_at = time.monotonic()
    subprocess.run(command, check=True, timeout=60, capture_output=True)
    system.send_answers(20, start=20)
    return tally(system, "postgres-restart", recovered_after(system, fault_at))


def llm_faults(system: System, redis: RedisProcess, _options: argparse.Namespace) -> Outcome:
    system.llm.set_behavior(latency_ms=LLM_LATENCY_MS, fault_rate=0.3, seed=8, timeout_seconds=70)
    system.send_answers(40)
    return tally(system, "llm-faults", recovered_after(system, time.monotonic()))


def broker_outage(system: System, redis: RedisProcess, options: argparse.Namespace) -> Outcome:
    system.send_answers(4)
    redis.stop(kill=True)
    refused, i = 0, 4
    until = time.monotonic() + options.outage_seconds
    while time.monotonic() < until:
        _, statuses = system.post_answer_once(i)
        refused += sum(status != 200 for status in statuses)
        i += 1
        time.sleep(2.0)
    redis.start()
    fault_at = time.monotonic()
    return tally(system, f"broker-outage ({options.outage_seconds:g} s)", recovered_after(system, fault_at), refused)


FAULTS: dict[str, Callable[..., Outcome | None]] = {
    "worker-kill": worker_kill,
    "redis-restart": redis_restart,
    "postgres-restart": postgres_restart,
    "llm-faults": llm_faults,
    "broker-outage": broker_outage,
}


def run_fault(name: str, options: argparse.Namespace) -> Outcome | None:
    # Each fault has a Redis of its own: the in-process bot's Celery app must not reuse the last one's connections.
    celery_app.celery._pool = None
    celery_app.celery.amqp._producer_pool = None
    with ExitStack() as stack:
        if options.keep:
            directory = Path(tempfile.mkdtemp(prefix=f"relmon-fault-{name}-"))
            print(f"{name}: logs in {directory}", flush=True)
        else:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"relmon-fault-{name}-")))
        redis = RedisProcess(directory / "redis")
        redis.start()
        stack.callback(redis.stop)
        options.database_url = stack.enter_context(fresh_database(directory))
        system = stack.enter_context(
            running_system(
                redis_url=redis.url,
                database_url=options.database_url,
                directory=directory,
                llm_latency_ms=LLM_LATENCY_MS,
                workers=1,
                concurrency=64,
                bot_overrides={"settle_seconds": DEFAULT_TIMINGS["RELMON_SETTLE_SECONDS"]},
                **DEFAULT_TIMINGS,
            )
        )
        return FAULTS[name](system, redis, options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outage-seconds", type=float, default=600.0)
    parser.add_argument("--only", choices=sorted(FAULTS), action="append")
    parser.add_argument("--keep", action="store_true", help="keep each fault's folder (logs, Redis files)")
    options = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the in-process bot's warnings (events spooled) are expected
    print(f"{'fault':<28} {'answers':>7} {'recovery':>9} {'lost':>5} {'dup':>4} {'refused':>7}", flush=True)
    failed = False
    for name in options.only or FAULTS:
        outcome = run_fault(name, options)
        if outcome is None:
            print(f"{name:<28} skipped (cannot restart this server)", flush=True)
            continue
        recovery = f"{outcome.recovery_s:.1f} s" if outcome.recovery_s is not None else "NOT"
        print(
            f"{outcome.fault:<28} {outcome.answers:>7} {recovery:>9} {outcome.lost:>5} {outcome.duplicated:>4} "
            f"{outcome.refused:>7}",
            flush=True,
        )
        failed |= outcome.recovery_s is None or outcome.lost > 0 or outcome.duplicated > 0 or outcome.refused > 0
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
