"""The OpenAI Batch API of the fake LLM, answering as OpenAI does: `POST /v1/files` (multipart, purpose=batch),
`GET /v1/files/{id}/content`, `POST /v1/batches` (input_file_id, endpoint, completion_window), `GET
/v1/batches/{id}`. A batch moves validating → in_progress → its outcome, one step per retrieve. Outcomes, one per
batch created (then "completed"): "completed" (every line in the output file), "expired" (the first half
answered, the rest in the error file with code batch_expired), "failed" (no output file, `errors`). With
`available=False` every route answers 404, as Ollama, vLLM and most gateways do."""

from __future__ import annotations

import email.parser
import json
import threading
import time
from collections.abc import Callable
from typing import Any

Answer = tuple[int, Any]  # status, JSON payload or bytes


def _not_found(path: str) -> Answer:
    return 404, {"error": {"message": f"Invalid URL (POST {path})", "type": "invalid_request_error"}}


class FakeBatches:
    def __init__(self, complete: Callable[[dict], dict]) -> None:
        self.complete = complete  # a request body -> a chat completion
        self.lock = threading.Lock()
        self.available = True
        self.outcomes: list[str] = []
        self.files: dict[str, tuple[str, bytes]] = {}
        self.batches: dict[str, dict] = {}
        self.requests: list[dict] = []  # the bodies answered in batches

    def handles(self, path: str) -> bool:
        return path.startswith(("/v1/files", "/v1/batches"))

    def answer(self, method: str, path: str, content_type: str, raw: bytes) -> Answer:
        if not self.available:
            return _not_found(path)
        parts = path.strip("/").split("/")[1:]  # files | files/{id}/content | batches | batches/{id}
        if method == "POST" and parts == ["files"]:
            return self._upload(content_type, raw)
        if method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            found = self.files.get(parts[1])
            return (200, found[1]) if found else (404, {"error": {"message": "No such File object"}})
        if method == "POST" and parts == ["batches"]:
            return self._create(json.loads(raw or b"{}"))
        if method == "GET" and len(parts) == 2 and parts[0] == "batches":
            return self._retrieve(parts[1])
        return _not_found(path)

    def _file(self, purpose: str, data: bytes, name: str) -> dict:
        with self.lock:
            file_id = f"file-fake{len(self.files) + 1}"
            self.files[file_id] = (purpose, data)
        return {"id": file_id, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": name, "purpose": purpose, "status": "processed"}  # fmt: skip

    def _upload(self, content_type: str, raw: bytes) -> Answer:
        message = email.parser.BytesParser().parsebytes(b"Content-Type: " + content_type.encode() + b"\r\n\r\n" + raw)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.get_payload()}
        if "file" not in fields or fields.get("purpose") is None:
            return 400, {"error": {"message": "file and purpose are required", "type": "invalid_request_error"}}
        purpose = fields["purpose"].get_payload(decode=True).decode()
        return 200, self._file(purpose, fields["file"].get_payload(decode=True), fields["file"].get_filename() or "f")

    def _create(self, body: dict) -> Answer:
        source = self.files.get(body.get("input_file_id", ""))
        if source is None or source[0] != "batch" or body.get("completion_window") != "24h":
            return 400, {"error": {"message": "invalid batch request", "type": "invalid_request_error"}}
        with self.lock:
            batch_id = f"batch_fake{len(self.batches) + 1}"
            outcome = self.outcomes.pop(0) if self.outcomes else "completed"
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": body.get("endpoint"), "errors": None,
                "input_file_id": body["input_file_id"], "completion_window": "24h", "status": "validating",
                "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                "request_counts": {"total": 0, "completed": 0, "failed": 0}, "metadata": None, "_outcome": outcome,
            }  # fmt: skip
        return 200, self._public(batch_id)

    def _public(self, batch_id: str) -> dict:
        return {k: v for k, v in self.batches[batch_id].items() if not k.startswith("_")}

    def _retrieve(self, batch_id: str) -> Answer:
        batch = self.batches.get(batch_id)
        if batch is None:
            return 404, {"error": {"message": "No such Batch object"}}
        if batch["status"] == "validating":
            batch["status"] = "in_progress"
        elif batch["status"] == "in_progress":
            self._run(batch)
        return 200, self._public(batch_id)

    def _run(self, batch: dict) -> None:
        outcome = batch["_outcome"]
        if outcome == "failed":
            batch["status"] = "failed"
            batch["errors"] = {"object": "list", "data": [{"code": "invalid_request", "message": "fake failure"}]}
            return
        lines = [json.loads(line) for line in self.files[batch["input_file_id"]][1].splitlines() if line.strip()]
        answered = lines if outcome == "completed" else lines[: len(lines) // 2]
        output, errors = [], []
        for index, line in enumerate(lines):
            if line in answered:
                with self.lock:
                    self.requests.append(line["body"])
                response = {"status_code": 200, "request_id": f"req_{index}", "body": self.complete(line["body"])}
                output.append({"id": f"batch_req_{index}", "custom_id": line["custom_id"], "response": response,
                               "error": None})  # fmt: skip
            else:
                errors.append({"id": f"batch_req_{index}", "custom_id": line["custom_id"], "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be executed "
                                         "before the completion window expired."}})  # fmt: skip
        batch["status"] = outcome
        batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(errors)}
        if output:
            batch["output_file_id"] = self._file("batch_output", _jsonl(output), "output.jsonl")["id"]
        if errors:
            batch["error_file_id"] = self._file("batch_output", _jsonl(errors), "errors.jsonl")["id"]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()
