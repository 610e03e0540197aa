"""`relmon golden import`: a team's existing set in any of golden.formats' formats, read back to plain rows
(`question`, `expected`, `context`, `bot_answer`, `topic`, `external_id`). Pure: the text in, the rows out, or an
ImportError_ naming the line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from judges.jsonl import TOO_DEEP, BadLine, csv_problem, deep_line, json_objects
from judges.safe_text import not_text

MAX_TOPIC = 200  # store.golden_models.GoldenItem.topic: a longer one is not a topic's name
_QUESTION_KEYS = ("question", "input", "query", "prompt", "text")
_ANSWER_KEYS = ("answer", "output", "expected", "expected_output", "response", "text")


class ImportProblem(ValueError):
    """A record that cannot be read: says where."""


def _text_of(value: Any, keys: tuple[str, ...]) -> str | None:
    """A text from a tool's field: a string as it is; an object's first known key (`{"question": ...}`), else its
    only string value."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, dict):
        for key in keys:
            if isinstance(value.get(key), str) and value[key].strip():
                return value[key].strip()
        strings = [v for v in value.values() if isinstance(v, str) and v.strip()]
        return strings[0].strip() if len(strings) == 1 else None
    if isinstance(value, list):
        return "\n".join(str(v) for v in value if v) or None
    return str(value)


def _context_of(value: Any) -> str | None:
    if isinstance(value, dict):
        value = value.get("context")
    if isinstance(value, list):
        return "\n".join(str(v) for v in value if v) or None
    return value.strip() or None if isinstance(value, str) else None


def _meta(record: dict[str, Any], *names: str) -> dict[str, Any]:
    for name in names:
        if isinstance(record.get(name), dict):
            return record[name]
    return {}


def row_of(record: dict[str, Any], where: str) -> dict[str, Any]:
    """One record of any tool's format as a plain row."""
    if "inputs" in record:  # LangSmith
        inputs, outputs, meta = record.get("inputs"), record.get("outputs"), _meta(record, "metadata")
    elif "expected_output" in record or "actual_output" in record:  # DeepEval
        inputs, outputs, meta = record.get("input"), record.get("expected_output"), _meta(record, "additional_metadata")
    elif "expectedOutput" in record:  # Langfuse
        inputs, outputs, meta = record.get("input"), record.get("expectedOutput"), _meta(record, "metadata")
    elif "input" in record:  # Braintrust
        inputs, outputs, meta = record.get("input"), record.get("expected"), _meta(record, "metadata")
    else:  # relmon's own jsonl / csv
        inputs, outputs, meta = record.get("question"), record.get("expected"), record
    question = _text_of(inputs, _QUESTION_KEYS)
    if not question:
        raise ImportProblem(f"{where}: no question (expected `question`, `input` or `inputs`)")
    context = _context_of(record.get("context")) or (_context_of(inputs) if isinstance(inputs, dict) else None)
    bot_answer = record.get("actual_output") or meta.get("bot_answer")
    ident = record.get("id") or meta.get("relmon_id")
    topic = meta.get("topic") if isinstance(meta.get("topic"), str) else None
    if topic is not None and len(topic) > MAX_TOPIC:
        raise ImportProblem(
            f"{where}: the topic is {len(topic):,} characters long: a topic's name has at most {MAX_TOPIC}"
        )
    row = {
        "question": question,
        "expected": _text_of(outputs, _ANSWER_KEYS),
        "context": context,
        "bot_answer": bot_answer if isinstance(bot_answer, str) and bot_answer.strip() else None,
        "topic": topic,
        "external_id": str(ident)[:200] if ident not in (None, "") else None,
    }
    for name, value in row.items():
        problem = not_text(value) if isinstance(value, str) else None
        if problem is not None:
            raise ImportProblem(f"{where}: the {name} holds {problem}: not text relmon can store")
    return row


def _phoenix_rows(body: dict[str, Any]) -> list[dict[str, Any]]:
    inputs, outputs, metadata = body.get("inputs"), body.get("outputs") or [], body.get("metadata") or []
    if not isinstance(inputs, list):
        raise ImportProblem("line 1: a Phoenix upload needs `inputs` as a list")
    rows = []
    for index, item in enumerate(inputs):
        record = {
            "inputs": item,
            "outputs": outputs[index] if index < len(outputs) else None,
            "metadata": metadata[index] if index < len(metadata) else {},
        }
        rows.append(row_of(record, f"example {index + 1}"))
    return rows


def read_any(text: str) -> list[dict[str, Any]]:
    """The rows of a file's text: a JSON list (DeepEval), a JSON object (a Phoenix upload body), JSON lines
    (Langfuse, LangSmith, Braintrust, relmon) or CSV with a header (relmon, or DeepEval's CSV columns)."""
    stripped = text.lstrip("\ufeff").strip()
    if not stripped:
        return []
    if stripped[0] in "[{":
        try:
            whole = json.loads(stripped)
        except json.JSONDecodeError:
            whole = None  # JSON lines: read one line at a time below
        except RecursionError:
            raise ImportProblem(f"line {deep_line(stripped)}: {TOO_DEEP}") from None
        if isinstance(whole, list):
            return [row_of(_record(r, f"record {i + 1}"), f"record {i + 1}") for i, r in enumerate(whole)]
        if isinstance(whole, dict):
            return (
                _phoenix_rows(whole)
                if "inputs" in whole and isinstance(whole["inputs"], list)
                else [row_of(whole, "line 1")]
            )
        rows = []
        for number, record in json_objects(enumerate(stripped.splitlines(), start=1)):
            if isinstance(record, BadLine):
                raise ImportProblem(f"line {number}: {record.problem}")
            rows.append(row_of(record, f"line {number}"))
        return rows
    read = [0]  # the number of the last line the reader took (its own line_num lags on some errors)

    def lines() -> Iterator[str]:
        for number, line in enumerate(io.StringIO(stripped), start=1):
            read[0] = number
            yield line

    rows = []
    try:
        for record in csv.DictReader(lines()):
            rows.append(row_of(dict(record), f"line {read[0]}"))  # its last line: a field may hold newlines
    except csv.Error as error:
        raise ImportProblem(f"line {read[0]}: {csv_problem(error)}") from None
    return rows


def _record(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ImportProblem(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value
