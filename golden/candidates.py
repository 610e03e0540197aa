"""The candidates file of `relmon regress`: the answers a new version of the bot gave to the golden questions, as
JSON lines or CSV with a header (`id` or `question`, and `answer`; `relmon golden export --format jsonl` is the
template). Read line by line, within a byte limit, every line checked before anything is judged: a problem names
its line, and a file with any problem judges nothing."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import BinaryIO

from judges.jsonl import BadLine, csv_problem, json_objects
from judges.safe_text import not_text
from store.golden_rules import normalized_question

MAX_BYTES = 100 * 1024 * 1024  # answers to 100,000 questions of 1 KB each: a larger file is not a candidates file
MAX_PROBLEMS = 20  # listed; the rest are counted


@dataclass(frozen=True)
class Candidate:
    line: int
    item_id: int
    answer: str


class CandidatesProblem(ValueError):
    """The file cannot be judged: the problems, one a line, each with its line number."""

    def __init__(self, problems: list[str], more: int = 0) -> None:
        self.problems, self.more = problems, more
        tail = f"\n… and {more} more" if more else ""
        super().__init__("\n".join(problems) + tail)


def _lines(handle: BinaryIO, max_bytes: int) -> Iterator[tuple[int, str]]:
    """(line number, text) of each line, decoded as UTF-8; stops with a problem past the byte limit."""
    read, number = 0, 0
    while raw := handle.readline(max_bytes - read + 1):  # never more than the limit in memory, even on one line
        number += 1
        read += len(raw)
        if read > max_bytes:
            raise CandidatesProblem(
                [f"line {number}: the file passes {max_bytes // 2**20} MB here: not a candidates file"]
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CandidatesProblem(
                [f"line {number}: not UTF-8 (byte {error.start + 1}): save the file as UTF-8"]
            ) from None
        yield number, text.lstrip("\ufeff") if number == 1 else text


def _records(handle: BinaryIO, max_bytes: int) -> Iterator[tuple[int, Mapping[str, object] | str]]:
    """(line number, record) of JSON lines or CSV rows; a string instead of a record is that line's problem."""
    lines = (pair for pair in _lines(handle, max_bytes) if pair[1].strip())
    first = next(lines, None)
    if first is None:
        return
    if first[1].lstrip().startswith("{"):
        for number, record in json_objects(_chain(first, lines)):
            yield number, f"line {number}: {record.problem}" if isinstance(record, BadLine) else record
        return
    numbers: list[int] = []

    def texts() -> Iterator[str]:
        for number, text in _chain(first, lines):
            numbers.append(number)
            yield text

    reader = csv.DictReader(texts())
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:  # the reader cannot go on past a broken line: the file stops there
            yield numbers[-1], f"line {numbers[-1]}: {csv_problem(error)}"
            return
        yield numbers[-1], row


def _chain(first: tuple[int, str], rest: Iterator[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    yield first
    yield from rest


MAX_ID_DIGITS = 18  # a 64-bit id; int() of thousands of digits is slow, then refused


def _item_id(value: object) -> int | None:
    """An item's id as exported: 12, "12" or "relmon-golden-12", in the digits 0–9 only (int() also reads "١٢" or
    "１２" as 12: an id typed in another script is refused, not guessed)."""
    if isinstance(value, bool):
        return None
    text = str(value).strip().removeprefix("relmon-golden-")
    ascii_digits = text.isascii() and text.isdigit() and len(text) <= MAX_ID_DIGITS
    return int(text) if ascii_digits else None


def read_candidates(handle: BinaryIO, items: Mapping[int, str], *, max_bytes: int | None = None) -> list[Candidate]:
    """The candidates, in file order, for the golden items `items` (id → question). Raises CandidatesProblem
    listing every problem: unknown ids or questions, missing answers, an item answered twice, bad lines."""
    by_question: dict[str, list[int]] = {}
    for item_id, question in items.items():
        by_question.setdefault(normalized_question(question), []).append(item_id)
    problems: list[str] = []
    seen: dict[int, int] = {}
    found: list[Candidate] = []
    for number, record in _records(handle, MAX_BYTES if max_bytes is None else max_bytes):
        if isinstance(record, str):
            problems.append(record)
            continue
        item_id, problem = _which_item(record, number, items, by_question)
        answer = record.get("answer")
        if problem is None and (not isinstance(answer, str) or not answer.strip()):
            problem = f"line {number}: no answer for item {item_id} (fill in `answer`)"
        if problem is None and (why := not_text(answer)) is not None:
            problem = f"line {number}: the answer holds {why}: not text"
        if problem is None and item_id in seen:
            problem = f"line {number}: item {item_id} again (first on line {seen[item_id]}): one answer per item"
        if problem is not None:
            problems.append(problem)
            continue
        seen[item_id] = number
        found.append(Candidate(number, item_id, answer.strip()))
    if problems:
        raise CandidatesProblem(problems[:MAX_PROBLEMS], max(0, len(problems) - MAX_PROBLEMS))
    if not found:
        raise CandidatesProblem(["line 1: no candidate answers in the file"])
    return found


def _which_item(
    record: Mapping[str, object], number: int, items: Mapping[int, str], by_question: Mapping[str, list[int]]
) -> tuple[int, str | None]:
    ident = record.get("id")
    if ident not in (None, ""):
        item_id = _item_id(ident)
        named = ident[:40] if isinstance(ident, str) else ident  # as written, within reason
        if item_id is None and any(c.isdigit() and not c.isascii() for c in str(ident)):
            return -1, f"line {number}: the id {named!r} is not written in the digits 0–9"
        if item_id is None or item_id not in items:
            return -1, f"line {number}: no golden item {named!r} (see `relmon golden list`)"
        return item_id, None
    question = record.get("question")
    if not isinstance(question, str) or not question.strip():
        return -1, f"line {number}: neither `id` nor `question`"
    matches = by_question.get(normalized_question(question), [])
    if len(matches) != 1:
        what = "no golden item asks" if not matches else f"{len(matches)} golden items ask"
        return -1, f"line {number}: {what} {question.strip()[:60]!r}: give its `id`"
    return matches[0], None
