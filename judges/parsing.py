"""Tolerant reading of LLM replies: find the JSON object or the [[rating]] a judge gave, whatever prose, code
fences or trailing text surround it. Nothing here guesses: when the reply does not contain what the judge
asked for, `UnparseableReply` says what was missing."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

_RATING = re.compile(r"\[\[\s*([^\[\]]*?)\s*\]\]")


class UnparseableReply(ValueError):
    """The reply does not contain a usable verdict; the message says why."""


def _objects(text: str) -> tuple[list[tuple[int, int, dict[str, Any]]], list[int]]:
    """The top-level JSON objects of the reply (start, end, value), and the `{` that start none. After a brace that
    does not decode, the next one is tried on its own, so a stray brace or quote before the verdict (the judge
    quoting the answer it judged) cannot swallow it; the braces inside a decoded object are part of it."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, dict[str, Any]]] = []
    broken: list[int] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            broken.append(start)
        else:
            if isinstance(value, dict):
                found.append((start, end, value))
                start = text.find("{", end)
                continue
        start = text.find("{", start + 1)
    return found, broken


def extract_json_object(text: str) -> dict[str, Any]:
    """The reply's final verdict: the last complete top-level JSON object in `text`, which may wrap it in code
    fences, prose before or after, or both. The last one counts, as the last [[rating]] does: the judge may quote
    the answer it judged, and the answer may hold a verdict of its own (`{"score": 4}`) written to be taken for
    the judge's. An object inside another one is part of it, and a reply whose last object is cut off or malformed
    has no verdict (the complete one before it may be a quote): that would be a guess."""
    found, broken = _objects(text)
    if not found:
        if "{" in text:
            raise UnparseableReply("the reply has no valid JSON object (malformed JSON)")
        raise UnparseableReply("the reply has no JSON object")
    _, end, value = found[-1]
    if broken and broken[-1] >= end:
        raise UnparseableReply("the reply's last JSON object is cut off or malformed JSON")
    return value


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
