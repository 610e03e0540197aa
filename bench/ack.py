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
import os
import statistics
import time

import redis
from sqlalchemy import select, tuple_

from bench.events import SECRET, make_events
from bench.measure import SignedEventPoster, percentile
from bench.processes import from_processes, judged_pairs, services
from common import task_notes
from store.db import Database
from store.models import Pair
from tests.processes import RelmonProcess, wait_for

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
    """The bodies sent from `senders` processes at once; returns (ack latencies in ms, non-200 answers)."""
    measured, _ = from_processes(_send_all, url, bodies, senders, timeout=300)
    return [ms for got, _ in measured for ms in got], sum(failed for _, failed in measured)


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
    latencies: list[float] = []
    failures = 0
    event_ids: set[str] = set()
    answers: list[tuple[str, str]] = []
    with services("relmon-bench-ack-") as running:
        database, client = running.database, running.broker
        bot, base_url = running.start_bot()
        with bot, running.start_worker():
            running.judge_backlog(args.backlog)
            for round_number in range(args.rounds):
                bodies, round_answers = make_events(args.events, channels=20, tag=f"burst-{round_number}")
                event_ids |= {json.loads(body)["event_id"] for body in bodies}
                answers += round_answers
                before = judged_pairs(database)
                got, failed = burst(base_url + "/slack/events", bodies, args.senders)
                latencies += got
                failures += failed
                print(
                    f"burst {round_number + 1}: {len(got)} events, {failed} non-200, {summary(got)} "
                    f"(the worker judged {judged_pairs(database) - before} pairs meanwhile)",
                    flush=True,
                )
            if judged_pairs(database) >= args.backlog:
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
