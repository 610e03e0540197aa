"""Pairing over a channel's history: the same rules as live capture (`capture.pairing`), fed thread by thread.

History comes newest first (`conversations.history` pages backwards in time), one top-level message at a time
with its thread's replies (`conversations.replies`). An answer in a thread is decided by its thread alone; a
top-level answer also needs the top-level messages of the window before it, which arrive later: it waits until
a message older than its window has been fed (or the history ends). So at most one window of messages is held,
whatever the history's length. History gives every message's final text (edits applied); deleted messages are
absent, and tombstones and notices are ignored as live capture ignores them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from capture.notices import is_notice
from capture.pairing import Author, Identity, LoggedMessage, author_of, logged_message, resolve, stream_errored, ts_key
from capture.text import message_text
from store.models import PairStatus

UserResolver = Callable[[str], str | None]


@dataclass(frozen=True)
class FoundPair:
    """A question and the answer to it, found in history: what a backfilled pair stores."""

    answer_ts: str
    thread_ts: str | None
    answer_bot_id: str | None
    answer_text: str
    question_ts: str
    question_user: str | None
    question_text: str
    stream_errored: bool = False
    # The answer's thread as history holds it, and the answer's messages: its outcome signals are read from them
    # (capture.history_outcomes).
    thread: tuple[LoggedMessage, ...] = field(default=(), compare=False, repr=False)
    parts: tuple[LoggedMessage, ...] = field(default=(), compare=False, repr=False)


def read_message(raw: dict[str, Any], monitored: Collection[str], own: Identity) -> LoggedMessage | None:
    """One history message as capture logs it, or None when capture would ignore it (notices, tombstones,
    relmon's own posts)."""
    if not isinstance(raw, dict) or not raw.get("ts") or is_notice(raw):
        return None
    author = author_of(raw, monitored, own)
    if author == Author.OWN:
        return None
    message = logged_message(raw, author)
    if isinstance(raw.get("reactions"), list):  # history shows an answer's reactions on it: outcome signals
        message = replace(message, content={**message.content, "reactions": raw["reactions"]})
    return message


def is_reply(raw: dict[str, Any]) -> bool:
    """A reply listed at top level (a thread_broadcast): it is read with its thread instead."""
    return bool(raw.get("thread_ts")) and raw.get("thread_ts") != raw.get("ts")


def has_replies(raw: dict[str, Any]) -> bool:
    return bool(raw.get("reply_count")) or (bool(raw.get("thread_ts")) and raw.get("thread_ts") == raw.get("ts"))


def found_pair(
    answer_ts: str,
    pool: Iterable[LoggedMessage],
    window_seconds: float,
    resolve_user: UserResolver | None = None,
    thread: Iterable[LoggedMessage] = (),
) -> FoundPair | None:
    """The pair an answer makes with its question, as settling decides it; None when it makes none (merged into
    an earlier part, still streaming, no question, nothing to judge)."""
    resolution = resolve(answer_ts, pool, window_seconds)
    if resolution is None or resolution.status != PairStatus.PENDING or resolution.question is None:
        return None
    parts = resolution.parts
    answer = "\n".join(t for t in (message_text(p.content, resolve_user) for p in parts) if t.strip())
    question = message_text(resolution.question.content, resolve_user).strip()
    if not answer.strip() or not question:
        return None
    root = resolution.root
    return FoundPair(
        answer_ts=answer_ts,
        thread_ts=root.thread_ts if root and root.thread_ts else None,
        answer_bot_id=root.bot_id if root else None,
        answer_text=answer,
        question_ts=resolution.question.ts,
        question_user=resolution.question.user,
        question_text=question,
        stream_errored=stream_errored(parts),
        thread=tuple(thread),
        parts=tuple(parts),
    )


class HistoryPairer:
    """Feed each top-level message with its replies, newest top-level message first; collect the pairs from
    `feed` and, at the end, `finish`."""

    def __init__(
        self, window_seconds: float, resolve_user: UserResolver | None = None, outcome_window: float = 0.0
    ) -> None:
        self.window = window_seconds
        self.resolve_user = resolve_user
        self.outcome_window = outcome_window
        self._toplevel: dict[str, LoggedMessage] = {}  # top-level messages the waiting answers may need
        self._waiting: dict[str, list[LoggedMessage]] = {}  # top-level answer ts -> its thread
        # People's top-level messages of the last outcome window, and the answers found in it (seconds, asker,
        # thread key): an asker's top-level message is news for their latest answer (capture.outcomes.watching).
        self._later: list[LoggedMessage] = []
        self._answered: list[tuple[float, str | None, str]] = []

    def feed(self, thread: list[LoggedMessage]) -> list[FoundPair]:
        """One top-level message (first) and its replies. Returns the pairs now decided."""
        if not thread:
            return []
        root = thread[0]
        found = self._feed(root, thread)
        if self.outcome_window > 0:
            found = self._with_followups(found)
            if root.author == Author.HUMAN and not root.in_thread:
                self._later.append(root)
            horizon = root.seconds + self.outcome_window + self.window  # nothing older can be news for them
            self._later = [m for m in self._later if m.seconds <= horizon]
            self._answered = [a for a in self._answered if a[0] <= horizon]
        return found

    def _with_followups(self, found: list[FoundPair]) -> list[FoundPair]:
        """Each pair's thread with the asker's top-level messages after the answer that are news for it: within
        the outcome window, and the asker's latest answer before them is in this pair's thread (as live)."""
        out = []
        for pair in sorted(found, key=lambda p: float(p.answer_ts), reverse=True):
            key, answered = pair.thread_ts or pair.answer_ts, float(pair.answer_ts)
            self._answered.append((answered, pair.question_user, key))
            extra = tuple(
                m
                for m in self._later
                if m.user == pair.question_user
                and answered < m.seconds <= answered + self.outcome_window
                and self._latest_thread(m) == key
            )
            out.append(replace(pair, thread=(*pair.thread, *extra)) if extra else pair)
        return out

    def _latest_thread(self, message: LoggedMessage) -> str | None:
        open_ = [a for a in self._answered if a[1] == message.user and a[0] < message.seconds]
        open_ = [a for a in open_ if message.seconds <= a[0] + self.outcome_window]
        return max(open_)[2] if open_ else None

    def _feed(self, root: LoggedMessage, thread: list[LoggedMessage]) -> list[FoundPair]:
        found = self._complete(root.seconds)
        self._toplevel[root.ts] = root
        for message in sorted(thread, key=ts_key):
            if message.author != Author.MONITORED_BOT:
                continue
            if message.in_thread:
                pair = found_pair(message.ts, thread, self.window, self.resolve_user, thread)
                if pair is not None:
                    found.append(pair)
            else:
                self._waiting[message.ts] = thread
        self._prune()
        return found

    def finish(self) -> list[FoundPair]:
        """The history has ended: every waiting answer has seen all it can."""
        found = self._complete(float("-inf"))
        return self._with_followups(found) if self.outcome_window > 0 else found

    def floor(self) -> str | None:
        """The oldest answer still waiting: a checkpoint must resume at or before it."""
        return min(self._waiting, key=float) if self._waiting else None

    def _complete(self, reached: float) -> list[FoundPair]:
        """Decide the waiting answers whose window lies wholly after `reached` (everything newer was fed)."""
        found = []
        for answer_ts in sorted(self._waiting, key=float, reverse=True):
            if float(answer_ts) - self.window <= reached:
                continue
            thread = self._waiting.pop(answer_ts)
            pair = found_pair(answer_ts, [*self._toplevel.values(), *thread], self.window, self.resolve_user, thread)
            if pair is not None:
                found.append(pair)
        self._prune()
        return found

    def _prune(self) -> None:
        """A top-level message can only be the question of a newer answer: keep those a waiting answer may need."""
        newest = max((float(ts) for ts in self._waiting), default=None)
        if newest is None:
            self._toplevel.clear()
            return
        self._toplevel = {ts: m for ts, m in self._toplevel.items() if float(ts) <= newest}


def newest_first_threads(
    days: Iterable[Iterable[dict[str, Any]]],
) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """A channel's messages day by day, newest day first (an export's day files), grouped as history gives them:
    each top-level message with its replies (oldest first), newest top-level message first.

    Lazy: one day is read at a time. A reply is never older than its root, so it comes in the root's day or a
    newer one; only replies still waiting for their root's day are held. Replies whose root never comes form a
    thread of their own, rooted at their first, at the end."""
    waiting: dict[str, list[dict[str, Any]]] = {}  # thread_ts -> replies read before their root
    for day in days:
        roots: dict[str, dict[str, Any]] = {}
        for raw in day:
            if not isinstance(raw, dict) or not raw.get("ts"):
                continue
            if is_reply(raw):
                waiting.setdefault(raw["thread_ts"], []).append(raw)
            else:
                roots[raw["ts"]] = raw
        for ts in sorted(roots, key=float, reverse=True):
            yield roots[ts], sorted(waiting.pop(ts, []), key=_message_seconds)
    orphans = [sorted(replies, key=_message_seconds) for replies in waiting.values()]
    for first, *rest in sorted(orphans, key=lambda thread: _message_seconds(thread[0]), reverse=True):
        yield first, rest


def _message_seconds(raw: dict[str, Any]) -> float:
    return float(raw["ts"])
