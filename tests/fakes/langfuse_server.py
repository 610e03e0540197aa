"""A local Langfuse public API for tests (Langfuse itself needs ClickHouse): the score endpoints the official SDK
(`langfuse.api`) calls, answering as Langfuse documents them.

- `POST /api/public/scores`: a JSON list of scores, HTTP Basic auth (public key : secret key). 202
  `{"message": "Accepted"}` when every score is accepted, 207 `{"accepted", "rejected", "errors": [{"message"}]}`
  otherwise; 401 `{"message": ...}` for a wrong key, 400 for a body that is not a list. A score with an `id`
  already stored replaces it (upsert).
- `GET /api/public/scores/{id}`: the stored score, or 404.
- `GET /api/public/projects`: the keys' project (`relmon doctor` reads it).
`posts` counts the accepted posts of each score id (a resend upserts the score, and is counted here).
`fail_next(n, status)` makes the next n score requests answer `status` (an outage).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections import Counter
from typing import Any

from tests.fakes.background import OutageFake, QuietHandler

DATA_TYPES = {"NUMERIC", "CATEGORICAL", "BOOLEAN", "TEXT", "CORRECTION"}


def score_problem(score: Any) -> str | None:
    """Why Langfuse would reject this score, or None."""
    if not isinstance(score, dict):
        return "score must be an object"
    if not isinstance(score.get("name"), str) or not score["name"]:
        return "name: Required"
    if not any(score.get(key) for key in ("traceId", "sessionId", "datasetRunId")):
        return "one of traceId, sessionId or datasetRunId is required"
    value, data_type = score.get("value"), score.get("dataType", "NUMERIC")
    if data_type not in DATA_TYPES:
        return f"dataType: Invalid enum value '{data_type}'"
    if data_type == "NUMERIC" and not isinstance(value, int | float):
        return "value: Expected number for NUMERIC score"
    if data_type == "CATEGORICAL" and not isinstance(value, str):
        return "value: Expected string for CATEGORICAL score"
    return None


PROJECT = {
    "id": "proj-support-bot",
    "name": "support-bot",
    "organization": {"id": "org-1", "name": "Acme"},
    "metadata": {},
}


class FakeLangfuse(OutageFake):
    thread_name = "fake-langfuse"

    def __init__(self, public_key: str = "pk-lf-test", secret_key: str = "sk-lf-test") -> None:
        self.public_key, self.secret_key = public_key, secret_key
        self.scores: dict[str, dict] = {}
        self.posts: Counter[str] = Counter()
        self.requests = 0
        self._serve()

    def stored(self) -> dict[str, dict]:
        with self._lock:
            return {key: dict(value) for key, value in self.scores.items()}

    def _authorised(self, header: str | None) -> bool:
        expected = base64.b64encode(f"{self.public_key}:{self.secret_key}".encode()).decode()
        return header == f"Basic {expected}"

    def _create(self, body: bytes) -> tuple[int, dict]:
        failure = self.next_failure()
        if failure:
            return failure, {"message": "Service Unavailable"}
        try:
            scores = json.loads(body)
        except ValueError:
            return 400, {"message": "Invalid request data", "error": "body is not JSON"}
        if not isinstance(scores, list):
            return 400, {"message": "Invalid request data", "error": "Expected array, received object"}
        errors = []
        with self._lock:
            for score in scores:
                problem = score_problem(score)
                if problem:
                    errors.append({"message": problem})
                    continue
                score_id = score.get("id") or str(uuid.uuid4())
                self.scores[score_id] = {**score, "id": score_id}
                self.posts[score_id] += 1
        if errors:
            return 207, {"accepted": len(scores) - len(errors), "rejected": len(errors), "errors": errors}
        return 202, {"message": "Accepted"}

    def _handler_class(self) -> type:
        fake = self

        class Handler(QuietHandler):
            def _answer(self, status: int, body: dict) -> None:
                self.send_body(status, json.dumps(body).encode(), "application/json")

            def do_POST(self) -> None:
                body = self.read_body()
                with fake._lock:
                    fake.requests += 1
                if self.path.split("?", 1)[0] != "/api/public/scores":
                    return self._answer(404, {"message": "Not Found"})
                if not fake._authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"message": "Invalid credentials"})
                self._answer(*fake._create(body))

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if not path.startswith("/api/public/scores/") and path != "/api/public/projects":
                    return self._answer(404, {"message": "Not Found"})
                if not fake._authorised(self.headers.get("Authorization")):
                    return self._answer(401, {"message": "Invalid credentials"})
                if path == "/api/public/projects":  # the keys' project, as Langfuse answers a project-scoped key
                    return self._answer(200, {"data": [PROJECT]})
                score = fake.stored().get(path.rsplit("/", 1)[1])
                self._answer(200, score) if score else self._answer(404, {"message": "Score not found"})

        return Handler
