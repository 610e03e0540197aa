"""relmon's judges: three LLM-as-a-judge prompts (relevancy, correctness, grounded) as a standalone library.

    from judges import LLMClient, get_judge
    client = LLMClient(model="gpt-4.1-mini")
    verdict = get_judge("relevancy").evaluate(client, question="...", answer="...")

No Slack, no Celery, nothing else of relmon's: usable from a notebook.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from judges.names import JUDGE_NAMES

if TYPE_CHECKING:
    from judges.base import Judge
    from judges.client import LLMClient, LLMRequestError, Sampling
    from judges.correctness import CorrectnessJudge
    from judges.grounded import GroundedJudge
    from judges.relevancy import RelevancyJudge
    from judges.verdict import TransientLLMError, Verdict

# Loaded on first use (PEP 562): importing `judges` or `judges.names` costs nothing, the judges and the OpenAI SDK
# load when a judge or the client is first asked for.
_HOMES = {
    "Judge": "judges.base",
    "LLMClient": "judges.client",
    "LLMRequestError": "judges.client",
    "Sampling": "judges.client",
    "CorrectnessJudge": "judges.correctness",
    "GroundedJudge": "judges.grounded",
    "RelevancyJudge": "judges.relevancy",
    "TransientLLMError": "judges.verdict",
    "Verdict": "judges.verdict",
}
_CLASSES = ("RelevancyJudge", "CorrectnessJudge", "GroundedJudge")  # in JUDGE_NAMES' order


def __getattr__(name: str) -> Any:
    if name == "JUDGES":
        value: Any = _judges()
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module 'judges' has no attribute {name!r}")
    globals()[name] = value
    return value


def _judges() -> dict[str, type[Judge]]:
    judges = {judge.name: judge for judge in (__getattr__(cls) for cls in _CLASSES)}
    assert tuple(judges) == JUDGE_NAMES, "a judge class is named otherwise than in judges.names"
    return judges


def get_judge(name: str) -> Judge:
    """A judge by name: "relevancy", "correctness" or "grounded"."""
    judges = __getattr__("JUDGES")
    try:
        return judges[name]()
    except KeyError:
        raise ValueError(f"unknown judge {name!r}: choose one of {', '.join(judges)}") from None


__all__ = [
    "JUDGES",
    "JUDGE_NAMES",
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
