"""Who may see a channel's answers and figures: its members, as conversations.members says (cached for a minute,
so joins and leaves show within a minute). One cache per Slack app (`bot.app.register_listeners` builds it)."""

from __future__ import annotations

import threading
import time

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

MEMBERS_TTL_SECONDS = 60.0
# Slack errors meaning relmon cannot see the channel at all.
UNSEEN_CHANNEL_ERRORS = frozenset(
    {"channel_not_found", "not_in_channel", "missing_scope", "method_not_supported_for_channel_type"}
)


class Refusal(Exception):
    """Stop and tell the person one sentence (an ERRORS code)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class MembershipCache:
    """Channel members from conversations.members, kept briefly."""

    def __init__(self, ttl_seconds: float = MEMBERS_TTL_SECONDS) -> None:
        self.ttl = ttl_seconds
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def is_member(self, client: WebClient, channel_id: str, user_id: str) -> bool | None:
        """True or False; None when relmon cannot see the channel (so cannot vouch for anyone)."""
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(channel_id)
        if cached is None or now - cached[0] > self.ttl:
            try:
                members = self._fetch(client, channel_id)
            except SlackApiError as error:
                if error.response.get("error") in UNSEEN_CHANNEL_ERRORS:
                    return None
                raise
            cached = (now, members)
            with self._lock:
                self._members[channel_id] = cached
        return user_id in cached[1]

    def require_member(self, client: WebClient, channel_id: str, user_id: str) -> None:
        """The link and the shortcut: relmon must see the channel, and the person be a member of it."""
        member = self.is_member(client, channel_id, user_id)
        if member is None:
            raise Refusal("not_found")
        if not member:
            raise Refusal("not_member")

    @staticmethod
    def _fetch(client: WebClient, channel_id: str) -> frozenset[str]:
        members: set[str] = set()
        for page in client.conversations_members(channel=channel_id, limit=1000):
            members.update(page.get("members", []))
        return frozenset(members)
