"""The daily topics run (beat): the last seven days' topics, stored for App Home. Nothing here alerts."""

from __future__ import annotations

from datetime import UTC, datetime

from common import task_names
from common.celery_app import celery
from common.reports.topic_runs import refresh
from common.runtime import get_runtime


@celery.task(name=task_names.REFRESH_TOPICS)
def refresh_topics() -> str:
    runtime = get_runtime()
    return refresh(runtime, datetime.now(UTC), redis_client=runtime.redis)
