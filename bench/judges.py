"""How fast the judges run, and what they cost on the client side, against the fake OpenAI server.

    python -m bench.judges                       # the default scenarios below
    python -m bench.judges --scenario 500:32:500 # latency_ms:threads:judgments, repeatable
    python -m bench.judges --cost-only           # only the cost per judgment against DeepEval's metric

The fake runs as a separate process (like a real LLM endpoint, it does not share our CPU or GIL), with
injected latency. Per scenario it prints:
- judgments/s: judgments / wall time;
- client overhead per judgment: mean time inside `evaluate()` minus mean time the server spent answering
  (injected latency included): our code + the openai SDK + HTTP over loopback, i.e. what is not waiting for
  the LLM. At 0 ms and one thread this is the clean figure; with many threads it also counts GIL waits;
- relmon code per judgment: mean time inside `evaluate()` minus the SDK call (`verdict.latency_ms`): prompt
  rendering and budget, cache, parsing, building the verdict;
- client CPU per judgment: this process's CPU time / judgments (all threads, SDK and HTTP included).
Targets (issue 2): client overhead ≤ 2 ms per judgment; at 500 ms latency, 32 threads ≥ 50 judgments/s.

Then it prints tokens and billed cost per judgment next to DeepEval's three-call answer-relevancy metric on the
same pairs (bench/judge_cost.py; DeepEval's templates come from `pip install -e '.[bench]'`).
Targets (issue 18): at least 85% of input tokens cached in steady state; at most 0.4x DeepEval's cost.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bench.judge_cost import report as cost_report
from judges import LLMClient, RelevancyJudge
from tests.bursts import burst
from tests.services import free_port

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIOS = ["0:1:400", "0:8:400", "500:32:500"]
QUESTION = "How do I export my invoices as CSV from the billing page?"
ANSWER = (
    "Open Billing > Invoices, select the invoices you need (or none for all of them), then click Export and "
    "choose CSV. The file lists the date, number, amount, tax and status of each invoice."
)


@dataclass
class Result:
    latency_ms: float
    threads: int
    judgments: int
    wall_s: float
    per_second: float
    evaluate_ms: float
    server_ms: float
    sdk_ms: float
    cpu_ms: float
    errors: int

    @property
    def client_overhead_ms(self) -> float:
        return self.evaluate_ms - self.server_ms

    @property
    def relmon_ms(self) -> float:
        return self.evaluate_ms - self.sdk_ms


class FakeProcess:
    def __init__(self) -> None:
        self.port = free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fakes.openai_server", "--port", str(self.port)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        if "listening" not in (self.process.stdout.readline() if self.process.stdout else ""):
            raise RuntimeError("the fake OpenAI server did not start")

    def post(self, path: str, payload: dict) -> dict:
        request = urllib.request.Request(
            self.root + path, json.dumps(payload).encode(), {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)

    def stats(self) -> dict:
        with urllib.request.urlopen(self.root + "/_admin/stats", timeout=10) as response:
            return json.load(response)

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def run_scenario(fake: FakeProcess, latency_ms: float, threads: int, judgments: int) -> Result:
    fake.post("/_admin/behavior", {"latency_ms": latency_ms})
    # No cache (every answer is distinct anyway) and no retries: we measure calls, not retry policies.
    client = LLMClient("bench-model", base_url=fake.root + "/v1", api_key="bench", max_retries=0, cache_size=0)
    judge = RelevancyJudge()
    burst(lambda n: judge.evaluate(client, QUESTION, f"warm-up {n}"), range(threads), workers=threads)  # warm-up
    fake.post("/_admin/reset", {})

    def one(n: int) -> tuple[float, float, bool]:
        started = time.perf_counter()
        verdict = judge.evaluate(client, QUESTION, f"{ANSWER} (#{n})")
        return time.perf_counter() - started, (verdict.latency_ms or 0.0) / 1000, verdict.status == "ok"

    cpu_started = time.process_time()
    started = time.perf_counter()
    timings = burst(one, range(judgments), workers=threads)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    stats = fake.stats()
    return Result(
        latency_ms=latency_ms,
        threads=threads,
        judgments=judgments,
        wall_s=wall,
        per_second=judgments / wall,
        evaluate_ms=1000 * sum(t for t, _, _ in timings) / judgments,
        server_ms=1000 * stats["handler_seconds_total"] / max(1, stats["requests"]),
        sdk_ms=1000 * sum(s for _, s, _ in timings) / judgments,
        cpu_ms=1000 * cpu / judgments,
        errors=sum(1 for *_, ok in timings if not ok),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scenario",
        action="append",
        help=f"latency_ms:threads:judgments (default: {' '.join(DEFAULT_SCENARIOS)})",
    )
    parser.add_argument("--cost-only", action="store_true", help="only the cost per judgment")
    args = parser.parse_args(argv)
    if args.cost_only:
        print("\n".join(cost_report()))
        return 0
    scenarios = [tuple(float(part) for part in text.split(":")) for text in (args.scenario or DEFAULT_SCENARIOS)]
    print(__doc__.split("\n\n", 2)[2].split("\n\n")[0].rstrip())
    print()
    header = (
        f"{'latency':>8} {'threads':>7} {'judgments':>9} {'wall s':>7} {'judg/s':>7} {'evaluate ms':>11} "
        f"{'server ms':>9} {'overhead ms':>11} {'relmon ms':>9} {'CPU ms':>7} {'errors':>6}"
    )
    print(header)
    fake = FakeProcess()
    try:
        for latency, threads, judgments in scenarios:
            r = run_scenario(fake, latency, int(threads), int(judgments))
            print(
                f"{r.latency_ms:>6.0f}ms {r.threads:>7} {r.judgments:>9} {r.wall_s:>7.2f} {r.per_second:>7.1f} "
                f"{r.evaluate_ms:>11.2f} {r.server_ms:>9.2f} {r.client_overhead_ms:>11.2f} {r.relmon_ms:>9.2f} "
                f"{r.cpu_ms:>7.2f} {r.errors:>6}",
                flush=True,
            )
    finally:
        fake.stop()
    print()
    print("\n".join(cost_report()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
