"""The doctor's check of the worker's and beat's metrics ports (RELMON_WORKER_METRICS_PORT, RELMON_BEAT_METRICS_PORT).

What the running processes say comes first: each worker and beat records in Redis whether it serves its port or
why not (`common.metrics_ports`), wherever it runs; a port not served fails, with the fix. Where no process has
said anything (none running, or one older than these records), the port is looked at on the doctor's own host, as
the process would meet it: relmon's `/metrics` answering there is fine, and only when nothing answers HTTP is the
port bound for a moment, with SO_REUSEADDR as the process's own server binds it (a port a closed connection left in
TIME_WAIT is free for it, not taken). A port held there is a warning: the doctor may run on another host than the
worker. `port_check` decides from plain data; `check_metrics_ports` gathers it."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httpx

from common.metrics_door import bind_host
from common.metrics_ports import PortReport, read_all, unserved_reason
from relmon.doctor.checks import Check, fail, ok, skip, warn
from store.settings import Settings

PROBE_TIMEOUT_SECONDS = 2.0  # a program that takes a connection and says nothing is not relmon's server
COMPONENTS = (("worker", "RELMON_WORKER_METRICS_PORT"), ("beat", "RELMON_BEAT_METRICS_PORT"))
RELMON = "relmon"  # the probe's findings
FREE = "free"
HELD = "held"


@dataclass(frozen=True)
class Probe:
    """A port on the doctor's host: relmon's metrics answer there, it is free, or another program holds it."""

    finding: str  # RELMON | FREE | HELD
    detail: str = ""


def port_fix(env_name: str, component: str, ports: Sequence[int]) -> str:
    held = ", ".join(str(port) for port in sorted(set(ports)))
    return (
        f"set {env_name} to a free port (or 0 to turn the {component}'s metrics off) and restart the {component}; "
        f"or stop the program that holds {held}"
    )


def port_check(
    component: str, env_name: str, configured: int, reports: Sequence[PortReport] | None, probe: Probe | None
) -> Check:
    """The verdict on one component's metrics port. `reports`: the records the running processes keep (None:
    Redis could not be read); `probe`: this host's port, looked at when no process of the component reported."""
    name = f"{component} metrics port"
    mine = [report for report in reports or () if report.component == component]
    unserved = [report for report in mine if report.port and not report.serving]
    if unserved:
        said = "; ".join(f"{report.host} (pid {report.pid}): {report.problem}" for report in unserved)
        detail = f"{said}: the {component} works on, but its metrics are not served"
        return fail(name, detail, port_fix(env_name, component, [report.port for report in unserved]))
    served = sorted({f"{report.host}:{report.port}" for report in mine if report.serving})
    if served:
        return ok(name, f"served by {len(mine)} {component} process(es): {', '.join(served)}")
    if mine:
        return skip(name, f"turned off ({env_name}=0) in the running {component}")
    if not configured:
        return skip(name, f"turned off ({env_name}=0)")
    unread = " (Redis could not be read)" if reports is None else ""
    said = f"no running {component} has reported{unread}; on this host"
    if probe is None or probe.finding == FREE:
        return ok(name, f"{said}, port {configured} is free for it")
    if probe.finding == RELMON:
        return ok(name, f"{said}, port {configured} answers relmon's /metrics")
    return warn(
        name,
        f"{said}, {probe.detail}: a {component} started here would not serve its metrics",
        port_fix(env_name, component, [configured]),
    )


def probe_port(port: int, token: str | None) -> Probe:
    """The port on this host, as the process would meet it: relmon's /metrics answering (its server names itself
    "relmon", with or without the doctor's token), another program answering or keeping silent, or nobody: then a
    bind with SO_REUSEADDR, where the process binds, says whether it is free."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with httpx.Client(trust_env=False, timeout=PROBE_TIMEOUT_SECONDS) as client:
            response = client.get(f"http://127.0.0.1:{port}/metrics", headers=headers)
    except httpx.ConnectError:
        return _bind_probe(port, bind_host(token))
    except httpx.HTTPError as error:
        return Probe(HELD, f"port {port} is held by another program (it does not answer HTTP: {type(error).__name__})")
    if response.headers.get("server", "").startswith(RELMON):
        return Probe(RELMON)
    return Probe(
        HELD, f"port {port} is held by another program (GET /metrics answered {response.status_code}, not relmon)"
    )


def _bind_probe(port: int, host: str) -> Probe:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as http.server binds: TIME_WAIT is free
        try:
            probe.bind((host, port))
        except OSError as error:
            return Probe(HELD, unserved_reason(port, error.errno, error.strerror))
    return Probe(FREE)


def check_metrics_ports(settings: Settings) -> Iterator[Check]:
    reports = _reports(settings)
    token = settings.secret("metrics_token")
    for component, env_name in COMPONENTS:
        configured = settings.worker_metrics_port if component == "worker" else settings.beat_metrics_port
        reported = any(report.component == component for report in reports or ())
        probe = probe_port(configured, token) if configured and not reported else None
        yield port_check(component, env_name, configured, reports, probe)


def _reports(settings: Settings) -> list[PortReport] | None:
    """The records of the running workers and beat; None when Redis does not answer (the redis check says why)."""
    from common.runtime import shared_redis

    try:
        client = shared_redis(settings)
        return read_all(client) if client is not None else []
    except Exception:  # a broken REDIS_URL, Redis down: reported by the redis check
        return None
