"""Retention: every day, delete pairs (and with them judgments, alerts and feedback) older than
RELMON_RETENTION_DAYS, once relmon's posts about them are retired (workers.retention), and `relmon regress` runs
(their reports and checks) as old. Batches keep each transaction short, so capture and judging never wait long."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from common import task_names
from common.celery_app import celery
from common.runtime import Runtime, get_runtime
from store.retention import delete_alerts_batch, delete_pairs_batch, delete_regress_runs_batch
from workers.retention import forget_response_urls, retire_posts

log = logging.getLogger("relmon.maintenance")

BATCH_SIZE = 1000


def purge(runtime: Runtime, now: datetime, *, batch_size: int = BATCH_SIZE) -> dict[str, int]:
    """Delete what is older than the retention period; returns how many pairs, loose alerts and regress runs went."""
    before = now - timedelta(days=runtime.settings.retention_days)
    counts = {"pairs": 0, "alerts": 0, "regress_runs": 0, "response_urls": forget_response_urls(runtime, now)}
    counts["posts"] = 0
    try:
        counts["posts"] = retire_posts(runtime, before)  # their rows are the only record of where they are
    except Exception as error:  # Slack failing now: those posts' rows wait for the next purge, the rest goes
        log.warning("posts not retired", extra={"error": repr(error)[:300]})
    batches = (
        ("pairs", delete_pairs_batch),
        ("alerts", delete_alerts_batch),
        ("regress_runs", delete_regress_runs_batch),
    )
    for name, delete_batch in batches:
        while True:
            with runtime.db.session() as session:
                deleted = delete_batch(session, before, batch_size)
            counts[name] += deleted
            if deleted < batch_size:
                break
    log.info("retention purge", extra={"before": before.isoformat(), **counts})
    return counts


@celery.task(name=task_names.PURGE_OLD)
def purge_old() -> dict[str, int]:
    return purge(get_runtime(), datetime.now(UTC))
