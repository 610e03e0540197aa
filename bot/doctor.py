"""`relmon doctor`: check every outside dependency and say, for each, what is wrong and how to fix it.

One line per check (`ok`, `FAIL` or `skip`), secrets masked; exit code 1 when any check fails. The checks are
plain functions returning `Check` values, so each can be tested against the fakes on its own.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TextIO

from store.settings import WHERE_TO_GET, Settings, mask
from workers.telemetry import SecretMasker, mask_url

LLM_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "FAIL" | "skip"
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text}\n        fix: {self.fix}" if self.fix else text


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "FAIL", detail, fix)


def skip(name: str, detail: str) -> Check:
    return Check(name, "skip", detail)


# Settings -----------------------------------------------------------------------------------------------


def check_settings(settings: Settings) -> Iterator[Check]:
    absent = settings.missing()
    if absent:
        for name in absent:
            yield fail("settings", f"{name} is not set", f"set {name} in the environment or .env: {WHERE_TO_GET[name]}")
    else:
        shown = ", ".join(
            f"{env}={mask(settings.secret(attr))}"
            for env, attr in (("SLACK_BOT_TOKEN", "slack_bot_token"), ("OPENAI_API_KEY", "openai_api_key"))
        )
        mode = "Socket Mode" if settings.slack_app_token else "HTTP"
        yield ok("settings", f"required settings present ({shown}; {mode})")
    if settings.channel_rules_file:
        from store.rules import ChannelRules

        try:
            ChannelRules.load(settings.channel_rules_file)
        except Exception as error:  # a YAML or validation error: show it, it names the bad key
            first = str(error).splitlines()[0] if str(error) else type(error).__name__
            yield fail(
                "channel rules",
                f"{settings.channel_rules_file} cannot be used: {first}",
                "fix the file (format: see `store/rules.py` or the README (Configuration))",
            )
        else:
            yield ok("channel rules", f"{settings.channel_rules_file} is valid")


# Slack --------------------------------------------------------------------------------------------------


def required_scopes() -> list[str]:
    from bot.manifest import manifest

    return list(manifest()["oauth_config"]["scopes"]["bot"])


def _header(headers: dict, name: str) -> str | None:
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value if isinstance(value, str) else ",".join(value)
    return None


def channels_to_check(settings: Settings) -> list[tuple[str, str]]:
    """(channel ID, why relmon must be in it): the alert and digest channels, rule alert channels, watched ones."""
    wanted: dict[str, str] = {}
    if settings.alert_channel:
        wanted[settings.alert_channel] = "alert channel (RELMON_ALERT_CHANNEL)"
    if settings.digest_channel and settings.digest_channel not in wanted:
        wanted[settings.digest_channel] = "digest channel (RELMON_DIGEST_CHANNEL)"
    if settings.channel_rules_file:
        from store.rules import ChannelRules

        try:
            rules = ChannelRules.load(settings.channel_rules_file)
        except Exception:  # reported by check_settings
            rules = None
        if rules is not None:
            for channel_id, rule in rules.channels.items():
                if rule.alert_channel:
                    wanted.setdefault(rule.alert_channel, f"alert channel for {channel_id} (channel rules)")
                if rule.watch is not False:
                    wanted.setdefault(channel_id, "watched channel (channel rules)")
    for channel_id in settings.watched_channels:
        wanted.setdefault(channel_id, "watched channel (RELMON_WATCHED_CHANNELS)")
    return list(wanted.items())


def check_slack(settings: Settings) -> Iterator[Check]:
    if not settings.slack_bot_token:
        yield skip("slack", "no SLACK_BOT_TOKEN")
        return
    from slack_sdk.errors import SlackApiError

    from workers.runtime import slack_client_for

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

    granted_header = _header(auth.headers, "x-oauth-scopes")
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

    for channel_id, why in channels_to_check(settings):
        yield _check_channel(client, channel_id, why, user_id, SlackApiError)


def _check_channel(client, channel_id: str, why: str, user_id: str | None, api_error: type) -> Check:
    name = f"slack channel {channel_id}"
    invite = f"in Slack, open the channel and type `/invite @relmon` (or check the ID {channel_id})"
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


# Redis and the database ---------------------------------------------------------------------------------


def check_redis(settings: Settings) -> Check:
    from workers.celery_app import broker_url_for, embedded_socket_path
    from workers.embedded_redis import answering

    if not settings.redis_url:
        socket_path = embedded_socket_path(settings)
        if answering(socket_path):
            return ok("redis", f"embedded Redis answers on {socket_path}")
        return ok("redis", f"embedded mode: relmon run / relmon worker start Redis on {socket_path}")
    from workers.runtime import redis_client_for

    shown = mask_url(broker_url_for(settings))
    try:
        redis_client_for(settings).ping()
    except Exception as error:
        return fail(
            "redis",
            f"no answer from {shown} ({type(error).__name__})",
            "start Redis or correct REDIS_URL (redis://host:6379/0); unset it to use the embedded Redis",
        )
    return ok("redis", f"PING answered by {shown}")


def check_database(settings: Settings) -> Check:
    from store.db import Database, pending_migrations

    url = settings.resolved_database_url
    shown = mask_url(url)
    sqlite_file = settings.data_dir / "relmon.sqlite3"
    if not settings.database_url and not sqlite_file.exists():
        return ok("database", f"SQLite mode: relmon run creates {sqlite_file.resolve()} and its schema")
    database = Database(url, pool_size=1)
    try:
        pending = pending_migrations(database.engine)
    except Exception as error:
        return fail(
            "database",
            f"cannot connect to {shown} ({type(error).__name__})",
            "start the database or correct DATABASE_URL (postgresql://user:password@host:5432/relmon)",
        )
    finally:
        database.dispose()
    if pending:
        return fail(
            "database",
            f"{shown}: {len(pending)} migration(s) not applied ({', '.join(pending)})",
            "run `relmon migrate` (relmon run, bot and worker also migrate when they start)",
        )
    return ok("database", f"{shown}: schema up to date")


# The LLM ------------------------------------------------------------------------------------------------


def check_llm(settings: Settings) -> Check:
    if not settings.openai_api_key:
        return skip("llm", "no OPENAI_API_KEY")
    import openai

    endpoint = settings.openai_base_url or "OpenAI (https://api.openai.com/v1)"
    key = mask(settings.secret("openai_api_key"))
    client = openai.OpenAI(
        api_key=settings.secret("openai_api_key"),
        base_url=settings.openai_base_url,
        max_retries=0,
        timeout=LLM_TIMEOUT_SECONDS,
    )
    model = settings.judge_model
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Reply with the word OK."}])
    except openai.AuthenticationError:
        return fail(
            "llm",
            f"{endpoint} rejected the key {key} (401)",
            "set OPENAI_API_KEY to a valid key for this endpoint (and OPENAI_BASE_URL for non-OpenAI providers)",
        )
    except openai.PermissionDeniedError:
        return fail("llm", f"{endpoint}: key {key} may not use {model} (403)", "grant the key access to the model")
    except openai.NotFoundError:
        return fail(
            "llm",
            f"{endpoint} does not know the model {model} (404)",
            "set RELMON_JUDGE_MODEL to a model this endpoint serves, or check OPENAI_BASE_URL (often ends in /v1)",
        )
    except openai.RateLimitError:
        return fail("llm", f"{endpoint} answered 429 (rate limit or no credit)", "check the account's quota")
    except openai.APIStatusError as error:
        return fail("llm", f"{endpoint} answered {error.status_code}", "check OPENAI_BASE_URL and RELMON_JUDGE_MODEL")
    except (openai.APIConnectionError, openai.APITimeoutError) as error:
        return fail(
            "llm",
            f"cannot reach {endpoint} ({type(error).__name__})",
            "check the network and OPENAI_BASE_URL (e.g. http://localhost:11434/v1 for a local server)",
        )
    return ok("llm", f"{endpoint} answered a chat completion with {model} (key {key})")


# The command --------------------------------------------------------------------------------------------


def all_checks(settings: Settings) -> Iterator[Check]:
    yield from check_settings(settings)
    yield from check_slack(settings)
    yield check_redis(settings)
    yield check_database(settings)
    yield check_llm(settings)


def report(checks: Iterable[Check], settings: Settings, out: TextIO) -> int:
    """Print each check as it completes (secrets masked again, in case an error message echoed one)."""
    masker = SecretMasker.from_settings(settings)
    failures = 0
    for check in checks:
        failures += check.failed
        print(masker(check.line()), file=out, flush=True)
    print(masker(f"\n{failures} problem(s) found" if failures else "\nall checks passed"), file=out)
    return 1 if failures else 0


def run_doctor(settings: Settings, out: TextIO | None = None) -> int:
    return report(all_checks(settings), settings, out or sys.stdout)
