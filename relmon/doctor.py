"""`relmon doctor`: check every outside dependency and say, for each, what is wrong and how to fix it.

One line per check (`ok`, `warn`, `FAIL` or `skip`), secrets masked; exit code 1 when any check fails (a `warn`
is worth a look but not a broken deployment: a quiet support bot, a rate-limited history read). The checks are
plain functions returning `Check` values, so each can be tested against the fakes on its own.

Besides settings, Slack (token, scopes, SLACK_APP_TOKEN, each channel), Redis, the database and the LLM, it lists
the bots that posted lately in the watched channels (every channel relmon is in when RELMON_WATCHED_CHANNELS is
empty), with their bot, app and user IDs, marking those in RELMON_MONITORED_BOTS: the way to find what to put in
that setting.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TextIO

from common.telemetry.scrub import SecretMasker, mask_url, problem_text
from store.settings import WHERE_TO_GET, Settings, mask

LLM_TIMEOUT_SECONDS = 20.0


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "FAIL" | "skip"
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status == "FAIL"

    @property
    def warned(self) -> bool:
        return self.status == "warn"

    def line(self) -> str:
        text = f"{self.status:<4}  {self.name}: {self.detail}"
        return f"{text}\n        fix: {self.fix}" if self.fix else text


def ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def fail(name: str, detail: str, fix: str) -> Check:
    return Check(name, "FAIL", detail, fix)


def warn(name: str, detail: str, fix: str = "") -> Check:
    return Check(name, "warn", detail, fix)


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
                "fix the file (format: see docs/configuration.md, Per-channel rules)",
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


def _rules(settings: Settings):
    """The channel rules, or None (no file, or a bad one: check_settings reports it)."""
    if not settings.channel_rules_file:
        return None
    from store.rules import ChannelRules

    try:
        return ChannelRules.load(settings.channel_rules_file)
    except Exception:  # reported by check_settings
        return None


def channels_to_check(settings: Settings) -> list[tuple[str, str]]:
    """(channel ID, why relmon must be in it): the alert and digest channels, rule alert channels, watched ones."""
    wanted: dict[str, str] = {}
    if settings.alert_channel:
        wanted[settings.alert_channel] = "alert channel (RELMON_ALERT_CHANNEL)"
    if settings.digest_channel and settings.digest_channel not in wanted:
        wanted[settings.digest_channel] = "digest channel (RELMON_DIGEST_CHANNEL)"
    rules = _rules(settings)
    if rules is not None:
        for channel_id, rule in rules.channels.items():
            if rule.alert_channel:
                wanted.setdefault(rule.alert_channel, f"alert channel for {channel_id} (channel rules)")
    for channel_id in watched_channel_ids(settings):
        wanted.setdefault(channel_id, f"watched channel ({_why_watched(settings, channel_id)})")
    return list(wanted.items())


def _why_watched(settings: Settings, channel_id: str) -> str:
    return "RELMON_WATCHED_CHANNELS" if channel_id in settings.watched_channels else "channel rules"


def watched_channel_ids(settings: Settings) -> list[str]:
    """The channels the settings name as watched: the rules' (unless `watch: false`) and RELMON_WATCHED_CHANNELS.
    A channel may also be the alert or digest channel: it is watched all the same (and read for bots)."""
    rules = _rules(settings)
    named = [c for c, rule in rules.channels.items() if rule.watch is not False] if rules is not None else []
    return list(dict.fromkeys([*named, *settings.watched_channels]))


def unwatched_channel_ids(settings: Settings) -> set[str]:
    """Channels whose rule says `watch: false`."""
    rules = _rules(settings)
    return {c for c, rule in rules.channels.items() if rule.watch is False} if rules is not None else set()


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
    if not settings.watched_channels:  # every channel relmon is in is watched: read those
        readable = yield from check_member_channels(reader, settings, readable, user_id)
    elif len(readable) > CHANNELS_READ:
        yield ok(
            "slack channels read", f"{len(readable)} watched channels: bots looked for in the first {CHANNELS_READ}"
        )
        readable = readable[:CHANNELS_READ]
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


def check_member_channels(
    reader: SlackReader, settings: Settings, configured: list[tuple[str, str]], user_id: str | None
) -> Generator[Check, None, list[tuple[str, str]]]:
    """With RELMON_WATCHED_CHANNELS empty relmon watches every channel it is in: list them (users.conversations,
    public and private, paged) up to CHANNELS_READ, and return them after the configured ones, each once."""
    from slack_sdk.errors import SlackApiError

    name = "slack channels read"
    found: dict[str, str] = dict(configured)
    unwatched = unwatched_channel_ids(settings)
    cursor, more = None, False
    try:
        for _ in range(MEMBER_PAGES):
            page = reader.call(
                "users_conversations",
                user=user_id,
                types="public_channel,private_channel",
                exclude_archived=True,
                limit=MEMBER_PAGE,
                cursor=cursor,
            )
            for channel in page.get("channels") or []:
                if channel["id"] not in unwatched and channel["id"] not in found:
                    found[channel["id"]] = f"#{channel['name']}" if channel.get("name") else channel["id"]
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            more = bool(cursor) or len(found) > CHANNELS_READ
            if not cursor or len(found) >= CHANNELS_READ:
                break
    except RateLimited as limit:
        yield warn(name, f"Slack rate-limited the channel list ({limit}); run doctor again in a minute")
        return list(configured)
    except SlackApiError as error:
        code = error.response.get("error", "unknown")
        fix = (
            "grant channels:read and groups:read, then reinstall the app"
            if code in SCOPE_ERRORS
            else "run doctor again; set RELMON_WATCHED_CHANNELS to name the channels to read"
        )
        yield fail(name, f"cannot list the channels relmon is in ({_code(error)})", fix)
        return list(configured)
    except OSError as error:  # network (urllib's errors are OSErrors)
        yield fail(name, f"cannot reach the Slack API to list channels ({type(error).__name__})", "check the network")
        return list(configured)
    channels = list(found.items())
    if not channels:
        yield warn(
            name,
            "RELMON_WATCHED_CHANNELS is empty (every channel relmon is in is watched) and relmon is in no channel",
            "in Slack, open the support bot's channels and type `/invite @relmon` in each",
        )
        return []
    shown = ", ".join(label for _, label in channels[:CHANNELS_READ])
    which = f"the first {CHANNELS_READ} of the channels" if more else f"the {len(channels[:CHANNELS_READ])} channel(s)"
    yield ok(
        name,
        f"RELMON_WATCHED_CHANNELS is empty (every channel relmon is in is watched): bots looked for in {which} "
        f"relmon is in: {shown}",
    )
    return channels[:CHANNELS_READ]


# How much doctor reads to find the bots that answer in the watched channels. The calls are bounded: some apps
# get 1 conversations.history / replies call a minute, and doctor must answer, not hang or hammer Slack.
HISTORY_MESSAGES = 200  # one conversations.history page per channel
CHANNELS_READ = 20  # at most this many channels
READ_CALLS = 60  # conversations.history + conversations.replies calls in all (history first, then threads)
MEMBER_PAGE = 200  # users.conversations page size (when RELMON_WATCHED_CHANNELS is empty)
MEMBER_PAGES = 10  # users.conversations pages at most (Slack may answer short pages with a cursor)
RETRY_AFTER_WAIT = 5  # a 429 whose Retry-After is at most this many seconds is waited out ...
RETRY_WAIT_TOTAL = 10  # ... up to this many seconds in all; beyond, doctor stops reading and says so
# Errors for which the fix is a scope (then reinstall); any other error gets other advice.
SCOPE_ERRORS = frozenset({"missing_scope", "not_allowed"})


class RateLimited(Exception):
    """Slack answered 429 with a Retry-After too long to wait out in a diagnosis."""

    def __init__(self, method: str, retry_after: float | None) -> None:
        shown = f", Retry-After {retry_after:g} s" if retry_after is not None else ""
        super().__init__(f"{method}{shown}")
        self.method, self.retry_after = method, retry_after


class SlackReader:
    """Calls Slack for doctor: waits out a short Retry-After (capped, in all), raises RateLimited beyond, and
    counts the history and replies calls against READ_CALLS (slack_sdk's retry handlers are cleared: they would
    wait whatever Slack asks)."""

    def __init__(self, client) -> None:
        self.client = client
        self.read_calls = 0
        self.waited = 0.0

    @property
    def budget_left(self) -> bool:
        return self.read_calls < READ_CALLS

    def call(self, method: str, **params):
        from slack_sdk.errors import SlackApiError

        if method in ("conversations_history", "conversations_replies"):
            self.read_calls += 1
        while True:
            try:
                return getattr(self.client, method)(**params)
            except SlackApiError as error:
                if error.response.status_code != 429 and error.response.get("error") != "ratelimited":
                    raise
                header = _header(error.response.headers, "retry-after")
                try:
                    retry_after = float(header) if header is not None else None
                except ValueError:
                    retry_after = None
                wait = 1.0 if retry_after is None else retry_after
                if wait > RETRY_AFTER_WAIT or self.waited + wait > RETRY_WAIT_TOTAL:
                    raise RateLimited(method.replace("_", "."), retry_after) from error
                self.waited += wait
                time.sleep(wait)


def _code(error) -> str:
    """Slack's error code, with the scope it says it needs (missing_scope: channels:history)."""
    code = error.response.get("error", "unknown")
    needed = error.response.get("needed")
    return f"{code}: {needed}" if code == "missing_scope" and needed else code


@dataclass
class SeenBot:
    bot_id: str
    app_id: str | None = None
    user_id: str | None = None
    name: str | None = None
    messages: int = 0
    channels: list[str] = field(default_factory=list)

    def ids(self) -> set[str]:
        return {value for value in (self.bot_id, self.app_id, self.user_id) if value}


def _threads(history: list[dict]) -> list[str]:
    return [m["ts"] for m in history if m.get("reply_count") or m.get("thread_ts") == m.get("ts")]


def _history_failure(channel_id: str, label: str, error) -> Check:
    code = error.response.get("error", "unknown")
    if code in SCOPE_ERRORS:
        fix = "grant channels:history and groups:history, then reinstall the app"
    elif code in ("not_in_channel", "channel_not_found"):
        fix = f"in Slack, open {label} and type `/invite @relmon` (or check the ID {channel_id})"
    else:
        fix = "run doctor again; if it persists, check SLACK_API_URL and the channel ID"
    return fail(f"slack history {channel_id}", f"cannot read the history of {label} ({_code(error)})", fix)


def check_bots_seen(
    client,
    settings: Settings,
    channels: list[tuple[str, str]],
    own_bot_id: str | None = None,
    reader: SlackReader | None = None,
) -> Iterator[Check]:
    """List the bots that posted in the watched channels lately, so RELMON_MONITORED_BOTS can be filled in.

    Each channel is read once: one conversations.history page each, then the replies of their threads (support
    bots often answer in threads, which conversations.history leaves out), newest first, taking turns between
    channels, within READ_CALLS calls in all."""
    from slack_sdk.errors import SlackApiError

    if not channels:
        yield skip("slack bots seen", "no watched channel to read (RELMON_WATCHED_CHANNELS or channel rules)")
        return
    reader = reader or SlackReader(client)
    seen: dict[str, SeenBot] = {}

    def note(message: dict, label: str) -> None:
        if not message.get("bot_id") or message["bot_id"] == own_bot_id:
            return  # people, and relmon's own alerts
        profile = message.get("bot_profile") or {}
        bot = seen.setdefault(message["bot_id"], SeenBot(message["bot_id"]))
        bot.app_id = bot.app_id or message.get("app_id") or profile.get("app_id")
        bot.user_id = bot.user_id or message.get("user")
        bot.name = bot.name or profile.get("name") or message.get("username")
        bot.messages += 1
        if label not in bot.channels:
            bot.channels.append(label)

    read: list[tuple[str, str, list[str]]] = []  # (channel ID, label, its threads) of the channels read
    limited: RateLimited | None = None
    unreachable = False
    for channel_id, label in channels:
        if not reader.budget_left:
            break
        try:
            history = reader.call("conversations_history", channel=channel_id, limit=HISTORY_MESSAGES)["messages"]
        except RateLimited as error:
            limited = error
            break
        except SlackApiError as error:
            yield _history_failure(channel_id, label, error)
            continue
        except OSError as error:  # network (urllib's errors are OSErrors): the other channels would fail alike
            unreachable = True
            yield fail(
                f"slack history {channel_id}",
                f"cannot reach the Slack API to read {label} ({type(error).__name__})",
                "check the network and SLACK_API_URL",
            )
            break
        for message in history:
            note(message, label)
        read.append((channel_id, label, _threads(history)))
    # Their threads, newest first, taking turns between channels: thread 1 of each, then thread 2, ...
    turns = [
        (channel_id, label, threads[i])
        for i in range(max((len(threads) for _, _, threads in read), default=0))
        for channel_id, label, threads in read
        if i < len(threads)
    ]
    for channel_id, label, ts in turns:
        if limited or unreachable or not reader.budget_left:
            break
        try:
            replies = reader.call("conversations_replies", channel=channel_id, ts=ts, limit=HISTORY_MESSAGES)
        except RateLimited as error:
            limited = error
            break
        except SlackApiError:
            continue  # a thread deleted meanwhile; the channel's history was read, so not a scope problem
        except OSError:
            unreachable = True
            break
        for reply in replies["messages"]:
            if reply.get("ts") != ts:
                note(reply, label)

    monitored = set(settings.monitored_bots)
    shown = ", ".join(label for _, label, _ in read)
    for bot in sorted(seen.values(), key=lambda b: -b.messages):
        ids = ", ".join(f"{kind} {value}" for kind, value in (("app", bot.app_id), ("user", bot.user_id)) if value)
        name = f'"{bot.name}" ' if bot.name else ""
        state = "monitored (in RELMON_MONITORED_BOTS)" if bot.ids() & monitored else "not monitored"
        where = ", ".join(bot.channels)
        yield ok(f"slack bot {bot.bot_id}", f"{name}({ids or 'no app'}): {bot.messages} message(s) in {where}; {state}")
    if limited is not None:
        incomplete = "the bots above may not be all: " if seen else ""
        yield warn(
            "slack bots seen",
            f"Slack rate-limited the history read ({limited}); {incomplete}run doctor again in a minute",
        )
    if not read:
        return  # nothing read: the lines above say why
    if not seen and limited is None:
        yield ok("slack bots seen", f"no bot message in the recent history of {shown}")
    if monitored and limited is None and not any(bot.ids() & monitored for bot in seen.values()):
        # Not said when the read was cut short (the bot may be in the threads not read). Only the last messages
        # were read: a support bot nobody asked lately is quiet, not misconfigured.
        yield warn(
            "slack monitored bots",
            f"none of RELMON_MONITORED_BOTS ({', '.join(sorted(monitored))}) posted in the recent history of "
            f"{shown} (the support bot may just have been quiet)",
            "if it did answer there lately, set RELMON_MONITORED_BOTS to the bot ID (B...), app ID (A...) or user "
            "ID (U...) of the support bot among the bots listed above",
        )


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


# Redis and the database ---------------------------------------------------------------------------------


def check_redis(settings: Settings) -> Check:
    from common.celery_app import broker_url_for, embedded_socket_path
    from common.embedded_redis import answering

    if not settings.redis_url:
        socket_path = embedded_socket_path(settings)
        if answering(socket_path):
            return ok("redis", f"embedded Redis answers on {socket_path}")
        return ok("redis", f"embedded mode: relmon run / relmon worker start Redis on {socket_path}")
    from common.runtime import redis_client_for

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
    database = None
    try:
        database = Database(url, pool_size=1)  # inside: a malformed URL fails here
        pending = pending_migrations(database.engine)
    except Exception as error:
        return fail(
            "database",
            f"cannot connect to {shown}: {problem_text(error)}",
            "start the database or correct DATABASE_URL (postgresql://user:password@host:5432/relmon)",
        )
    finally:
        if database is not None:
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
    key_value = settings.secret("openai_api_key")
    if not key_value and not settings.openai_base_url:
        return skip("llm", "no OPENAI_API_KEY")
    import openai

    endpoint = settings.openai_base_url or "OpenAI (https://api.openai.com/v1)"
    key = mask(key_value) if key_value else "none (a keyless endpoint)"
    client = openai.OpenAI(
        api_key=key_value or "not-needed",  # a local endpoint (Ollama, vLLM) needs none; the SDK wants a string
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
    failures = warnings = 0
    for check in checks:
        failures += check.failed
        warnings += check.warned
        print(masker(check.line()), file=out, flush=True)
    summary = f"{failures} problem(s) found" if failures else "all checks passed"
    if warnings:
        summary += f", {warnings} warning{'s' if warnings > 1 else ''}"
    print(masker(f"\n{summary}"), file=out)
    return 1 if failures else 0


def run_doctor(settings: Settings, out: TextIO | None = None) -> int:
    return report(all_checks(settings), settings, out or sys.stdout)
