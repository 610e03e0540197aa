"""Stable topics: a topic that continues from an earlier run keeps its key, its name and its history.

Earlier topics are known by a few of their questions (anchors); their centre in this run's space is the mean of the
anchors' vectors (so it works for the local embedding too, refitted every run). A new topic takes the key of the
earlier topic whose centre is closest, one to one (the Hungarian assignment on cosine), when it is close enough."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

# Cosine (in the reduced space) above which a topic is the continuation of an earlier one.
SAME_TOPIC = 0.8


def match(current: np.ndarray, earlier: np.ndarray, floor: float = SAME_TOPIC) -> dict[int, int]:
    """Index of each current centre → index of the earlier centre it continues (unit rows, same space)."""
    if len(current) == 0 or len(earlier) == 0:
        return {}
    similarity = current @ earlier.T
    rows, columns = linear_sum_assignment(-similarity)
    return {int(r): int(c) for r, c in zip(rows, columns, strict=True) if similarity[r, c] >= floor}
