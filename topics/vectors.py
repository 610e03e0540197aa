"""Every question's vector of a topics run, in one space: the embeddings endpoint's (each pair's stored once, under
its model and endpoint, `topics.embeddings.embedding_space`; the missing ones asked a batch at a time, each call
paid from the daily budget first), else the local fallback's for the whole run, with a note saying why. A failed
endpoint is noted by its kind only (`topics.failures`): its own words may echo the questions."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from store import topics as rows
from store.db import Database
from store.settings import Settings
from topics import local_embeddings
from topics.embeddings import (
    EmbeddingClient,
    EmbeddingsUnavailable,
    batches,
    client_for,
    embedding_space,
    endpoint_label,
    endpoint_of,
    from_bytes,
    text_sha,
    to_bytes,
)
from topics.failures import BUDGET_SPENT, embedding_fallback_note, embeddings_error
from topics.naming_run import BudgetSpent, Spend
from topics.questions import Question

log = logging.getLogger("relmon.topics")


class _Matrix:
    """One row per question, filled as vectors come (stored or new); its width is the first vector's. float16, as
    stored: half the memory of float32 (20,000 questions of 1,536 values: 61 MB), and the reduction reads it a
    chunk at a time as float32."""

    def __init__(self, rows: int, model: str) -> None:
        self.rows, self.model = rows, model
        self.data: np.ndarray | None = None
        self.filled = np.zeros(rows, dtype=bool)

    def put(self, index: int, vector: np.ndarray) -> None:
        if self.data is None:
            self.data = np.zeros((self.rows, len(vector)), dtype=np.float16)
        if len(vector) != self.data.shape[1]:  # the endpoint changed sizes under one model name
            raise EmbeddingsUnavailable(f"{self.model}: embeddings of {len(vector)} and {self.data.shape[1]} values")
        self.data[index] = vector
        self.filled[index] = True


@dataclass
class VectorSource:
    db: Database
    settings: Settings
    embedder: Callable[[], EmbeddingClient] | None  # None: from the settings
    charge: Callable[[], None]  # pays one LLM call from the daily budget, or raises BudgetSpent

    def vectors(
        self, questions: Sequence[Question], now: datetime, spend: Spend, notes: list[str]
    ) -> tuple[np.ndarray, str]:
        """The questions' vectors and the name of their space; a fallback adds its note to `notes`."""
        settings = self.settings
        texts = [q.text for q in questions]
        if settings.local_embedding_only:
            return local_embeddings.local_vectors(texts), local_embeddings.NAME
        where = endpoint_label(endpoint_of(settings).base_url)
        try:
            return self._endpoint_vectors(questions, spend), settings.embedding_model
        except EmbeddingsUnavailable as error:
            why = embeddings_error(error)  # its kind only: the provider's words may echo the questions
            said = f"{why} from {where} ({settings.embedding_model})"
        except BudgetSpent:
            why = said = BUDGET_SPENT
        # Once a run: its vectors must share one space, so the texts already embedded are left aside too.
        notes.append(embedding_fallback_note(local_embeddings.NAME, why))
        log.warning(
            f"topics fell back to the local embedding: {said}",
            extra={"reason": why, "endpoint": where, "model": settings.embedding_model},
        )
        return local_embeddings.local_vectors(texts), local_embeddings.NAME

    def _endpoint_vectors(self, questions: Sequence[Question], spend: Spend) -> np.ndarray:
        settings = self.settings
        space = embedding_space(settings)
        shas = [text_sha(q.text) for q in questions]
        where: dict[int, list[int]] = {}
        for i, question in enumerate(questions):
            where.setdefault(question.pair_id, []).append(i)
        matrix = _Matrix(len(questions), settings.embedding_model)
        with self.db.reading() as session:
            for pair_id, sha, data in rows.stored_embeddings(session, list(where), space):
                for i in where[pair_id]:
                    if shas[i] == sha:
                        matrix.put(i, from_bytes(data))
        missing = [int(i) for i in np.flatnonzero(~matrix.filled)]
        if missing:
            client = self.embedder() if self.embedder else client_for(settings)
            sizes = [len(questions[i].text) for i in missing]
            for call in batches(sizes, settings.embedding_batch_size, settings.embedding_max_chars):
                batch = missing[call.start : call.stop]
                self.charge()
                embedded, tokens = client.embed([questions[i].text for i in batch])
                spend.calls += 1
                spend.prompt += tokens
                new_rows = []
                for i, vector in zip(batch, embedded, strict=True):
                    matrix.put(i, vector)
                    new_rows.append(
                        {
                            "pair_id": questions[i].pair_id,
                            "model": space,
                            "text_sha": shas[i],
                            "vector": to_bytes(vector),
                        }
                    )
                with self.db.session() as session:
                    rows.store_embeddings(session, new_rows)
        return matrix.data if matrix.data is not None else np.zeros((0, 1), dtype=np.float32)
