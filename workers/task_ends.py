"""Where a noted task's note is dropped (common.task_notes): once the task ends for good, by the call it ran, in
Celery's `task_postrun` signal, whatever the task. Imported by every worker with the task modules."""

from __future__ import annotations

from typing import Any

from celery.signals import task_postrun

from common import task_notes
from common.runtime import get_runtime
from workers.judging.rules import is_infrastructure


@task_postrun.connect
def drop_the_note_of_an_ended_task(
    sender: Any = None,
    args: Any = None,
    kwargs: Any = None,
    state: str | None = None,
    retval: Any = None,
    **_rest: Any,
) -> None:
    if sender is None or sender.name not in task_notes.NOTED:
        return
    error = retval if isinstance(retval, BaseException) else None
    if task_notes.ended_for_good(state, error, outage=is_infrastructure(error)):
        task_notes.done(get_runtime().redis, task_notes.call_id(sender.name, args or (), kwargs or {}))
