"""A team's own judge: a prompt the team wrote (judges.judge_files reads it from a file), a scale (an integer range
or pass/fail) and the score that fails. It is a judge like the seed ones: the same system message, delimiters,
size limit and cache key, and its reply is read by the same tolerant parser (judges.parsing).

relmon adds one fixed paragraph after the team's prompt that asks for the reply as a JSON object on the judge's
scale, so a team writes only what to judge, and every custom judge's reply is read the same way. A reply whose
score is not on the scale is an error verdict, never a guess."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, create_model

from judges.base import Judge, Parsed
from judges.context import split_context, split_documents
from judges.judge_spec import PASS_FAIL, PLACEHOLDERS, JudgeSpec, Scale
from judges.parsing import UnparseableReply, extract_json_object, validate
from judges.prompts import SYSTEM_MESSAGE, PromptTemplate


class CustomJudge(Judge):
    """A judge built from a JudgeSpec. Unlike the seed judges (one class each), its scale, prompt and output model
    are the instance's."""

    def __init__(self, spec: JudgeSpec) -> None:
        self.spec = spec
        self.name = spec.name  # type: ignore[misc]
        self.min_score = spec.scale.low  # type: ignore[misc]
        self.max_score = spec.scale.high  # type: ignore[misc]
        self.threshold = spec.fails_at
        self.max_reply_tokens = 400  # type: ignore[misc]  # a score and one or two sentences, in JSON
        self.system = SYSTEM_MESSAGE  # type: ignore[misc]
        # The team's text as written, then relmon's reply format: both are the prompt, both make its version.
        self.template = PromptTemplate(spec.prompt.rstrip() + spec.scale.reply_format(), "format")  # type: ignore[misc]
        self.inputs = {name: name for name in self.template.placeholders}  # type: ignore[misc]
        self.output_model = _output_model(spec.scale)  # type: ignore[misc]

    @property
    def needs_reference(self) -> bool:
        return "reference" in self.spec.needs or "documents" in self.spec.needs

    @property
    def is_pass_fail(self) -> bool:
        return self.spec.scale.pass_fail

    def values(self, question: str, answer: str, reference: str | None) -> dict[str, str]:
        """Every placeholder's text for this pair ("" when the pair has none): the earlier turns apart from the
        question, the retrieved passages apart from a reference answer."""
        context, bare_question = split_context(question)
        documents, other_reference = split_documents(reference)
        return {
            "question": bare_question,
            "answer": answer,
            "reference": other_reference or "",
            "context": context or "",
            "documents": documents or "",
        }

    def missing(self, question: str, answer: str, reference: str | None) -> list[str]:
        """The placeholders this judge needs that the pair has no text for."""
        values = self.values(question, answer, reference)
        return [name for name in self.spec.needs if not values[name].strip()]

    def placeholders(self, question: str, answer: str, reference: str | None) -> dict[str, str]:
        values = self.values(question, answer, reference)
        return {name: values[name] for name in self.template.placeholders}

    def evaluate(self, client, question, answer, reference=None, *, sampling=None):  # type: ignore[override]
        """As every judge, except that a pair without a text the judge needs is not judged by it, and says so."""
        if answer and answer.strip():
            missing = self.missing(question, answer, reference)
            if missing:
                wanted = ", ".join("{" + name + "}" for name in missing)
                return self._verdict(status="empty", error=f"not judged by {self.name}: the pair has no {wanted}")
        return super().evaluate(client, question, answer, reference, sampling=sampling)

    def parse(self, text: str) -> Parsed:
        result = validate(self.output_model, extract_json_object(text))
        return Parsed(score=result.score, reasoning=result.reasoning.strip())

    def fails(self, score: float | None) -> bool:
        return score is not None and score <= self.threshold

    def example_prompt(self, question: str, answer: str, reference: str | None, max_chars: int) -> str:
        """The prompt as the LLM would get it for this pair (`relmon judges check` shows one)."""
        return self.render(question, answer, reference, max_chars)

    def __repr__(self) -> str:
        scale, version = self.spec.scale, self.prompt_version
        return f"CustomJudge({self.name!r}, scale {scale}, fails at {self.threshold}, prompt {version})"


def _output_model(scale: Scale) -> type[BaseModel]:
    """The reply's model on this scale: the strict JSON schema sent, and what the reply is validated against (a
    score off the scale is an UnparseableReply, so an error verdict)."""
    from typing import Annotated

    from pydantic import BeforeValidator

    score_type = Annotated[int, BeforeValidator(scale.score_of)]
    return create_model(
        "CustomJudgeOutput",
        __config__=ConfigDict(extra="ignore"),
        score=(score_type, Field(..., ge=scale.low, le=scale.high, description=f"The score on {scale}.")),
        reasoning=(str, Field(..., description="One or two sentences saying why.")),
    )


__all__ = ["PASS_FAIL", "PLACEHOLDERS", "CustomJudge", "JudgeSpec", "Scale", "UnparseableReply"]
