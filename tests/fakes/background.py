"""What the local fakes share: an HTTP server on 127.0.0.1 served from a daemon thread, as a context manager."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer
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


class OutageFake(BackgroundServer):
    """A fake API on a free port of 127.0.0.1 that can be told to fail its next requests (`fail_next`). The subclass
    calls `_serve()` in its __init__ and defines `_handler_class()`; its handler asks `next_failure()`."""

    def _serve(self) -> None:
        self._lock = threading.Lock()
        self._failures: list[int] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = None

    def _handler_class(self) -> type:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, count: int, status: int = 503) -> None:
        with self._lock:
            self._failures.extend([status] * count)

    def next_failure(self) -> int | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None


class QuietHandler(BaseHTTPRequestHandler):
    """A fake's request handler: keep-alive, no access log, whole bodies in and out."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        return

    def read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_body(self, status: int, data: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def serve_from_command_line(make: Callable[[int], Any], description: str, announce: Callable[[Any], str]) -> None:
    """`python -m tests.fakes.<fake> [--port N]`: serve one fake until interrupted, saying where it listens."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with make(args.port) as fake:
        print(announce(fake), flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
