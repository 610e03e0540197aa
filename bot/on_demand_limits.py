"""What one person may ask for, counted in Redis at the bot before anything is stored or queued: reports (App Home,
`/judge digest`, `/judge stats`) a minute (RELMON_REPORTS_PER_PERSON_MINUTE); on-demand judging's budget of
requests per UTC day apart from the captured answers' (RELMON_ON_DEMAND_BUDGET) and a per-person hourly limit
(RELMON_ON_DEMAND_PER_PERSON_HOUR). The workers judge on-demand pairs without charging the monitoring budget."""

from __future__ import annotations

from datetime import UTC, datetime

import redis

from common.membership import Refusal
from store.settings import Settings

_INCR_UNDER_LIMIT = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
if used >= tonumber(ARGV[1]) then return 0 end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


def _take(client: redis.Redis, key: str, limit: int, ttl_seconds: int) -> bool:
    """One unit of `key`'s counter if it is under `limit` (atomic: concurrent requests never overspend)."""
    return bool(client.eval(_INCR_UNDER_LIMIT, 1, key, limit, ttl_seconds))


def take_report(client: redis.Redis, settings: Settings, user_id: str | None, now: datetime | None = None) -> None:
    """One report (App Home, `/judge digest`, `/judge stats`) for this person, or a Refusal (reports_rate_limited):
    RELMON_REPORTS_PER_PERSON_MINUTE a minute, so nobody can keep the database busy for everyone else."""
    minute = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M")
    if not _take(client, f"relmon:reports:person:{user_id}:{minute}", settings.reports_per_person_minute, 120):
        raise Refusal("reports_rate_limited")


def take_on_demand(client: redis.Redis, settings: Settings, user_id: str | None, now: datetime | None = None) -> None:
    """Spend one on-demand request for this person, or a Refusal (rate_limited, on_demand_budget). The person's
    hour is counted first, so one person at their limit does not spend the day's budget."""
    now = now or datetime.now(UTC)
    hour = now.strftime("%Y-%m-%dT%H")
    if not _take(client, f"relmon:on_demand:person:{user_id}:{hour}", settings.on_demand_per_person_hour, 3_600):
        raise Refusal("rate_limited")
    if not _take(client, f"relmon:on_demand:day:{now.date().isoformat()}", settings.on_demand_budget, 2 * 86_400):
        raise Refusal("on_demand_budget")
