"""JSON lines with their line numbers: the one reader of the labels files (`judges.labels`), the golden set's
imports (`golden.importing`) and `relmon regress`'s candidates (`golden.candidates`). A bad line is a value, not an
exception, so that a caller may stop at the first (labels, imports) or list them all (candidates); each caller
says where, in its own words (`path:N:` or `line N:`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BadLine:
    """What is wrong with one line: not JSON, or JSON but not an object."""

    problem: str


def json_objects(lines: Iterable[tuple[int, str]]) -> Iterator[tuple[int, dict[str, Any] | BadLine]]:
    """(line number, object) for each numbered line that is not blank; a `BadLine` in place of the object says
    what is wrong with that line."""
    for number, line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            yield number, BadLine(f"not JSON ({error.msg})")
            continue
        if isinstance(value, dict):
            yield number, value
        else:
            yield number, BadLine(f"expected a JSON object, got {type(value).__name__}")
