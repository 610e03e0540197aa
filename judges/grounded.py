"""Grounded question answering: two answers graded 1 to 5 for relevancy, or null when an answer says no document
answers the question. Seed: 000_a25f59a3403f0ff7.txt. Answer 1 is the reference (expected) answer, answer 2
the one being judged: the verdict is answer 2's grade. A null grade is a "null" verdict, never a low score."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from judges.base import Judge, Parsed
from judges.names import GROUNDED
from judges.parsing import UnparseableReply, extract_json_object, integer_score, validate
from judges.prompts import REFERENCE_SYSTEM_MESSAGE, PromptTemplate


def _null_or_integer(value: Any) -> Any:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("null", "none", "")):
        return None
    return integer_score(value)


class GroundedAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    answer_affirms_no_document_answers: bool
    answer_relevancy_justification: str
    answer_relevancy: Annotated[int | None, BeforeValidator(_null_or_integer)] = Field(..., ge=1, le=5)


class GroundedOutput(BaseModel):
    answer_1: GroundedAnswer
    answer_2: GroundedAnswer


class GroundedJudge(Judge):
    name = GROUNDED
    min_score = 1
    max_score = 5
    max_reply_tokens = 700  # two graded answers in JSON, each with a justification
    system = REFERENCE_SYSTEM_MESSAGE
    template = PromptTemplate.load("grounded.txt", "jinja")
    inputs = {"question": "input", "reference": "expected_output", "answer": "actual_output"}
    output_model = GroundedOutput

    def parse(self, text: str) -> Parsed:
        data = extract_json_object(text)
        if "answer_2" not in data:
            raise UnparseableReply("the reply has no answer_2 (the grade of the answer being judged)")
        graded = validate(GroundedAnswer, data["answer_2"])
        # The prompt's rule: an answer that says no document answers the question is null, whatever grade the
        # LLM also wrote; a null verdict never raises a relevancy alert.
        score = None if graded.answer_affirms_no_document_answers else graded.answer_relevancy
        return Parsed(score=score, reasoning=graded.answer_relevancy_justification.strip())
