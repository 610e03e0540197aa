"""The bots that posted lately in the watched channels (the way to fill in RELMON_MONITORED_BOTS), read within
bounds: some apps get one conversations.history call a minute, and doctor must answer, not hang or hammer Slack."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field

from relmon.doctor.channels import unwatched_channel_ids
from relmon.doctor.checks import Check, fail, ok, skip, warn
from store.settings import Settings

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


def header_value(headers: dict, name: str) -> str | None:
    """The value of an HTTP header, its name in any case; None when absent."""
    for key, value in (headers or {}).items():
        if key.lower() == name:
            return value if isinstance(value, str) else ",".join(value)
    return None


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
                header = header_value(error.response.headers, "retry-after")
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


def channels_to_read(
    reader: SlackReader, settings: Settings, readable: list[tuple[str, str]], user_id: str | None
) -> Generator[Check, None, list[tuple[str, str]]]:
    """The channels whose bots are listed: the watched ones relmon can read (`readable`), or with
    RELMON_WATCHED_CHANNELS empty every channel relmon is in; at most CHANNELS_READ of them."""
    if not settings.watched_channels:  # every channel relmon is in is watched: read those
        return (yield from check_member_channels(reader, settings, readable, user_id))
    if len(readable) > CHANNELS_READ:
        yield ok(
            "slack channels read", f"{len(readable)} watched channels: bots looked for in the first {CHANNELS_READ}"
        )
    return readable[:CHANNELS_READ]


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
