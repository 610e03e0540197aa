"""How long Slack waits for the bot's acknowledgement while a worker judges beside it, against the floor of the
same HTTP server doing nothing: a burst of signed events (half people's questions, half the support bot's answers
in their threads) from sender *processes*, sent as fast as each answer comes back, once at a do-nothing server and
once at `relmon bot`, in turns, in one run. Both servers are gunicorn with relmon's own settings
(`bot.server.gunicorn_options`); the do-nothing one answers 200 to every POST after reading its body. A `relmon
worker` judges a backlog of pairs all the while (the fake LLM answering at once: the worker CPU-bound, the worst
case for the bot); every process shares this machine's cores, as `relmon run` does. Settings are relmon's defaults.

Prints ack latency p50/p99 for each server and the ratio of the bot's p99 to the floor's (target: at most 3x).

    python -m bench.ack                    # 400 events from 8 sender processes, 2 rounds of each server
    python -m bench.ack --events 800 --rounds 3
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.events import SECRET, BenchRedis, _judged, make_events
from bench.measure import SignedEventPoster, percentile
from bench.pipeline import add_pairs, start_fake_openai
from common import task_names
from common.celery_app import QUEUE_JUDGE, create_celery
from store.db import Database
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_bot, start_worker, wait_for
from tests.services import free_port

TARGET_RATIO = 3.0


# The do-nothing server -----------------------------------------------------------------------------------------


def do_nothing_app(environ: dict, start_response) -> list[bytes]:
    """Reads the request's body and answers 200 with an empty JSON object: the floor of an HTTP acknowledgement."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    environ["wsgi.input"].read(length)
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
    return [b"{}"]


def serve_do_nothing(port: int) -> None:
    from bot.server import _gunicorn, gunicorn_options

    options = gunicorn_options("127.0.0.1", port, Settings(_env_file=None, log_level="WARNING"))
    options["proc_name"] = "relmon-bench-floor"
    _gunicorn(lambda: do_nothing_app, options).run()


def start_do_nothing() -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "bench.ack", "--serve-floor", str(port)])
    url = f"http://127.0.0.1:{port}/slack/events"
    poster = SignedEventPoster(url, SECRET, timeout=2)
    wait_for(lambda: poster.post(b"{}") == 200, timeout=60, what="the do-nothing server")
    poster.close()
    return process, url


# Senders -------------------------------------------------------------------------------------------------------


def _send_all(url: str, bodies: list[bytes], ready, go, results) -> None:
    """One sender process: connects, says it is ready, waits for the go, then sends its bodies one after the
    other, each as soon as the last was answered; puts (latencies in ms, failures) on `results`."""
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


def burst(url: str, bodies: list[bytes], senders: int) -> dict:
    """The bodies split among `senders` processes (forked: nothing to import), which start sending together once
    all are connected; returns the acknowledgement figures."""
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
    return {"latencies": latencies, "failures": failures}


def summary(latencies: list[float]) -> str:
    return (
        f"p50 {statistics.median(latencies):.1f} ms  p99 {percentile(latencies, 0.99):.1f} ms  "
        f"max {max(latencies):.1f} ms"
    )


# The run -------------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="relmon-bench-ack-"))
    redis_server = BenchRedis(work / "redis")
    redis_server.start()
    database = Database(f"sqlite:///{work / 'relmon.sqlite3'}")
    database.migrate()
    fake_openai, openai_url = start_fake_openai(0.0)
    floor, floor_url = start_do_nothing()
    producer = create_celery(Settings(_env_file=None, redis_url=redis_server.url), redis_server.url)
    figures: dict[str, list[float]] = {"do-nothing": [], "relmon bot": []}
    failures = {"do-nothing": 0, "relmon bot": 0}
    try:
        with FakeSlack() as slack:
            env = relmon_env(
                redis_url=redis_server.url,
                database_url=database.url,
                slack_api_url=slack.api_url,
                openai_base_url=openai_url,
                data_dir=work / "data",
                RELMON_LOG_LEVEL="WARNING",
            )
            env.pop("RELMON_WORKER_CONCURRENCY")  # relmon's defaults throughout
            bot, base_url = start_bot(env, log_dir=work, timeout=120)
            with (
                bot,
                start_worker(dict(env, RELMON_LOG_LEVEL="INFO"), log_dir=work, timeout=120),
            ):  # "ready" is logged at INFO
                for pair_id in add_pairs(database, args.backlog, start=0):
                    producer.send_task(task_names.JUDGE_PAIR, args=[pair_id], queue=QUEUE_JUDGE)
                wait_for(lambda: _judged(database) >= 20, timeout=120, interval=0.2, what="judging to start")
                targets = {"do-nothing": floor_url, "relmon bot": base_url + "/slack/events"}
                for round_number in range(args.rounds):
                    for name, url in targets.items():
                        bodies, _ = make_events(args.events, channels=20, tag=f"{name[:5]}-{round_number}")
                        before = _judged(database)
                        result = burst(url, bodies, args.senders)
                        busy = _judged(database) - before
                        figures[name] += result["latencies"]
                        failures[name] += result["failures"]
                        print(
                            f"round {round_number + 1}, {name}: {len(result['latencies'])} events, "
                            f"{result['failures']} failures, {summary(result['latencies'])} "
                            f"(the worker judged {busy} pairs meanwhile)",
                            flush=True,
                        )
                left = args.backlog - _judged(database)
                if left <= 0:
                    print("warning: the worker ran out of backlog during the run: raise --backlog", flush=True)
    finally:
        floor.terminate()
        floor.wait(timeout=10)
        fake_openai.terminate()
        fake_openai.wait(timeout=10)
        producer.close()
        database.dispose()
        redis_server.stop()
    floor_p99 = percentile(figures["do-nothing"], 0.99)
    bot_p99 = percentile(figures["relmon bot"], 0.99)
    ratio = bot_p99 / floor_p99
    print(f"do-nothing server, all rounds: {summary(figures['do-nothing'])}")
    print(f"relmon bot, all rounds:        {summary(figures['relmon bot'])}")
    verdict = "met" if ratio <= TARGET_RATIO else "NOT met"
    print(
        f"ack p99 ratio bot / do-nothing: {ratio:.2f}x (target <= {TARGET_RATIO:.0f}x: {verdict}); "
        f"cores {os.cpu_count()}"
    )
    return 0 if not any(failures.values()) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=400, help="events in each burst (default 400)")
    parser.add_argument("--senders", type=int, default=8, help="sender processes (default 8)")
    parser.add_argument("--rounds", type=int, default=2, help="bursts at each server, in turns (default 2)")
    parser.add_argument("--backlog", type=int, default=3000, help="pairs for the worker to judge (default 3000)")
    parser.add_argument("--serve-floor", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_floor:
        serve_do_nothing(args.serve_floor)
        return
    raise SystemExit(run(args))


if __name__ == "__main__":
    main()
