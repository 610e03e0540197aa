"""A local Sentry ingest endpoint for tests: sentry_sdk sends real envelopes to it over HTTP.

    with FakeSentry() as sentry:
        env["SENTRY_DSN"] = sentry.dsn            # http://public@127.0.0.1:PORT/1
        ...
        events = sentry.wait_for_events(1)
        assert "secret" not in sentry.raw_text()

Accepts POST /api/<project>/envelope/ (envelopes) and /api/<project>/store/ (legacy JSON events), gzip- or
brotli-compressed or plain; records each request's decompressed bytes and the parsed items.
Runnable alone: `python -m tests.fakes.sentry_server --port N`.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import zlib
from contextlib import suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.background import BackgroundServer, QuietHandler, serve_from_command_line


@dataclass
class Envelope:
    project: str
    headers: dict[str, Any]
    items: list[tuple[dict[str, Any], bytes]]  # (item header, payload)
    raw: bytes

    def payloads(self, item_type: str) -> list[dict[str, Any]]:
        found = []
        for header, payload in self.items:
            if header.get("type") == item_type:
                with suppress(ValueError):
                    found.append(json.loads(payload))
        return found


def decompress(body: bytes, encoding: str) -> bytes:
    encoding = encoding.lower().strip()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding == "br":
        import brotli  # only present if sentry_sdk could have used it

        return brotli.decompress(body)
    return body


def parse_envelope(project: str, raw: bytes) -> Envelope:
    """Sentry's envelope format: a header line, then items of (header line, payload of `length` bytes or
    up to the next newline)."""
    first, _, rest = raw.partition(b"\n")
    headers = json.loads(first) if first.strip() else {}
    items: list[tuple[dict[str, Any], bytes]] = []
    while rest.strip():
        header_line, _, rest = rest.partition(b"\n")
        if not header_line.strip():
            continue
        item_header = json.loads(header_line)
        length = item_header.get("length")
        if length is not None:
            payload, rest = rest[:length], rest[length:]
            rest = rest.removeprefix(b"\n")
        else:
            payload, _, rest = rest.partition(b"\n")
        items.append((item_header, payload))
    return Envelope(project, headers, items, raw)


class FakeSentry(BackgroundServer):
    """A Sentry ingest API on 127.0.0.1 (a free port), served from a background thread."""

    thread_name = "fake-sentry"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, public_key: str = "public", project: str = "1") -> None:
        self.public_key = public_key
        self.project = project
        self._lock = threading.Lock()
        self.envelopes: list[Envelope] = []
        self.requests: list[tuple[str, dict[str, str], bytes]] = []  # (path, headers, decompressed body)
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def dsn(self) -> str:
        return f"http://{self.public_key}@127.0.0.1:{self.port}/{self.project}"

    # Inspection -------------------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        """Error events (envelope items of type `event`, and legacy /store/ bodies), in arrival order."""
        with self._lock:
            return [event for envelope in self.envelopes for event in envelope.payloads("event")]

    def raw_text(self) -> str:
        """Everything received (decompressed request bodies and headers), for "never contains" assertions."""
        with self._lock:
            parts = [json.dumps(headers) + "\n" + body.decode("utf-8", "replace") for _, headers, body in self.requests]
        return "\n".join(parts)

    def wait_for_events(self, count: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            events = self.events()
            if len(events) >= count or time.monotonic() > deadline:
                return events
            time.sleep(0.05)

    # HTTP -------------------------------------------------------------------------------------

    def _record(self, path: str, headers: dict[str, str], body: bytes) -> None:
        parts = [p for p in path.split("?", 1)[0].split("/") if p]  # api, <project>, envelope|store
        if len(parts) != 3 or parts[0] != "api" or parts[2] not in ("envelope", "store"):
            raise LookupError(path)
        project, kind = parts[1], parts[2]
        if kind == "envelope":
            envelope = parse_envelope(project, body)
        else:  # legacy store endpoint: one JSON event
            envelope = Envelope(project, {}, [({"type": "event"}, body)], body)
        with self._lock:
            self.requests.append((path, headers, body))
            self.envelopes.append(envelope)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(QuietHandler):
            def _send(self, status: int, body: dict[str, Any]) -> None:
                self.send_body(status, json.dumps(body).encode(), "application/json")

            def do_POST(self) -> None:
                body = self.read_body()
                try:
                    body = decompress(body, self.headers.get("Content-Encoding", ""))
                    fake._record(self.path, dict(self.headers.items()), body)
                except LookupError:
                    self._send(404, {"detail": "not found"})
                    return
                except (ValueError, OSError, zlib.error) as error:
                    self._send(400, {"detail": f"bad payload: {error}"})
                    return
                self._send(200, {"id": "0" * 32})

        return Handler


def main() -> None:  # pragma: no cover - manual use
    serve_from_command_line(
        lambda port: FakeSentry(port=port),
        "Serve a fake Sentry ingest endpoint",
        lambda fake: f"fake Sentry DSN {fake.dsn}",
    )


if __name__ == "__main__":  # pragma: no cover
    main()
