"""The local fallback embedding: TF-IDF over the period's questions, then truncated SVD (latent semantic analysis),
with scikit-learn. No endpoint, no cost: the trial and a chat-only endpoint still get topics. It is fitted on the
texts it is given, so its vectors compare only within one run (they are never stored)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.decomposition import TruncatedSVD
from sklearn.feature_extraction.text import TfidfVectorizer

from topics.clustering import DIMENSIONS, unit_rows

NAME = "local TF-IDF + SVD"


def vectorizer() -> TfidfVectorizer:
    # Word counts dampened (sublinear), English function words left out: "how do I" says nothing of the topic.
    return TfidfVectorizer(stop_words="english", sublinear_tf=True, max_features=50_000, dtype=np.float32)


def local_vectors(texts: Sequence[str], dimensions: int = DIMENSIONS, seed: int = 0) -> np.ndarray:
    """One unit row per text (zero rows for texts with no word of substance)."""
    if not texts:
        return np.zeros((0, dimensions), dtype=np.float32)
    try:
        matrix = vectorizer().fit_transform(texts)
    except ValueError:  # no word at all in any text (only stop words, emoji)
        return np.zeros((len(texts), dimensions), dtype=np.float32)
    components = min(dimensions, matrix.shape[1] - 1, len(texts) - 1)
    if components < 1:
        return unit_rows(matrix.toarray().astype(np.float32))
    reduced = TruncatedSVD(components, random_state=seed).fit_transform(matrix)
    return unit_rows(reduced.astype(np.float32))
