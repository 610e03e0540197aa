"""The LLM side of `relmon regress`: each candidate's four checks (golden.regress.CHECKS) judged online in a bounded
pool, or through the Batch API at half price (relmon.backfill.batch's path), each verdict stored the moment it came
(store.regress_runs) and each check paid from the daily budget once. A run stopped by an LLM outage or a spent
budget is resumed by the next run of the same file: what is stored is not judged again."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from golden.regress import JUDGE_OF_CHECK, check_texts
from judges import LLMClient, TransientLLMError, Verdict, get_judge
from judges.base import Judge
from judges.client import LLMRequestError
from judges.context import JudgeInput
from store import regress_runs
from store.db import Database
from store.usage import budget_day


class StopRun(Exception):
    """The run cannot go on now (the LLM unreachable, the budget spent): what is stored stays for the next run."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ItemCheck:
    item_key: str
    name: str  # golden.regress.CHECKS
    texts: tuple[str, str, str | None]  # (question with earlier turns, answer, reference) as the judge reads them

    @property
    def custom_id(self) -> str:
        return f"{self.item_key}:{self.name}"


def checks_of(
    item_key: str, question: str, context: str | None, answer: str, expected: str | None, team: Sequence[str] = ()
) -> list[ItemCheck]:
    """The four checks of an item, and one per team judge (`team`): the candidate against the expected answer."""
    from golden.regress import CHECKS

    checks = []
    for name in CHECKS:
        q, a, reference = check_texts(name, question, answer, expected)
        checks.append(ItemCheck(item_key, name, JudgeInput.of(q, a, reference, context).texts))
    for name in team:
        checks.append(ItemCheck(item_key, name, JudgeInput.of(question, answer, expected, context).texts))
    return checks


def seed_judge_of(check: str) -> Judge:
    """The judge of one of the four checks (a team judge's check is named after it: `Judging.judge_of`)."""
    return get_judge(JUDGE_OF_CHECK[check])


def verdict_dict(verdict: Verdict) -> dict[str, Any]:
    """What a stored check keeps of a verdict (JSON)."""
    fields = ("judge", "status", "score", "max_score", "normalized_score", "reasoning", "model", "prompt_tokens",
              "cached_tokens", "completion_tokens", "latency_ms", "raw_output", "error")  # fmt: skip
    return {name: getattr(verdict, name, None) for name in fields}


@dataclass
class Judging:
    database: Database
    llm: LLMClient
    run_id: int
    budget: int
    threads: int = 8
    on_done: Callable[[int], None] = lambda _count: None
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr)
    judge_of: Callable[[str], Judge] = seed_judge_of  # check name → its judge (a team judge's check: its name)

    def _charge(self, check: ItemCheck, charged: bool) -> None:
        if charged:
            return  # paid by the run that stopped: a resumed check costs nothing more
        with self.database.session() as session:
            paid = regress_runs.charge_check(
                session, self.run_id, check.item_key, check.name, budget_day(), self.budget
            )
        if not paid:
            raise StopRun(
                f"the daily budget of {self.budget:,} judgments is spent (RELMON_DAILY_BUDGET): the checks judged so "
                "far are kept; run the same command again tomorrow (UTC) to finish",
                3,
            )

    def _store(self, check: ItemCheck, verdict: dict[str, Any]) -> None:
        with self.database.session() as session:
            regress_runs.store_verdict(session, self.run_id, check.item_key, check.name, verdict)
        self.on_done(1)

    def _evaluate(self, check: ItemCheck) -> dict[str, Any]:
        judge = self.judge_of(check.name)
        return verdict_dict(judge.evaluate(self.llm, *check.texts))

    def online(self, todo: list[tuple[ItemCheck, bool]]) -> None:
        """Judge these checks (and whether each is paid already), `threads` at a time."""
        pending = iter(todo)
        running: dict[Future, ItemCheck] = {}
        outage: TransientLLMError | None = None
        spent: StopRun | None = None
        with ThreadPoolExecutor(max_workers=max(1, self.threads), thread_name_prefix="regress") as pool:
            while True:
                while outage is None and spent is None and len(running) < self.threads:
                    item = next(pending, None)
                    if item is None:
                        break
                    check, charged = item
                    try:
                        self._charge(check, charged)
                    except StopRun as stop:
                        spent = stop  # the checks in flight are paid for: they are stored before the run stops
                        break
                    running[pool.submit(self._evaluate, check)] = check
                if not running:
                    break
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    check = running.pop(future)
                    try:
                        self._store(check, future.result())
                    except TransientLLMError as error:
                        outage = outage or error
        if spent is not None:
            raise spent
        if outage is not None:
            raise StopRun(
                f"the LLM is unreachable ({outage}): the checks judged so far are kept; run the same command "
                "again to resume where it stopped",
                3,  # not 1: 1 says the new version regressed, and an outage says nothing of it
            )

    def batch(self, todo: list[tuple[ItemCheck, bool]], poll_seconds: float) -> None:
        """Judge through the Batch API at half price; what it does not answer (or an endpoint without one) online."""
        from relmon.backfill.batch import BatchRun, NoBatchApi

        for check, charged in todo:
            self._charge(check, charged)
        checks = {check.custom_id: check for check, _ in todo}
        lines = []
        for check in checks.values():
            judge = self.judge_of(check.name)
            if judge.name not in JUDGE_OF_CHECK and _lacks(judge, check):
                continue  # not judged by it (a text it needs is missing): said online, never sent
            messages = judge.messages(*check.texts, self.llm.max_prompt_chars)
            body = self.llm.request_body(messages, judge.output_model, judge.max_reply_tokens)  # bounded as online
            lines.append(json.dumps({"custom_id": check.custom_id, "method": "POST", "url": "/v1/chat/completions",
                                     "body": body}))  # fmt: skip
        left = dict(checks)
        if lines:
            try:
                runner = BatchRun(self.llm, poll_seconds, say=self.say)
                answered = runner.submit_requests(
                    ("\n".join(lines) + "\n").encode(), len(lines), "relmon-regress.jsonl"
                )
            except NoBatchApi:
                self.say("this endpoint has no Batch API (404 on /v1/files or /v1/batches): judging online")
                answered = {}
            for custom_id, body in answered.items():
                check = left.get(custom_id)
                if check is None:
                    continue
                judge = self.judge_of(check.name)
                try:
                    verdict = judge.verdict_of(self.llm.reply_of(body, 0.0))
                except LLMRequestError:
                    continue
                self._store(check, verdict_dict(verdict) | {"batch": True})
                del left[custom_id]
        if left:
            self.say(f"{len(left)} check(s) not answered by the batch: judging them online")
        self.online([(check, True) for check in left.values()])


def _lacks(judge: Judge, check: ItemCheck) -> bool:
    """Whether a team judge would refuse this check's texts (`CustomJudge.missing`)."""
    missing = getattr(judge, "missing", None)
    return bool(missing and check.texts[1].strip() and missing(*check.texts))
