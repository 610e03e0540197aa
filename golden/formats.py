"""The golden set in each evaluation tool's own import format, field for field as its documentation names them, and
back: pure functions from plain item dicts (relmon.golden_cli.as_plain) to records. The table is in docs/golden.md:

- deepeval: a JSON list of goldens (`EvaluationDataset.add_goldens_from_json_file`): `input`, `actual_output`,
  `expected_output`, `context` (a list), `retrieval_context`, `additional_metadata`, `comments`, `name`;
- langfuse: JSON lines of dataset items (`POST /api/public/dataset-items`): `datasetName`, `id`, `input`,
  `expectedOutput`, `metadata`;
- langsmith: JSON lines of examples (`Client.create_examples`): `id` (a UUID), `inputs`, `outputs`, `metadata`,
  `split`;
- braintrust: JSON lines of records (`bt datasets create --file`): `id`, `input`, `expected`, `metadata`, `tags`;
- phoenix: one JSON object, the body of `POST /v1/datasets/upload`: `action`, `name`, `description`, `inputs`,
  `outputs`, `metadata` (lists, one entry per example);
- jsonl / csv: relmon's own, also the template of `relmon regress`: `id`, `question`, `answer` (empty: the new
  bot's answer goes there), `expected`, `context`, ...

A team's own judges (judges.d) travel with the items where the format has room for them: each item's `judges`
(relmon_golden's plain dict: name → the criteria, its scale and fails_at, and the verdict it gave the bot's answer)
is the metadata's `relmon_judges` (DeepEval's `additional_metadata`, the others' `metadata`) and the JSONL's
`judges`; the CSV keeps its columns.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from judges.safe_text import json_text

FORMATS = ("deepeval", "langfuse", "langsmith", "braintrust", "phoenix", "jsonl", "csv")
DATASET_NAME = "relmon-golden"
# LangSmith example ids are UUIDs: derived from the item's id, so a second export upserts the same examples.
_UUID_NAMESPACE = uuid.UUID("6f1c3b0e-5d1a-4c1e-9a57-2f0b9a1c7e42")
PLAIN_COLUMNS = (
    "id",
    "question",
    "answer",
    "expected",
    "context",
    "bot_answer",
    "topic",
    "channel",
    "private",
    "permalink",
    "times",
    "origin",
    "created_at",
)


def external_id(item: dict[str, Any]) -> str:
    return f"relmon-golden-{item['id']}"


def _metadata(item: dict[str, Any], *, with_bot_answer: bool = True) -> dict[str, Any]:
    meta = {
        "source": "relmon",
        "relmon_id": item["id"],
        "channel": item.get("channel"),
        "private": bool(item.get("private")),
        "permalink": item.get("permalink"),
        "topic": item.get("topic"),
        "times_asked": item.get("times", 1),
        "origin": item.get("origin"),
        "created_at": item.get("created_at"),
    }
    if with_bot_answer:
        meta["bot_answer"] = item.get("bot_answer")
    if item.get("judges"):
        meta["relmon_judges"] = item["judges"]
    return {key: value for key, value in meta.items() if value is not None}


def _inputs(item: dict[str, Any]) -> dict[str, Any]:
    inputs = {"question": item["question"]}
    if item.get("context"):
        inputs["context"] = item["context"]
    return inputs


def deepeval_golden(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "input": item["question"],
        "actual_output": item.get("bot_answer"),
        "expected_output": item.get("expected"),
        "context": [item["context"]] if item.get("context") else None,
        "retrieval_context": None,
        "additional_metadata": _metadata(item, with_bot_answer=False),
        "name": external_id(item),
        "comments": f"relmon golden item {item['id']}: asked {item.get('times', 1)} time(s)",
    }


def langfuse_item(item: dict[str, Any], dataset: str = DATASET_NAME) -> dict[str, Any]:
    return {
        "datasetName": dataset,
        "id": external_id(item),
        "input": _inputs(item),
        "expectedOutput": item.get("expected"),
        "metadata": _metadata(item),
    }


def langsmith_example(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(uuid.uuid5(_UUID_NAMESPACE, str(item["id"]))),
        "inputs": _inputs(item),
        "outputs": {"answer": item.get("expected")},
        "metadata": _metadata(item),
        "split": "golden",
    }


def braintrust_record(item: dict[str, Any]) -> dict[str, Any]:
    tags = ["relmon", *(value for value in (item.get("origin"), item.get("topic")) if value)]
    return {
        "id": external_id(item),
        "input": _inputs(item),
        "expected": item.get("expected"),
        "metadata": _metadata(item),
        "tags": tags,
    }


def phoenix_upload(items: Iterable[dict[str, Any]], dataset: str = DATASET_NAME) -> dict[str, Any]:
    listed = list(items)
    return {
        "action": "create",
        "name": dataset,
        "description": "Questions the support bot failed, with the answers that worked (relmon's golden set)",
        "inputs": [_inputs(item) for item in listed],
        "outputs": [{"answer": item.get("expected")} for item in listed],
        "metadata": [_metadata(item) for item in listed],
    }


def plain_record(item: dict[str, Any]) -> dict[str, Any]:
    return {column: item.get(column) for column in PLAIN_COLUMNS} | {"answer": None}


def plain_line(item: dict[str, Any]) -> dict[str, Any]:
    """The JSONL's record: the plain columns, and the team judges' criteria and verdicts when there are any."""
    record = plain_record(item)
    if item.get("judges"):
        record["judges"] = item["judges"]
    return record


def judge_entry(spec: Any, verdict: dict[str, Any] | None) -> dict[str, Any]:
    """One team judge on one item (`spec` a judges.judge_spec.JudgeSpec): what it checks, how it scores, and
    its verdict on the bot's answer (None: it did not judge it)."""
    entry: dict[str, Any] = {
        "criteria": spec.description or None,
        "scale": str(spec.scale),
        "fails_at": spec.fails_at,
        "needs": list(spec.needs),
    }
    if verdict is not None and verdict.get("status") == "ok" and verdict.get("score") is not None:
        entry["verdict"] = {"score": verdict["score"], "passed": verdict["score"] > spec.fails_at,
                            "prompt_version": verdict.get("prompt_version")}  # fmt: skip
    elif verdict is not None:
        entry["verdict"] = {"status": verdict.get("status"), "prompt_version": verdict.get("prompt_version")}
    else:
        entry["verdict"] = None
    return entry


_LINE_FORMATS = {
    "langfuse": langfuse_item,
    "langsmith": langsmith_example,
    "braintrust": braintrust_record,
    "jsonl": plain_line,
}


def render_file(
    items: Iterable[dict[str, Any]], fmt: str, cell: Callable[[Any], Any] = lambda value: value
) -> Iterator[str]:
    """The file's text in pieces, for any of FORMATS; `cell` writes a CSV cell (relmon.export.safe_cell). JSON is
    written by judges.safe_text.json_text: the same strings read back, no control character raw in the file."""
    if fmt == "deepeval":
        yield json_text([deepeval_golden(item) for item in items], indent=2) + "\n"
    elif fmt == "phoenix":
        yield json_text(phoenix_upload(items), indent=2) + "\n"
    elif fmt == "csv":
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=list(PLAIN_COLUMNS))
        writer.writeheader()
        for item in items:
            writer.writerow({key: cell(value) for key, value in plain_record(item).items()})
        yield out.getvalue()
    elif fmt in _LINE_FORMATS:
        for item in items:
            yield json_text(_LINE_FORMATS[fmt](item)) + "\n"
    else:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
