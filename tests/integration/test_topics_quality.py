"""Topics quality on the labelled corpus (342 questions, 10 known topics, 22 outliers), held above floors: with the
local fallback embedding and with the fake endpoint's embeddings (asked over HTTP, as relmon asks). The figures
themselves are printed by `python -m bench.topics --quality` (docs/topics.md)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.topics_corpus import FAILING_TOPIC, corpus, quality
from topics.embeddings import BATCH, EmbeddingClient
from topics.local_embeddings import local_vectors

# Floors a little under what each measured on 2026-12-03 (docs/topics.md), so that a worse grouping fails.
FLOORS = {
    "local": {"ari": 0.70, "ari_all": 0.55, "outliers": 0.30},
    "endpoint": {"ari": 0.70, "ari_all": 0.42, "outliers": 0.36},
}


def _endpoint_vectors(texts: list[str]) -> np.ndarray:
    with FakeOpenAI() as fake:
        client = EmbeddingClient("text-embedding-3-small", fake.base_url, "sk-test", max_retries=0)
        return np.vstack([client.embed(texts[i : i + BATCH])[0] for i in range(0, len(texts), BATCH)])


@pytest.mark.parametrize("embedding", ["local", "endpoint"])
def test_the_corpus_groups_into_its_known_topics_above_the_floors(embedding):
    texts = [row["question"] for row in corpus()]
    vectors = local_vectors(texts) if embedding == "local" else _endpoint_vectors(texts)
    found = quality(vectors, embedding)
    floors = FLOORS[embedding]
    assert found.topics >= 8
    assert found.ari >= floors["ari"], found
    assert found.ari_all >= floors["ari_all"], found
    assert found.outliers <= floors["outliers"], found
    assert found.outliers <= 0.5
    assert found.first_topic == FAILING_TOPIC, found
