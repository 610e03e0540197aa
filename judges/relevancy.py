"""Answer relevancy (the default judge): how well the answer addresses the question, 0 to 4, independent of
factual correctness. Seed: 002_1d41c61cba137151.txt. The LLM answers JSON {score, reasoning}."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from judges.base import Judge, Parsed
from judges.names import RELEVANCY
from judges.parsing import extract_json_object, integer_score, validate
from judges.prompts import PromptTemplate


class RelevancyOutput(BaseModel):
    """The seed's AnswerRelevancyResult."""

    model_config = ConfigDict(extra="ignore")

    score: Annotated[int, BeforeValidator(integer_score)] = Field(
        ..., ge=0, le=4, description="Integer 0 (completely irrelevant) to 4 (fully relevant)."
    )
    reasoning: str = Field(..., description="Concise 1-2 sentence justification for the score.")


class RelevancyJudge(Judge):
    name = RELEVANCY
    max_score = 4
    max_reply_tokens = 300  # a score and 1–2 sentences of reasoning in JSON: under 100 tokens
    template = PromptTemplate.load("relevancy.txt", "format")
    inputs = {"question": "user_message", "answer": "response"}
    output_model = RelevancyOutput

    def parse(self, text: str) -> Parsed:
        result = validate(RelevancyOutput, extract_json_object(text))
        return Parsed(score=result.score, reasoning=result.reasoning.strip())
