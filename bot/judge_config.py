"""`/judge config`: show a channel's or a bot's rule in force, and let an admin change it from Slack.

The grammar is `bot.config_grammar`; what a change does to the stored values (`changed_values`) and who may make
it (`may_change`) are plain functions; `configure` is the thin adapter the /judge listener calls after its ack.
A change is stored in `store.rule_overrides` and laid over the rules file's entry by the one reader of the rules
(`Runtime.rules`): this process forgets its copy at once, the others read it again within a minute.

Who may change: the workspace's admins and owners (users.info), and the people and user groups RELMON_ADMINS
names. Who may look: a channel's members (and those who may change it); a bot's rule, which names no one's
words, anyone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.config_grammar import ChannelRef, ConfigError, ConfigRequest, is_handle, parse_config
from bot.replies import tell
from bot.stats import channel_named
from common.exchange_access import may_view, slack_group_members
from common.membership import MembershipCache
from common.messages.judge_config import (
    config_error_message,
    not_allowed_message,
    not_here_message,
    rule_message,
)
from common.messages.verdicts import error_message
from common.replies import Asker
from common.runtime import Runtime
from store import bot_groups
from store.rule_overrides import override_of, save_override
from store.rules import BotRule, ChannelRule, value_sources

log = logging.getLogger("relmon.judge_config")

RANGES = {  # how a threshold out of range is explained (store.rules.ChannelRule's bounds)
    "threshold": "relevancy's threshold is 0 to 4",
    "correctness_threshold": "correctness's threshold is 0 to 2",
    "grounded_threshold": "grounded's threshold is 1 to 5",
}


class NotAllowed(Exception):
    """The person may not do this: they are told whom to ask."""


# Pure rules ---------------------------------------------------------------------------------------------


def changed_values(
    current: Mapping[str, Any],
    request: ConfigRequest,
    known_judges: Iterable[str],
    *,
    is_bot: bool,
    team_scales: Mapping[str, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    """The values stored for a scope after `request` (a `set` or `reset`; alert channels already resolved to IDs),
    or ConfigError: an unknown judge is refused with the known ones, a threshold out of its judge's range too
    (`team_scales`: each team judge's lowest and highest score)."""
    if request.action == "reset":
        if not request.reset_fields:
            return {}
        return {k: v for k, v in current.items() if k not in request.reset_fields}
    known = list(known_judges)
    values = {**current, **request.values}
    named = [*request.values.get("judges", []), *request.values.get("thresholds", {})]
    unknown = [name for name in dict.fromkeys(named) if name not in known]
    if unknown:
        raise ConfigError(f"No judge called {', '.join(unknown)[:200]}: the judges are {', '.join(known)}.")
    if "thresholds" in request.values:
        for judge, score in request.values["thresholds"].items():
            low, high = (team_scales or {}).get(judge, (0, 1))
            if not (isinstance(score, int) and low <= score < high):
                raise ConfigError(f"{judge}'s threshold is a whole number from {low} to {high - 1}.")
        values["thresholds"] = {**current.get("thresholds", {}), **request.values["thresholds"]}
    try:
        (BotRule if is_bot else ChannelRule).model_validate(values)
    except ValidationError as error:
        fields = [str(problem["loc"][0]) for problem in error.errors() if problem.get("loc")]
        explained = [RANGES[f] for f in fields if f in RANGES]
        raise ConfigError((explained[0] if explained else "That value isn't allowed") + ".") from None
    return values


def may_change(
    user_id: str, user: Mapping[str, Any] | None, admins: Iterable[str], group_members: Callable[[str], set[str]]
) -> bool:
    """A workspace admin or owner (`user`: users.info's user), or someone RELMON_ADMINS names (directly or in a
    user group it names)."""
    if user and (user.get("is_admin") or user.get("is_owner") or user.get("is_primary_owner")):
        return True
    return may_view(user_id, admins, group_members)


# The adapter ---------------------------------------------------------------------------------------------


def configure(runtime: Runtime, client: WebClient, asker: Asker, membership: MembershipCache, argument: str) -> None:
    """The slow half of `/judge config <argument>`: every reply private, every failure one short sentence."""
    assert asker.user_id is not None
    settings = runtime.settings
    try:
        request = parse_config(argument)
        scope = _scope(runtime, client, request, asker)
        is_bot = bot_groups.bot_of(scope) is not None
        if request.action == "show":
            may_look = is_bot or membership.is_member(client, scope, asker.user_id)
            if not (may_look or _is_admin(client, asker.user_id, settings.admins)):
                raise NotAllowed
        else:
            if not _is_admin(client, asker.user_id, settings.admins):
                raise NotAllowed
            _resolve_alert_channel(runtime, client, request)
            _resolve_viewers(client, request)
            with runtime.db.session() as session:
                current = override_of(session, scope)
                catalog = runtime.judges
                scales = {name: (spec.scale.low, spec.scale.high) for name, spec in catalog.specs.items()}
                values = changed_values(current, request, catalog.names, is_bot=is_bot, team_scales=scales)
                save_override(session, scope, values, asker.user_id)
            runtime.rule_source.forget()
            log.info("rule changed in Slack", extra={"scope": scope, "user": asker.user_id, "fields": sorted(values)})
        tell(client, asker, _shown(runtime, scope, changed=request.action != "show"))
    except ConfigError as error:
        tell(client, asker, config_error_message(str(error)))
    except NotAllowed:
        tell(client, asker, not_allowed_message(settings.admins))
    except _NotHere:
        tell(client, asker, not_here_message())
    except Exception:
        log.exception("/judge config failed")
        tell(client, asker, error_message("unavailable"))


class _NotHere(Exception):
    pass


def _scope(runtime: Runtime, client: WebClient, request: ConfigRequest, asker: Asker) -> str:
    if request.target.bot is not None:
        return bot_groups.key_of(request.target.bot)
    if request.target.channel is None:
        if not asker.channel_id or asker.channel_id[0] not in "CG":
            raise _NotHere  # a DM: no channel to configure
        return asker.channel_id
    channel = _channel_id(runtime, client, request.target.channel)
    if channel is None:
        # Told apart from a channel one may not see only to those who may change rules: nobody else learns
        # whether a private channel of that name exists (as `/judge stats`).
        if not _is_admin(client, asker.user_id or "", runtime.settings.admins):
            raise NotAllowed
        raise ConfigError(f"relmon can't find #{request.target.channel.name}: check the name, or invite relmon there.")
    return channel


def _channel_id(runtime: Runtime, client: WebClient, ref: ChannelRef) -> str | None:
    return ref.channel_id or channel_named(runtime, client, ref.name or "")


def _resolve_alert_channel(runtime: Runtime, client: WebClient, request: ConfigRequest) -> None:
    ref = request.values.get("alert_channel")
    if isinstance(ref, ChannelRef):
        channel = _channel_id(runtime, client, ref)
        if channel is None:
            raise ConfigError(f"relmon can't find #{ref.name}: invite relmon to the alert channel first.")
        if not _relmon_is_in(client, channel):  # its alerts could not be posted there
            raise ConfigError(f"relmon isn't in <#{channel}>: invite it there first (`/invite @relmon`).")
        request.values["alert_channel"] = channel


def _relmon_is_in(client: WebClient, channel: str) -> bool:
    try:
        return bool((client.conversations_info(channel=channel).get("channel") or {}).get("is_member"))
    except SlackApiError:  # channel_not_found: a private channel relmon is not in, or no such channel
        return False


def _resolve_viewers(client: WebClient, request: ConfigRequest) -> None:
    """Plain `@handle`s (a command sent unescaped) as the user group or person Slack knows by that handle, name or
    display name; one it does not know is refused."""
    viewers = request.values.get("viewers") or []
    handles = {v[1:].lower() for v in viewers if is_handle(v)}
    if not handles:
        return
    found = _handles_in_slack(client, handles)
    missing = sorted(f"@{h}" for h in handles if h not in found)
    if missing:
        raise ConfigError(f"relmon can't find {', '.join(missing)[:200]}: pick them from Slack's list, or give IDs.")
    request.values["viewers"] = list(dict.fromkeys(found[v[1:].lower()] if is_handle(v) else v for v in viewers))


def _handles_in_slack(client: WebClient, handles: set[str]) -> dict[str, str]:
    """handle -> ID, user groups first (usergroups.list), then people (users.list, paged)."""
    found: dict[str, str] = {}
    try:
        groups = client.usergroups_list().get("usergroups") or []
    except SlackApiError as error:  # a workspace without user groups (a free plan): people only
        log.warning("usergroups.list failed", extra={"error": error.response.get("error")})
        groups = []
    for group in groups:
        if isinstance(group, dict) and str(group.get("handle", "")).lower() in handles:
            found.setdefault(str(group["handle"]).lower(), group["id"])
    if handles - set(found):
        for page in client.users_list(limit=200):
            for user in page.get("members") or []:
                profile = user.get("profile") or {}
                for name in (user.get("name"), profile.get("display_name")):
                    if isinstance(name, str) and name.lower() in handles and not user.get("deleted"):
                        found.setdefault(name.lower(), user["id"])
            if not handles - set(found):
                break
    return found


def _is_admin(client: WebClient, user_id: str, admins: list[str]) -> bool:
    try:
        user = client.users_info(user=user_id).get("user")
    except SlackApiError as error:
        log.warning("users.info failed", extra={"error": error.response.get("error")})
        user = None
    return may_change(user_id, user if isinstance(user, dict) else None, admins, slack_group_members(client))


def _shown(runtime: Runtime, scope: str, *, changed: bool) -> dict:
    runtime.rule_source.forget()  # what is shown is what is stored now, even if another process just changed it
    rules, settings = runtime.rules, runtime.settings
    with runtime.db.reading() as session:
        overrides = override_of(session, scope)
    bot = bot_groups.bot_of(scope)
    bot_rule = rules.bot(bot) if bot is not None else None
    own = rules.own(scope)
    return rule_message(
        scope,
        rules.for_channel(scope, settings),
        value_sources(runtime.rule_source.file_rules(), scope, overrides),
        own_alert_channel=own.alert_channel if own is not None else None,
        viewers=bot_rule.viewers if bot_rule is not None else None,
        changed=changed,
    )
