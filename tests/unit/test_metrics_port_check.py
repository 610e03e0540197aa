"""The doctor's verdict on the worker's and beat's metrics ports, from plain data: what the running processes
recorded, else what this host's port looks like."""

from __future__ import annotations

import errno

from common.metrics_ports import PortReport, report_for, unserved_reason
from relmon.doctor.port_checks import FREE, HELD, RELMON, Probe, port_check

WORKER = ("worker", "RELMON_WORKER_METRICS_PORT")


def served(host: str = "w1", port: int = 9464, component: str = "worker") -> PortReport:
    return PortReport(component, host, 10, port, serving=True)


def taken(host: str = "w2", port: int = 9464, component: str = "worker") -> PortReport:
    return PortReport(component, host, 11, port, serving=False, problem=f"port {port} in use by another program")


def test_a_running_process_that_cannot_serve_its_port_fails_with_the_fix() -> None:
    check = port_check(*WORKER, 9464, [served(), taken()], None)
    assert check.status == "FAIL"
    assert check.detail.startswith("w2 (pid 11): port 9464 in use by another program: the worker works on")
    assert "set RELMON_WORKER_METRICS_PORT to a free port (or 0 to turn the worker's metrics off)" in check.fix
    assert "stop the program that holds 9464" in check.fix


def test_the_running_processes_say_it_whatever_this_hosts_port_looks_like() -> None:
    held_here = Probe(HELD, "port 9464 in use by another program")
    check = port_check(*WORKER, 9464, [served("w1"), served("w2", 9470)], held_here)
    assert check.status == "ok" and check.detail == "served by 2 worker process(es): w1:9464, w2:9470"
    assert port_check(*WORKER, 9464, [served(component="beat")], None).detail.startswith("no running worker")
    off = port_check(*WORKER, 9464, [PortReport("worker", "w1", 10, 0, serving=False)], held_here)
    assert off.status == "skip" and "turned off" in off.detail


def test_without_a_report_this_hosts_port_is_looked_at() -> None:
    assert port_check(*WORKER, 9464, [], Probe(FREE)).status == "ok"
    assert "answers relmon's /metrics" in port_check(*WORKER, 9464, [], Probe(RELMON)).detail
    held = port_check(*WORKER, 9464, None, Probe(HELD, "port 9464 in use by another program"))
    assert held.status == "warn" and "RELMON_WORKER_METRICS_PORT" in held.fix
    said = "no running worker has reported (Redis could not be read); on this host, port 9464 in use"
    assert held.detail.startswith(said)
    assert port_check(*WORKER, 0, [], None).status == "skip"


def test_a_bind_error_is_said_in_a_persons_words() -> None:
    assert unserved_reason(9464, errno.EADDRINUSE, "Address already in use") == "port 9464 in use by another program"
    assert "need privileges" in unserved_reason(80, errno.EACCES, "Permission denied")
    assert unserved_reason(9464, errno.EINVAL, "Invalid argument") == "port 9464 cannot be opened (Invalid argument)"
    report = report_for("beat", 9465, OSError(errno.EADDRINUSE, "Address already in use"))
    assert (report.serving, report.problem) == (False, "port 9465 in use by another program")
    assert report_for("beat", 0, None).serving is False and report_for("beat", 9465, None).serving is True
