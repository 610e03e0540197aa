"""Small Slack look-ups cached in Redis: user names (for readable mentions), whether a channel is private,
and relmon's own identity (auth.test). A failed look-up never fails capture: it falls back to the ID."""

from __future__ import annotations

import json
import logging

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from capture.pairing import Identity

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


def channel_is_private(client: redis.Redis, slack: WebClient, channel_id: str, channel_type: str | None) -> bool:
    """From the event's channel_type when it says; else conversations.info, cached."""
    if channel_type in ("group", "mpim", "im"):
        return True
    if channel_type == "channel":
        return False
    key = f"relmon:channel_private:{channel_id}"
    cached = client.get(key)
    if cached is not None:
        return cached == b"1"
    try:
        info = slack.conversations_info(channel=channel_id)["channel"]
        private = bool(info.get("is_private") or info.get("is_group") or info.get("is_im"))
    except SlackApiError:
        # Unknown: treat as private, the safe side (its text is then never quoted elsewhere).
        return True
    client.set(key, "1" if private else "0", ex=CHANNEL_TTL_SECONDS)
    return private


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
