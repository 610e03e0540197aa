"""What a relevancy judgment costs: relmon's one call against DeepEval's three-call answer-relevancy metric, on
the same pairs and against the same fake OpenAI server (which counts tokens as 4 characters each and reports
cached input the way OpenAI does: an identical beginning of at least 1,024 tokens, in 128-token steps).

relmon is measured in steady state: the provider has already seen one judgment, as it has after the first
minutes of a deployment, so the constant prefix (system message + the seed's instructions) is in its cache.
DeepEval's three prompts are built with DeepEval's own templates (`pip install -e '.[bench]'`); each is under
1,024 tokens, so none is ever cached. The fake answers DeepEval's calls the way its metric expects (one
statement per sentence of the answer, a "yes" verdict each, a one-sentence reason), and relmon's with its usual
one-sentence verdict. Cost is what a provider bills at the list prices of three small models (the table the
digest prices with, store/settings.py), relmon's default first: how much caching saves depends on the provider's
discount on cached input (gpt-4.1-mini and gpt-4.1-nano: three quarters; gpt-4o-mini: half, so that its cached
1,024-token prefix alone costs more than 0.4x DeepEval's judgment).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from judges import LLMClient, RelevancyJudge
from store.settings import DEFAULT_JUDGE_MODEL, LIST_PRICES, ListPrice
from tests.fakes.openai_server import FakeOpenAI

MODEL = DEFAULT_JUDGE_MODEL
TARGET_RATIO = 0.4  # issue 18: a judgment bills at most 0.4x DeepEval's, at the default model's prices


PRICED_MODELS = (DEFAULT_JUDGE_MODEL, "gpt-4.1-nano", "gpt-4o-mini")

# Support-bot exchanges of a usual length (a question of a line, an answer of two to four sentences).
PAIRS = [
    (
        "How do I export my invoices as CSV from the billing page?",
        "Open Billing > Invoices, select the invoices you need (or none for all of them), then click Export and "
        "choose CSV. The file lists the date, number, amount, tax and status of each invoice.",
    ),
    (
        "Can I change the email address on my account?",
        "Yes. Go to Settings > Profile, click Edit next to your email and enter the new address. We send a "
        "confirmation link to it, and the change takes effect once you click that link.",
    ),
    (
        "Why was my card declined when I upgraded to the Team plan?",
        "A decline usually comes from the bank: check that the card has not expired and that online payments are "
        "allowed on it. If it still fails, try another card or ask your bank to approve the charge from us. Your "
        "current plan stays active in the meantime.",
    ),
    (
        "Is there a limit on how many projects a free workspace can have?",
        "A free workspace can have up to 3 active projects. Archived projects do not count towards the limit, so "
        "you can archive one to make room for a new one.",
    ),
    (
        "How do I add a teammate who does not have an account yet?",
        "Open Settings > Members and click Invite. Enter their email address and pick a role; they get an "
        "invitation email and join your workspace when they accept it. Invitations expire after 7 days.",
    ),
    (
        "Does the API support webhooks for new orders?",
        "Yes. Create a webhook under Developers > Webhooks, choose the order.created event and enter your "
        "endpoint's URL. We sign every delivery with your webhook secret and retry failed deliveries for up to "
        "24 hours.",
    ),
]


@dataclass(frozen=True)
class Usage:
    """What a run of requests spent: its calls and their tokens."""

    calls: int
    prompt: int
    cached: int
    completion: int

    @classmethod
    def of(cls, replies: list) -> Usage:
        def total(name: str) -> int:
            return sum(getattr(reply, name) or 0 for reply in replies)

        return cls(len(replies), total("prompt_tokens"), total("cached_tokens"), total("completion_tokens"))

    def cost(self, prices: ListPrice) -> float:
        uncached = self.prompt - self.cached
        return (uncached * prices.input + self.cached * prices.cached_input + self.completion * prices.output) / 1e6


def sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+", text) if part.strip()]


def measure_relmon(fake: FakeOpenAI, *, cold: bool = False) -> Usage:
    """relmon's requests in steady state, or each with the provider's cache empty (`cold`)."""
    client = LLMClient(MODEL, base_url=fake.base_url, api_key="bench", max_retries=0, cache_size=0)
    judge = RelevancyJudge()
    judge.evaluate(client, "What are your opening hours?", "We answer every day from 8:00 to 20:00 CET.")  # warm
    replies = []
    for question, answer in PAIRS:
        if cold:
            fake.forget_prompts()
        messages = judge.messages(question, answer, None, client.max_prompt_chars)
        replies.append(client.complete(messages, judge.output_model))
    return Usage.of(replies)


def deepeval_templates():
    """DeepEval's answer-relevancy templates and reply schemas, or None when deepeval is not installed."""
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # DeepEval's documented switch: no telemetry
    try:
        from deepeval.metrics.answer_relevancy.answer_relevancy import AnswerRelevancyTemplate
        from deepeval.metrics.answer_relevancy.schema import AnswerRelevancyScoreReason, Statements, Verdicts
    except ImportError:
        return None
    return AnswerRelevancyTemplate, Statements, Verdicts, AnswerRelevancyScoreReason


def measure_deepeval(fake: FakeOpenAI, templates) -> Usage:
    """DeepEval's AnswerRelevancyMetric, call by call: statements of the answer, a verdict per statement, then
    the reason for the score (its default, include_reason=True)."""
    template, statements_schema, verdicts_schema, reason_schema = templates
    client = LLMClient(MODEL, base_url=fake.base_url, api_key="bench", max_retries=0, cache_size=0)
    replies = []

    def call(prompt: str, schema, reply: dict) -> None:
        fake.set_reply(lambda body: json.dumps(reply))
        replies.append(client.complete(prompt, schema))

    try:
        for question, answer in PAIRS:
            statements = sentences(answer)
            call(template.generate_statements(actual_output=answer, multimodal=False), statements_schema,
                 {"statements": statements})  # fmt: skip
            call(template.generate_verdicts(input=question, statements=statements, multimodal=False), verdicts_schema,
                 {"verdicts": [{"verdict": "yes"} for _ in statements]})  # fmt: skip
            reason = "The score is 1.00 because the answer addresses the question directly, with nothing off topic."
            call(template.generate_reason(irrelevant_statements=[], input=question, score="1.00", multimodal=False),
                 reason_schema, {"reason": reason})  # fmt: skip
    finally:
        fake.set_reply(None)
    return Usage.of(replies)


def report() -> list[str]:
    """The comparison as printable lines."""
    rows: dict[str, Usage] = {}
    with FakeOpenAI() as fake:
        rows["relmon (1 call)"] = measure_relmon(fake)
        rows["relmon, cache cold"] = measure_relmon(fake, cold=True)
        templates = deepeval_templates()
        if templates is not None:
            rows["DeepEval (3 calls)"] = measure_deepeval(fake, templates)
    n = len(PAIRS)
    lines = [
        f"Tokens per relevancy judgment over {n} support pairs (tokens = characters / 4, as the fake counts):",
        f"{'':<20} {'calls':>5} {'input':>6} {'cached':>6} {'output':>6} {'total':>6} {'cached share':>12}",
    ]
    for name, usage in rows.items():
        share = usage.cached / usage.prompt if usage.prompt else 0.0
        lines.append(
            f"{name:<20} {usage.calls / n:>5.0f} {usage.prompt / n:>6.0f} {usage.cached / n:>6.0f} "
            f"{usage.completion / n:>6.0f} {(usage.prompt + usage.completion) / n:>6.0f} {share:>12.1%}"
        )
    lines += ["", "Billed cost per judgment at list prices (USD per million tokens: input / cached input / output):"]
    for model in PRICED_MODELS:
        prices = LIST_PRICES[model]
        costs = {name: usage.cost(prices) / n for name, usage in rows.items()}
        figures = " · ".join(f"{name} ${cost:.6f}" for name, cost in costs.items())
        default = " (relmon's default)" if model == DEFAULT_JUDGE_MODEL else ""
        listed = f"${prices.input:g} / ${prices.cached_input:g} / ${prices.output:g}"
        line = f"{model}{default} ({listed}):\n  {figures}"
        if "DeepEval (3 calls)" in costs:
            ratio = costs["relmon (1 call)"] / costs["DeepEval (3 calls)"]
            line += f" · relmon = {ratio:.2f}x DeepEval"
            if default:
                line += f" (target <= {TARGET_RATIO}x: {'met' if ratio <= TARGET_RATIO else 'NOT met'})"
        lines.append(line)
    if templates is None:
        lines.append("DeepEval is not installed (pip install -e '.[bench]'): its three-call baseline was not measured.")
    return lines
