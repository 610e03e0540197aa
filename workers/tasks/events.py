"""`capture_event`: one Slack event the bot deduplicated and published before it answered Slack (bot.publishing),
captured here (workers.live_capture). The bot noted it in Redis beside the task (capture.handoffs), so that a
message lost in kombu's window is sent again by the orphan check; the note is dropped once the event is captured,
or given up on with a bug. Retried while Redis or the database is down; running an event twice changes nothing more."""

from __future__ import annotations

from typing import Any

from capture import handoffs
from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.capture_failures import CAPTURE_RETRIES, capture_failures
from workers.live_capture import LiveCapture


@celery.task(name=task_names.CAPTURE_EVENT, bind=True, **CAPTURE_RETRIES)
def capture_event(self, entry: dict[str, Any], handoff: str | None = None) -> None:
    runtime = get_runtime()
    capture = LiveCapture(runtime, handoff=handoff)
    with capture_failures(runtime, handoff):
        capture.capture_entry(entry)
    handoffs.done(runtime.redis, capture.handoff)  # unless the answer's store dropped it already
