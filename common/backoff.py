"""The one backoff rule every relmon retry uses: exponential, capped, with jitter, never sooner than the server's
Retry-After (up to a ceiling, so a long Retry-After cannot hold a task back for long)."""

from __future__ import annotations

import random

DEFAULT_JITTER = 0.25


def backoff_seconds(
    attempt: int,
    *,
    base: float,
    cap: float,
    jitter: float = DEFAULT_JITTER,
    retry_after: float | None = None,
    retry_after_cap: float | None = None,
    at_least: float = 0.0,
    rng: random.Random | None = None,
) -> float:
    """The wait before retry number `attempt + 1` (`attempt` retries done so far).

    base, 2·base, 4·base … at most `cap`, each stretched by up to `jitter` (a fraction) at random so that tasks
    which failed together (a 429 burst, an outage) do not come back together. A server's `retry_after` is
    honoured up to `retry_after_cap` (default `cap` with full jitter), and the wait is never below `at_least`."""
    delay = min(cap, base * 2 ** max(0, attempt))
    if jitter:
        delay *= 1.0 + jitter * (rng or random).random()
    if retry_after is not None and retry_after > delay:
        ceiling = retry_after_cap if retry_after_cap is not None else cap * (1.0 + jitter)
        delay = max(delay, min(retry_after, ceiling))
    return max(delay, at_least)
