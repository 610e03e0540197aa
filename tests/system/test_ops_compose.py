"""docker-compose.yml, Dockerfile and .env.example, checked without a Docker engine: structure with PyYAML, and
`docker-compose config -q` (Debian's docker-compose 1.29.2) when it is installed."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from store.settings import Settings
from tests.processes import RelmonProcess, relmon_command, relmon_env, start_worker, wait_for

ROOT = Path(__file__).resolve().parents[2]
RELMON_SERVICES = ("migrate", "bot", "worker", "beat")
METRICS_SERVICES = ("prometheus", "grafana")  # the optional `metrics` profile
SECRET_VARIABLES = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "OPENAI_API_KEY",
    "RELMON_EMBEDDING_API_KEY",
    "SENTRY_DSN",
    "RELMON_METRICS_TOKEN",
    "RELMON_INGEST_TOKENS",
    "GRAFANA_ADMIN_PASSWORD",
)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def setting_variables() -> list[str]:
    return [field.validation_alias.choices[0] for field in Settings.model_fields.values()]


def command_of(service: dict) -> str:
    command = service.get("command", "")
    return " ".join(command) if isinstance(command, list) else command


def healthcheck_text(service: dict) -> str:
    test = service["healthcheck"]["test"]
    return " ".join(test) if isinstance(test, list) else test


def test_services_present(compose: dict) -> None:
    assert set(compose["services"]) == {"redis", "postgres", *RELMON_SERVICES, *METRICS_SERVICES}


def test_the_metrics_profile_alone_brings_a_dashboard_scraping_relmons_ports(compose: dict) -> None:
    for name, service in compose["services"].items():
        assert (service.get("profiles") == ["metrics"]) == (name in METRICS_SERVICES), name
    config = yaml.safe_load((ROOT / "ops" / "prometheus" / "prometheus.yml").read_text())
    targets = {job["job_name"]: job for job in config["scrape_configs"]}
    assert targets["relmon-bot"]["static_configs"][0]["targets"] == ["bot:3000"]
    worker = targets["relmon-worker"]["dns_sd_configs"][0]
    assert worker["names"] == ["worker"] and worker["port"] == Settings.model_fields["worker_metrics_port"].default
    beat_port = Settings.model_fields["beat_metrics_port"].default
    assert targets["relmon-beat"]["static_configs"][0]["targets"] == [f"beat:{beat_port}"]
    mounts = " ".join(compose["services"]["grafana"]["volumes"])
    assert "./ops/grafana/dashboards:" in mounts and "./ops/grafana/provisioning:" in mounts


def test_prometheus_and_grafana_listen_on_this_hosts_loopback_only(compose: dict) -> None:
    """What the metrics profile publishes is bound to 127.0.0.1 (never 0.0.0.0: a port on every interface)."""
    for name in METRICS_SERVICES:
        ports = compose["services"][name]["ports"]
        assert ports, name
        for mapping in ports:
            assert isinstance(mapping, str) and mapping.startswith("127.0.0.1:"), f"{name} publishes {mapping!r}"
    assert compose["services"]["prometheus"]["ports"] == ["127.0.0.1:9090:9090"]
    assert compose["services"]["grafana"]["ports"] == ["127.0.0.1:3001:3000"]


def test_prometheus_scrapes_every_relmon_port_with_the_token(compose: dict) -> None:
    """relmon's /metrics asks for RELMON_METRICS_TOKEN (common.metrics_door): each job sends it from the file
    the prometheus service writes from .env at start, and the service refuses to start without one."""
    config = yaml.safe_load((ROOT / "ops" / "prometheus" / "prometheus.yml").read_text())
    prometheus = compose["services"]["prometheus"]
    start = command_of(prometheus)
    for job in config["scrape_configs"]:
        authorization = job["authorization"]
        assert authorization["type"] == "Bearer", job["job_name"]
        assert f"> {authorization['credentials_file']}" in start, job["job_name"]
    assert '[ -n "$$RELMON_METRICS_TOKEN" ] ||' in start and "exit 1" in start
    assert "exec /bin/prometheus --config.file=/etc/prometheus/prometheus.yml" in start
    # Only the token from .env reaches Prometheus, not the Slack and LLM secrets.
    assert "env_file" not in prometheus
    assert prometheus["environment"] == {"RELMON_METRICS_TOKEN": "${RELMON_METRICS_TOKEN:-}"}


def test_grafana_asks_for_an_admin_password_the_user_chose(compose: dict) -> None:
    """No fixed admin password in the file (nor Grafana's admin/admin): GRAFANA_ADMIN_PASSWORD from .env, and
    Grafana does not start without it."""
    grafana = compose["services"]["grafana"]
    assert "env_file" not in grafana
    assert grafana["environment"] == {"GF_SECURITY_ADMIN_PASSWORD": "${GRAFANA_ADMIN_PASSWORD:-}"}
    start = command_of(grafana)
    assert '[ -n "$$GF_SECURITY_ADMIN_PASSWORD" ] ||' in start and "exit 1" in start and start.endswith("exec /run.sh")
    assert "admin/admin" not in (ROOT / "docker-compose.yml").read_text()


def test_the_metrics_start_commands_run_under_a_shell(tmp_path: Path) -> None:
    """The prometheus and grafana start lines, run by a real /bin/sh with stand-ins for the two binaries: without
    the variable each exits 1 saying what to set; with it, Prometheus's token file holds exactly the token."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, variable, binary in (
        ("prometheus", "RELMON_METRICS_TOKEN", "/bin/prometheus"),
        ("grafana", "GF_SECURITY_ADMIN_PASSWORD", "/run.sh"),
    ):
        service = compose["services"][name]
        assert service["entrypoint"] == ["/bin/sh", "-c"]
        (tmp_path / "started").unlink(missing_ok=True)
        stand_in = tmp_path / "stand-in"
        stand_in.write_text(f'#!/bin/sh\necho "$@" > {tmp_path / "started"}\n')
        stand_in.chmod(0o755)
        line = (
            command_of(service)
            .replace("$$", "$")  # compose's escape for a literal $
            .replace("/prometheus/relmon-metrics-token", str(tmp_path / "token"))
            .replace(binary, str(stand_in))
        )
        refused = subprocess.run(["/bin/sh", "-c", line], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
        assert refused.returncode == 1 and f"set {variable.replace('GF_SECURITY_ADMIN', 'GRAFANA_ADMIN')}" in (
            refused.stderr
        )
        assert not (tmp_path / "started").exists()
        started = subprocess.run(
            ["/bin/sh", "-c", line], env={"PATH": "/usr/bin:/bin", variable: "s3cret token"}, capture_output=True
        )
        assert started.returncode == 0, started.stderr
        assert (tmp_path / "started").exists()
    assert (tmp_path / "token").read_text() == "s3cret token"
    assert (tmp_path / "token").stat().st_mode & 0o077 == 0  # readable by Prometheus's user alone


def test_redis_keeps_an_append_only_file_on_a_volume(compose: dict) -> None:
    redis = compose["services"]["redis"]
    assert redis["image"].startswith("redis:7")
    assert re.search(r"--appendonly yes", command_of(redis))
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert "redis-cli ping" in healthcheck_text(redis)


def test_postgres_on_a_volume_with_pg_isready(compose: dict) -> None:
    postgres = compose["services"]["postgres"]
    assert postgres["image"].startswith("postgres:16")
    assert any(volume.endswith(":/var/lib/postgresql/data") for volume in postgres["volumes"])
    assert "pg_isready" in healthcheck_text(postgres)


def test_named_volumes_are_declared(compose: dict) -> None:
    used = {
        volume.split(":")[0]
        for service in compose["services"].values()
        for volume in service.get("volumes", [])
        if not volume.startswith((".", "/"))
    }
    assert used and used <= set(compose["volumes"])


def test_migrations_run_once_before_the_app(compose: dict) -> None:
    services = compose["services"]
    migrate = services["migrate"]
    assert command_of(migrate) == "relmon migrate"
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in ("bot", "worker", "beat"):
        depends = services[name]["depends_on"]
        assert depends["migrate"]["condition"] == "service_completed_successfully"
        assert depends["redis"]["condition"] == "service_healthy"
        assert depends["postgres"]["condition"] == "service_healthy"


def test_the_compose_file_runs_each_relmon_process(compose: dict) -> None:
    services = compose["services"]
    assert command_of(services["bot"]) == "relmon bot --port 3000"
    assert "3000:3000" in services["bot"]["ports"]
    assert "/healthz" in healthcheck_text(services["bot"])
    assert command_of(services["worker"]) == "relmon worker"
    assert command_of(services["beat"]) == "relmon beat"


def test_every_long_running_service_has_a_health_check(compose: dict) -> None:
    for name, service in compose["services"].items():
        if service.get("restart") == "no":  # one-shot (migrate)
            continue
        check = service.get("healthcheck", {})
        assert not check.get("disable") and check.get("test"), f"{name} has no health check"
    assert healthcheck_text(compose["services"]["worker"]) == "CMD relmon ping worker"
    assert healthcheck_text(compose["services"]["beat"]) == "CMD relmon ping beat"


def seconds(duration: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration))


def test_the_worker_has_time_to_finish_its_llm_calls_on_stop(compose: dict) -> None:
    llm_timeout = Settings.model_fields["llm_timeout_seconds"].default  # RELMON_LLM_TIMEOUT's default
    grace = seconds(compose["services"]["worker"]["stop_grace_period"])
    assert grace >= llm_timeout + 20  # an LLM call's timeout, then its writes


def test_exactly_one_beat(compose: dict) -> None:
    beats = [name for name, service in compose["services"].items() if "relmon beat" in command_of(service)]
    assert beats == ["beat"]
    beat = compose["services"]["beat"]
    assert beat.get("deploy", {}).get("replicas", 1) == 1
    assert "scale" not in beat
    assert "Exactly one beat" in (ROOT / "docker-compose.yml").read_text()


def test_settings_come_from_the_env_file_pointing_at_the_services(compose: dict) -> None:
    for name in RELMON_SERVICES:
        service = compose["services"][name]
        assert service["env_file"] in (".env", [".env"])
        environment = service["environment"]
        assert environment["REDIS_URL"].startswith("redis://redis:6379/")
        assert "@postgres:5432/" in environment["DATABASE_URL"]
        assert any(volume.endswith(":/data") for volume in service["volumes"]) and environment["RELMON_DATA_DIR"]


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", text, re.M)
    assert re.search(r"^RUN pip install \.", text, re.M)
    user = re.findall(r"^USER (\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*", text, re.M) and "/healthz" in text
    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in packages:
        assert f"COPY {package.rstrip('*')} " in text, f"the image lacks the {package} package"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".env" in ignored and ".venv" in ignored and "data" in ignored


def test_env_example_lists_every_setting_without_secrets() -> None:
    text = (ROOT / ".env.example").read_text()
    for variable in setting_variables():
        assert re.search(rf"^#? ?{variable}=", text, re.M), f"{variable} missing from .env.example"
    for variable in SECRET_VARIABLES:
        for value in re.findall(rf"^#? ?{variable}=(.*)$", text, re.M):
            assert value == "", f"{variable} has a value in .env.example"


def test_configuration_doc_lists_every_setting() -> None:
    """Every setting is documented where a user finds it from the README: docs/configuration.md, linked there."""
    assert "(docs/configuration.md)" in (ROOT / "README.md").read_text(), "README.md does not link the settings"
    text = (ROOT / "docs" / "configuration.md").read_text()
    for variable in setting_variables():
        assert f"`{variable}`" in text, f"{variable} missing from docs/configuration.md"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_health_check_commands_answer_for_real_processes(redis_url: str, tmp_path: Path) -> None:
    """`relmon ping worker|beat`, the compose health checks, against real processes on this host."""
    env = relmon_env(redis_url=redis_url, database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", data_dir=tmp_path / "d")

    def ping(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(relmon_command("ping", *args), env=env, capture_output=True, text=True, timeout=60)

    assert ping("worker").returncode == 1  # nothing runs yet: unhealthy
    worker = start_worker(env, log_dir=tmp_path)
    beat = RelmonProcess("beat", env=env, log_dir=tmp_path).start()
    with worker, beat:
        beat.wait_for_log("beat pidbox: Connected", timeout=60)
        result = ping("worker")
        assert result.returncode == 0 and f"celery@{socket.gethostname()}: pong" in result.stdout, result.stderr
        # beat logs "Connected" a moment before it listens for pings: a health check retries, and so does this
        result = wait_for(lambda: (r := ping("beat")).returncode == 0 and r, timeout=30, what="beat's pong")
        assert result.returncode == 0 and f"celerybeat@{socket.gethostname()}: pong" in result.stdout, result.stderr
        other = ping("worker", "--hostname", "elsewhere")  # another host's worker: not this container's
        assert other.returncode == 1 and "celery@elsewhere did not answer" in other.stderr
        assert beat.stop() == 0  # SIGTERM: beat stops at once and cleanly
    assert ping("beat").returncode == 1


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_accepts_the_file(tmp_path: Path) -> None:
    shutil.copy(ROOT / "docker-compose.yml", tmp_path / "docker-compose.yml")
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    result = subprocess.run(
        ["docker-compose", "-f", "docker-compose.yml", "config", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
