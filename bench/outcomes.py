"""What outcome observation costs per answer, for bursts like bench.events': askers asking question after question
at top level in a channel, each answered in its thread by the support bot.

In one process, on its own Redis and a fresh SQLite database (or --postgresql), with the fake Slack: every event
goes through the worker's capture of each event (`workers.live_capture.LiveCapture.handle`, no HTTP), and the
tasks it and the workers send are run one at a time by name, as a worker would (`celery.tasks[name](*args)`):
settle_pair (it opens the answer's outcome window), observe_message, observe_reaction and follow_up_outcome;
judging and the windows' closing are counted, not run. An answer's settle runs `--settle-lag` events after it
(bench.events sends 200 events/s with RELMON_SETTLE_SECONDS=1: 200), so the window opens with later messages already
in the log, as in production. Driving the tasks by name and the events through the listener, the same file measures
any version of relmon.

Prints, for each scenario: the outcome tasks queued per answer (observe_message and follow_up_outcome), and the
CPU time (this thread: Python, SQLite and the Redis client; not the Redis server) the workers' tasks and the
bot's listener spent per answer.

    python -m bench.outcomes                           # bench.events' burst, then 20 askers x 25, 50, 100
    python -m bench.outcomes --askers 10 --questions 100 --channels 10
    python -m bench.outcomes --postgresql
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter, deque
from pathlib import Path

from bench.measure import fresh_database
from bench.processes import BenchRedis
from common import celery_app, task_names
from store.db import Database
from tests import slack_requests as sr
from tests.builders import installed_runtime, make_settings
from tests.fakes.slack_server import FakeSlack
from tests.services import drop_postgres_database, postgres_admin_url

RUN = (
    task_names.SETTLE_PAIR,
    task_names.OBSERVE_MESSAGE,
    task_names.OBSERVE_REACTION,
    task_names.FOLLOW_UP_OUTCOME,
)
OUTCOME_TASKS = (task_names.OBSERVE_MESSAGE, task_names.FOLLOW_UP_OUTCOME)


class Queue:
    """The broker, in this process: what the bot and the tasks send, run in order by `drain`."""

    def __init__(self) -> None:
        self.pending: deque[tuple[str, list, dict]] = deque()
        self.sent: Counter[str] = Counter()
        self.cpu: Counter[str] = Counter()  # seconds per task name

    def send_task(self, name: str, args=None, kwargs=None, **_options) -> None:
        self.sent[name] += 1
        if name in RUN:
            self.pending.append((name, list(args or []), dict(kwargs or {})))

    def drain(self) -> None:
        while self.pending:
            name, args, kwargs = self.pending.popleft()
            task = celery_app.celery.tasks[name]
            started = time.thread_time()
            task(*args, **kwargs)
            self.cpu[name] += time.thread_time() - started


def scenario(title: str, *, answers: int, askers: int, channels: int, lag: int, database_url: str, redis_url: str):
    import workers.tasks.capture  # the tasks register on the Celery app at import
    import workers.tasks.outcomes
    import workers.tasks.slack  # noqa: F401
    from capture.pairing import Identity
    from workers.live_capture import LiveCapture

    queue = Queue()
    original_send = celery_app.celery.send_task
    celery_app.celery.send_task = queue.send_task
    bot_cpu = 0.0
    try:
        with FakeSlack() as slack:
            settings = make_settings(
                redis_url=redis_url, database_url=database_url, slack_api_url=slack.api_url, history_fallback=False
            )
            with installed_runtime(settings) as runtime:
                runtime.redis.flushdb()
                listener = LiveCapture(runtime)
                own = Identity("U_RELMON", "B_RELMON", "A_RELMON")
                settles: deque[tuple] = deque()  # (due at event number, pair ID, version)
                sent_events = 0
                started = time.monotonic()
                for i in range(answers):
                    channel, asker = f"C{i % channels:08d}", f"U{i % askers:07d}"
                    question = sr.human_message(channel, sr.next_ts(), f"question {i}: how do I do {i}?", user=asker)
                    answer = sr.bot_message(channel, sr.next_ts(), f"answer {i}: open it.", thread_ts=question["ts"])
                    for event in (question, answer):
                        before = time.thread_time()
                        listener.handle(event, "T_BENCH", own, ext_shared=False)
                        bot_cpu += time.thread_time() - before
                        sent_events += 1
                        # The bot's settle tasks wait (RELMON_SETTLE_SECONDS): let `lag` events pass first.
                        held = [p for p in queue.pending if p[0] == task_names.SETTLE_PAIR]
                        queue.pending = deque(p for p in queue.pending if p[0] != task_names.SETTLE_PAIR)
                        settles.extend((sent_events + lag, *p[1]) for p in held)
                        while settles and settles[0][0] <= sent_events:
                            queue.pending.append((task_names.SETTLE_PAIR, list(settles.popleft()[1:]), {}))
                        queue.drain()
                while settles:
                    queue.pending.append((task_names.SETTLE_PAIR, list(settles.popleft()[1:]), {}))
                queue.drain()
                elapsed = time.monotonic() - started
    finally:
        celery_app.celery.send_task = original_send
    per = {name: queue.sent[name] / answers for name in OUTCOME_TASKS}
    worker_ms = {name: queue.cpu[name] * 1000 / answers for name in RUN}
    print(
        f"{title}: {answers} answers in {channels} channels, {askers} askers ({answers // askers} questions each), "
        f"settle after {lag} events; {elapsed:.1f} s\n"
        f"  outcome tasks queued per answer: observe_message {per[task_names.OBSERVE_MESSAGE]:.2f}, "
        f"follow_up_outcome {per[task_names.FOLLOW_UP_OUTCOME]:.2f} "
        f"(totals {queue.sent[task_names.OBSERVE_MESSAGE]:,} and {queue.sent[task_names.FOLLOW_UP_OUTCOME]:,})\n"
        f"  worker CPU ms per answer: settle_pair (opens the window) {worker_ms[task_names.SETTLE_PAIR]:.2f}, "
        f"observe_message {worker_ms[task_names.OBSERVE_MESSAGE]:.2f}, "
        f"follow_up_outcome {worker_ms[task_names.FOLLOW_UP_OUTCOME]:.2f}, "
        f"total {sum(worker_ms.values()):.2f}\n"
        f"  capture CPU ms per event (capture_event, in a worker): {bot_cpu * 1000 / (2 * answers):.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--answers", type=int, help="one scenario of this many answers (default: the two below)")
    parser.add_argument("--askers", type=int, default=20)
    parser.add_argument("--channels", type=int, default=20)
    parser.add_argument("--settle-lag", type=int, default=200, help="events between an answer and its settle (200)")
    parser.add_argument("--postgresql", action="store_true", help="a fresh PostgreSQL database instead of SQLite")
    args = parser.parse_args()
    if args.answers:
        scenarios = [("burst", args.answers, args.askers, args.channels)]
    else:
        scenarios = [("bench.events' two runs (its askers and channels)", 4000, 1000, 20)]
        scenarios += [(f"one asker per channel, {n} questions each", 20 * n, 20, 20) for n in (25, 50, 100)]
    work = Path(tempfile.mkdtemp(prefix="relmon-bench-outcomes-"))
    redis_server = BenchRedis(work / "redis")
    redis_server.start()
    admin = postgres_admin_url() if args.postgresql else None
    try:
        for index, (title, answers, askers, channels) in enumerate(scenarios):
            database_url, name = fresh_database(admin, work / f"relmon-{index}.sqlite3")
            database = Database(database_url)
            database.migrate()
            database.dispose()
            try:
                scenario(
                    title,
                    answers=answers,
                    askers=askers,
                    channels=channels,
                    lag=args.settle_lag,
                    database_url=database_url,
                    redis_url=redis_server.url,
                )
            finally:
                if name is not None:
                    drop_postgres_database(admin, name)
    finally:
        redis_server.stop()


if __name__ == "__main__":
    main()
