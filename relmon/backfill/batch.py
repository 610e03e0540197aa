"""Judging through the OpenAI Batch API, at half the price: one JSONL file of chat completion requests (the same
bodies online judging posts, built by the judges), a batch over `/v1/chat/completions` within 24 h, polled until it
ends, then its output file read line by line, keyed by `custom_id` ("<pair id>:<judge>"). What a batch did not
answer (expired, failed, a line in the error file) goes into one more batch, then is judged online. An endpoint
without a Batch API (Ollama, vLLM, most gateways: 404) is judged online at once."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import openai

from common.runtime import Runtime
from judges import LLMClient
from judges.client import LLMRequestError
from judges.judge_files import JudgeCatalog
from relmon.backfill.judging import Plan, finish_plan, judge_online, plan
from workers.judging.rules import verdict_values

log = logging.getLogger("relmon.backfill")

ENDED = ("completed", "failed", "expired", "cancelled")
BATCH_ATTEMPTS = 2  # a batch, and one retry of what it did not answer


class NoBatchApi(Exception):
    """The endpoint answered 404 to the Batch API."""


@dataclass
class BatchRun:
    llm: LLMClient
    poll_seconds: float
    sleep: Callable[[float], None] = time.sleep
    say: Callable[[str], None] = print
    on_judged: Callable[[str], None] = lambda _outcome: None
    judges: JudgeCatalog = field(default_factory=JudgeCatalog)  # the team's judges too (store.judge_catalog)

    def requests(self, plans: dict[int, Plan]) -> bytes:
        lines = []
        for pair_id, planned in plans.items():
            pair = planned.pair
            for name in planned.calls:
                judge = self.judges.get(name)
                messages = judge.messages(*pair.judge_input.texts, self.llm.max_prompt_chars)
                body = self.llm.request_body(messages, judge.output_model, judge.max_reply_tokens)
                line = {"custom_id": f"{pair_id}:{name}", "method": "POST", "url": "/v1/chat/completions", "body": body}
                lines.append(json.dumps(line))
        return ("\n".join(lines) + "\n").encode()

    def submit(self, plans: dict[int, Plan]) -> dict[str, dict]:
        """Run one batch to its end; returns the response bodies of the requests it answered, by custom_id."""
        return self.submit_requests(self.requests(plans), sum(len(p.calls) for p in plans.values()))

    def submit_requests(self, content: bytes, count: int, name: str = "relmon-backfill.jsonl") -> dict[str, dict]:
        """Run one batch of these JSONL requests (`count` of them) to its end (relmon regress's too)."""
        sdk = self.llm.sdk
        try:
            uploaded = sdk.files.create(file=(name, content), purpose="batch")
            batch = sdk.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
        except openai.NotFoundError as error:
            raise NoBatchApi(str(error)) from error
        self.say(f"batch {batch.id} submitted: {count} request(s)")
        while batch.status not in ENDED:
            self.sleep(self.poll_seconds)
            batch = sdk.batches.retrieve(batch.id)
        self.say(f"batch {batch.id} {batch.status}")
        answered: dict[str, dict] = {}
        if batch.output_file_id:
            for raw in sdk.files.content(batch.output_file_id).text.splitlines():
                line = json.loads(raw) if raw.strip() else {}
                response = line.get("response") or {}
                if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                    answered[line["custom_id"]] = response["body"]
        return answered

    def store(self, runtime: Runtime, plans: dict[int, Plan], answered: dict[str, dict]) -> dict[int, Plan]:
        """Store every pair whose requests all came back; returns the plans of the others."""
        left = {}
        for pair_id, planned in plans.items():
            rows = []
            for name, key in planned.calls.items():
                body = answered.get(f"{pair_id}:{name}")
                if body is None:
                    break
                try:
                    verdict = self.judges.get(name).verdict_of(self.llm.reply_of(body, 0.0))
                except LLMRequestError:
                    break
                rows.append(verdict_values(verdict, pair_id=pair_id, cache_key=key) | {"batch": True})
            if len(rows) == len(planned.calls):
                self.on_judged(finish_plan(runtime, planned, rows))
            else:
                left[pair_id] = planned
        return left

    def judge(self, runtime: Runtime, pair_ids: list[int]) -> None:
        plans: dict[int, Plan] = {}
        for pair_id in pair_ids:
            planned = plan(runtime, pair_id)
            if planned.outcome:
                self.on_judged(planned.outcome)
            elif not planned.calls:
                self.on_judged(finish_plan(runtime, planned, []))
            else:
                plans[pair_id] = planned
        for attempt in range(BATCH_ATTEMPTS):
            if not plans:
                return
            try:
                answered = self.submit(plans)
            except NoBatchApi:
                self.say("this endpoint has no Batch API (404 on /v1/files or /v1/batches): judging online")
                break
            plans = self.store(runtime, plans, answered)
            if plans and attempt + 1 < BATCH_ATTEMPTS:
                self.say(f"{len(plans)} pair(s) not answered by the batch: one more batch")
        if plans:
            self.say(f"judging {len(plans)} pair(s) online")
        for pair_id in plans:  # their budget is charged already: charging again is a no-op
            self.on_judged(judge_online(runtime, pair_id, self.llm))
