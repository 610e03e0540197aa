"""Splitting a topic whose failure rate differs sharply inside: a failing topic is never hidden inside a large one.

Topics are ranked by their failed questions, so a small failing group merged into a large healthy one (what an
embedding that sees words, not meaning, does: "SSO login" questions pulled into "refunds" by shared words) is
ranked as the large topic and named after it, and the failing group is ranked nowhere. Whatever the embeddings'
geometry, each topic is tried in two: its members are reduced again on their own (the directions that separate
them, not the ones that separate topics) and cut in two by k-means and by Ward's agglomerative clustering (one of
the 2 to 4 groups they find, against the rest); the cut is kept when both parts have at least `min_part` questions
and their failure rates differ significantly (Fisher's exact test, p < `ALPHA`) and by at least `MIN_RATE_GAP`.
The parts are tried again, a few levels deep, so a topic mixing three groups comes apart too.
Pure and deterministic: the same vectors and flags give the same labels.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import fisher_exact
from sklearn.cluster import AgglomerativeClustering, KMeans
from sklearn.decomposition import TruncatedSVD

ALPHA = 0.001  # strict: every topic of a week is tested, and a needless split costs a topic name
MIN_RATE_GAP = 0.25  # "sharply": 25 points of failure rate apart, at least
DEPTH = 3  # a topic is cut at most this many times over (three mixed groups come apart)
LOCAL_DIMENSIONS = 10
MOST_GROUPS = 4
WARD_LIMIT = 2000  # Ward's memory grows with the square of the members: k-means alone above this


@dataclass(frozen=True)
class Split:
    """One cut kept: the topic's label, how many questions (and failed ones) each part has, and the test's p."""

    topic: int
    sizes: tuple[int, int]
    failed: tuple[int, int]
    p_value: float


def _local(vectors: np.ndarray, seed: int) -> np.ndarray:
    """The members in the few directions along which they differ most (centred truncated SVD)."""
    rows = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    rows = rows / np.where(norms == 0, 1.0, norms)
    rows = rows - rows.mean(axis=0, keepdims=True)
    dimensions = min(LOCAL_DIMENSIONS, rows.shape[1] - 1, len(rows) - 1)
    if dimensions < 1:
        return rows
    return TruncatedSVD(dimensions, random_state=seed).fit_transform(rows)


def _cuts(points: np.ndarray, seed: int) -> list[np.ndarray]:
    """Candidate two-way cuts of the points, as boolean masks (True: the part cut out): each group that k-means and
    Ward's clustering find when asked for 2 to `MOST_GROUPS` groups, against the rest. A small group inside a
    large topic need not be the topic's widest divide (the large one's own phrasings may be), so more than two
    groups are looked at; the test's strict p answers for the number of cuts tried."""
    cuts = []
    for groups in range(2, MOST_GROUPS + 1):
        if len(points) <= groups:
            break
        found = [KMeans(groups, n_init=4, random_state=seed).fit_predict(points)]
        if len(points) <= WARD_LIMIT:
            found.append(AgglomerativeClustering(groups, linkage="ward").fit_predict(points))
        for labels in found:
            cuts += [labels == group for group in range(groups if groups > 2 else 1)]
    return cuts


def best_cut(
    vectors: np.ndarray, failed: np.ndarray, *, min_part: int, alpha: float = ALPHA, seed: int = 0
) -> tuple[np.ndarray, float] | None:
    """The two-way cut of these questions (rows of `vectors`, `failed` flags) whose parts' failure rates differ
    most significantly, when that is significant (p < alpha, rates `MIN_RATE_GAP` apart) and each part has at
    least `min_part` questions; else None. Returns the mask of the second part and the test's p."""
    failed = np.asarray(failed, dtype=bool)
    if len(failed) < 2 * min_part or failed.all() or not failed.any():
        return None
    best: tuple[np.ndarray, float] | None = None
    for mask in _cuts(_local(vectors, seed), seed):
        sizes = int((~mask).sum()), int(mask.sum())
        if min(sizes) < min_part:
            continue
        bad = int(failed[~mask].sum()), int(failed[mask].sum())
        if abs(bad[0] / sizes[0] - bad[1] / sizes[1]) < MIN_RATE_GAP:
            continue
        _, p = fisher_exact([[bad[0], sizes[0] - bad[0]], [bad[1], sizes[1] - bad[1]]])
        if p < alpha and (best is None or p < best[1]):
            best = (mask, float(p))
    return best


def split_mixed(
    vectors: np.ndarray,
    labels: np.ndarray,
    failed: np.ndarray,
    *,
    min_part: int,
    alpha: float = ALPHA,
    seed: int = 0,
) -> tuple[np.ndarray, list[Split]]:
    """`labels` (one per row of `vectors`; -1 an outlier) with every topic whose failure rate differs sharply
    inside cut in two, the parts tried again up to `DEPTH` levels; new topics take the next free labels. Also
    returns the cuts kept, for the run's notes and the tests."""
    out = np.asarray(labels, dtype=np.int64).copy()
    failed = np.asarray(failed, dtype=bool)
    splits: list[Split] = []
    pending = [(int(topic), 0) for topic in np.unique(out[out >= 0])]
    following = int(out.max()) + 1 if (out >= 0).any() else 0
    while pending:
        topic, depth = pending.pop(0)
        members = np.flatnonzero(out == topic)
        cut = best_cut(vectors[members], failed[members], min_part=min_part, alpha=alpha, seed=seed)
        if cut is None:
            continue
        mask, p = cut
        out[members[mask]] = following
        parts = members[~mask], members[mask]
        splits.append(
            Split(
                topic,
                (len(parts[0]), len(parts[1])),
                (int(failed[parts[0]].sum()), int(failed[parts[1]].sum())),
                p,
            )
        )
        if depth + 1 < DEPTH:
            pending += [(topic, depth + 1), (following, depth + 1)]
        following += 1
    return out, splits
