"""Usage as the server gives it: a count it did not report is unknown, and the digest's cost says so."""

from __future__ import annotations

import pytest

from common.messages.digest import digest_text
from common.reports.costs import Prices, TokenTally
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, pair, thresholds_for, verdict

PRICES = Prices(input_per_million=0.40, output_per_million=1.60, cached_input_per_million=0.10)


def unknown_cache(score: int, tokens: tuple[int, int]):
    """A judgment from a server without prompt_tokens_details (llama-cpp-python, Ollama, many gateways)."""
    return verdict(score, tokens=tokens, prompt_cached=None)


def half_cached_and_unknown() -> TokenTally:
    tally = TokenTally(PRICES)
    tally.add(verdict(4, tokens=(2_000_000, 0), prompt_cached=1_000_000))  # said: half cached
    tally.add(unknown_cache(3, (1_000_000, 100_000)))  # said nothing of its cache
    return tally


def test_unknown_cached_input_is_counted_apart() -> None:
    tokens = half_cached_and_unknown().tokens()
    assert (tokens.prompt, tokens.cached, tokens.cache_unknown) == (3_000_000, 1_000_000, 1_000_000)


def test_unknown_cached_input_is_priced_in_full() -> None:
    tokens = half_cached_and_unknown().tokens()
    # 1 M uncached + 1 M cached + 1 M of unknown caching at the full rate, 0.1 M out
    assert tokens.cost_usd == pytest.approx(0.40 + 0.10 + 0.40 + 0.16)


def test_a_call_that_reported_no_usage_is_counted_apart_not_as_free() -> None:
    tally = TokenTally(PRICES)
    tally.add(verdict(4, tokens=(None, None), prompt_cached=None))  # a proxy that sends no usage
    tally.add(verdict(None, status="error", tokens=(None, None), prompt_cached=None))  # e.g. a 401: no call at all
    tokens = tally.tokens()
    assert (tokens.prompt, tokens.completion, tokens.cost_usd, tokens.calls_without_usage) == (0, 0, 0.0, 1)


def test_the_digest_says_what_it_does_not_know() -> None:
    rows = [
        pair("C1", judgments=[verdict(4, tokens=(2_000, 100), prompt_cached=1_024)]),
        pair("C1", judgments=[unknown_cache(3, (1_500, 80))]),
        pair("C1", judgments=[verdict(2, tokens=(None, None), prompt_cached=None)]),
    ]
    text = digest_text(build_report(PERIOD, rows, [], thresholds_for, PRICES), {}, {}, PRICES)
    assert (
        "LLM usage: 3,680 tokens (3,500 in of which 1,024 cached, 1,500 not known to be cached or not, 180 out)" in text
    )
    assert "(at most: input of unknown caching priced in full) · 1 call reported no token counts (not included)" in text
    known = digest_text(build_report(PERIOD, rows[:1], [], thresholds_for, PRICES), {}, {}, PRICES)
    assert "not known" not in known and "at most" not in known and "no token counts" not in known
