"""How long `relmon bot` takes to accept an OTLP trace batch at `POST /v1/traces`: 512 spans a request (the
SDK's BatchSpanProcessor's largest export), protobuf as the OTLP/HTTP exporter sends it, to a real `relmon bot`
process (gunicorn, relmon's defaults) on a local Redis and SQLite. Two batches: every span a chat generation with
its messages (the worst case: 512 exchanges handed on, as a `POST /v1/exchanges` batch is: `ingest_exchanges` tasks
of up to 100 exchanges, noted in one Redis transaction, then published), and a bot's usual mix (one chat span in
eight, the rest HTTP and database spans, dropped unread). Each request's spans are new (fresh trace ids). No worker
runs: the time measured is the bot's, up to its 200.

Prints, per batch, the body's size, the median (p50) and worst of the requests' times, and the task messages and
notes each request left in Redis; then a verdict against the target (under 1 s).

    python -m bench.otlp_ingest               # 5 requests of each batch
    python -m bench.otlp_ingest --rounds 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import httpx
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from bench.processes import services
from common import task_notes
from common.celery_app import QUEUE_JUDGE
from tests.otlp_spans import http_span, request, semconv_chat, span

TARGET_SECONDS = 1.0
SPANS = 512
TOKEN = "bench-otlp-token"


def batch(chat_every: int) -> ExportTraceServiceRequest:
    """512 spans of 64 fresh traces (8 spans each), every `chat_every`-th a chat span with its messages."""
    spans = []
    for n in range(SPANS):
        trace_id = os.urandom(16) if n % 8 == 0 else spans[-1].trace_id
        if n % chat_every == 0:
            question = f"Question {n}: how do I reset the password of account {n * 7919 % 10_000}?"
            answer = "Open Settings > Security > Reset, then follow the link we e-mail you. " * 3
            spans.append(span("chat gpt-4o-mini", semconv_chat(question, answer), span_id=n + 1, trace_id=trace_id))
        else:
            other = http_span(n + 1) if n % 2 else span("SELECT", {"db.system.name": "postgresql"}, span_id=n + 1)
            other.trace_id = trace_id
            spans.append(other)
    return request(*spans, **{"service.version": "2.3.1"})


def measure(url: str, chat_every: int, rounds: int, broker: redis.Redis) -> tuple[int, list[float], float, float]:
    """(the body's bytes, each request's seconds, task messages and notes a request left in Redis)."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
    times, size = [], 0
    with httpx.Client(timeout=30) as client:
        client.post(url, content=batch(chat_every).SerializeToString(), headers=headers)  # warm the worker
        messages, notes = broker.llen(QUEUE_JUDGE), broker.hlen(task_notes.KEY)
        for _ in range(rounds):
            body = batch(chat_every).SerializeToString()
            size = len(body)
            started = time.perf_counter()
            answer = client.post(url, content=body, headers=headers)
            times.append(time.perf_counter() - started)
            if answer.status_code != 200:
                raise SystemExit(f"POST /v1/traces answered {answer.status_code}: {answer.content[:300]!r}")
            if ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans:
                raise SystemExit("spans were rejected: the bench's batch is wrong")
    messages = (broker.llen(QUEUE_JUDGE) - messages) / rounds
    notes = (broker.hlen(task_notes.KEY) - notes) / rounds
    return size, times, messages, notes


def run(args: argparse.Namespace) -> int:
    worst = 0.0
    with services("relmon-bench-otlp-", llm_latency_ms=None, producer=False, RELMON_INGEST_TOKENS=TOKEN) as running:
        bot, base_url = running.start_bot()
        with bot:
            for label, chat_every in (("every span a chat", 1), ("one chat span in eight", 8)):
                size, times, messages, notes = measure(base_url + "/v1/traces", chat_every, args.rounds, running.broker)
                worst = max(worst, max(times))
                print(
                    f"{SPANS} spans, {label} ({SPANS // chat_every} exchanges, {size / 1024:.0f} KiB): "
                    f"p50 {statistics.median(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
                    f"over {len(times)} requests; task messages {messages:g}, notes {notes:g} a request",
                    flush=True,
                )
    verdict = "ok" if worst < TARGET_SECONDS else "over"
    print(f"target: a batch accepted in under {TARGET_SECONDS:.0f} s: {verdict} (worst {worst * 1000:.0f} ms)")
    return 0 if worst < TARGET_SECONDS else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed requests of each batch")
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
