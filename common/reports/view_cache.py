"""Reports served from a cache per period and viewer class: App Home, the `/judge digest` preview and
`/judge stats` each build a report at most once a minute for everyone who would be shown the same thing, however
often they ask (bounded work per person, docs/reliability.md). A viewer class names what differs between viewers:
the channels a person may see (and, where text is quoted, read), the period and the data's version; a new answer,
vote or outcome starts a new class. A deletion drops every cached report (`forget_views`), so no quote outlives it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable

import redis

from common.membership import Viewer
from common.runtime import Runtime

VIEW_CACHE_SECONDS = 60  # a report is shared by everyone of its viewer class this long, unless the data changes
HOME_VIEW_KEY = "relmon:home:view:"  # App Home's figures, + the viewer class
REPORT_VIEW_KEY = "relmon:reports:view:"  # the digest previews' and /judge stats' messages, + the viewer class
PREFIXES = (HOME_VIEW_KEY, REPORT_VIEW_KEY)


def digest_of(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def viewer_class(runtime: Runtime, viewer: Viewer, period, *, reads: bool = False, extra: Iterable[str] = ()) -> str:
    """Who a report is for, as far as it differs: of the channels it could list (captured in the period or the one
    before, or configured), those this person may see (and, with `reads`, whose text they may read), with the
    period, the data's version and `extra` (where it is shown). Everyone of one class is shown the same report."""
    from store.stats_queries import channel_ids_between, data_version

    settings, rules = runtime.settings, runtime.rules
    with runtime.db.session() as session:
        captured = channel_ids_between(session, period.previous_start, period.end)
        version = data_version(session)
    candidates = sorted(captured | set(settings.watched_channels) | set(rules.channels))
    seen = [
        f"{channel}:{int(viewer.may_see(channel))}{int(viewer.may_read(channel)) if reads else ''}"
        for channel in candidates
    ]
    return digest_of(period.key, version, *extra, *seen)


def cached(client: redis.Redis, key: str, build: Callable[[], dict], seconds: int = VIEW_CACHE_SECONDS) -> dict:
    """The JSON report stored under `key`, or `build()`'s, stored for `seconds`."""
    found = client.get(key)
    if found is not None:
        return json.loads(found)
    report = build()
    client.set(key, json.dumps(report), ex=seconds)
    return report


def forget_views(client: redis.Redis) -> int:
    """Drop every cached report (a deletion: a cached quote must not outlive its message); how many went."""
    keys = [key for prefix in PREFIXES for key in client.scan_iter(match=f"{prefix}*", count=500)]
    return client.delete(*keys) if keys else 0
