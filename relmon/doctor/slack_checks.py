"""The doctor's Slack checks: the bot token and its scopes, SLACK_APP_TOKEN, relmon's membership of each channel
it must be in, then the bots seen in the watched channels (`slack_bots`)."""

from __future__ import annotations

from collections.abc import Iterator

from relmon.doctor.channels import channels_to_check, watched_channel_ids
from relmon.doctor.checks import Check, fail, ok, skip
from relmon.doctor.slack_bots import SlackReader, channels_to_read, check_bots_seen, header_value
from store.settings import Settings, mask


def required_scopes() -> list[str]:
    from bot.manifest import manifest

    return list(manifest()["oauth_config"]["scopes"]["bot"])


def check_slack(settings: Settings) -> Iterator[Check]:
    if not settings.slack_bot_token:
        yield skip("slack", "no SLACK_BOT_TOKEN")
        return
    from slack_sdk.errors import SlackApiError

    from common.runtime import slack_client_for

    client = slack_client_for(settings)
    client.retry_handlers.clear()  # a diagnosis, not a delivery: answer fast
    token = mask(settings.secret("slack_bot_token"))
    try:
        auth = client.auth_test()
    except SlackApiError as error:
        code = error.response.get("error", "unknown")
        yield fail(
            "slack auth",
            f"Slack refused the token {token} ({code})",
            "copy the Bot User OAuth Token (xoxb-...) again from the Slack app page > OAuth & Permissions; "
            "reinstall the app to the workspace if it was revoked",
        )
        return
    except Exception as error:  # network: DNS, refused, TLS
        yield fail(
            "slack auth",
            f"cannot reach the Slack API at {settings.slack_api_url} ({type(error).__name__}: {error})",
            "check the network and SLACK_API_URL (leave it unset for Slack itself)",
        )
        return
    user_id = auth.get("user_id")
    yield ok("slack auth", f"token {token} is relmon's bot user {user_id} in team {auth.get('team')}")

    granted_header = header_value(auth.headers, "x-oauth-scopes")
    needed = required_scopes()
    if granted_header is None:
        yield fail(
            "slack scopes",
            "Slack did not say which scopes the token has (no x-oauth-scopes header)",
            "check SLACK_API_URL points at the Slack Web API",
        )
    else:
        granted = {scope.strip() for scope in granted_header.split(",") if scope.strip()}
        lacking = [scope for scope in needed if scope not in granted]
        if lacking:
            yield fail(
                "slack scopes",
                f"the token lacks {', '.join(lacking)}",
                "add them under OAuth & Permissions > Bot Token Scopes (or re-create the app from "
                "`relmon manifest`), then reinstall the app to the workspace",
            )
        else:
            yield ok("slack scopes", f"all {len(needed)} scopes of the manifest granted")

    if settings.slack_app_token:
        yield check_app_token(settings)
    watched = set(watched_channel_ids(settings))
    readable: list[tuple[str, str]] = []  # (channel ID, label) of the watched channels relmon can read
    for channel_id, why in channels_to_check(settings):
        check = _check_channel(client, channel_id, why, user_id, SlackApiError)
        yield check
        if check.status == "ok" and channel_id in watched:  # whatever its label (it may be the alert channel too)
            readable.append((channel_id, check.detail.rsplit("member of ", 1)[-1]))
    reader = SlackReader(client)
    readable = yield from channels_to_read(reader, settings, readable, user_id)
    yield from check_bots_seen(client, settings, readable, own_bot_id=auth.get("bot_id"), reader=reader)


def check_app_token(settings: Settings) -> Check:
    """SLACK_APP_TOKEN (Socket Mode): apps.connections.open answers with a WebSocket URL (not opened here)."""
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    token = mask(settings.secret("slack_app_token"))
    base_url = settings.slack_api_url if settings.slack_api_url.endswith("/") else settings.slack_api_url + "/"
    client = WebClient(base_url=base_url, timeout=15)
    fix = (
        "create an App-Level Token with the connections:write scope (Slack app page > Basic Information > "
        "App-Level Tokens, xapp-...), turn on Socket Mode, and set SLACK_APP_TOKEN to it; unset it to use HTTP"
    )
    try:
        client.apps_connections_open(app_token=settings.secret("slack_app_token"))
    except SlackApiError as error:
        code = error.response.get("error", "unknown")
        return fail("slack app token", f"Slack refused SLACK_APP_TOKEN {token} for Socket Mode ({code})", fix)
    except OSError as error:  # network: DNS, refused, TLS, timeout (urllib's errors are OSErrors)
        return fail(
            "slack app token",
            f"cannot reach the Slack API at {settings.slack_api_url} ({type(error).__name__})",
            "check the network and SLACK_API_URL",
        )
    return ok("slack app token", f"SLACK_APP_TOKEN {token} opens Socket Mode connections")


def _check_channel(client, channel_id: str, why: str, user_id: str | None, api_error: type) -> Check:
    name = f"slack channel {channel_id}"
    invite = f"in Slack, open the channel and type `/invite @relmon` (or check the ID {channel_id})"
    try:
        return _check_channel_membership(client, channel_id, why, user_id, api_error, name, invite)
    except api_error as error:  # a call _check_channel_membership does not expect to fail
        return fail(name, f"{why}: Slack answered {error.response.get('error', 'unknown')}", invite)
    except OSError as error:  # network: report it as this channel's problem, and go on with the others
        return fail(
            name,
            f"{why}: cannot reach the Slack API ({type(error).__name__})",
            "check the network and SLACK_API_URL (leave it unset for Slack itself)",
        )


def _check_channel_membership(
    client, channel_id: str, why: str, user_id: str | None, api_error: type, name: str, invite: str
) -> Check:
    try:
        info = client.conversations_info(channel=channel_id)["channel"]
    except api_error as error:
        code = error.response.get("error", "unknown")
        if code == "channel_not_found":
            return fail(name, f"{why}: relmon cannot see it (channel_not_found: wrong ID, or private)", invite)
        if code == "missing_scope":
            return fail(name, f"{why}: missing scope to read it", "grant channels:read and groups:read, reinstall")
        return fail(name, f"{why}: conversations.info failed ({code})", invite)
    member = info.get("is_member")
    if member is None and user_id:  # some answers omit is_member: ask for the member list
        try:
            member = user_id in client.conversations_members(channel=channel_id, limit=1000)["members"]
        except api_error as error:
            return fail(name, f"{why}: conversations.members failed ({error.response.get('error')})", invite)
    label = f"#{info.get('name')}" if info.get("name") else channel_id
    if not member:
        return fail(name, f"{why}: relmon is not a member of {label}", invite.replace("the channel", label))
    return ok(name, f"{why}: member of {label}")
