"""Labelled answers in the `relmon eval` JSONL format (question, answer, optional reference, the human's score),
and the canary set shipped with the judges: support-style answers labelled by hand on the relevancy scale."""

from __future__ import annotations

from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from judges.base import Judge
from judges.jsonl import BadLine, json_objects

SUPPORT_CANARY = Path(str(files("judges") / "canary" / "support_canary.jsonl"))


class LabelError(ValueError):
    """A labels file that cannot be read; the message names the file and line."""


@dataclass(frozen=True)
class Label:
    line: int
    question: str
    answer: str
    reference: str | None
    human: int | None  # None: the human says the answer cannot be graded (grounded judge's null)


def read_labels(path: Path, judge: Judge) -> list[Label]:
    """Read a JSONL file of labelled answers; any malformed line is a LabelError naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise LabelError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise LabelError(f"{path} is not UTF-8 (byte {exc.start}): save it as UTF-8") from None
    labels = []
    for number, item in json_objects(enumerate(lines, start=1)):
        if isinstance(item, BadLine):
            raise LabelError(f"{path}:{number}: {item.problem}")
        question, answer = item.get("question"), item.get("answer")
        if not isinstance(question, str) or not isinstance(answer, str):
            raise LabelError(f"{path}:{number}: needs string fields question and answer")
        key = "human_score" if "human_score" in item else "score" if "score" in item else None
        if key is None:
            raise LabelError(f"{path}:{number}: needs the human score (human_score or score)")
        human = item[key]
        if human is not None and (
            isinstance(human, bool)
            or not isinstance(human, int | float)
            or human != int(human)
            or not judge.min_score <= human <= judge.max_score
        ):
            raise LabelError(
                f"{path}:{number}: {key} {human!r} is not an integer on the {judge.name} scale "
                f"{judge.min_score}–{judge.max_score}"
            )
        reference = item.get("reference")
        labels.append(Label(number, question, answer, reference, None if human is None else int(human)))
    if not labels:
        raise LabelError(f"{path} has no labelled lines")
    return labels
