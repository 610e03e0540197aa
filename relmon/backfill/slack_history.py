"""Slack's history, page by page, within the method's rate tier: a token bucket per method (Tier 3 is about 50
calls a minute) and, when Slack answers 429 anyway, its Retry-After (slack_sdk's RateLimitErrorRetryHandler)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from slack_sdk import WebClient

HISTORY_PAGE = 200  # Slack's advice for conversations.history and .replies
METHODS = ("conversations.history", "conversations.replies")


class TokenBucket:
    """`rate_per_minute` calls a minute, in bursts of at most `burst`: `take` waits until a call is allowed."""

    def __init__(
        self,
        rate_per_minute: float,
        burst: int = 1,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.per_second = rate_per_minute / 60.0
        self.burst = float(burst)
        self.tokens = float(burst)
        self.clock, self.sleep = clock, sleep
        self.stamp = clock()
        self._lock = threading.Lock()

    def take(self) -> float:
        """Wait for a token; returns the seconds waited."""
        waited = 0.0
        with self._lock:
            while True:
                now = self.clock()
                self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.per_second)
                self.stamp = now
                if self.tokens >= 1.0:
                    self.tokens -= 1.0
                    return waited
                pause = (1.0 - self.tokens) / self.per_second
                self.sleep(pause)
                waited += pause


class HistoryReader:
    """conversations.history (newest first) and conversations.replies, cursor paged, each method behind its bucket."""

    def __init__(self, slack: WebClient, calls_per_minute: float) -> None:
        self.slack = slack
        self.buckets = {method: TokenBucket(calls_per_minute) for method in METHODS}

    def history(self, channel: str, oldest: str, latest: str) -> Iterator[list[dict[str, Any]]]:
        """The channel's top-level messages in [oldest, latest], newest first, one page at a time."""
        params = {"channel": channel, "oldest": oldest, "latest": latest, "inclusive": True, "limit": HISTORY_PAGE}
        yield from self._pages("conversations.history", self.slack.conversations_history, params)

    def thread(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """A thread's root and replies, oldest first."""
        params = {"channel": channel, "ts": ts, "limit": HISTORY_PAGE}
        return [
            m for page in self._pages("conversations.replies", self.slack.conversations_replies, params) for m in page
        ]

    def _pages(self, method: str, call: Callable[..., Any], params: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        cursor = None
        while True:
            self.buckets[method].take()
            response = call(**params, **({"cursor": cursor} if cursor else {}))
            yield list(response.get("messages") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not response.get("has_more") or not cursor:
                return
