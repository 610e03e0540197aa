#!/usr/bin/env bash
# Install relmon into .venv and start everything on this machine: `relmon run` (bot, worker and beat,
# with an embedded Redis and SQLite unless REDIS_URL / DATABASE_URL say otherwise). Settings come from
# the environment or .env; arguments go to `relmon run` (e.g. --port 3000).
RELMON_EXTRAS=dev
# shellcheck source=scripts/_venv.sh
. "$(dirname "$0")/_venv.sh"
exec relmon run "$@"
