"""Coalesced redraws: one alert is redrawn (chat.update) at most once per RELMON_ALERT_REDRAW_SECONDS, however many
votes, reactions, outcome follow-ups or edits ask for it. The first asks redraws at once and closes a gate for the
window; what asks within the window schedules one trailing redraw at its end (which reads the state as it is
then, so the last change is always shown); what asks while that one is scheduled costs nothing. So nobody can
spend the alert channel's chat.update rate by toggling a reaction or clicking a button."""

from __future__ import annotations

from dataclasses import dataclass

import redis

# Atomic: take the gate (redraw now), else schedule the trailing redraw once, else nothing to do.
_GATE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) then return -1 end
local left = redis.call('PTTL', KEYS[1])
if left < 0 then left = 0 end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', left + tonumber(ARGV[1])) then return left end
return -2
"""


@dataclass(frozen=True)
class RedrawDecision:
    now: bool  # redraw now
    trailing_in: float | None = None  # schedule the trailing redraw in this many seconds (None: nothing to send)


def gate_key(alert_id: int) -> str:
    return f"relmon:alert-redraw:{alert_id}"


def pending_key(alert_id: int) -> str:
    return f"relmon:alert-redraw:pending:{alert_id}"


def decide(client: redis.Redis, alert_id: int, window_seconds: float, *, trailing: bool = False) -> RedrawDecision:
    """Whether this ask redraws now, schedules the trailing redraw, or is already covered by it. The trailing
    redraw itself (`trailing`) first frees its slot, then goes through the gate like any ask."""
    if window_seconds <= 0:
        return RedrawDecision(now=True)
    if trailing:
        client.delete(pending_key(alert_id))
    result = int(client.eval(_GATE, 2, gate_key(alert_id), pending_key(alert_id), int(window_seconds * 1000)))
    if result == -1:
        return RedrawDecision(now=True)
    if result == -2:
        return RedrawDecision(now=False)
    return RedrawDecision(now=False, trailing_in=result / 1000 + 0.05)
