"""The worker's and beat's metrics port, as `relmon doctor` sees it: the record a process keeps in real Redis (served,
or why not), and, where no process reported, this host's port (relmon's, free, or another program's: a plain
socket listening, one that keeps silent, a port left in TIME_WAIT). No fixed port: tests.services.free_port."""

from __future__ import annotations

import errno
import io
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import redis

from common import metrics
from common.metrics_ports import INDEX_KEY, KEY_PREFIX, PortReporter, read_all
from relmon.doctor.port_checks import FREE, HELD, RELMON, check_metrics_ports, probe_port
from relmon.doctor.report import report
from tests.builders import make_settings
from tests.services import free_port

TOKEN = "metrics-token-for-tests"


@contextmanager
def another_program(port: int) -> Iterator[socket.socket]:
    """A plain socket listening on `port` that never answers: another program holding it."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", port))
        held.listen(1)
        yield held


def doctor_lines(settings) -> tuple[int, list[str]]:
    """The doctor's report of the metrics-port checks, as `relmon doctor` prints them."""
    out = io.StringIO()
    code = report(check_metrics_ports(settings), settings, out)
    return code, out.getvalue().splitlines()


def test_a_process_whose_port_another_program_holds_says_so_and_the_doctor_fails_with_the_fix(redis_url) -> None:
    port, free = free_port(), free_port()
    settings = make_settings(redis_url=redis_url, beat_metrics_port=port, worker_metrics_port=free)
    client = redis.Redis.from_url(redis_url)
    with another_program(port):
        beat = metrics.serve_process_metrics(settings, "beat")  # as `relmon beat` starts: the port is taken
        reporter = PortReporter(client, beat).start()
        code, lines = doctor_lines(settings)
    assert (beat.serving, beat.problem) == (False, f"port {port} in use by another program")
    assert code == 1, lines
    [failed] = [line for line in lines if line.startswith("FAIL")]
    assert failed.startswith(f"FAIL  beat metrics port: {beat.host} (pid {beat.pid}): port {port} in use by another")
    fix = lines[lines.index(failed) + 1]
    assert fix.strip() == (
        "fix: set RELMON_BEAT_METRICS_PORT to a free port (or 0 to turn the beat's metrics off) and restart the "
        f"beat; or stop the program that holds {port}"
    )
    assert any(line.startswith(f"ok    worker metrics port: no running worker has reported; on this host, port {free}")
               for line in lines)  # fmt: skip
    reporter.stop()  # a clean stop takes the record away at once
    assert read_all(client) == []


def test_a_served_port_is_fine_and_the_record_lives_while_the_process_does(redis_url) -> None:
    port = free_port()
    settings = make_settings(redis_url=redis_url, beat_metrics_port=port, worker_metrics_port=0)
    client = redis.Redis.from_url(redis_url)
    beat = metrics.serve_process_metrics(settings, "beat")
    assert beat.serving and httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).status_code == 200
    reporter = PortReporter(client, beat, interval=0.2).start()
    code, lines = doctor_lines(settings)
    assert code == 0, lines
    assert f"ok    beat metrics port: served by 1 beat process(es): {beat.host}:{port}" in lines
    assert "skip  worker metrics port: turned off (RELMON_WORKER_METRICS_PORT=0)" in lines
    client.delete(beat.key())  # as if its TTL ran out: the next refresh writes it again
    deadline = time.monotonic() + 5
    while not client.exists(beat.key()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.exists(beat.key()) and 0 < client.ttl(beat.key()) <= 90
    reporter.stop()
    assert read_all(client) == [] and not client.exists(beat.key())
    client.set(f"{KEY_PREFIX}worker:elsewhere:1", '{"not": "a report"}')  # not one of ours: passed over
    client.zadd(INDEX_KEY, {f"{KEY_PREFIX}worker:elsewhere:1": time.time() + 90, f"{KEY_PREFIX}worker:gone:2": 1})
    assert read_all(client) == []


def test_without_a_record_relmons_port_is_fine_and_another_programs_is_a_warning(redis_url) -> None:
    relmon_port, guarded_port, held_port, free = free_port(), free_port(), free_port(), free_port()
    assert metrics.serve_metrics_port(make_settings(), relmon_port, lambda: metrics.exposition()) == relmon_port
    guarded = make_settings(metrics_token=TOKEN)
    assert metrics.serve_metrics_port(guarded, guarded_port, lambda: metrics.exposition()) == guarded_port
    assert probe_port(relmon_port, None).finding == RELMON
    assert probe_port(guarded_port, "another-token").finding == RELMON  # relmon's door answered 401: still relmon's
    assert probe_port(free, None).finding == FREE
    with another_program(held_port):
        silent = probe_port(held_port, None)  # it takes the connection and says nothing
        settings = make_settings(redis_url=redis_url, worker_metrics_port=held_port, beat_metrics_port=relmon_port)
        code, lines = doctor_lines(settings)
    assert silent.finding == HELD and "does not answer HTTP" in silent.detail
    assert code == 0, lines  # a warning: the doctor may not run where the worker does
    [warned] = [line for line in lines if line.startswith("warn")]
    said = f"warn  worker metrics port: no running worker has reported; on this host, port {held_port}"
    assert warned.startswith(said)
    assert "a worker started here would not serve its metrics" in warned
    assert "set RELMON_WORKER_METRICS_PORT to a free port" in lines[lines.index(warned) + 1]
    assert any(line.startswith("ok    beat metrics port:") and "answers relmon's /metrics" in line for line in lines)


def test_a_port_bound_but_not_listening_is_held_and_one_in_time_wait_is_free() -> None:
    bound_port = free_port()
    with socket.socket() as bound:  # bound, not listening: nothing answers, and the bind probe finds it taken
        bound.bind(("127.0.0.1", bound_port))
        found = probe_port(bound_port, None)
    assert (found.finding, found.detail) == (HELD, f"port {bound_port} in use by another program")

    port = time_wait_port()
    with socket.socket() as plain, pytest.raises(OSError) as taken:  # without SO_REUSEADDR it looks taken
        plain.bind(("127.0.0.1", port))
    assert taken.value.errno == errno.EADDRINUSE
    assert probe_port(port, None).finding == FREE  # as the worker's own server binds it: free


def time_wait_port() -> int:
    """A port whose server closed a connection first and stopped listening: the connection waits in TIME_WAIT."""
    port = free_port()
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen(1)
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server's side closes first: its end of the connection goes to TIME_WAIT
        client.recv(1)
        client.close()
    return port
