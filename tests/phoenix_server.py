"""A real Phoenix server for tests (`phoenix serve` from PyPI's arize-phoenix): one process, SQLite in a folder of
its own, HTTP (its UI, REST API and OTLP/HTTP traces endpoint) on a free port of 127.0.0.1.

Phoenix's dependencies (pandas, grpcio, strawberry, its own SQLAlchemy and OpenTelemetry pins) are not relmon's,
so it lives in a virtual environment of its own, `.venv-phoenix`, which scripts/test.sh creates (uv, about a
minute on a clean machine). It is found, in this order, at RELMON_TEST_PHOENIX (the `phoenix` executable), beside
the environment running the tests (`<that venv>/../.venv-phoenix`), or in the repository. A test that needs it
fails when none is found: CI installs it, and a silent skip would hide the Phoenix tests for good.

Phoenix's gRPC collector cannot be turned off, and binds all interfaces: it is given a free port too, and nothing
sends to it."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.services import free_port

REPOSITORY = Path(__file__).resolve().parent.parent
# Importing Phoenix takes 20 s of CPU, and more the first time (uv installs it without bytecode: the first start
# compiles what it imports). On a 2-core machine with a load of 11 a start took 90 s; the first, at a load of 35,
# 6 min (2026-12-03). The test module's timeout (pytest-timeout counts the fixture in) allows for it.
START_SECONDS = 480.0
# PHOENIX_ADMIN_SECRET is a bearer token Phoenix takes as an API key when auth is on (32+ characters, a digit and
# a letter). PHOENIX_SECRET signs its sessions' JWTs.
ADMIN_SECRET = "relmon-test-admin-secret-0123456789abcdef"
JWT_SECRET = "relmon-test-jwt-secret-0123456789abcdefgh"
INSTALL_FIX = "create it with scripts/test.sh, or point RELMON_TEST_PHOENIX at a `phoenix` executable"


def phoenix_executable() -> str:
    given = os.environ.get("RELMON_TEST_PHOENIX")
    candidates = [Path(given)] if given else []
    candidates += [
        Path(sys.prefix).parent / ".venv-phoenix" / "bin" / "phoenix",
        REPOSITORY / ".venv-phoenix" / "bin" / "phoenix",
    ]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise RuntimeError(f"no Phoenix server: looked at {', '.join(map(str, candidates))}; {INSTALL_FIX}")


class PhoenixProcess:
    """`phoenix serve` on 127.0.0.1 with its database in `directory`; `auth`: only the admin secret gets in."""

    def __init__(self, directory: Path, *, auth: bool = False) -> None:
        self.directory = directory
        self.auth = auth
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def headers(self) -> dict:
        return {"Authorization": f"Bearer {ADMIN_SECRET}"} if self.auth else {}

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.directory),
            "PHOENIX_WORKING_DIR": str(self.directory),
            "PHOENIX_SQL_DATABASE_URL": f"sqlite:///{self.directory / 'phoenix.db'}",
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_TELEMETRY_ENABLED": "false",  # no usage reports from a test
        }
        if self.auth:
            env |= {"PHOENIX_ENABLE_AUTH": "true", "PHOENIX_SECRET": JWT_SECRET, "PHOENIX_ADMIN_SECRET": ADMIN_SECRET}
        log = (self.directory / "phoenix.log").open("wb")
        self.process = subprocess.Popen(
            [phoenix_executable(), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory
        )
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"phoenix serve exited ({self.process.returncode}): {self.log_tail()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"phoenix serve did not answer within {START_SECONDS:.0f} s: {self.log_tail()}")

    def log_tail(self) -> str:
        return (self.directory / "phoenix.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=15)
        self.process = None

    def get(self, path: str, **params: object) -> dict:
        """A GET of Phoenix's REST API, as its JSON."""
        response = httpx.get(f"{self.url}/{path}", params=params, headers=self.headers, timeout=10)
        response.raise_for_status()
        return response.json()

    def span_annotations(self, span_id: str, project: str = "default") -> list[dict]:
        return self.get(f"v1/projects/{project}/span_annotations", span_ids=span_id)["data"]
