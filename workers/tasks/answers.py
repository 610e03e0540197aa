"""`capture_answer`: the SQL side of capture, done by a worker (the step: workers.pairs.capturing). Here is how it
retries. (A deletion's scrub: workers.tasks.forgetting.)"""

from __future__ import annotations

from typing import Any

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.capture_failures import CAPTURE_RETRIES, capture_failures, replayed
from workers.pairs.capturing import capture_answer_in


@celery.task(name=task_names.CAPTURE_ANSWER, bind=True, **CAPTURE_RETRIES)
def capture_answer(self, channel: str, ts: str, **described: Any) -> str:
    """`described`: what the bot sent with the answer (thread_ts, team_id, channel_type, ext_shared, logged,
    handoff), as `capture_answer_in` takes it."""
    runtime = get_runtime()
    with capture_failures(runtime, described.get("handoff")):
        return capture_answer_in(runtime, channel, ts, redelivered=replayed(self), **described)
