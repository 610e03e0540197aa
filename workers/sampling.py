"""Sampling: judge only a fraction of a channel's answers, the same fraction every time for the same message.

A message's place in [0, 1) comes from a hash of its channel and timestamp, so a redelivered or re-enqueued
task makes the same decision, and raising the rate only adds messages (it never swaps one sample for another).
"""

from __future__ import annotations

import hashlib

from store.models import ON_DEMAND_SOURCES


def sample_point(channel_id: str | None, answer_ts: str | None) -> float:
    """A stable number in [0, 1) for one message."""
    digest = hashlib.sha256(f"{channel_id or ''}:{answer_ts or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_sampled_in(channel_id: str | None, answer_ts: str | None, sample_rate: float, *, source: str) -> bool:
    """Whether this answer is judged. Someone who asked for a judgment (/judge, the shortcut, the CLI) gets one."""
    if source in ON_DEMAND_SOURCES:
        return True
    if sample_rate >= 1.0:
        return True
    if sample_rate <= 0.0:
        return False
    return sample_point(channel_id, answer_ts) < sample_rate


def sampled_message(answer_ts: str | None, pair_id: int) -> str:
    """What stands for the message in `sample_point`: its ts, or for an answer that has none (an ingested exchange
    outside Slack) its pair, so that such answers are not all one point, sampled all together or not at all."""
    return answer_ts or f"pair-{pair_id}"
