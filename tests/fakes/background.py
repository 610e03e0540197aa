"""What the local fakes share: an HTTP server on 127.0.0.1 served from a daemon thread, as a context manager."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from contextlib import suppress
from http.server import HTTPServer
from typing import Any, Self


class BackgroundServer:
    """Mixin: the subclass sets `self._server` (an HTTPServer) and `self._thread = None` in its __init__."""

    thread_name = "fake-server"
    poll_interval = 0.5  # seconds between shutdown checks of serve_forever

    _server: HTTPServer
    _thread: threading.Thread | None

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(self.poll_interval,), name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_from_command_line(make: Callable[[int], Any], description: str, announce: Callable[[Any], str]) -> None:
    """`python -m tests.fakes.<fake> [--port N]`: serve one fake until interrupted, saying where it listens."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with make(args.port) as fake:
        print(announce(fake), flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
