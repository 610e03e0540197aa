"""Correctness against a reference answer, 0 to 2. Seed: 001_8bb062aad4533b87.txt. The LLM explains, then
gives its rating as [[rating]]; it is read from plain text (no structured output: the format is the seed's)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field

from judges.base import Judge, Parsed
from judges.names import CORRECTNESS
from judges.parsing import integer_score, last_bracket_rating, validate
from judges.prompts import REFERENCE_SYSTEM_MESSAGE, PromptTemplate


class CorrectnessRating(BaseModel):
    rating: Annotated[int, BeforeValidator(integer_score)] = Field(..., ge=0, le=2)


class CorrectnessJudge(Judge):
    name = CORRECTNESS
    max_score = 2
    max_reply_tokens = 800  # an explanation comparing the answers, then [[rating]]: a few paragraphs
    system = REFERENCE_SYSTEM_MESSAGE
    template = PromptTemplate.load("correctness.txt", "format")
    inputs = {"question": "question", "reference": "expected_answer", "answer": "generated_answer"}

    def parse(self, text: str) -> Parsed:
        rating = validate(CorrectnessRating, {"rating": last_bracket_rating(text)}).rating
        return Parsed(score=rating, reasoning=text.strip())
