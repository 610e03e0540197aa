"""The tasks a forgetting queues beyond relmon's own rows (workers.forgotten_elsewhere: a trace tool's comment
blanked, a posted digest redrawn), run in process as soon as they are sent, as tests.bot_harness.InlineWorker runs
the forget task itself: the message still goes to the broker, then the task runs here through Celery's tracer
(a noted task's note is dropped when it ends). Shared by tests/integration/test_forget_reach.py and
tests/system/test_traces_phoenix.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from common import celery_app, task_names


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, object]]]:
    """Install the in-process run of the forgetting's later tasks; yields (task name, result) of each run."""
    import workers.task_ends  # noqa: F401  (drops a noted task's note when it ends, as in a worker)
    from workers.tasks import digest, traces

    runs = {
        task_names.BLANK_LANGFUSE_COMMENTS: traces.blank_langfuse_comments,
        task_names.BLANK_PHOENIX_EXPLANATIONS: traces.blank_phoenix_explanations,
        task_names.REDRAW_DIGEST: digest.redraw_digest,
    }
    ran: list[tuple[str, object]] = []

    def install() -> None:
        sent_before = celery_app.celery.send_task

        def send_then_run(name, args=None, kwargs=None, **options):
            result = sent_before(name, args=args, kwargs=kwargs, **options)
            if name in runs:
                outcome = runs[name].apply(args=list(args or ()), task_id=options.get("task_id"), throw=True)
                ran.append((name, outcome.get()))
            return result

        monkeypatch.setattr(celery_app.celery, "send_task", send_then_run)

    install()
    yield ran
