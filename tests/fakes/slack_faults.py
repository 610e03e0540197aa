"""The fake Slack's faults (a mixin of FakeSlack, tests/fakes/slack_server.py): refused and rate-limited Web API
calls, `response_url`s that rate-limit, expire, answer late or not at all, and Web API calls answered late or not at
all."""

from __future__ import annotations

import threading
import time


class SlackFaults:
    """Fault injection for FakeSlack; the attributes below are set by FakeSlack.__init__."""

    _lock: threading.RLock
    base_url: str
    _rate_limits: dict[str, list[int]]  # method -> [remaining, retry_after]
    _refusals: dict[str, list]  # method -> [remaining, error]
    response_attempts: dict[str, list[float]]  # response_url key -> post times
    _response_limits: dict[str, list[int]]  # response_url key -> [remaining, retry_after]
    _expired_responses: set[str]
    _response_delays: dict[str, float]  # response_url key -> seconds before the answer
    _response_drops: dict[str, int]  # response_url key -> posts taken but left unanswered
    _method_faults: dict[str, list]  # Web API method -> [remaining, seconds before the answer, drop]

    def refuse(self, method: str, error: str = "missing_scope", times: int = 1_000_000) -> None:
        """The next `times` calls to `method` answer `{"ok": false, "error": error}` as Slack does (a missing scope
        names the scope needed and those the token has)."""
        with self._lock:
            self._refusals[method] = [times, error]

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls to `method` answer 429 with this Retry-After (seconds)."""
        with self._lock:
            self._rate_limits[method] = [times, retry_after]

    def response_url(self, key: str) -> str:
        return f"{self.base_url}/response/{key}"

    def rate_limit_response_url(self, key: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` posts to response_url(key) answer 429 with this Retry-After (seconds)."""
        with self._lock:
            self._response_limits[key] = [times, retry_after]

    def expire_response_url(self, key: str) -> None:
        """From now on response_url(key) answers 404 `expired_url`, as Slack does after 30 minutes."""
        with self._lock:
            self._expired_responses.add(key)

    def slow_response_url(self, key: str, seconds: float) -> None:
        """From now on response_url(key) takes each post at once but answers it `seconds` later."""
        with self._lock:
            self._response_delays[key] = seconds

    def drop_response_url(self, key: str, times: int = 1) -> None:
        """The next `times` posts to response_url(key) are taken, then the connection is closed unanswered."""
        with self._lock:
            self._response_drops[key] = times

    def slow_method(self, method: str, seconds: float, times: int = 1) -> None:
        """The next `times` calls to `method` are carried out at once but answered `seconds` later."""
        with self._lock:
            self._method_faults[method] = [times, seconds, False]

    def drop_method(self, method: str, times: int = 1) -> None:
        """The next `times` calls to `method` are carried out, then the connection is closed unanswered."""
        with self._lock:
            self._method_faults[method] = [times, 0.0, True]

    def _method_answer(self, method: str) -> tuple[float, bool]:
        """For a call just carried out: (seconds before the answer, whether to close without answering)."""
        with self._lock:
            fault = self._method_faults.get(method)
            if not fault or fault[0] <= 0:
                return 0.0, False
            fault[0] -= 1
            return fault[1], fault[2]

    def _response_answer(self, key: str) -> tuple[float, bool]:
        """For a post just taken: (seconds before the answer, whether to close without answering)."""
        with self._lock:
            dropped = self._response_drops.get(key, 0) > 0
            if dropped:
                self._response_drops[key] -= 1
            return self._response_delays.get(key, 0.0), dropped

    def _response_fault(self, key: str) -> tuple[int, str, dict[str, str]] | None:
        """(status, body, headers) when this post to response_url(key) is refused; None: take it."""
        with self._lock:
            self.response_attempts[key].append(time.monotonic())
            if key in self._expired_responses:
                return 404, "expired_url", {}
            limit = self._response_limits.get(key)
            if limit and limit[0] > 0:
                limit[0] -= 1
                return 429, "rate_limited", {"Retry-After": str(limit[1])}
        return None

    def _take_rate_limit(self, method: str) -> int | None:
        with self._lock:
            limit = self._rate_limits.get(method)
            if not limit or limit[0] <= 0:
                return None
            limit[0] -= 1
            return limit[1]
