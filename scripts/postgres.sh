# Sourced by test.sh: find or provide a PostgreSQL server for the tests and export RELMON_TEST_POSTGRES_URL.
pg_answers() {
  python - "$1" <<'PY'
import sys, psycopg
try:
    psycopg.connect(sys.argv[1], connect_timeout=3).close()
except Exception:
    sys.exit(1)
PY
}

ensure_postgres() {
  if [ -n "${RELMON_TEST_POSTGRES_URL:-}" ] && pg_answers "$RELMON_TEST_POSTGRES_URL"; then
    return 0
  fi
  local trust_url="postgresql://postgres@127.0.0.1:5432/postgres"
  local password_url="postgresql://postgres:relmon-test@127.0.0.1:5432/postgres"
  for url in "$trust_url" "$password_url"; do
    if pg_answers "$url"; then export RELMON_TEST_POSTGRES_URL=$url; return 0; fi
  done
  if [ "$(id -u)" != 0 ]; then
    echo "No PostgreSQL on 127.0.0.1:5432: PostgreSQL tests will be skipped (set RELMON_TEST_POSTGRES_URL)." >&2
    return 0
  fi
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "Installing PostgreSQL with apt-get..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq postgresql >/dev/null
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || true
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && break
    sleep 1
  done
  if ! pg_answers "$trust_url"; then
    (cd / && su postgres -c "psql -q -c \"ALTER USER postgres PASSWORD 'relmon-test'\"") >/dev/null
  fi
  for url in "$trust_url" "$password_url"; do
    if pg_answers "$url"; then export RELMON_TEST_POSTGRES_URL=$url; return 0; fi
  done
  echo "PostgreSQL could not be started" >&2
  return 1
}
