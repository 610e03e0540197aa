"""Grouping questions by their embeddings: HDBSCAN (scikit-learn), no fixed number of topics, outliers left out,
but never more than half of them.

Embeddings are reduced first (centred truncated SVD to `DIMENSIONS` dimensions, then unit length, so euclidean
distance follows cosine): density-based clustering does poorly in a thousand dimensions and costs far more. For
scale, HDBSCAN sees at most `SAMPLE` questions (a seeded sample); every other question joins the topic whose
centre is nearest when it is as close as most of that topic's own members, else it is an outlier. Deterministic:
the same vectors give the same topics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.cluster import HDBSCAN
from sklearn.decomposition import TruncatedSVD

from topics.splitting import split_mixed

DIMENSIONS = 15
SAMPLE = 4000
MIN_TOPIC_SIZE = 8
MAX_OUTLIER_SHARE = 0.5
# A question joins a topic when it is at least as close to its centre as the closest 90% of the topic's members.
MEMBER_PERCENTILE = 10
CHUNK = 2048  # rows reduced at a time


@dataclass(frozen=True)
class Clustering:
    labels: np.ndarray  # one per question: its topic's index, or -1 for an outlier
    centroids: np.ndarray  # one unit row per topic, in the reduced space
    reduced: np.ndarray  # the questions in the reduced space (unit rows)
    bars: np.ndarray  # per topic: the cosine to its centre a question needs to join it
    reduction: Reduction

    @property
    def count(self) -> int:
        return len(self.centroids)

    @property
    def outliers(self) -> int:
        return int((self.labels < 0).sum())


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


class Reduction:
    """Unit rows in at most `dimensions` dimensions (centred truncated SVD, i.e. PCA), fitted on one period's
    questions and applied to others (the week before, earlier topics' anchors) so that they compare. Fitted on a
    seeded sample of at most `sample` rows and applied a chunk at a time, so the memory it takes does not grow with
    the period: the caller's matrix (float16 from the store, or float32) is the only full-width copy."""

    def __init__(self, vectors: np.ndarray, dimensions: int = DIMENSIONS, seed: int = 0, sample: int = SAMPLE) -> None:
        rows, columns = vectors.shape
        self.mean: np.ndarray | None = None
        self.svd: TruncatedSVD | None = None
        if columns > dimensions and rows > dimensions + 1:
            chosen = np.arange(rows)
            if rows > sample:
                chosen = np.sort(np.random.default_rng(seed).choice(rows, size=sample, replace=False))
            fit_on = unit_rows(np.asarray(vectors[chosen], dtype=np.float32))
            self.mean = fit_on.mean(axis=0, keepdims=True)
            self.svd = TruncatedSVD(dimensions, random_state=seed).fit(fit_on - self.mean)

    def __call__(self, vectors: np.ndarray) -> np.ndarray:
        if self.svd is None:
            return unit_rows(np.asarray(vectors, dtype=np.float32))
        out = np.empty((len(vectors), self.svd.n_components), dtype=np.float32)
        for start in range(0, len(vectors), CHUNK):
            chunk = unit_rows(np.asarray(vectors[start : start + CHUNK], dtype=np.float32))
            out[start : start + CHUNK] = self.svd.transform(chunk - self.mean)
        return unit_rows(out)


def min_topic_size(questions: int, smallest: int = MIN_TOPIC_SIZE, sample: int = SAMPLE) -> int:
    """The fewest questions a topic needs: `smallest`, or 2% of what HDBSCAN sees when that is more (a busy
    week's topics are the ones worth fixing, not its hundred small corners)."""
    return max(smallest, min(questions, sample) // 50)


def centroids_of(reduced: np.ndarray, labels: np.ndarray, count: int) -> np.ndarray:
    if count == 0:
        return np.zeros((0, reduced.shape[1]), dtype=np.float32)
    sums = np.zeros((count, reduced.shape[1]), dtype=np.float64)
    np.add.at(sums, labels[labels >= 0], reduced[labels >= 0])
    return unit_rows(sums).astype(np.float32)


def cluster(
    vectors: np.ndarray,
    *,
    smallest: int = MIN_TOPIC_SIZE,
    sample: int = SAMPLE,
    max_outlier_share: float = MAX_OUTLIER_SHARE,
    seed: int = 0,
    failed: np.ndarray | None = None,
) -> Clustering:
    """Topics of the rows of `vectors` (any embedding: the endpoint's or the local fallback's). With `failed` (one
    flag per row), a topic whose failure rate differs sharply inside is cut in two (`topics.splitting`)."""
    reduction = Reduction(vectors, seed=seed, sample=sample)
    reduced = reduction(vectors)
    n = len(reduced)
    labels = np.full(n, -1, dtype=np.int64)
    none = np.zeros(0, dtype=np.float32)
    if n < smallest:
        return Clustering(labels, centroids_of(reduced, labels, 0), reduced, none, reduction)
    seen = np.arange(n)
    if n > sample:
        seen = np.sort(np.random.default_rng(seed).choice(n, size=sample, replace=False))
    size = min_topic_size(n, smallest, sample)
    found = HDBSCAN(min_cluster_size=size, copy=True).fit_predict(reduced[seen])
    if failed is not None:
        # Cut before the outliers join, so that they join the part they are nearest to.
        sampled = vectors if len(seen) == n else vectors[seen]
        found, _ = split_mixed(sampled, found, np.asarray(failed, dtype=bool)[seen], min_part=size, seed=seed)
    labels[seen] = found
    count = int(found.max()) + 1 if len(found) else 0
    centroids = centroids_of(reduced, labels, count)
    if count == 0:
        return Clustering(labels, centroids, reduced, none, reduction)
    # Each topic's bar: how close its own members are to its centre.
    member_similarity = np.einsum("ij,ij->i", reduced[seen], centroids[np.maximum(found, 0)])
    bars = np.array(
        [np.percentile(member_similarity[found == topic], MEMBER_PERCENTILE) for topic in range(count)],
        dtype=np.float32,
    )
    unassigned = np.flatnonzero(labels < 0)
    if len(unassigned):
        similarity = reduced[unassigned] @ centroids.T
        nearest = similarity.argmax(axis=1)
        best = similarity[np.arange(len(unassigned)), nearest]
        joins = best >= bars[nearest]
        labels[unassigned[joins]] = nearest[joins]
        _cap_outliers(labels, unassigned[~joins], nearest[~joins], best[~joins], max_outlier_share)
    if failed is not None:
        # Again once the others have joined: a failing group HDBSCAN saw too little of can be whole only now.
        labels, splits = split_mixed(vectors, labels, np.asarray(failed, dtype=bool), min_part=size, seed=seed)
        if splits:
            count = int(labels.max()) + 1
            centroids = centroids_of(reduced, labels, count)
            placed = labels >= 0
            similarity = np.einsum("ij,ij->i", reduced[placed], centroids[labels[placed]])
            bars = np.array(
                [np.percentile(similarity[labels[placed] == topic], MEMBER_PERCENTILE) for topic in range(count)],
                dtype=np.float32,
            )
    return Clustering(labels, centroids_of(reduced, labels, count), reduced, bars, reduction)


def _cap_outliers(
    labels: np.ndarray, outliers: np.ndarray, nearest: np.ndarray, best: np.ndarray, max_share: float
) -> None:
    """Never more than `max_share` of the questions left out: the outliers closest to a topic join it first."""
    allowed = int(len(labels) * max_share)
    excess = len(outliers) - allowed
    if excess <= 0:
        return
    closest = np.argsort(-best, kind="stable")[:excess]
    labels[outliers[closest]] = nearest[closest]


def assign(clustering: Clustering, reduced: np.ndarray) -> np.ndarray:
    """The topic of each row of `reduced` (unit rows in the clustering's space: the week before's questions) by
    the rule that placed the sampled-out questions: the nearest centre, if as close as its members; else -1."""
    if clustering.count == 0 or len(reduced) == 0:
        return np.full(len(reduced), -1, dtype=np.int64)
    similarity = reduced @ clustering.centroids.T
    nearest = similarity.argmax(axis=1)
    best = similarity[np.arange(len(reduced)), nearest]
    return np.where(best >= clustering.bars[nearest], nearest, -1)
