"""Pairing rules: which messages relmon cares about, and which question a bot answer answers.

Plain functions over plain data. The decision is a function of the *set* of logged messages, never of
the order in which their events arrived: the bot decides once when an answer arrives, and the worker
decides again at settle time, when late events (an earlier question, an earlier part of the answer)
have had time to land.

Rules (the user-facing list is in docs/capture.md):
- The support bot is recognised by bot_id, bot_profile.id / app_id, or its bot user ID (never by subtype).
- A reply in a thread answers the latest human message before it in that thread (often the root).
- A top-level answer answers the latest human top-level message in the channel within a window.
- A thread_broadcast is a thread reply (its `thread_ts` / `root` name the thread).
- Consecutive monitored-bot messages in one thread (its root included) form one answer, whose
  identity is the first of them (the answer root).
- A message still streaming (`streaming_state: in_progress`) never settles; a completed or errored
  stream settles at once, and a logged completion is never replaced by its (earlier) opener.
- A human message without words or files is never a question; notices (Slackbot, joins, huddles, canvases,
  any subtype not a message's: `is_notice`) are nobody's words, and a root turned into a tombstone counts as
  deleted.
- A root re-sent only because its reply bookkeeping moved is not an edit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from capture.notices import is_notice
from store.rules import ChannelRules
from store.settings import Settings


class Author(StrEnum):
    HUMAN = "human"
    MONITORED_BOT = "monitored_bot"
    OWN = "own"  # relmon itself
    OTHER = "other"  # any other bot or integration


@dataclass(frozen=True)
class Identity:
    """relmon's own identity in the workspace, from auth.test."""

    user_id: str | None = None
    bot_id: str | None = None
    app_id: str | None = None

    def ids(self) -> set[str]:
        return {i for i in (self.user_id, self.bot_id, self.app_id) if i}


@dataclass(frozen=True)
class LoggedMessage:
    """One message as the conversation log keeps it."""

    ts: str
    thread_ts: str | None
    author: Author
    user: str | None = None
    bot_id: str | None = None
    subtype: str | None = None
    deleted: bool = False
    streaming: str | None = None  # streaming_state: in_progress | completed | errored
    wordless: bool = False  # no words and no files: never a question
    external: bool = False  # a person of another organisation (Slack Connect): never staff by default
    content: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def in_thread(self) -> bool:
        """A reply (broadcast or not): its thread is not itself."""
        return bool(self.thread_ts) and self.thread_ts != self.ts

    @property
    def thread_key(self) -> str:
        """The thread this message belongs to: its root's ts (a top-level message is its own root)."""
        return self.thread_ts if self.in_thread else self.ts

    @property
    def seconds(self) -> float:
        return float(self.ts)


def ts_key(message: LoggedMessage) -> tuple[float, str]:
    return (float(message.ts), message.ts)


# Who wrote it ------------------------------------------------------------------------------------


def message_of(event: dict[str, Any]) -> dict[str, Any]:
    """The message an event is about: the new version for message_changed, else the event itself."""
    if event.get("subtype") == "message_changed" and isinstance(event.get("message"), dict):
        return event["message"]
    return event


def bot_ids_of(message: dict[str, Any]) -> set[str]:
    """Every ID that could name a bot author: bot_id, app_id, bot_profile's id and app_id, its user."""
    profile = message.get("bot_profile") or {}
    ids = {message.get("bot_id"), message.get("app_id"), profile.get("id"), profile.get("app_id")}
    if message.get("bot_id") or profile:
        ids.add(message.get("user"))  # a bot message's user is the bot user
    return {i for i in ids if i}


def is_monitored_bot(message: dict[str, Any], monitored: Collection[str]) -> bool:
    """From the support bot? Matches bot_id, app_id or bot_profile ids; the user only as a bot user ID
    configured explicitly (a U... in RELMON_MONITORED_BOTS)."""
    if not monitored:
        return False
    if bot_ids_of(message) & set(monitored):
        return True
    return bool(message.get("user")) and message["user"] in monitored


def is_bot_message(message: dict[str, Any]) -> bool:
    return bool(message.get("bot_id") or message.get("bot_profile") or message.get("subtype") == "bot_message")


def author_of(message: dict[str, Any], monitored: Collection[str], own: Identity) -> Author:
    """Who wrote it. A notice (`is_notice`) is nobody's words: never a person's, whoever it names as its user."""
    ids = bot_ids_of(message) | ({message["user"]} if message.get("user") else set())
    if ids & own.ids():
        return Author.OWN
    if is_notice(message):  # a bot_add names the added bot's bot_id: still nobody's words
        return Author.OTHER
    if is_monitored_bot(message, monitored):
        return Author.MONITORED_BOT
    if is_bot_message(message) or not message.get("user"):
        return Author.OTHER
    return Author.HUMAN


def bot_user_of(message: dict[str, Any], monitored: Collection[str]) -> str | None:
    """The monitored bot's user ID, when this message names it next to the bot's own IDs (to be remembered:
    the bot's file uploads carry only that user)."""
    if message.get("user") and message.get("bot_id") and (bot_ids_of(message) - {message["user"]}) & set(monitored):
        return message["user"]
    return None


def is_external(message: dict[str, Any], workspace: str | None) -> bool:
    """Written by a person of another organisation: Slack Connect messages carry the writer's own team
    (`user_team`, `source_team`); `workspace` is the team the event was delivered to (the envelope's team_id)."""
    theirs = message.get("user_team") or message.get("source_team")
    return bool(workspace and theirs and theirs != workspace)


def logged_message(
    message: dict[str, Any], author: Author, content: dict[str, Any] | None = None, *, workspace: str | None = None
) -> LoggedMessage:
    from capture.text import content_of, message_text

    words = content_of(message)
    state = message.get("streaming_state")
    return LoggedMessage(
        ts=message["ts"],
        thread_ts=message.get("thread_ts"),
        author=author,
        user=message.get("user"),
        bot_id=message.get("bot_id"),
        subtype=message.get("subtype"),
        streaming=state if state in STREAM_STATES else None,
        wordless=not message_text(words).strip(),
        external=author == Author.HUMAN and is_external(message, workspace),
        content=content if content is not None else words,
    )


# Fields Slack moves on a thread's root whenever someone replies: re-sending the root for them is no edit.
BOOKKEEPING_KEYS = frozenset(
    {
        "reply_count",
        "reply_users",
        "reply_users_count",
        "latest_reply",
        "subscribed",
        "last_read",
        "agent_session",
        "replies",
        "is_locked",
        "unread_count",
    }
)


def is_bookkeeping(event: dict[str, Any]) -> bool:
    """A message_changed in which only reply bookkeeping moved (a root gaining `thread_ts == ts` included)."""
    new, old = event.get("message"), event.get("previous_message")
    if event.get("subtype") != "message_changed" or not isinstance(new, dict) or not isinstance(old, dict):
        return False
    moved = {k for k in new.keys() | old.keys() if new.get(k) != old.get(k)}
    if (
        "thread_ts" in moved
        and new.get("thread_ts") in (None, new.get("ts"))
        and old.get("thread_ts")
        in (
            None,
            old.get("ts"),
        )
    ):
        moved.discard("thread_ts")
    return moved <= BOOKKEEPING_KEYS


def is_tombstone(event: dict[str, Any]) -> bool:
    """A thread root deleted while it has replies: Slack turns it into a tombstone through a message_changed."""
    return event.get("subtype") == "message_changed" and message_of(event).get("subtype") == "tombstone"


# Streams ---------------------------------------------------------------------------------------

IN_PROGRESS, COMPLETED, ERRORED = "in_progress", "completed", "errored"
STREAM_STATES = frozenset({IN_PROGRESS, COMPLETED, ERRORED})


def settles_at_once(state: str | None) -> bool:
    """A stream that has ended needs no quiet time: no more text is coming."""
    return state in (COMPLETED, ERRORED)


def replaces(existing: LoggedMessage | None, incoming: LoggedMessage) -> bool:
    """Whether `incoming` may replace the logged version of its message. A stream's completion can be handled
    before its opener (its event_ts can be the earlier one): the opener must not undo it."""
    if existing is None:
        return True
    return not (existing.streaming in (COMPLETED, ERRORED) and incoming.streaming == IN_PROGRESS)


def unchanged(existing: LoggedMessage | None, incoming: LoggedMessage) -> bool:
    """Nothing relmon reads moved: same words, files and stream state."""
    return (
        existing is not None
        and not existing.deleted
        and existing.content == incoming.content
        and existing.streaming == incoming.streaming
        and existing.author == incoming.author
    )


def relmon_channels(settings: Settings, rules: ChannelRules) -> set[str]:
    """Where relmon itself posts (alerts and digests): never judged."""
    channels = {settings.alert_channel, settings.digest_channel, rules.defaults.alert_channel}
    channels |= {rule.alert_channel for rule in rules.channels.values()}
    return {c for c in channels if c}


def channel_ignore_reason(channel_id: str | None, settings: Settings, rules: ChannelRules) -> str | None:
    """Why messages in this channel are not captured, or None when they are."""
    if not channel_id:
        return "no_channel"
    if channel_id.startswith("D"):
        return "direct_message"
    if channel_id in relmon_channels(settings, rules):
        return "relmon_channel"
    if not rules.for_channel(channel_id, settings).watch:
        return "unwatched"
    return None


# The answer and its question ------------------------------------------------------------------


def _live(messages: Iterable[LoggedMessage]) -> list[LoggedMessage]:
    """Undeleted messages, one per ts (the last given wins), in ts order."""
    by_ts = {m.ts: m for m in messages}
    return sorted((m for m in by_ts.values() if not m.deleted), key=ts_key)


def thread_messages(thread_key: str, messages: Iterable[LoggedMessage]) -> list[LoggedMessage]:
    """The root and replies of one thread, in ts order."""
    return [m for m in _live(messages) if m.thread_key == thread_key]


def answer_run(message: LoggedMessage, messages: Iterable[LoggedMessage]) -> list[LoggedMessage]:
    """The consecutive monitored-bot messages of `message`'s thread that form one answer with it.

    A top-level message that is not a thread root is its own thread, so two top-level bot messages never
    merge; a bot's top-level message and its own replies under it do."""
    pool = {m.ts: m for m in messages}
    pool[message.ts] = message
    thread = thread_messages(message.thread_key, pool.values())
    if message.deleted or message not in thread:
        return [message]
    index = thread.index(message)
    start = index
    while start > 0 and thread[start - 1].author == Author.MONITORED_BOT:
        start -= 1
    end = index
    while end + 1 < len(thread) and thread[end + 1].author == Author.MONITORED_BOT:
        end += 1
    return thread[start : end + 1]


def find_question(
    answer: LoggedMessage, messages: Iterable[LoggedMessage], window_seconds: float
) -> LoggedMessage | None:
    """The human message an answer (its root) answers, or None.

    In a thread: the latest human message before it in that thread (the root included).
    At top level: the latest human top-level message in the channel at most `window_seconds` before it."""
    live = _live(messages)
    if answer.in_thread:
        candidates = [m for m in live if m.thread_key == answer.thread_key]
    else:
        oldest = answer.seconds - window_seconds
        candidates = [m for m in live if not m.in_thread and m.seconds >= oldest]
    before = [m for m in candidates if could_be_question(m) and ts_key(m) < ts_key(answer)]
    return before[-1] if before else None


def could_be_question(message: LoggedMessage) -> bool:
    """A person's message with words or files, not deleted: what `find_question` takes for a question."""
    return message.author == Author.HUMAN and not message.wordless and not message.deleted


STREAMING = "streaming"


def stream_errored(parts: Iterable[LoggedMessage]) -> bool:
    return any(part.streaming == ERRORED for part in parts)


@dataclass(frozen=True)
class Resolution:
    """What settling decided for one answer."""

    status: str  # pending | no_question | deleted | merged (store.models.PairStatus values), or streaming
    root: LoggedMessage | None
    parts: list[LoggedMessage]
    question: LoggedMessage | None


def resolve(answer_ts: str, messages: Iterable[LoggedMessage], window_seconds: float) -> Resolution | None:
    """Decide an answer's fate from the logged messages; None when the answer is not in the log."""
    pool = {m.ts: m for m in messages}
    answer = pool.get(answer_ts)
    if answer is None:
        return None
    if answer.deleted:
        return Resolution("deleted", answer, [answer], None)
    run = answer_run(answer, pool.values())
    if run[0].ts != answer.ts:
        return Resolution("merged", run[0], run, None)
    if any(part.streaming == IN_PROGRESS for part in run):
        return Resolution(STREAMING, answer, run, None)  # waits for the stream's completion
    question = find_question(answer, pool.values(), window_seconds)
    return Resolution("pending" if question else "no_question", answer, run, question)
