"""Who may read an ingested dm or private exchange's words from its alert ("Show the exchange"): the people its
bot's rule names (`viewers:` in the rules file's `bots:` section, store.rules.BotRule), each a Slack user (U…, W…)
or a user group (S…) whose members Slack's usergroups.users.list gives. Nobody else, and nobody at all when the
rule names no one (the default). Asked where the text is read (the listener, just before it reads the pair), so a
rule changed since the alert was posted decides. A group Slack cannot list counts as holding nobody (the safe
side)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

log = logging.getLogger("relmon.exchange_access")


def is_group(viewer: str) -> bool:
    return viewer.startswith("S")


def may_view(user_id: str | None, viewers: Iterable[str], group_members: Callable[[str], set[str]]) -> bool:
    """Whether `user_id` is one of `viewers`, directly or as a member of a group among them."""
    if not user_id:
        return False
    named = list(viewers)
    if user_id in named:
        return True
    return any(is_group(viewer) and user_id in group_members(viewer) for viewer in named)


def slack_group_members(client: WebClient) -> Callable[[str], set[str]]:
    """A user group's members as Slack lists them (empty when Slack refuses or cannot be reached)."""

    def members(group: str) -> set[str]:
        try:
            users = client.usergroups_users_list(usergroup=group).get("users") or []
        except (SlackApiError, OSError) as error:
            log.warning("usergroups.users.list failed", extra={"group": group, "error": str(error)})
            return set()
        return {user for user in users if isinstance(user, str)}

    return members
