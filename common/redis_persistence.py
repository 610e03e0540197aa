"""Redis's own copies: with an append-only file, every command Redis ran (a logged message's text, a task's
message) stays on disk until the file is rewritten. After a deletion has been scrubbed, relmon asks Redis to
rewrite it (BGREWRITEAOF), so the deleted words leave the disk too: at most one rewrite every few seconds, however
many deletions came.

Only when Redis says its append-only file is on (INFO persistence). A Redis that refuses the command (a managed
service that renames it) is logged, not retried: its operator's persistence is theirs to scrub.
"""

from __future__ import annotations

import logging

import redis

from common import task_names
from common.celery_app import celery

log = logging.getLogger("relmon.forget")

REWRITE_DELAY_SECONDS = 5.0  # deletions within this time share one rewrite
REWRITE_DUE_KEY = "relmon:aof-rewrite-due"


class RewriteBusy(Exception):
    """A rewrite is running already: the one asked for must start after it (it may have forked before our writes)."""


def rewrite_soon(client: redis.Redis) -> None:
    """At most one rewrite pending. The marker lapses a second before the rewrite runs, so writes done while it
    stood are done before the rewrite forks, and a later deletion schedules the next rewrite itself."""
    marker_ms = int((REWRITE_DELAY_SECONDS - 1.0) * 1000)
    if client.set(REWRITE_DUE_KEY, "1", nx=True, px=marker_ms):
        celery.send_task(task_names.REWRITE_REDIS_AOF, countdown=REWRITE_DELAY_SECONDS)


def rewrite_append_only_file(client: redis.Redis) -> str:
    """Start a background rewrite of the append-only file now; RewriteBusy when one is already running."""
    info = client.info("persistence")
    if not int(info.get("aof_enabled", 0)):
        return "no append-only file"
    if int(info.get("aof_rewrite_in_progress", 0)):
        raise RewriteBusy()
    try:
        client.bgrewriteaof()
    except redis.ResponseError as error:
        if "in progress" in str(error).lower():
            raise RewriteBusy() from error
        log.warning("append-only file not rewritten", extra={"error": str(error)[:200]})
        return "refused"
    return "rewriting"
