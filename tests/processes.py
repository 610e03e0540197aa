"""Real relmon processes for tests: start `relmon bot` / `relmon worker` (or any subcommand) with an
environment of their own, wait for conditions with a deadline, stop them (gently or with SIGKILL).

    with RelmonProcess("worker", env=relmon_env(...)) as worker:
        worker.wait_until_ready()
        wait_for(lambda: count_judgments() == 1, timeout=30, what="a judgment")

Output goes to a log file (`.log_path`), shown in the error when a wait fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import httpx

from tests.services import free_port

T = TypeVar("T")

# Environment variables that must not leak from the developer's shell into a test process.
_SCRUBBED_PREFIXES = ("SLACK_", "OPENAI_", "RELMON_", "REDIS_URL", "DATABASE_URL", "SENTRY_DSN")


class WaitTimeout(AssertionError):
    pass


def wait_for(condition: Callable[[], T], timeout: float = 20.0, interval: float = 0.05, what: str = "condition") -> T:
    """Call `condition` until it returns something truthy (returned) or the deadline passes (raises).
    Exceptions inside `condition` count as "not yet"; the last one is reported."""
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # a service still starting up
            last_error = error
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what}{detail}")
        time.sleep(interval)


def clear_of_the_hour_turn(needed: float) -> None:
    """Return once at least `needed` seconds remain in this UTC hour, waiting for the next hour if fewer do: alert
    caps count per UTC hour, so a test that fills one must not straddle the turn of the hour."""
    if 3600 - time.time() % 3600 < needed:
        wait_for(lambda: time.time() % 3600 < needed, timeout=needed + 5, interval=0.2, what="the next UTC hour")


def relmon_env(
    *,
    redis_url: str,
    database_url: str,
    slack_api_url: str | None = None,
    openai_base_url: str | None = None,
    data_dir: str | Path | None = None,
    **settings: object,
) -> dict[str, str]:
    """An environment for a relmon process: the given services plus test credentials.
    Extra keyword arguments become variables: `relmon_env(..., RELMON_SETTLE_SECONDS=0)`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_SCRUBBED_PREFIXES)}
    env.update(
        {
            "REDIS_URL": redis_url,
            "DATABASE_URL": database_url,
            "SLACK_BOT_TOKEN": "xoxb-test-token",
            "SLACK_SIGNING_SECRET": "test-signing-secret",
            "OPENAI_API_KEY": "sk-test-key",
            "RELMON_MONITORED_BOTS": "B_SUPPORT",
            "RELMON_ALERT_CHANNEL": "C_ALERTS",
            "RELMON_WORKER_CONCURRENCY": "4",
            "RELMON_LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    if slack_api_url:
        env["SLACK_API_URL"] = slack_api_url
    if openai_base_url:
        env["OPENAI_BASE_URL"] = openai_base_url
    env["RELMON_DATA_DIR"] = str(data_dir or tempfile.mkdtemp(prefix="relmon-data-"))
    env.update({name: str(value) for name, value in settings.items()})
    return env


def relmon_command(*args: str) -> list[str]:
    """`relmon ARGS` run with this interpreter (the venv's), so no PATH lookup is needed."""
    return [sys.executable, "-c", "import sys; from relmon.cli import main; sys.exit(main())", *args]


class RelmonProcess:
    """One `relmon <subcommand>` process with its output in a log file."""

    def __init__(
        self,
        *args: str,
        env: Mapping[str, str],
        log_dir: str | Path | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.args = args
        self.env = dict(env)
        self.cwd = str(cwd or Path(__file__).resolve().parents[1])
        directory = Path(log_dir or tempfile.mkdtemp(prefix="relmon-proc-"))
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / f"relmon-{'-'.join(args)}-{os.getpid()}-{time.monotonic_ns()}.log"
        self.process: subprocess.Popen | None = None
        self._log_file = None

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def start(self) -> RelmonProcess:
        self._log_file = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            relmon_command(*self.args),
            env=self.env,
            cwd=self.cwd,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stop() reaches Celery's children too
        )
        return self

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def wait_for_log(self, text: str, timeout: float = 30.0) -> None:
        """Wait until `text` appears in the output (fails early if the process exits)."""

        def seen() -> bool:
            if text in self.log():
                return True
            if not self.running():
                raise WaitTimeout(f"relmon {' '.join(self.args)} exited ({self.process.returncode}):\n{self.tail()}")
            return False

        try:
            wait_for(seen, timeout=timeout, what=f"{text!r} in the output of relmon {' '.join(self.args)}")
        except WaitTimeout as error:
            raise WaitTimeout(f"{error}\n--- output ---\n{self.tail()}") from None

    def wait_until_ready(self, timeout: float = 60.0) -> None:
        """A worker is ready when Celery says so; a bot when /healthz answers (see wait_http)."""
        if self.args and self.args[0] == "worker":
            self.wait_for_log("ready", timeout=timeout)
        else:
            self.wait_for_log("starting", timeout=timeout)

    def wait_http(self, url: str, timeout: float = 60.0) -> httpx.Response:
        def answered() -> httpx.Response | None:
            if not self.running():
                raise WaitTimeout(f"relmon {' '.join(self.args)} exited:\n{self.tail()}")
            response = httpx.get(url, timeout=2)
            return response if response.status_code == 200 else None

        try:
            return wait_for(answered, timeout=timeout, what=f"{url} to answer 200")
        except WaitTimeout as error:
            raise WaitTimeout(f"{error}\n--- output ---\n{self.tail()}") from None

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log().splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the whole process group (a crash, not a shutdown)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=15)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `timeout`; returns the exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        # Reap anything left in the group (Celery pool children, gunicorn workers).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        return self.process.returncode

    def __enter__(self) -> RelmonProcess:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_worker(env: Mapping[str, str], *, log_dir: str | Path | None = None, timeout: float = 60.0) -> RelmonProcess:
    """A running `relmon worker`, ready to take tasks."""
    worker = RelmonProcess("worker", env=env, log_dir=log_dir).start()
    try:
        worker.wait_until_ready(timeout=timeout)
    except BaseException:
        worker.stop()
        raise
    return worker


def start_bot(
    env: Mapping[str, str], *, port: int | None = None, log_dir: str | Path | None = None, timeout: float = 60.0
) -> tuple[RelmonProcess, str]:
    """A running `relmon bot` on 127.0.0.1; returns (process, base URL such as http://127.0.0.1:PORT).

    A port of our choosing can still be taken by another test's server between the check and the bind;
    then the bot exits saying so and is started again on another port (a port the caller chose is kept)."""
    for attempt in range(3):
        chosen = port or free_port()
        bot = RelmonProcess("bot", "--host", "127.0.0.1", "--port", str(chosen), env=env, log_dir=log_dir).start()
        base_url = f"http://127.0.0.1:{chosen}"
        try:
            bot.wait_http(f"{base_url}/healthz", timeout=timeout)
        except WaitTimeout:
            bot.stop()
            if port is None and attempt < 2 and "Address already in use" in bot.log():
                continue
            raise
        except BaseException:
            bot.stop()
            raise
        return bot, base_url
    raise AssertionError("unreachable")


def json_lines(output: str) -> list[dict]:
    """Each line of a relmon process's output as JSON; fails on the first line that is not one JSON object."""
    parsed = []
    for line in output.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}\n--- output ---\n{output[-4000:]}") from None
        assert isinstance(value, dict), line
        parsed.append(value)
    return parsed
