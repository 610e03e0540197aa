"""common.celery_task: a retry that cannot be published keeps the running message (a requeue), where Celery would
drop it."""

from __future__ import annotations

import socket

import pytest
from celery import Celery, Task
from celery.exceptions import Reject

from common.celery_task import KeepMessageTask


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # free, and nobody listens once the probe is closed


def _running_task(task_cls: type[Task]):
    app = Celery("t", task_cls=task_cls, broker=f"redis://127.0.0.1:{_closed_port()}/0")
    app.conf.task_publish_retry = False  # the broker is down: publishing fails at once

    @app.task(bind=True, shared=False)
    def work(self) -> None:
        pass

    # As the worker runs it: a request from a delivered message, not a direct call.
    work.push_request(id="t-1", args=[], kwargs={}, retries=0, called_directly=False, is_eager=False)
    return work


def test_celery_itself_drops_the_message_when_the_retry_cannot_be_published() -> None:
    with pytest.raises(Reject) as raised:
        _running_task(Task).retry(exc=RuntimeError("redis down"), countdown=1)
    assert raised.value.requeue is False  # what KeepMessageTask is for


def test_a_retry_the_broker_cannot_take_requeues_the_message() -> None:
    with pytest.raises(Reject) as raised:
        _running_task(KeepMessageTask).retry(exc=RuntimeError("redis down"), countdown=1)
    assert raised.value.requeue is True


def test_relmon_tasks_are_built_on_it() -> None:
    from common import task_names
    from common.celery_app import celery
    from workers.tasks import events  # noqa: F401  (registers the task)

    assert isinstance(celery.tasks[task_names.CAPTURE_EVENT], KeepMessageTask)
