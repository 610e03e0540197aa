"""JSON lines with their line numbers: the one reader of the labels files (`judges.labels`), the golden set's
imports (`golden.importing`) and `relmon regress`'s candidates (`golden.candidates`). A bad line is a value, not an
exception, so that a caller may stop at the first (labels, imports) or list them all (candidates); each caller
says where, in its own words (`path:N:` or `line N:`). The same readers' CSV and whole-document problems are said
here too (`csv_problem`, `deep_line`), so that every input file names its bad line the same way."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

TOO_DEEP = "JSON nested too deeply (arrays or objects inside each other hundreds of levels down): not a record"
CSV_FIELD_LIMIT = csv.field_size_limit()  # 128 KiB: Python's csv module refuses a longer field


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
        except RecursionError:  # `[[[[…` a few thousand deep: the parser gives up, the line is not a record
            yield number, BadLine(TOO_DEEP)
            continue
        if isinstance(value, dict):
            yield number, value
        else:
            yield number, BadLine(f"expected a JSON object, got {type(value).__name__}")


def csv_problem(error: csv.Error) -> str:
    """What a csv.Error says, for a person: a field past the csv module's limit is named as such."""
    if "field larger than field limit" in str(error):
        limit = f"{CSV_FIELD_LIMIT // 1024} KiB ({CSV_FIELD_LIMIT:,} characters)"
        return f"a field is over {limit}: not a question or an answer"
    return f"not CSV ({error})"


def deep_line(text: str, depth: int = 500) -> int:
    """The number of the line where JSON text passes `depth` levels of nesting (1 when it never does): where a
    document the parser gave up on (RecursionError) went too deep. Brackets inside strings do not count."""
    level, line = 0, 1
    for match in re.finditer(r'"(?:[^"\\\n]|\\.)*"|[\[\]{}\n]', text):
        token = match.group()
        if token == "\n":
            line += 1
        elif token in "[{":
            level += 1
            if level > depth:
                return line
        elif token in "]}":
            level -= 1
    return 1
