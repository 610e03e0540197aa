"""The base class of relmon's tasks: a retry the broker cannot take keeps the task's message.

Celery's `Task.retry` publishes the retry as a new message and, when that fails (Redis restarting), raises
`Reject(requeue=False)`: the running message is then dropped, and with it the task (the autoretries of
`autoretry_for` go through the same `retry`). Here that Reject asks for a requeue instead: the message goes back to
the queue marked redelivered, or, if Redis cannot even hear that, stays unacknowledged until its lease lapses and a
live worker restores it. Every relmon task is idempotent, so a message kept is at worst run once more."""

from __future__ import annotations

from celery import Task
from celery.exceptions import Reject


class KeepMessageTask(Task):
    def retry(self, *args, **kwargs):
        try:
            return super().retry(*args, **kwargs)
        except Reject as dropped:
            if dropped.requeue:
                raise
            raise Reject(dropped.reason, requeue=True) from dropped
