"""`relmon run` and `relmon worker` with no services: embedded Redis, SQLite, real processes, clean stops."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import slack_requests as sr
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_command, relmon_env, wait_for
from tests.services import free_port

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

REQUIRED = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "RELMON_MONITORED_BOTS",
    "RELMON_ALERT_CHANNEL",
    "OPENAI_API_KEY",
)


def run_to_end(command: str, env: dict[str, str], cwd: Path, *, timeout: float) -> subprocess.CompletedProcess:
    """`relmon <command>` run until it exits, its output captured as text."""
    return subprocess.run(relmon_command(command), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def children_of(pid: int) -> set[int]:
    """Every live descendant of `pid`, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def no_service_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """Fake Slack and LLM, test credentials, and neither REDIS_URL nor DATABASE_URL."""
    with FakeSlack() as slack, FakeOpenAI() as llm:
        env = relmon_env(
            redis_url="",
            database_url="",
            slack_api_url=slack.api_url,
            openai_base_url=llm.base_url,
            data_dir=tmp_path / "data",
            RELMON_WORKER_CONCURRENCY=2,
        )
        del env["REDIS_URL"], env["DATABASE_URL"]
        yield env


def test_missing_settings_stop_it_at_once_naming_exactly_what_to_set(tmp_path: Path) -> None:
    base = {k: v for k, v in relmon_env(redis_url="", database_url="", data_dir=tmp_path / "d").items()}
    for name in (*REQUIRED, "REDIS_URL", "DATABASE_URL"):
        base.pop(name, None)
    result = run_to_end("run", base, tmp_path, timeout=60)
    assert result.returncode == 2
    for name in REQUIRED:
        assert f"  {name}: " in result.stderr
    assert "Bot User OAuth Token" in result.stderr  # where to get it
    assert not (tmp_path / "d" / "redis").exists()  # nothing was started

    partial = {**base, "SLACK_BOT_TOKEN": "xoxb-1-2-abcdefgh", "OPENAI_API_KEY": "sk-abcdefghijkl"}
    result = run_to_end("run", partial, tmp_path, timeout=60)
    assert result.returncode == 2
    listed = [line.split(":")[0].strip() for line in result.stderr.splitlines() if line.startswith("  ")]
    assert listed == ["SLACK_SIGNING_SECRET", "RELMON_MONITORED_BOTS", "RELMON_ALERT_CHANNEL"]


@pytest.mark.timeout(240)
def test_run_is_self_contained_from_start_to_sigterm(no_service_env: dict[str, str], tmp_path: Path) -> None:
    data = Path(no_service_env["RELMON_DATA_DIR"])
    port = free_port()
    run = RelmonProcess("run", "--port", str(port), env=no_service_env, log_dir=tmp_path, cwd=tmp_path).start()
    try:
        run.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        run.wait_for_log("ready", timeout=90)  # the worker
        socket_path = data / "redis" / "redis.sock"
        assert stat.S_ISSOCK(os.stat(socket_path).st_mode)
        assert (data / "redis" / "appendonly.aof").exists()
        assert (data / "relmon.sqlite3").exists()
        redis_pid = int((data / "redis" / "redis.pid").read_text())
        descendants = children_of(run.pid)
        assert redis_pid in descendants
        assert len(descendants - {redis_pid}) >= 3  # bot, worker, beat (and their own children)
        assert "xoxb-test-token" not in run.log()  # logs mask the token

        os.kill(run.pid, signal.SIGTERM)  # the run process only: it must forward the signal itself
        assert run.process.wait(timeout=90) == 0
        wait_for(lambda: not any(alive(pid) for pid in descendants), timeout=10, what="every child to exit")
        assert not alive(redis_pid)
        assert not socket_path.exists()  # redis-server shut down gracefully
    finally:
        run.stop()


@pytest.mark.timeout(240)
def test_run_restarts_a_killed_child_without_a_pause_in_judging(no_service_env: dict[str, str], tmp_path: Path) -> None:
    """The worker dies (SIGKILL): `relmon run` says so, starts it again after a short backoff, and an answer sent
    afterwards is judged. The other children and the embedded Redis stay as they were."""
    port = free_port()
    run = RelmonProcess("run", "--port", str(port), env=no_service_env, log_dir=tmp_path, cwd=tmp_path).start()
    try:
        run.wait_http(f"http://127.0.0.1:{port}/healthz", timeout=120)
        run.wait_for_log("ready", timeout=90)
        data = Path(no_service_env["RELMON_DATA_DIR"])
        redis_pid = int((data / "redis" / "redis.pid").read_text())
        worker = next(p for p in children_of(run.pid) if b"worker" in Path(f"/proc/{p}/cmdline").read_bytes())
        os.kill(worker, signal.SIGKILL)
        wait_for(lambda: "child restarted" in run.log(), timeout=30, what="the worker restarted")
        assert "a child exited; restarting it" in run.log() and '"child": "worker"' in run.log()
        wait_for(lambda: run.log().count("ready") >= 2, timeout=90, what="the new worker ready")
        assert run.running() and alive(redis_pid)

        question_ts = sr.next_ts()
        url = f"http://127.0.0.1:{port}/slack/events"
        secret = no_service_env["SLACK_SIGNING_SECRET"]
        for event in (
            sr.human_message("C_SUPPORT", question_ts, "How do I reset my password?"),
            sr.bot_message("C_SUPPORT", sr.next_ts(), "Open Settings, then Reset.", thread_ts=question_ts),
        ):
            assert sr.post(url, sr.envelope(event), secret).status_code == 200

        def judged() -> int:
            with sqlite3.connect(data / "relmon.sqlite3") as connection:
                return connection.execute("SELECT count(*) FROM judgments").fetchone()[0]

        wait_for(judged, timeout=60, what="the answer judged by the restarted worker")
    finally:
        run.stop()


def test_bot_alone_keeps_its_embedded_redis_when_gunicorn_workers_exit(
    no_service_env: dict[str, str], tmp_path: Path
) -> None:
    """gunicorn forks its workers from the master that started the embedded Redis; a worker that exits (stopped,
    timed out, or replaced on SIGHUP) runs the inherited atexit handler, which must leave the server alone."""
    data = Path(no_service_env["RELMON_DATA_DIR"])
    socket_path = data / "redis" / "redis.sock"
    port = free_port()
    bot = RelmonProcess("bot", "--host", "127.0.0.1", "--port", str(port), env=no_service_env, log_dir=tmp_path)
    bot.cwd = str(tmp_path)
    bot.start()
    try:
        health = f"http://127.0.0.1:{port}/healthz"
        bot.wait_http(health, timeout=120)
        redis_pid = int((data / "redis" / "redis.pid").read_text())
        workers = children_of(bot.pid) - {redis_pid}
        assert workers
        os.kill(next(iter(workers)), signal.SIGTERM)  # one worker stops gracefully: sys.exit, atexit handlers
        os.kill(bot.pid, signal.SIGHUP)  # a reload: every worker replaced the same way
        wait_for(lambda: not any(alive(pid) for pid in workers), timeout=60, what="the old workers to exit")
        wait_for(lambda: children_of(bot.pid) - {redis_pid} - workers, timeout=60, what="new workers")
        assert alive(redis_pid)
        assert stat.S_ISSOCK(os.stat(socket_path).st_mode)  # not unlinked by an exiting worker
        bot.wait_http(health, timeout=60)  # the new workers reach Redis
        assert "embedded redis stopped" not in bot.log()
        assert bot.log().count("embedded redis started") == 1

        os.kill(bot.pid, signal.SIGTERM)
        bot.process.wait(timeout=60)
        wait_for(lambda: not alive(redis_pid), timeout=15, what="the master to stop its embedded redis-server")
        assert not socket_path.exists()
    finally:
        bot.stop()


@pytest.mark.timeout(180)
# Run alone, after the parallel run: beside other tests' relmon processes its redis-server was seen outliving the
# worker (twice on 2026-12-03, not yet explained; it passes alone). Tracked in the closing note of that stop.
@pytest.mark.serial
def test_a_worker_alone_owns_the_embedded_redis(no_service_env: dict[str, str], tmp_path: Path) -> None:
    data = Path(no_service_env["RELMON_DATA_DIR"])
    worker = RelmonProcess("worker", env=no_service_env, log_dir=tmp_path, cwd=tmp_path).start()
    try:
        worker.wait_until_ready(timeout=120)
        assert stat.S_ISSOCK(os.stat(data / "redis" / "redis.sock").st_mode)
        redis_pid = int((data / "redis" / "redis.pid").read_text())
        assert alive(redis_pid)
        os.kill(worker.pid, signal.SIGTERM)
        worker.process.wait(timeout=60)
        # Its shutdown writes the append-only file: 15 s was short on a loaded machine (CI: 4 test workers, 2 cores).
        wait_for(lambda: not alive(redis_pid), timeout=60, what="the embedded redis-server to exit")
        assert (data / "redis" / "appendonly.aof").exists()
    finally:
        worker.stop()


def test_an_embedded_redis_problem_is_one_clear_message(tmp_path: Path) -> None:
    # A data folder so deep that the Redis socket path exceeds the 107 bytes a unix socket path may have.
    env = relmon_env(redis_url="", database_url="", data_dir=tmp_path / ("d" * 120))
    del env["REDIS_URL"], env["DATABASE_URL"]
    for command in ("run", "worker"):
        result = run_to_end(command, env, tmp_path, timeout=60)
        assert result.returncode == 3, result.stderr
        assert "Traceback" not in result.stderr
        assert f"relmon {command}: cannot start the embedded Redis:" in result.stderr
        assert "RELMON_DATA_DIR" in result.stderr  # the advice


def test_a_database_that_cannot_be_reached_is_one_clear_message(redis_url: str, tmp_path: Path) -> None:
    """Bot (which migrates in a child process), worker, migrate and export: the database's problem in one line,
    the URL's password masked (a "#" in it included), what to check, exit code 3; not a traceback."""
    dead = f"postgresql+psycopg://relmon:hunter2#x9@127.0.0.1:{free_port()}/relmon"
    env = relmon_env(redis_url=redis_url, database_url=dead, data_dir=tmp_path / "data")
    for command in ("bot", "worker", "migrate"):
        result = run_to_end(command, env, tmp_path, timeout=120)
        assert result.returncode == 3, result.stderr
        assert "Traceback" not in result.stderr and "hunter2" not in result.stderr
        [line] = [line for line in result.stderr.splitlines() if line.startswith(f"relmon {command}: ")]
        assert "cannot bring the database schema up to date at postgresql+psycopg://relmon:****2#x9@127.0.0.1" in line
        assert "Connection refused" in line and "Check DATABASE_URL" in line and "sqlalche.me" not in line
    export = run_to_end("export", env, tmp_path, timeout=60)
    assert export.returncode == 3 and "Traceback" not in export.stderr and "hunter2" not in export.stderr
    assert "relmon export: the database failed at postgresql+psycopg://relmon:****2#x9@" in export.stderr
    # A URL that is not one (a port that is no number): the same one line, from the worker's own migration too.
    env["DATABASE_URL"] = "postgresql://relmon:hunter2@127.0.0.1:abc/relmon"
    result = run_to_end("worker", env, tmp_path, timeout=60)
    assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
    assert "relmon worker: cannot bring the database schema up to date" in result.stderr


def test_socket_mode_that_slack_refuses_is_one_clear_message(redis_url: str, tmp_path: Path) -> None:
    """Socket Mode off in the app (apps.connections.open refuses), or a bot token Slack does not know: one line
    naming the setting to fix, exit 3, not a traceback."""
    with FakeSlack() as slack:  # no Socket Mode URL: apps.connections.open answers socket_mode_not_enabled
        env = relmon_env(
            redis_url=redis_url,
            database_url=f"sqlite:///{tmp_path / 'relmon.sqlite3'}",
            slack_api_url=slack.api_url,
            data_dir=tmp_path / "data",
        )
        env["SLACK_APP_TOKEN"] = "xapp-1-test"
        result = run_to_end("bot", env, tmp_path, timeout=120)
        assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
        assert "relmon bot: Slack refused Socket Mode (socket_mode_not_enabled): SLACK_APP_TOKEN" in result.stderr

        slack.valid_tokens = {"xapp-1-test"}  # the bot token is not one Slack knows
        result = run_to_end("bot", env, tmp_path, timeout=120)
        assert result.returncode == 3 and "Traceback" not in result.stderr, result.stderr
        assert "relmon bot: Slack refused SLACK_BOT_TOKEN (invalid_auth)" in result.stderr


def test_the_processes_that_serve_load_neither_alembic_nor_matplotlib(tmp_path: Path) -> None:
    """The bot migrates in a child process and the digest's chart module loads only when a digest draws: each
    gunicorn worker and each Celery worker is spared Alembic (~10 MB) and matplotlib (~40 MB)."""
    url = f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
    script = f"""
import sys
from bot.server import MODULES_BEFORE_FORK, load_before_fork
from store.db import migrate_in_child, pending_migrations, make_engine
from store.settings import Settings
from workers.main import import_task_modules

migrate_in_child({url!r})
load_before_fork(Settings(database_url={url!r}))
import_task_modules()
assert all(name in sys.modules for name in MODULES_BEFORE_FORK)
print(sorted(name for name in ("alembic", "matplotlib") if name in sys.modules))
print(pending_migrations(make_engine({url!r})))  # the child migrated the fresh file (this loads alembic)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["[]", "[]"]


def test_a_failed_migration_in_the_child_process_comes_back_as_its_error(tmp_path: Path) -> None:
    from store.db import MigrationError, migrate_in_child

    not_a_database = tmp_path / "not-a-database.sqlite3"
    not_a_database.write_bytes(b"this is not a SQLite file" * 100)
    with pytest.raises(MigrationError, match=r"DatabaseError.*file is not a database"):
        migrate_in_child(f"sqlite:///{not_a_database}")


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed exit, on purpose
def test_beat_stops_on_sigterm_even_when_a_gc_callback_swallows_the_exit() -> None:
    """What `relmon run` saw: SIGTERM landing while a garbage-collector callback runs (SQLAlchemy's pool
    finalizers) turns Celery's SystemExit into "Exception ignored", and beat ran on until SIGKILL."""
    from workers.main import BEAT_MAX_INTERVAL_SECONDS, _install_beat_stop_handler

    class Service:
        _is_shutdown = threading.Event()

    class Finalized:
        def __del__(self) -> None:  # the signal's handler runs here, inside a finalizer
            os.kill(os.getpid(), signal.SIGTERM)

    service = Service()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        _install_beat_stop_handler(service)
        Finalized()  # collected at once: SystemExit is raised in __del__ and ignored
        assert service._is_shutdown.is_set()  # beat's loop sees it at its next wake-up
        with pytest.raises(SystemExit):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs before this returns
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    assert BEAT_MAX_INTERVAL_SECONDS <= 10  # and that wake-up comes soon
