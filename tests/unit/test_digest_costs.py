"""The digest's costs: each judge's score distribution with each channel's tokens and their cost, cached input at
its own price, and the prices that apply when none is set."""

from __future__ import annotations

from common.messages.digest import digest_message, digest_text
from common.reports.costs import Prices
from store.settings import Settings
from store.stats_queries import PairRow
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict


def two_channels_three_judgments_each_with_tokens():
    rows = [
        pair("C1", judgments=[verdict(4, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(2, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(3, tokens=(1000, 100))]),
        pair("C2", judgments=[verdict(3, tokens=(2000, 0)), verdict(5, judge="grounded", top=5, tokens=(500, 50))]),
    ]
    return build_report(PERIOD, rows, [], thresholds_for, PRICES)


def test_the_message_shows_each_judges_distribution_with_each_channels_tokens_cost():
    report = two_channels_three_judgments_each_with_tokens()
    message = digest_message(report, {}, {}, PRICES)
    fields = {f["text"].split("\n")[0]: f["text"] for f in message["blocks"][2]["fields"]}
    assert "scores 0:0 · 1:0 · 2:1 · 3:2 · 4:1" in fields["*Relevancy*"]
    assert "scores 1:0 · 2:0 · 3:0 · 4:0 · 5:1" in fields["*Grounded*"]
    sections = {b["text"]["text"].split(" ")[0]: b["text"]["text"] for b in message["blocks"] if "text" in b}
    c1, c2 = sections["*<#C1>*"], sections["*<#C2>*"]
    assert "scores 0:0 · 1:0 · 2:1 · 3:1 · 4:1" in c1
    assert "3,300 tokens ≈ $0.0006" in c1  # 3,000 in at $0.15/M + 300 out at $0.60/M
    assert "scores 0:0 · 1:0 · 2:0 · 3:1 · 4:0" in c2 and "scores 1:0 · 2:0 · 3:0 · 4:0 · 5:1" in c2
    assert "2,550 tokens ≈ $0.0004" in c2
    assert "grounded: no scores" in c1  # a judge without scores in a channel gets no distribution


def test_the_dry_run_shows_each_judges_distribution_with_each_channels_tokens_cost():
    report = two_channels_three_judgments_each_with_tokens()
    text = digest_text(report, {}, {}, PRICES)
    channel_c1 = text.split("== #C1 ==")[1].split("== #C2 ==")[0]
    assert "  scores 0:0 · 1:0 · 2:1 · 3:1 · 4:1" in channel_c1
    assert "LLM usage: 3,300 tokens (3,000 in, 300 out) · ≈ $0.0006" in channel_c1
    assert "LLM usage: 2,550 tokens (2,500 in, 50 out) · ≈ $0.0004" in text.split("== #C2 ==")[1]


CACHED_PRICED = Prices(input_per_million=0.15, output_per_million=0.60, cached_input_per_million=0.03)


def mostly_cached_input() -> list[PairRow]:
    """1,000,000 input tokens of which 900,000 cached, 100,000 out."""
    return [pair("C1", judgments=[verdict(4, tokens=(1_000_000, 100_000), prompt_cached=900_000)])]


def test_cached_input_is_priced_at_the_cached_rate():
    """0.1 M x $0.15 + 0.9 M x $0.075 (half the input price when no cached price is set) + 0.1 M x $0.60 = $0.1425;
    with a cached price of $0.03: $0.102."""
    rows = mostly_cached_input()
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    assert report.overall.tokens.cached == 900_000
    assert abs(report.overall.tokens.cost_usd - 0.1425) < 1e-9
    assert abs(build_report(PERIOD, rows, [], thresholds_for, CACHED_PRICED).overall.tokens.cost_usd - 0.102) < 1e-9


def test_the_cost_line_shows_cached_input_with_its_price():
    report = build_report(PERIOD, mostly_cached_input(), [], thresholds_for, PRICES)
    text = digest_text(report, {}, {}, PRICES)
    assert "LLM usage: 1,100,000 tokens (1,000,000 in of which 900,000 cached, 100,000 out) · ≈ $0.14" in text
    assert "Cost estimated at $0.15 / $0.075 / $0.6 per million input / cached input / output tokens." in text
    message = digest_message(report, {}, {}, PRICES)
    assert "$0.15 / $0.075 / $0.6 per million input / cached input / output tokens." in str(message["blocks"][-1])
    assert "$0.15 / $0.03 / $0.6 per million" in digest_text(report, {}, {}, CACHED_PRICED)


def test_unset_prices_are_the_judge_models_list_prices(monkeypatch):
    for name in ("RELMON_PRICE_CACHED_INPUT", "RELMON_COST_INPUT_PER_MTOK", "RELMON_COST_OUTPUT_PER_MTOK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("RELMON_JUDGE_MODEL", raising=False)
    default = Settings(_env_file=None)
    assert (default.judge_model, default.input_price, default.cached_input_price, default.output_price) == (
        "gpt-4.1-mini",
        0.40,
        0.10,
        1.60,
    )
    older = Settings(_env_file=None, judge_model="gpt-4o-mini")
    assert (older.input_price, older.cached_input_price, older.output_price) == (0.15, 0.075, 0.60)
    # A model without a list price here (a local or gateway model) is priced as the default until it is set.
    assert Settings(_env_file=None, judge_model="llama3.1:8b").input_price == 0.40


def test_the_cached_input_price_defaults_to_half_an_input_price_that_is_set(monkeypatch):
    monkeypatch.delenv("RELMON_PRICE_CACHED_INPUT", raising=False)
    assert Settings(_env_file=None, cost_per_million_input_tokens=0.4).cached_input_price == 0.2
    monkeypatch.setenv("RELMON_PRICE_CACHED_INPUT", "0.05")
    assert Settings(_env_file=None).cached_input_price == 0.05
