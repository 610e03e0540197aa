"""Beat's outage tick (the task: workers.tasks.outage): while the LLM endpoint is down, probe it with the oldest
waiting answer when a probe is due; once it is back, release the waiting answers oldest first at
RELMON_LLM_RESUME_PER_MINUTE. Only one beat runs, so ticks never overlap. The state and rules:
workers.judging.outage."""

from __future__ import annotations

import logging
from dataclasses import replace

from common import task_names
from common.celery_app import celery
from common.runtime import Runtime
from workers.judging import outage

log = logging.getLogger("relmon.judging")


def tick(runtime: Runtime, now: float) -> str:
    """One tick; returns what it did: "probe", "down" (waiting for the next probe), "released N" or "idle"."""
    client, settings = runtime.redis, runtime.settings
    down = outage.current(client)
    if down is not None:
        if not outage.probe_due(down, now):
            return "down"
        oldest = outage.oldest_waiting(client)
        if oldest is None:  # nothing waits: the next answer captured is held, and probes
            return "down"
        # No second probe while this one is in flight (it may take the whole LLM timeout); its outcome sets the
        # next one's time (workers.judging.run.failed_probe).
        in_flight = outage.probe_delay(down.probes, settings.llm_probe_seconds) + settings.llm_timeout_seconds
        outage.update(client, replace(down, next_probe_at=now + in_flight))
        celery.send_task(task_names.JUDGE_PAIR, args=[oldest], kwargs={"probe": True})
        log.info("probing the LLM endpoint", extra={"pair_id": oldest, "probes_failed": down.probes})
        return "probe"
    backlog = outage.waiting_count(client)
    if not backlog:
        return "idle"
    count, mark = outage.release_plan(
        settings.llm_resume_per_minute,
        outage.release_mark(client),
        now,
        backlog,
        burst_seconds=outage.tick_interval(settings.llm_probe_seconds),
    )
    released = outage.take_oldest(client, count)
    for pair_id in released:
        # Resumed: an earlier run stored what it had (cache hits) and followed it up already.
        celery.send_task(task_names.JUDGE_PAIR, args=[pair_id], kwargs={"resumed": True})
    outage.set_release_mark(client, mark)
    if released:
        log.info("released waiting answers", extra={"count": len(released), "left": backlog - len(released)})
    return f"released {len(released)}"
