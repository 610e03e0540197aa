"""relmon's judges: three LLM-as-a-judge prompts (relevancy, correctness, grounded) as a standalone library.

    from judges import LLMClient, get_judge
    client = LLMClient(model="gpt-4.1-mini")
    verdict = get_judge("relevancy").evaluate(client, question="...", answer="...")

No Slack, no Celery, nothing else of relmon's: usable from a notebook.
"""

from __future__ import annotations

from judges.base import Judge
from judges.client import LLMClient, LLMRequestError, Sampling
from judges.correctness import CorrectnessJudge
from judges.grounded import GroundedJudge
from judges.relevancy import RelevancyJudge
from judges.verdict import TransientLLMError, Verdict

JUDGES: dict[str, type[Judge]] = {judge.name: judge for judge in (RelevancyJudge, CorrectnessJudge, GroundedJudge)}


def get_judge(name: str) -> Judge:
    """A judge by name: "relevancy", "correctness" or "grounded"."""
    try:
        return JUDGES[name]()
    except KeyError:
        raise ValueError(f"unknown judge {name!r}: choose one of {', '.join(JUDGES)}") from None


__all__ = [
    "JUDGES",
    "CorrectnessJudge",
    "GroundedJudge",
    "Judge",
    "LLMClient",
    "LLMRequestError",
    "RelevancyJudge",
    "Sampling",
    "TransientLLMError",
    "Verdict",
    "get_judge",
]
