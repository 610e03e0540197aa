"""What `relmon regress` costs: judgments (checks) per second and LLM calls per golden item, online and through the
Batch API, against the fake OpenAI server answering in --latency-ms, with a golden set of --items items in SQLite in
a temporary folder. Each item is judged four times (relevancy, correctness, the grounded judge in both orders):
the target is at most 6 LLM calls an item.

    python -m bench.regress --items 200 --latency-ms 200
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

from relmon.cli import build_parser
from relmon.regress.command import run_regress
from store import golden
from store.db import Database
from store.golden_rules import ORIGIN_TAKEOVER, Occurrence
from store.settings import Settings
from tests.fakes.openai_server import FakeOpenAI


def seed(database: Database, items: int) -> list[int]:
    ids = []
    with database.session() as session:
        for n in range(items):
            occurrence = Occurrence("C1", f"{n}.0", f"{n}.1", f"{n}.2", f"How do I do task number {n}?", None,
                                    "offtopic", f"Open Settings, then task {n}.", None, False, ORIGIN_TAKEOVER,
                                    pair_id=n)  # fmt: skip
            ids.append(golden.add_occurrence(session, occurrence)[0])
    return ids


def one_mode(mode: str, *, items: int, latency_ms: float, threads: int, folder: Path) -> dict:
    url = f"sqlite:///{folder / f'{mode}.sqlite3'}"
    database = Database(url)
    database.migrate()
    ids = seed(database, items)
    database.dispose()
    candidates = folder / f"{mode}.jsonl"
    lines = [json.dumps({"id": i, "answer": f"Open Settings, then the task ({i})."}) for i in ids]
    candidates.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with FakeOpenAI(latency_ms=latency_ms) as llm:
        settings = Settings(_env_file=None, database_url=url, openai_base_url=llm.base_url, openai_api_key="sk-bench",
                            batch_poll_seconds=0.05, daily_budget=10 * items)  # fmt: skip
        extra = ["--batch"] if mode == "batch" else ["--threads", str(threads)]
        args = build_parser().parse_args(["regress", str(candidates), "--baseline", "none", *extra])
        started = time.perf_counter()
        with redirect_stdout(StringIO()):
            status = run_regress(args, settings)
        seconds = time.perf_counter() - started
        calls = len(llm.requests) + len(llm.batches.requests)
    return {
        "mode": mode,
        "items": items,
        "exit": status,
        "seconds": seconds,
        "judgments_per_second": 4 * items / seconds,
        "llm_calls_per_item": calls / items,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=200.0, help="the fake LLM's time to answer")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="relmon-bench-regress-") as folder:
        for mode in ("online", "batch"):
            row = one_mode(mode, items=args.items, latency_ms=args.latency_ms, threads=args.threads,
                           folder=Path(folder))  # fmt: skip
            print(
                f"{row['mode']:>6}: {row['items']} items in {row['seconds']:.1f} s (exit {row['exit']}) · "
                f"{row['judgments_per_second']:.1f} judgments/s · {row['llm_calls_per_item']:.2f} LLM calls per item "
                f"(target ≤ 6) · latency {args.latency_ms:g} ms, {args.threads} threads"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
