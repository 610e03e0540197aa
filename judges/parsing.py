"""Tolerant reading of LLM replies: find the JSON object or the [[rating]] a judge gave, whatever prose, code
fences or trailing text surround it. Nothing here guesses: when the reply does not contain what the judge
asked for, `UnparseableReply` says what was missing."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_RATING = re.compile(r"\[\[\s*([^\[\]]*?)\s*\]\]")


class UnparseableReply(ValueError):
    """The reply does not contain a usable verdict; the message says why."""


def _candidates(text: str) -> list[str]:
    """Texts that may hold the JSON object, most likely first: fenced blocks, then the whole reply."""
    return [block.strip() for block in _FENCE.findall(text)] + [text.strip()]


def _balanced_end(text: str, start: int) -> int:
    """Index just past the brace that closes the one at `start` (braces inside JSON strings do not count), or
    len(text) when it never closes (a truncated reply)."""
    depth = 0
    in_string = escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return len(text)


def extract_json_object(text: str) -> dict[str, Any]:
    """The first top-level JSON object in `text`, which may wrap it in code fences, prose before or after, or
    both. An object nested inside a malformed one is not taken for the answer: that would be a guess."""
    decoder = json.JSONDecoder()
    for candidate in _candidates(text):
        start = candidate.find("{")
        while start != -1:
            try:
                value, end = decoder.raw_decode(candidate, start)
            except json.JSONDecodeError:
                value, end = None, _balanced_end(candidate, start)
            if isinstance(value, dict):
                return value
            start = candidate.find("{", max(end, start + 1))
    if "{" in text:
        raise UnparseableReply("the reply has no valid JSON object (malformed JSON)")
    raise UnparseableReply("the reply has no JSON object")


def last_bracket_rating(text: str) -> str:
    """The content of the last [[...]] in `text` ("The rating is: [[2]]" gives "2"). The last one counts: the
    prompt asks for the rating after the explanation, and the explanation may quote the format."""
    matches = _RATING.findall(text)
    if not matches:
        raise UnparseableReply("the reply has no [[rating]]")
    return matches[-1]


def integer_score(value: Any) -> Any:
    """Pydantic before-validator for scores: integers, integral floats (3.0) and digit strings ("3") pass;
    booleans, fractions (2.5) and words do not. The scale check is left to the field's bounds."""
    if isinstance(value, bool):
        raise ValueError("the score must be an integer, not a boolean")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"the score must be an integer, not {value}")
        return int(value)
    if isinstance(value, str):
        stripped = value.strip()
        if re.fullmatch(r"[+-]?\d+(\.0+)?", stripped):
            return int(float(stripped))
        raise ValueError(f"the score must be an integer, not {value!r}")
    return value


def validate(model: type[BaseModel], data: Any) -> Any:
    """`model.model_validate(data)`, with validation errors turned into one readable `UnparseableReply`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error["loc"]) or "reply"
            got = f" (got {error['input']!r})" if error["type"] != "missing" else ""
            problems.append(f"{where}: {error['msg']}{got}")
        raise UnparseableReply("; ".join(problems)) from None
