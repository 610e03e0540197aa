"""The answers being watched, in Redis, for the bot's fast filter (capture.outcomes.watching) and for
reactions: the workers write a watch when an answer's window opens and drop it when it closes.

The watches are kept by what a message can concern, so the bot reads only those: a reply, its thread's watches; a
top-level message, its writer's (the asker's) watches; a reaction, the watch of the message it is on. Reading
every watch of the channel for each message made the bot's work grow with the channel's open windows.

Layout (each key expires a minute after the newest window it holds):
    relmon:outcome:watch:{channel}:thread:{thread_key}  hash pair_id -> JSON of a Watch
    relmon:outcome:watch:{channel}:asker:{user}         hash pair_id -> JSON of a Watch
    relmon:outcome:watch:{channel}:msg:{ts}             JSON of the Watch whose answer holds message ts
    relmon:outcome:reactors:{pair}:{name}               set of "user emoji" that gave a reaction signal still standing
    relmon:outcome:helped:{channel}:{user}              sorted set of the threads (root ts) a person answered lately,
                                                        scored by when: evidence that they are staff
    relmon:outcome:members:{channel}                    the alert channel's members (JSON), for ten minutes
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import redis
from slack_sdk.errors import SlackApiError

from capture.outcomes import Watch
from capture.pairing import LoggedMessage
from capture.teammates import HELPED_DAYS, StaffEvidence

PREFIX = "relmon:outcome"
REACTION_SEEN_SECONDS = 86_400  # outlives any outcome window: a person's reaction counted once stays counted


def _decoded(raw: bytes | str) -> Watch:
    fields = json.loads(raw)
    return Watch(**{**fields, "parts": tuple(fields.get("parts") or ())})


def decoded_watches(raws: Iterable[bytes | str]) -> list[Watch]:
    return [_decoded(raw) for raw in raws]


class WatchBoard:
    def __init__(self, client: redis.Redis) -> None:
        self.redis = client

    def _thread(self, channel: str, thread_key: str) -> str:
        return f"{PREFIX}:watch:{channel}:thread:{thread_key}"

    def _asker(self, channel: str, user: str) -> str:
        return f"{PREFIX}:watch:{channel}:asker:{user}"

    def _message(self, channel: str, ts: str) -> str:
        return f"{PREFIX}:watch:{channel}:msg:{ts}"

    def queue_add(self, pipe: Any, channel: str, watch: Watch) -> None:
        """Put up `watch`: its commands queued on `pipe` (a transaction of the caller's, which reads the log in
        it too: workers.outcome_watching)."""
        ttl = max(1, int(watch.closes_at - time.time()) + 60)
        fields = asdict(watch)
        del fields["topic"]  # the bot's filter needs no texts: the workers read them with the window
        raw = json.dumps(fields, separators=(",", ":"))
        indexes = [self._thread(channel, watch.thread_key)]
        if watch.asker:
            indexes.append(self._asker(channel, watch.asker))
        for key in indexes:
            pipe.hset(key, str(watch.pair_id), raw)
            pipe.expire(key, ttl)  # one window length for all: the newest window ends last
        for ts in (watch.answer_ts, *watch.parts):
            pipe.set(self._message(channel, ts), raw, ex=ttl)

    def remove(self, channel: str, pair_id: int, *, thread_key: str, asker: str | None, answer_ts: str) -> None:
        """Drop a closed window's watch (its later parts' keys lapse on their own: the worker ignores them)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hdel(self._thread(channel, thread_key), str(pair_id))
        if asker:
            pipe.hdel(self._asker(channel, asker), str(pair_id))
        pipe.delete(self._message(channel, answer_ts))
        pipe.execute()

    def candidates_key(self, channel: str, message: LoggedMessage) -> str | None:
        """The hash of the watches `message` could concern (capture.outcomes.watching decides): its thread's for a
        reply, its writer's for a top-level message; None when there is none (a top-level message with no writer).
        Its HVALS is read beside the message's log write (workers.live_capture); `decoded_watches` decodes it."""
        if message.in_thread:
            return self._thread(channel, message.thread_key)
        return self._asker(channel, message.user) if message.user else None

    def of_asker(self, channel: str, user: str | None) -> list[Watch]:
        return decoded_watches(self.redis.hvals(self._asker(channel, user))) if user else []

    def of_answer(self, channel: str, ts: str) -> Watch | None:
        """The watch of the answer `ts` belongs to (any of its messages)."""
        raw = self.redis.get(self._message(channel, ts))
        return _decoded(raw) if raw else None

    def react(self, pair_id: int, name: str, user: str, added: bool) -> bool:
        """Whether this reaction changes the outcome: only one person's first giving of a signal's reaction on the
        answer does. Taking it back, giving it again, or toggling it for the hundredth time changes nothing (and asks
        for no redraw); a redelivered event is not a second giving."""
        if not added:
            return False
        return bool(self.redis.set(self._reacted(pair_id, name, user), 1, nx=True, ex=REACTION_SEEN_SECONDS))

    def unreact(self, pair_id: int, name: str, user: str) -> None:
        """The giving `react` counted was not recorded (the database failed): the next try counts it again."""
        self.redis.delete(self._reacted(pair_id, name, user))

    @staticmethod
    def _reacted(pair_id: int, name: str, user: str) -> str:
        return f"{PREFIX}:reacted:{pair_id}:{name}:{user}"


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


MEMBERS_PAGE = 200


def channel_members(client: redis.Redis, slack, channel: str) -> set[str]:
    """A channel's members (conversations.members, every page), cached for ten minutes. A channel Slack will not
    list (relmon not in it, a missing scope) has no members: nobody is staff by it."""
    key = f"{PREFIX}:members:{channel}"
    cached = client.get(key)
    if cached is not None:
        return set(json.loads(cached))
    members: list[str] = []
    cursor = None
    try:
        while True:
            page = slack.conversations_members(
                channel=channel, limit=MEMBERS_PAGE, **({"cursor": cursor} if cursor else {})
            )
            members.extend(page.get("members") or [])
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                break
    except SlackApiError:
        members = []
    client.set(key, json.dumps(members), ex=TEAM_CACHE_SECONDS)
    return set(members)


def _helped_key(channel: str, user: str) -> str:
    return f"{PREFIX}:helped:{channel}:{user}"


def helped_threads(client: redis.Redis, channel: str, users: list[str], now: float, *, besides: str) -> dict[str, int]:
    """How many threads of the channel other than `besides` each person answered in the last HELPED_DAYS."""
    horizon = now - HELPED_DAYS * 86_400
    pipe = client.pipeline(transaction=False)
    for user in users:
        pipe.zrangebyscore(_helped_key(channel, user), horizon, "+inf")
    counts = {}
    for user, threads in zip(users, pipe.execute(), strict=True):
        counts[user] = len({t.decode() if isinstance(t, bytes) else t for t in threads} - {besides})
    return counts


def note_helped(client: redis.Redis, channel: str, user: str, thread_key: str, at: float) -> None:
    """A person answered someone else's thread: evidence for the next time (kept HELPED_DAYS)."""
    key = _helped_key(channel, user)
    pipe = client.pipeline(transaction=True)
    pipe.zadd(key, {thread_key: at})
    pipe.zremrangebyscore(key, "-inf", at - HELPED_DAYS * 86_400)
    pipe.expire(key, HELPED_DAYS * 86_400)
    pipe.execute()


def staff_evidence(
    client: redis.Redis,
    slack,
    *,
    team: list[str],
    alert_channel: str | None,
    channel: str,
    user: str | None,
    thread_key: str,
    now: float,
) -> StaffEvidence:
    """Who is staff for a reply by `user` in `thread_key`: RELMON_SUPPORT_TEAM when set (`team`), else the
    evidence: the alert channel's members and the threads `user` answered lately in the channel."""
    if team:
        return StaffEvidence(team=frozenset(support_team(client, slack, team)))
    members = channel_members(client, slack, alert_channel) if alert_channel else set()
    helped = helped_threads(client, channel, [user], now, besides=thread_key) if user else {}
    return StaffEvidence(alert_members=frozenset(members), helped=helped)
