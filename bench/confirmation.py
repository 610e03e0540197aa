"""What confirming low scores costs: LLM calls per judgment and the latency from an answer's first LLM call to
its alert, with and without the second opinion, at the default threshold (relevancy ≤ 2).

In process: a real Redis, SQLite in a temporary folder, the fake Slack, and the fake OpenAI server answering in
--latency-ms. Each answer is judged (the first call), stored, and handed to the alert path (`consider`), as
judge_pair and consider_alert do, without the queue between them. --low is the share of answers the judge scores
low (the default 10%).

    python -m bench.confirmation
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.measure import percentile
from judges import get_judge
from store.db import Database
from store.models import Judgment, Pair
from tests.alert_helpers import ALERTS, SUPPORT, fake_slack
from tests.builders import installed_runtime, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.services import RedisProcess
from workers.alerts import delivery


def one_mode(mode: str, *, answers: int, low_share: float, latency_ms: float, folder: Path, redis_url: str) -> dict:
    with fake_slack() as slack, FakeOpenAI(latency_ms=latency_ms) as llm:
        settings = make_settings(
            redis_url=redis_url,
            database_url=f"sqlite:///{folder / f'{mode}.sqlite3'}",
            slack_api_url=slack.api_url,
            openai_base_url=llm.base_url,
            judge_model="fake-judge",
            confirm=mode,
            alert_cap_per_hour=10_000,
            alert_channel_cap_per_hour=10_000,
        )
        Database(settings.resolved_database_url).migrate()  # a fresh SQLite file per mode
        judge = get_judge("relevancy")
        latencies = []
        lows = round(answers * low_share)
        with installed_runtime(settings) as runtime:
            for number in range(answers):
                answer = f"offtopic answer {number}" if number < lows else f"a helpful answer {number}"
                started = time.perf_counter()
                verdict = judge.evaluate(runtime.llm, question=f"question {number}?", answer=answer)
                with runtime.db.session() as session:
                    pair = Pair(
                        channel_id=SUPPORT,
                        answer_ts=f"1.{number:06d}",
                        question_text=f"question {number}?",
                        answer_text=answer,
                        status="judged",
                    )
                    session.add(pair)
                    session.flush()
                    row = Judgment(
                        pair_id=pair.id,
                        judge="relevancy",
                        status=verdict.status,
                        score=verdict.score,
                        max_score=4,
                        normalized_score=verdict.normalized_score,
                        model=verdict.model,
                    )
                    session.add(row)
                    session.flush()
                    judgment_id = row.id
                if delivery.consider(runtime, judgment_id).low.startswith("posted"):
                    latencies.append((time.perf_counter() - started) * 1000)
        return {
            "mode": mode,
            "answers": answers,
            "alerts": len(slack.posted(ALERTS)),
            "calls_per_judgment": len(llm.requests) / answers,
            "alert_latency_p50_ms": statistics.median(latencies) if latencies else None,
            "alert_latency_p95_ms": percentile(latencies, 0.95) if latencies else None,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=200)
    parser.add_argument("--low", type=float, default=0.10, help="share of answers scored low (default 0.10)")
    parser.add_argument("--latency-ms", type=float, default=500.0, help="the fake LLM's latency (default 500)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="relmon-bench-") as folder:
        redis_server = RedisProcess(Path(folder) / "redis")
        redis_server.start()
        try:
            for index, mode in enumerate(("off", "second_opinion")):
                result = one_mode(
                    mode,
                    answers=args.answers,
                    low_share=args.low,
                    latency_ms=args.latency_ms,
                    folder=Path(folder),
                    redis_url=redis_server.url.rsplit("/", 1)[0] + f"/{index + 1}",  # receipts of its own
                )
                print(
                    f"RELMON_CONFIRM={result['mode']:<14} {result['answers']} answers, {result['alerts']} alerts: "
                    f"{result['calls_per_judgment']:.2f} LLM calls per judgment, alert latency "
                    f"p50 {result['alert_latency_p50_ms']:.0f} ms, p95 {result['alert_latency_p95_ms']:.0f} ms"
                )
        finally:
            redis_server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
