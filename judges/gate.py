"""A bound on the calls in flight to one endpoint, shared by every thread that calls it, which backs off after a
timeout instead of piling on.

A local server (llama-cpp-python serves one request at a time) queues what it cannot serve; with 64 worker threads
each waiting its full timeout, the queued requests time out, are retried and queue again. The gate lets at most
`limit` calls out at once. A timeout means the server is slower than we thought: the gate halves what it lets out
(down to one) and holds every new call for a cooldown that doubles with each timeout in a row (up to a minute);
each success lets one more call out again, up to `limit` (additive increase, multiplicative decrease).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from judges.verdict import TransientLLMError

COOLDOWN_BASE_SECONDS = 2.0
COOLDOWN_CAP_SECONDS = 60.0


class EndpointBusy(TransientLLMError):
    """No call slot freed up in time: the endpoint is saturated. Try again later (`retry_after`)."""


class EndpointGate:
    def __init__(
        self,
        limit: int,
        *,
        cooldown_base: float = COOLDOWN_BASE_SECONDS,
        cooldown_cap: float = COOLDOWN_CAP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if limit < 1:
            raise ValueError("an endpoint gate lets at least one call through")
        self.limit = limit
        self.cooldown_base, self.cooldown_cap, self.clock = cooldown_base, cooldown_cap, clock
        self.allowed = limit  # what the gate lets out now: `limit`, or less after timeouts
        self.in_flight = 0
        self.timeouts_in_a_row = 0
        self.cooldown_until = 0.0
        self._changed = threading.Condition()

    @contextmanager
    def slot(self, wait_seconds: float) -> Iterator[None]:
        """Hold one call slot for the block; wait at most `wait_seconds` for one (and for a cooldown to end), then
        raise EndpointBusy."""
        deadline = self.clock() + wait_seconds
        with self._changed:
            while True:
                now = self.clock()
                cooling = self.cooldown_until - now
                if self.in_flight < self.allowed and cooling <= 0:
                    break
                left = deadline - now
                if left <= 0:
                    raise EndpointBusy(
                        f"the LLM endpoint is saturated: {self.in_flight} call(s) in flight, none freed up in "
                        f"{wait_seconds:.0f} s (RELMON_LLM_CONCURRENCY bounds the calls in flight)",
                        retry_after=max(cooling, self.cooldown_base),
                    )
                self._changed.wait(min(left, cooling) if cooling > 0 else left)
            self.in_flight += 1
        try:
            yield
        finally:
            with self._changed:
                self.in_flight -= 1
                self._changed.notify_all()

    def succeeded(self) -> None:
        with self._changed:
            self.timeouts_in_a_row = 0
            if self.allowed < self.limit:
                self.allowed += 1
                self._changed.notify_all()

    def timed_out(self) -> float:
        """Note a timeout; returns the cooldown every call now waits out (a retry should wait at least that)."""
        with self._changed:
            self.timeouts_in_a_row += 1
            self.allowed = max(1, self.allowed // 2)
            cooldown = min(self.cooldown_cap, self.cooldown_base * 2 ** (self.timeouts_in_a_row - 1))
            self.cooldown_until = max(self.cooldown_until, self.clock() + cooldown)
            return cooldown
