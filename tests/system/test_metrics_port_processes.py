"""A real `relmon worker` whose metrics port another program holds, and a real `relmon beat` that serves its own:
each records it in Redis as it starts, and the doctor's check reads what they said."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import redis

from common.metrics_ports import read_all
from relmon.doctor.port_checks import check_metrics_ports
from tests.builders import make_settings
from tests.processes import RelmonProcess, relmon_env, start_worker, wait_for
from tests.services import free_port

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_doctor_reads_what_the_running_worker_and_beat_say_of_their_ports(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    held_port, beat_port = free_port(), free_port()
    env = relmon_env(redis_url=redis_url, database_url=db_url, data_dir=tmp_path / "data",
                     RELMON_WORKER_METRICS_PORT=held_port, RELMON_BEAT_METRICS_PORT=beat_port)  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    with socket.socket() as other_program:
        other_program.bind(("127.0.0.1", held_port))
        other_program.listen(1)
        worker = start_worker(env, log_dir=tmp_path)
        beat = RelmonProcess("beat", env=env, log_dir=tmp_path).start()
        try:
            reports = wait_for(lambda: (found := read_all(client)) and len(found) == 2 and found, timeout=30,
                               what="the worker's and beat's records")  # fmt: skip
            assert "port not served" in worker.log()  # the worker logs it, and works on
            settings = make_settings(redis_url=redis_url, worker_metrics_port=held_port, beat_metrics_port=beat_port)
            checks = {check.name: check for check in check_metrics_ports(settings)}
            worker_stop = worker.stop()
            gone = wait_for(lambda: not any(r.component == "worker" for r in read_all(client)), timeout=10,
                            what="the stopped worker's record gone")  # fmt: skip
        finally:
            worker.stop()
            beat.stop()
    by_component = {report.component: report for report in reports}
    assert by_component["worker"].pid == worker.pid and not by_component["worker"].serving
    assert by_component["worker"].problem == f"port {held_port} in use by another program"
    assert by_component["beat"].serving and by_component["beat"].port == beat_port
    failed = checks["worker metrics port"]
    assert failed.status == "FAIL" and f"port {held_port} in use by another program" in failed.detail
    assert failed.fix.startswith("set RELMON_WORKER_METRICS_PORT to a free port (or 0 to turn")
    assert checks["beat metrics port"].status == "ok" and f":{beat_port}" in checks["beat metrics port"].detail
    assert worker_stop == 0 and gone
