"""The daily topics run (beat): the last seven days' topics, stored for App Home, and the fixes followed on them
(workers.fixes: a changed verdict is posted in its mark's thread). Nothing here alerts."""

from __future__ import annotations

from datetime import UTC, datetime

from common import task_names
from common.celery_app import celery
from common.reports.topic_runs import refresh
from common.runtime import get_runtime
from workers.fixes import follow


@celery.task(name=task_names.REFRESH_TOPICS)
def refresh_topics() -> str:
    """The daily run, then each followed fix's verdict on it: a change is told in its mark's thread that day."""
    runtime, now = get_runtime(), datetime.now(UTC)
    outcome = refresh(runtime, now, redis_client=runtime.redis)
    follow(runtime, now)
    return outcome
