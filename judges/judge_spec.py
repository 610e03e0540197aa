"""What a team's judge file says, checked (judges.judge_files reads it; judges.custom runs it): the scale, the score
that fails, the placeholders. A leaf: the bot and the channel rules read judges' names and thresholds from it
without loading the LLM client."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judges.parsing import integer_score

# What relmon fills in a team's prompt: the customer's question, the bot's answer, a reference answer, the
# conversation's earlier turns and the passages the bot retrieved.
PLACEHOLDERS = ("question", "answer", "reference", "context", "documents")
# The seed judges' placeholder names for the inputs (the delimiter lines name them): the same texts, the same words.
PASS_FAIL = "pass/fail"
_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class Scale:
    """The scores a judge gives: `low`..`high`; pass/fail is 0 (fail) and 1 (pass)."""

    low: int
    high: int
    pass_fail: bool = False

    @classmethod
    def parse(cls, text: str) -> Scale:
        """`"1..5"` or `"pass/fail"`; ValueError saying what is accepted otherwise."""
        if text.strip().lower() == PASS_FAIL:
            return cls(0, 1, pass_fail=True)
        match = _RANGE.match(text)
        if match is None:
            raise ValueError(f'scale {text!r} is neither a range like "1..5" nor "pass/fail"')
        low, high = int(match.group(1)), int(match.group(2))
        if not low < high:
            raise ValueError(f"scale {text!r}: the lowest score must be below the highest")
        if high - low > 100:
            raise ValueError(f"scale {text!r}: at most 100 steps")
        return cls(low, high)

    def __str__(self) -> str:
        return PASS_FAIL if self.pass_fail else f"{self.low}..{self.high}"

    def score_of(self, value: Any) -> Any:
        """Pydantic before-validator: pass/fail takes "pass"/"fail" and booleans as 1/0 too."""
        if self.pass_fail:
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, str) and value.strip().lower() in ("pass", "fail"):
                return 1 if value.strip().lower() == "pass" else 0
        return integer_score(value)

    def reply_format(self) -> str:
        """The paragraph relmon adds after a team's prompt: how to reply, on this scale."""
        if self.pass_fail:
            scores = "1 if the answer passes, 0 if it fails"
        else:
            scores = f"an integer from {self.low} (worst) to {self.high} (best)"
        return (
            "\n\nReply with only a JSON object, nothing before or after it: "
            '{"score": <score>, "reasoning": "<one or two sentences saying why>"}, '
            f"where score is {scores}."
        )


@dataclass(frozen=True)
class JudgeSpec:
    """What a judge file says, checked: judges.judge_files builds it; CustomJudge runs it."""

    name: str
    prompt: str
    scale: Scale
    fails_at: int  # a score at or below this fails (and alerts)
    needs: tuple[str, ...]  # the placeholders a pair must have to be judged by it
    description: str = ""
    source: str = ""  # the file it came from
    labels: str | None = None  # a labelled JSONL (relmon eval's format), beside the file: the canary re-judges it

    @property
    def labels_path(self) -> Path | None:
        """The labelled file, relative to the judge file's folder (None: none given)."""
        if not self.labels:
            return None
        path = Path(self.labels).expanduser()
        return path if path.is_absolute() or not self.source else Path(self.source).parent / path
