"""How long Slack waits for the bot's acknowledgement in a burst, while a worker judges beside it: signed events
(half people's questions, half the support bot's answers in their threads) from sender *processes*, each sent as
soon as the sender's last one was answered, at `relmon bot` (gunicorn and Bolt, as users run it). A `relmon
worker` judges a backlog of pairs all the while (the fake LLM answering at once: the worker CPU-bound, the worst
case for the bot); every process shares this machine's cores, as `relmon run` does. Settings are relmon's defaults.

Prints ack latency p50/p99/max for each burst and for all of them, the non-200 answers, and a verdict against the
targets (p99 under 1 s, none over 3 s, every answer a 200). Then it checks that every event was handed on: the
bot logged "event handed on" for each, and the worker captured each one (no task note left, every answer
stored as a pair). No beat runs, so nothing sends a lost task again: a note left behind is an event lost.

    python -m bench.ack                               # a burst of 400 events from 8 sender processes
    python -m bench.ack --events 100 --rounds 1 --backlog 300
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

import redis
from sqlalchemy import select, tuple_

from bench.events import SECRET, BenchRedis, _judged, make_events
from bench.measure import SignedEventPoster, percentile
from bench.pipeline import add_pairs, start_fake_openai
from common import task_names, task_notes
from common.celery_app import QUEUE_JUDGE, create_celery
from store.db import Database
from store.models import Pair
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, start_worker, wait_for

TARGET_P99_MS = 1000.0
TARGET_MAX_MS = 3000.0  # Slack sends an event again when it waited 3 s for the acknowledgement

# Senders -------------------------------------------------------------------------------------------------------


def _send_all(url: str, bodies: list[bytes], ready, go, results) -> None:
    """One sender process: connects, says it is ready, waits for the go, then sends its bodies one after the
    other, each as soon as the last was answered; puts (latencies in ms, non-200 answers) on `results`."""
    poster = SignedEventPoster(url, SECRET, timeout=10)
    poster.connect()
    ready.release()
    go.wait()
    latencies, failures = [], 0
    for body in bodies:
        sent = time.perf_counter()
        try:
            status = poster.post(body)
        except (OSError, http.client.HTTPException):
            status = 599
        latencies.append((time.perf_counter() - sent) * 1000)
        failures += status != 200
    poster.close()
    results.put((latencies, failures))


def burst(url: str, bodies: list[bytes], senders: int) -> tuple[list[float], int]:
    """The bodies split among `senders` processes (forked: nothing to import), which start sending together once
    all are connected; returns (ack latencies in ms, non-200 answers)."""
    context = multiprocessing.get_context("fork")
    results, ready, go = context.Queue(), context.Semaphore(0), context.Event()
    processes = [
        context.Process(target=_send_all, args=(url, bodies[i::senders], ready, go, results)) for i in range(senders)
    ]
    for process in processes:
        process.start()
    for _ in processes:
        ready.acquire(timeout=60)
    go.set()
    latencies: list[float] = []
    failures = 0
    for _ in processes:
        got, failed = results.get(timeout=300)
        latencies += got
        failures += failed
    for process in processes:
        process.join()
    return latencies, failures


def summary(latencies: list[float]) -> str:
    return (
        f"p50 {statistics.median(latencies):.1f} ms  p99 {percentile(latencies, 0.99):.1f} ms  "
        f"max {max(latencies):.1f} ms"
    )


# Handed on -----------------------------------------------------------------------------------------------------


def handed_on(bot: RelmonProcess, event_ids: set[str]) -> int:
    """How many of `event_ids` the bot logged as handed on (its one line per event, after `send_task` returned)."""
    logged = set()
    for line in bot.log().splitlines():
        if '"event handed on"' in line:
            logged.add(json.loads(line).get("event_id"))
    return len(event_ids & logged)


def stored_answers(database: Database, answers: list[tuple[str, str]]) -> int:
    with database.session() as session:
        found = session.execute(select(Pair.id).where(tuple_(Pair.channel_id, Pair.answer_ts).in_(answers))).all()
    return len(found)


def captured(client: redis.Redis, database: Database, answers: list[tuple[str, str]]) -> bool:
    """Every handed-on event captured by the worker: its note dropped, each answer stored as a pair."""
    return client.hlen(task_notes.KEY) == 0 and stored_answers(database, answers) == len(answers)


# The run -------------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="relmon-bench-ack-"))
    redis_server = BenchRedis(work / "redis")
    redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    database = Database(f"sqlite:///{work / 'relmon.sqlite3'}")
    database.migrate()
    fake_openai, openai_url = start_fake_openai(0.0)
    producer = create_celery(Settings(_env_file=None, redis_url=redis_server.url), redis_server.url)
    latencies: list[float] = []
    failures = 0
    event_ids: set[str] = set()
    answers: list[tuple[str, str]] = []
    try:
        with FakeSlack() as slack:
            env = relmon_env(
                redis_url=redis_server.url,
                database_url=database.url,
                slack_api_url=slack.api_url,
                openai_base_url=openai_url,
                data_dir=work / "data",
            )
            env.pop("RELMON_WORKER_CONCURRENCY")  # relmon's defaults throughout
            bot, base_url = start_bot(env, log_dir=work, timeout=120)
            with bot, start_worker(env, log_dir=work, timeout=120):
                for pair_id in add_pairs(database, args.backlog, start=0):
                    producer.send_task(task_names.JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
                wait_for(lambda: _judged(database) >= 20, timeout=120, interval=0.2, what="judging to start")
                for round_number in range(args.rounds):
                    bodies, round_answers = make_events(args.events, channels=20, tag=f"burst-{round_number}")
                    event_ids |= {json.loads(body)["event_id"] for body in bodies}
                    answers += round_answers
                    before = _judged(database)
                    got, failed = burst(base_url + "/slack/events", bodies, args.senders)
                    latencies += got
                    failures += failed
                    print(
                        f"burst {round_number + 1}: {len(got)} events, {failed} non-200, {summary(got)} "
                        f"(the worker judged {_judged(database) - before} pairs meanwhile)",
                        flush=True,
                    )
                if _judged(database) >= args.backlog:
                    print("warning: the worker ran out of backlog during the bursts: raise --backlog", flush=True)
                # The burst's capture_event tasks queue behind what is left of the backlog.
                wait_started = time.monotonic()
                try:
                    wait_for(lambda: captured(client, database, answers), timeout=300, interval=0.5, what="capture")
                except AssertionError as error:
                    print(f"warning: {error}", flush=True)
                waited = time.monotonic() - wait_started
                sent_on = handed_on(bot, event_ids)
                notes_left = client.hlen(task_notes.KEY)
                stored = stored_answers(database, answers)
    finally:
        fake_openai.terminate()
        fake_openai.wait(timeout=10)
        producer.close()
        database.dispose()
        redis_server.stop()
    # Lost: not handed on by the bot, or handed on and never captured (its note left); an answer captured but not
    # stored is counted apart.
    lost = len(event_ids) - sent_on + notes_left
    print(f"all bursts: {len(latencies)} events, {failures} non-200, {summary(latencies)}; cores {os.cpu_count()}")
    print(
        f"handed on: {sent_on} of {len(event_ids)} events logged by the bot; captured by the worker "
        f"{waited:.0f} s after the last burst: {notes_left} task notes left, {stored} of {len(answers)} answers "
        f"stored as pairs; lost {lost}"
    )
    p99, worst = percentile(latencies, 0.99), max(latencies)
    met = p99 < TARGET_P99_MS and worst < TARGET_MAX_MS and failures == 0 and lost == 0 and stored == len(answers)
    print(
        f"target (p99 < {TARGET_P99_MS:.0f} ms: {p99:.0f}; max < {TARGET_MAX_MS:.0f} ms: {worst:.0f}; "
        f"0 non-200: {failures}; 0 lost: {lost}): {'met' if met else 'NOT met'}"
    )
    return 0 if met else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=400, help="events in each burst (default 400)")
    parser.add_argument("--senders", type=int, default=8, help="sender processes (default 8)")
    parser.add_argument("--rounds", type=int, default=1, help="bursts, one after the other (default 1)")
    parser.add_argument("--backlog", type=int, default=3000, help="pairs for the worker to judge (default 3000)")
    raise SystemExit(run(parser.parse_args()))


if __name__ == "__main__":
    main()
