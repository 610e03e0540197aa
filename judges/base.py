"""What every judge does with a question and an answer: check there is something to judge, look in the cache,
render its prompt within budget, call the LLM once, parse the reply into a verdict.

A request is laid out constant part first: the judge's system message, then its seed prompt, whose
instructions all come before the placeholders. The texts to judge (the only variable part) come last, so
every request of a judge starts with the same long prefix, which providers cache and bill at a lower rate."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel

from judges.client import LLMClient, LLMReply, LLMRequestError, Sampling
from judges.parsing import UnparseableReply
from judges.prompts import SYSTEM_MESSAGE, PromptTemplate, PromptTooSmall
from judges.verdict import Verdict


@dataclass(frozen=True)
class Parsed:
    """What a judge read in a reply: a score on its scale (None for a null verdict) and the LLM's reasoning."""

    score: int | None
    reasoning: str


class Judge:
    name: ClassVar[str]
    min_score: ClassVar[int] = 0  # the scale, min_score to max_score
    max_score: ClassVar[int]
    template: ClassVar[PromptTemplate]
    # The template's placeholder for each input the judge reads: "question", "answer" and, for a judge that
    # compares with a reference answer (and so needs one), "reference".
    inputs: ClassVar[dict[str, str]]
    # Sent first, as the system message: the texts to judge are data, not instructions.
    system: ClassVar[str] = SYSTEM_MESSAGE
    # The pydantic model of the reply, sent as a strict JSON schema; None for free-text judges.
    output_model: ClassVar[type[BaseModel] | None] = None
    # The bound on the reply, in tokens: what the seed asks for with room to spare (a small model rambles; a paid
    # one bills what it writes). A reply cut at the bound is an error verdict, never read for a score.
    max_reply_tokens: ClassVar[int]

    @functools.cached_property
    def prompt_version(self) -> str:
        """Changes with the seed template and with the system message: either changes what the LLM is asked."""
        return hashlib.sha256(f"{self.system}\0{self.template.text}".encode()).hexdigest()[:16]

    @property
    def needs_reference(self) -> bool:
        return "reference" in self.inputs

    def placeholders(self, question: str, answer: str, reference: str | None) -> dict[str, str]:
        """The template's placeholder values."""
        given = {"question": question, "answer": answer, "reference": reference or ""}
        return {placeholder: given[name] for name, placeholder in self.inputs.items()}

    def parse(self, text: str) -> Parsed:
        """Read the reply; raise UnparseableReply when it holds no valid score."""
        raise NotImplementedError

    def normalize(self, score: float | None) -> float | None:
        if score is None:
            return None
        return (score - self.min_score) / (self.max_score - self.min_score)

    def cache_key(self, model: str, question: str, answer: str, reference: str | None) -> str:
        digest = hashlib.sha256()
        for part in (self.name, model, self.prompt_version, question, answer, reference or ""):
            encoded = part.encode("utf-8")
            digest.update(len(encoded).to_bytes(8, "big"))  # length-prefixed: no two inputs share a key
            digest.update(encoded)
        return digest.hexdigest()

    def render(self, question: str, answer: str, reference: str | None, max_chars: int) -> str:
        """The seed prompt filled in, cut so that it and the system message fit in `max_chars` characters."""
        values = self.placeholders(question, answer, reference)
        return self.template.render_within(values, max_chars, preamble_chars=len(self.system))

    def messages(self, question: str, answer: str, reference: str | None, max_chars: int) -> list[dict[str, str]]:
        """The chat messages of one request: the constant system message, then the seed prompt with the texts."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.render(question, answer, reference, max_chars)},
        ]

    def evaluate(
        self,
        client: LLMClient,
        question: str,
        answer: str,
        reference: str | None = None,
        *,
        sampling: Sampling | None = None,
    ) -> Verdict:
        """Judge one answer. Returns a Verdict (status ok, null, error or empty); raises TransientLLMError when
        the LLM stayed unreachable or overloaded after the client's retries. `sampling` other than the default
        (a second opinion) asks the LLM afresh: the verdict cache is neither read nor filled."""
        sampling = sampling or Sampling()
        model = sampling.model or client.model
        if not answer or not answer.strip():
            return self._verdict(status="empty", error="nothing to judge: the answer is empty")
        if self.needs_reference and not (reference and reference.strip()):
            return self._verdict(
                status="error",
                error=f"the {self.name} judge needs a reference answer to compare with (--reference)",
            )
        key = self.cache_key(model, question, answer, reference)
        known = self.from_cache(client, key) if sampling.is_default else None
        if known is not None:
            return known
        try:
            messages = self.messages(question, answer, reference, client.max_prompt_chars)
        except PromptTooSmall as exc:
            return self._verdict(status="error", model=model, error=str(exc))
        try:
            reply = client.complete(messages, self.output_model, sampling=sampling, max_tokens=self.max_reply_tokens)
        except LLMRequestError as exc:
            return self._verdict(status="error", model=model, error=str(exc))
        verdict = self.verdict_of(reply)
        if verdict.status in ("ok", "null") and sampling.is_default:
            client.cache.put(key, verdict)
        return verdict

    def verdict_of(self, reply: LLMReply) -> Verdict:
        """The verdict a reply holds (online, or one line of a Batch API output file)."""
        measured = {
            "model": reply.model,
            "prompt_tokens": reply.prompt_tokens,
            "cached_tokens": reply.cached_tokens,
            "completion_tokens": reply.completion_tokens,
            "latency_ms": round(reply.latency_ms, 1),
            "raw_output": reply.text,
        }
        if reply.finish_reason == "length":  # whatever it holds so far, its verdict was not written: no guessing
            return self._verdict(
                status="error",
                error=f"the judge's reply was cut at its bound of {self.max_reply_tokens} tokens before its verdict",
                **measured,
            )
        try:
            parsed = self.parse(reply.text)
        except UnparseableReply as exc:
            return self._verdict(status="error", error=f"cannot read the judge's reply: {exc}", **measured)
        return self._verdict(
            status="ok" if parsed.score is not None else "null",
            score=parsed.score,
            normalized_score=self.normalize(parsed.score),
            reasoning=parsed.reasoning,
            **measured,
        )

    def from_cache(self, client: LLMClient, key: str) -> Verdict | None:
        """The client's cached verdict for this key, as a copy: marked cached, with no tokens or latency (a cache
        hit calls nothing and costs nothing). The pipeline looks here before it charges the budget."""
        known = client.cache.get(key)
        if known is None:
            return None
        return known.model_copy(
            update={
                "cached": True,
                "prompt_tokens": None,
                "cached_tokens": None,
                "completion_tokens": None,
                "latency_ms": None,
            }
        )

    def _verdict(self, **fields: object) -> Verdict:
        return Verdict(judge=self.name, max_score=self.max_score, prompt_version=self.prompt_version, **fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(scale {self.min_score}–{self.max_score}, prompt {self.prompt_version})"
