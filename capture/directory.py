"""Small Slack look-ups cached in Redis: user names (for readable mentions), whether a channel is private or
shared with another organisation, the monitored bots' user IDs, and relmon's own identity (auth.test). A
failed look-up never fails capture: it falls back to the ID, or to the safe side."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from capture.pairing import Identity, bot_ids_of, bot_user_of

log = logging.getLogger("relmon.capture")

USER_NAME_TTL_SECONDS = 24 * 3600
CHANNEL_TTL_SECONDS = 3600
IDENTITY_TTL_SECONDS = 3600


class UserNames:
    """user ID → display name via users.info, cached in Redis."""

    def __init__(self, client: redis.Redis, slack: WebClient, ttl_seconds: int = USER_NAME_TTL_SECONDS) -> None:
        self.redis = client
        self.slack = slack
        self.ttl = ttl_seconds
        self._local: dict[str, str | None] = {}  # per instance: one settle resolves each user once

    def __call__(self, user_id: str) -> str | None:
        return self.name(user_id)

    def name(self, user_id: str) -> str | None:
        if not user_id:
            return None
        if user_id in self._local:
            return self._local[user_id]
        key = f"relmon:user:{user_id}"
        cached = self.redis.get(key)
        if cached is not None:
            name = cached.decode() or None
        else:
            name = self._fetch(user_id)
            self.redis.set(key, name or "", ex=self.ttl if name else 300)  # retry unknowns sooner
        self._local[user_id] = name
        return name

    def _fetch(self, user_id: str) -> str | None:
        try:
            user = self.slack.users_info(user=user_id)["user"]
        except SlackApiError as error:
            log.info("users.info failed", extra={"user": user_id, "error": error.response.get("error")})
            return None
        profile = user.get("profile") or {}
        return profile.get("display_name") or profile.get("real_name") or user.get("real_name") or user.get("name")


@dataclass(frozen=True)
class ChannelFlags:
    """Whose eyes a channel's text is for: private, and shared with another organisation (Slack Connect)."""

    private: bool
    ext_shared: bool

    @property
    def restricted(self) -> bool:
        """Its text stays in the channel as a private channel's does (common.privacy quotes it only where a
        rule allows): private, or shared with another organisation."""
        return self.private or self.ext_shared


# Slack's flags that put a channel's text before people of another workspace or organisation: Slack Connect
# (is_ext_shared, and one not yet accepted), a channel shared between workspaces (is_shared), or across an
# Enterprise Grid organisation (is_org_shared).
SHARING_FLAGS = ("is_ext_shared", "is_pending_ext_shared", "is_shared", "is_org_shared")
# What a look-up can fail with: Slack's refusals (an error, a missing scope, a rate limit past the client's
# retries) and the network's.
LOOKUP_ERRORS = (SlackApiError, OSError, ValueError)


def flags_from_info(info: dict[str, Any] | None) -> ChannelFlags:
    """A channel's flags from its conversations.info (or an export's entry). Unknown is private: no answer, or an
    answer that does not say whether the channel is private, is a private channel."""
    if not isinstance(info, dict):
        return ChannelFlags(private=True, ext_shared=False)
    says_private = any(isinstance(info.get(key), bool) for key in ("is_private", "is_group", "is_im", "is_mpim"))
    private = not says_private or any(info.get(key) is True for key in ("is_private", "is_group", "is_im", "is_mpim"))
    return ChannelFlags(private=private, ext_shared=any(info.get(key) is True for key in SHARING_FLAGS))


def channel_flags(
    client: redis.Redis, slack: WebClient, channel_id: str, channel_type: str | None, ext_shared: bool | None = None
) -> ChannelFlags:
    """From the event when it says the channel's text is restricted (a private channel_type, the envelope's
    is_ext_shared_channel: Slack Connect); else from conversations.info, cached CHANNEL_TTL_SECONDS per channel,
    which also says whether a channel is shared between workspaces or across an Enterprise Grid organisation (an
    event calls such a channel public and not Slack Connect). So the hot path asks once per channel an hour.
    Unknown is the safe side: a channel Slack cannot describe (an error, a rate limit, a missing scope, no answer)
    is private, and is asked about again next time."""
    told = told_by_event(channel_type, ext_shared)
    return told if told is not None else stored_flags(client, slack, channel_id)[0]


def told_by_event(channel_type: str | None, ext_shared: bool | None) -> ChannelFlags | None:
    """The flags when the event itself says the channel's text is restricted (no look-up needed), else None."""
    private = {"group": True, "mpim": True, "im": True, "channel": False}.get(channel_type or "")
    if private is True or ext_shared is True:
        return ChannelFlags(bool(private), bool(ext_shared))
    return None


def stored_flags(client: redis.Redis, slack: WebClient, channel_id: str) -> tuple[ChannelFlags, bool]:
    """A channel's flags from the cache in Redis, else from conversations.info (then cached); and whether they
    are known (a look-up Slack did not answer is private, and not cached)."""
    key = _flags_key(channel_id)
    cached = client.get(key)
    if cached is None:
        looked_up, known = look_up_flags(slack, channel_id)
        if not known:
            return looked_up, False
        cached = json.dumps((looked_up.private, looked_up.ext_shared)).encode()
        client.set(key, cached, ex=CHANNEL_TTL_SECONDS)
    looked_private, looked_shared = json.loads(cached)
    return ChannelFlags(looked_private, looked_shared), True


class KnownChannels:
    """A worker's memory of channels' flags (`channel_flags`), kept for a few minutes in the process: the capture of
    each answer then costs no Redis round trip for them (the hour's cache in Redis serves the other processes and
    the first answer after a restart). What Slack could not describe is not kept: it is asked about again."""

    def __init__(self, client: redis.Redis, slack: WebClient, ttl_seconds: float = 300.0) -> None:
        self.client, self.slack, self.ttl_seconds = client, slack, ttl_seconds
        self._seen: dict[str, tuple[float, ChannelFlags]] = {}

    def flags(self, channel_id: str, channel_type: str | None, ext_shared: bool | None = None) -> ChannelFlags:
        told = told_by_event(channel_type, ext_shared)
        if told is not None:
            return told
        now = time.monotonic()
        seen = self._seen.get(channel_id)
        if seen is not None and seen[0] > now:
            return seen[1]
        flags, known = stored_flags(self.client, self.slack, channel_id)
        if known:
            self._seen[channel_id] = (now + self.ttl_seconds, flags)
        return flags


def look_up_flags(slack: WebClient, channel_id: str) -> tuple[ChannelFlags, bool]:
    """A channel's flags from conversations.info, and whether Slack answered (a failure is private, unknown)."""
    try:
        info = slack.conversations_info(channel=channel_id).get("channel")
    except LOOKUP_ERRORS as error:
        info = None
        log.warning("channel %s: conversations.info failed (%s): taken as private", channel_id, error)
    return flags_from_info(info), isinstance(info, dict)


def _flags_key(channel_id: str) -> str:
    return f"relmon:channel_flags:{channel_id}"


def channel_is_private(client: redis.Redis, slack: WebClient, channel_id: str, channel_type: str | None) -> bool:
    """Whether a channel's text stays in it as a private channel's does (Slack Connect channels included)."""
    return channel_flags(client, slack, channel_id, channel_type).restricted


class BotUsers:
    """The monitored bots' IDs with the bot user IDs learnt for them, so that a bot's file upload (its `user`,
    no `bot_id`) counts as its own even when RELMON_MONITORED_BOTS names only a B… or A… ID. Learnt from
    bots.info for each configured B… ID and from the first message carrying bot_id and user; remembered in
    Redis (bot or app ID → user ID) and read again at most every `refresh_seconds`."""

    KEY = "relmon:bot_users"
    ASKED_TTL_SECONDS = 600  # bots.info is asked again after a failure at most this often

    def __init__(
        self, client: redis.Redis, slack: WebClient, configured: Collection[str], refresh_seconds: float = 60
    ) -> None:
        self.redis, self.slack = client, slack
        self.configured = frozenset(configured)
        self.refresh_seconds = refresh_seconds
        self._ids: frozenset[str] = self.configured
        self._read_at: float | None = None

    def ids(self, *, fresh: bool = False) -> frozenset[str]:
        """The configured IDs and the learnt user IDs."""
        if fresh or self._read_at is None or time.monotonic() - self._read_at > self.refresh_seconds:
            self._read()
        return self._ids

    def knows(self, message: dict[str, Any]) -> frozenset[str]:
        """`ids()`, read again from Redis when a message could be a bot's upload from a user not yet known here
        (another process may have learnt it)."""
        ids = self.ids()
        if message.get("user") and not message.get("bot_id") and message["user"] not in ids and message.get("files"):
            ids = self.ids(fresh=True)
        return ids

    def learn(self, message: dict[str, Any]) -> None:
        user = bot_user_of(message, self.configured)
        if user and user not in self._ids:
            owner = min((bot_ids_of(message) - {user}) & self.configured)
            self.redis.hset(self.KEY, owner, user)
            self._ids = self._ids | {user}

    def _read(self) -> None:
        learnt = {k.decode(): v.decode() for k, v in self.redis.hgetall(self.KEY).items()}
        for bot_id in self.configured - learnt.keys():
            asked_key = f"{self.KEY}:asked:{bot_id}"
            if bot_id.startswith("B") and self.redis.set(asked_key, "1", nx=True, ex=self.ASKED_TTL_SECONDS):
                user = self._ask(bot_id)
                if user:
                    self.redis.hset(self.KEY, bot_id, user)
                    learnt[bot_id] = user
        self._ids = self.configured | {u for u in learnt.values() if u}
        self._read_at = time.monotonic()

    def _ask(self, bot_id: str) -> str | None:
        try:
            return self.slack.bots_info(bot=bot_id)["bot"].get("user_id")
        except SlackApiError as error:
            log.info("bots.info failed", extra={"bot": bot_id, "error": error.response.get("error")})
            return None


def own_identity(client: redis.Redis, slack: WebClient) -> Identity:
    """relmon's user, bot and app IDs (auth.test, then bots.info for the app ID), cached in Redis."""
    key = "relmon:identity"
    cached = client.get(key)
    if cached:
        return Identity(**json.loads(cached))
    auth = slack.auth_test()
    bot_id = auth.get("bot_id")
    app_id = None
    if bot_id:
        try:
            app_id = slack.bots_info(bot=bot_id)["bot"].get("app_id")
        except SlackApiError:
            app_id = None
    identity = Identity(user_id=auth.get("user_id"), bot_id=bot_id, app_id=app_id)
    client.set(key, json.dumps(identity.__dict__), ex=IDENTITY_TTL_SECONDS)
    return identity
