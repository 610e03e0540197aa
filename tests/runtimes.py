"""The process runtime for tests: a `common.runtime.Runtime` installed with set_runtime, always removed after.

Tests take the `runtime_for` fixture (tests/conftest.py); helpers that set a runtime up inside a `with` use
`installed_runtime`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from common import celery_app
from common.runtime import Runtime, set_runtime
from store.settings import Settings


@contextmanager
def installed_runtime(settings: Settings, *, worker: bool = False) -> Iterator[Runtime]:
    """A Runtime for `settings`, installed as the process runtime; afterwards set_runtime(None) and the database
    it opened disposed. worker=True also configures the Celery app as `relmon worker` does (tasks run with
    `.apply()` then see these settings)."""
    if worker:
        celery_app.configure(settings)
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        yield runtime
    finally:
        set_runtime(None)
        if "db" in runtime.__dict__:  # only a database it opened (a cached_property)
            runtime.db.dispose()
