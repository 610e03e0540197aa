"""The bot's WSGI app served in-process over real HTTP (a threaded wsgiref server), for tests and benches."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from sqlalchemy import select

from bot.server import build_wsgi_app
from capture.conversation_log import ConversationLog
from capture.pairing import Author, LoggedMessage
from common import celery_app, task_names, task_notes
from common.runtime import Runtime
from store.models import Pair
from store.settings import Settings
from tests.builders import installed_runtime


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def log_message(
    log: ConversationLog, channel: str, at: float, *, thread: str | None = None, author: Author = Author.HUMAN
) -> LoggedMessage:
    """A message of U_ASKER's (or of `author`) at `at` seconds, logged as the bot would."""
    message = LoggedMessage(ts=f"{at:.6f}", thread_ts=thread, author=author, user="U_ASKER")
    log.record(channel, message)
    return message


def redis_calls(client) -> dict[str, int]:
    """Calls so far of each command the Redis server ran (INFO commandstats), e.g. {"get": 3}."""
    return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in client.info("commandstats").items()}


def redis_calls_since(client, before: dict[str, int]) -> dict[str, int]:
    """The commands run since `before` (a `redis_calls`), INFO itself left out."""
    return {k: v - before.get(k, 0) for k, v in redis_calls(client).items() if k != "info" and v != before.get(k, 0)}


@dataclass
class ServedBot:
    settings: Settings
    runtime: Runtime
    url: str  # .../slack/events
    base_url: str
    wsgi: Any = None  # the WSGI app itself, for in-process calls (tests.slack_requests.call_wsgi)
    worker: Any = None  # the InlineWorker that runs the tasks the bot sends

    def pairs(self) -> list[Pair]:
        with self.runtime.db.session() as session:
            return list(session.execute(select(Pair).order_by(Pair.id)).scalars())

    def notes(self) -> dict[str, task_notes.Call]:
        """The events handed on to a worker and not yet captured, by event ID: each one's noted `capture_event`
        call (common.task_notes)."""
        calls = [task_notes.Call.from_json(raw) for raw in self.runtime.redis.hgetall(task_notes.KEY).values()]
        return {
            call.kwargs["entry"]["body"]["event_id"]: call for call in calls if call.task == task_names.CAPTURE_EVENT
        }


class InlineWorker:
    """The bot publishes each event's `capture_event` task (bot.publishing) and answers Slack before a worker ran
    it. Tests served in-process have no worker: while installed, such a task is sent to the broker as usual (a dead
    broker fails the bot the same way) and then run here at once, so that a test finds the pair as soon as Slack got
    its acknowledgement; so are a deletion's scrub and an ingested exchange, its signals and its deletion. The copy
    left in the queue is harmless: the task changes nothing when run again. Settling and judging are left to the
    test (tests.bot_events). System tests run real worker processes. `paused()`: sent, not run (the message lost on
    the way, say)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._active = False
        self._sent_before: Any = None
        self._wrapper: Any = None

    def install(self) -> None:
        # The worker's own code: tests may import it, the bot may not. Run as a worker runs them (Celery's tracer,
        # with the message's task ID), so that a noted task's note is dropped when it ends (workers.task_ends).
        import workers.task_ends  # noqa: F401
        from workers.tasks import events, forgetting, ingest

        runs = {  # the tasks, on the process runtime (this bot's)
            task_names.CAPTURE_EVENT: events.capture_event,
            task_names.FORGET_MESSAGE: forgetting.forget_message,
            task_names.INGEST_EXCHANGE: ingest.ingest_exchange,
            task_names.INGEST_EXCHANGES: ingest.ingest_exchanges,
            task_names.INGEST_SIGNAL: ingest.ingest_signal,
            task_names.FORGET_EXCHANGE: forgetting.forget_exchange,
        }
        send = celery_app.celery.send_task
        self._active = True

        def send_then_run(name, args=None, kwargs=None, **options):
            result = send(name, args=args, kwargs=kwargs, **options)
            if name in runs and self._active:  # a test's own patch may keep this wrapper after the bot stopped
                runs[name].apply(kwargs=dict(kwargs or {}), task_id=options.get("task_id"), throw=True)
            return result

        self._sent_before, self._wrapper = send, send_then_run
        celery_app.celery.send_task = send_then_run

    @contextmanager
    def paused(self) -> Iterator[None]:
        self._active = False
        try:
            yield
        finally:
            self._active = True

    def remove(self) -> None:
        """Stop running tasks inline; put back what was there unless a later patch was put back over it already."""
        self._active = False
        if self._wrapper is not None and celery_app.celery.__dict__.get("send_task") is self._wrapper:
            celery_app.celery.send_task = self._sent_before
        self._wrapper = self._sent_before = None


class BotServer:
    """Serve build_wsgi_app(settings) on 127.0.0.1 (a free port) until closed."""

    def __init__(self, settings: Settings) -> None:
        self._stack = ExitStack()  # the app installs the runtime as the process's own; removed on exit
        self.runtime = self._stack.enter_context(installed_runtime(settings))
        self.wsgi = build_wsgi_app(settings, self.runtime)
        self.worker = InlineWorker(self.runtime)
        self.server = make_server("127.0.0.1", 0, self.wsgi, server_class=_ThreadingServer, handler_class=_QuietHandler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.served = ServedBot(settings, self.runtime, f"{base_url}/slack/events", base_url, self.wsgi, self.worker)

    def __enter__(self) -> ServedBot:
        self.worker.install()
        self.thread.start()
        return self.served

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
        # Lazy listeners still running would reach the next test's runtime (it is the process's own): wait for
        # them, and drop those not started yet.
        self.wsgi.bolt.app._listener_runner.listener_executor.shutdown(wait=True, cancel_futures=True)
        self.worker.remove()
        self._stack.close()
