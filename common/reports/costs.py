"""What the judges' LLM calls cost: token counts as the provider reported them, and their estimated price.

A count the provider did not report is unknown, not 0 (store.models.Judgment): a server without
`prompt_tokens_details` (llama-cpp-python, Ollama, many gateways) says nothing of its prompt cache, so its input is
priced at the full input rate (an upper bound) and counted apart, and a call that reported no usage at all is
counted apart rather than as a free one."""

from __future__ import annotations

from dataclasses import dataclass

from store.models import JudgmentStatus
from store.stats_queries import JudgmentRow

BATCH_DISCOUNT = 0.5  # the Batch API bills half the online price


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, for the estimated cost. Cached input (read from the provider's prompt cache)
    costs half the input price unless `cached_input_per_million` says otherwise."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0
    cached_input_per_million: float | None = None

    @property
    def cached_input(self) -> float:
        if self.cached_input_per_million is None:
            return self.input_per_million / 2
        return self.cached_input_per_million


@dataclass(frozen=True)
class Tokens:
    prompt: int = 0  # every input token reported, the cached ones included
    completion: int = 0
    cost_usd: float = 0.0
    cached: int = 0  # of prompt, read from the provider's prompt cache
    cache_unknown: int = 0  # of prompt, those whose provider did not say whether they were cached (priced uncached)
    calls_without_usage: int = 0  # calls whose provider reported no token counts at all (neither counted nor priced)

    @property
    def total(self) -> int:
        return self.prompt + self.completion


def judgment_cost(judgment: JudgmentRow, prices: Prices) -> float:
    """USD of one judgment's tokens (the cached input at its rate, input of unknown caching at the full rate; a
    batch judgment at half price)."""
    prompt = judgment.prompt_tokens or 0
    cached = min(judgment.cached_tokens or 0, prompt)
    cost = (
        (prompt - cached) / 1e6 * prices.input_per_million
        + cached / 1e6 * prices.cached_input
        + (judgment.completion_tokens or 0) / 1e6 * prices.output_per_million
    )
    return cost * BATCH_DISCOUNT if judgment.batch else cost


class TokenTally:
    """The tokens and cost of the calls fed so far (a reused verdict made no call: it counts nothing)."""

    def __init__(self, prices: Prices) -> None:
        self.prices = prices
        self.prompt = self.cached = self.completion = self.cache_unknown = self.without_usage = 0
        self.cost = 0.0

    def add(self, judgment: JudgmentRow) -> None:
        if judgment.cached:
            return
        prompt = judgment.prompt_tokens
        if prompt is None:
            # A verdict was read from a reply whose usage said nothing; an error may have made no call at all.
            self.without_usage += judgment.status in (JudgmentStatus.OK, JudgmentStatus.NULL)
        elif judgment.cached_tokens is None:
            self.cache_unknown += prompt
        self.prompt += prompt or 0
        self.cached += min(judgment.cached_tokens or 0, prompt or 0)
        self.completion += judgment.completion_tokens or 0
        self.cost += judgment_cost(judgment, self.prices)

    def tokens(self) -> Tokens:
        return Tokens(self.prompt, self.completion, self.cost, self.cached, self.cache_unknown, self.without_usage)
