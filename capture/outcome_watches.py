"""The answers being watched, in Redis, for the bot's fast filter (capture.outcomes.watching) and for
reactions: the workers write a watch when an answer's window opens and drop it when it closes.

Layout:
    relmon:outcome:watch:{channel}         hash pair_id -> JSON of a Watch (expires with the newest window)
    relmon:outcome:reactors:{pair}:{name}  set of "user emoji" that gave a reaction signal still standing
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

import redis
from slack_sdk.errors import SlackApiError

from capture.outcomes import Watch

PREFIX = "relmon:outcome"


class WatchBoard:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def _key(self, channel: str) -> str:
        return f"{PREFIX}:watch:{channel}"

    def add(self, channel: str, watch: Watch) -> None:
        ttl = max(1, int(watch.closes_at - time.time()) + 60)
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(self._key(channel), str(watch.pair_id), json.dumps(asdict(watch), separators=(",", ":")))
        pipe.expire(self._key(channel), ttl)  # the newest window ends last (one window length for all)
        pipe.execute()

    def remove(self, channel: str, pair_id: int) -> None:
        self.redis.hdel(self._key(channel), str(pair_id))

    def watches(self, channel: str) -> list[Watch]:
        found = (json.loads(raw) for raw in self.redis.hvals(self._key(channel)))
        return [Watch(**{**fields, "parts": tuple(fields.get("parts") or ())}) for fields in found]

    def of_answer(self, channel: str, ts: str) -> Watch | None:
        """The watch of the answer `ts` belongs to (any of its messages)."""
        return next((w for w in self.watches(channel) if w.covers(ts)), None)

    def react(self, pair_id: int, name: str, who: str, added: bool) -> int:
        """Count a reaction given or taken back; returns how many of that signal's reactions stand."""
        key = f"{PREFIX}:reactors:{pair_id}:{name}"
        pipe = self.redis.pipeline(transaction=True)
        if added:
            pipe.sadd(key, who)
        else:
            pipe.srem(key, who)
        pipe.expire(key, 86_400)
        pipe.scard(key)
        return int(pipe.execute()[-1])


TEAM_CACHE_SECONDS = 600


def support_team(client: redis.Redis, slack, entries: list[str]) -> set[str]:
    """RELMON_SUPPORT_TEAM as user IDs: user groups (S…) resolved with usergroups.users.list, cached for ten
    minutes. A group Slack will not list counts as empty (logged by slack_sdk), not as everyone."""
    members: set[str] = set()
    for entry in entries:
        if not entry.startswith("S"):
            members.add(entry)
            continue
        key = f"{PREFIX}:team:{entry}"
        cached = client.get(key)
        if cached is not None:
            members.update(json.loads(cached))
            continue
        try:
            users = list(slack.usergroups_users_list(usergroup=entry).get("users") or [])
        except SlackApiError:
            users = []
        client.set(key, json.dumps(users), ex=TEAM_CACHE_SECONDS)
        members.update(users)
    return members
