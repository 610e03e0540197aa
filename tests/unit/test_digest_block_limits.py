"""The digest within Slack's limits: many or busy channels fit the blocks and the total text Slack takes, quotes
becoming links before any channel is left out."""

from __future__ import annotations

from common.messages import blocks as block_kit
from common.messages.digest import MAX_BLOCKS, digest_message
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict


def test_many_channels_stay_within_slack_block_limits():
    rows = [
        pair(
            f"C{i:03d}",
            judgments=[
                verdict(i % 5, tokens=(123_456, 7_890)),
                verdict(i % 3, judge="correctness", top=2),
                verdict(1 + i % 5, judge="grounded", top=5),
            ],
        )
        for i in range(120)
        for _ in range(4)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    long_text = "word " * 400
    quotes = {row.id: (long_text, long_text) for row in rows}
    links = {row.id: "https://example.slack.com/archives/C1/p" + "9" * 60 for row in rows}
    message = digest_message(report, links, quotes, PRICES)
    assert len(message["blocks"]) <= MAX_BLOCKS
    assert block_kit.text_length(message["blocks"]) <= block_kit.MAX_MESSAGE_TEXT
    assert "more channels" in str(message["blocks"][-2])
    channel_sections = [b for b in message["blocks"] if "*<#C" in b.get("text", {}).get("text", "")[:5]]
    assert channel_sections and all("tokens ≈ $" in b["text"]["text"] for b in channel_sections)
    assert all(b["text"]["text"].count("scores ") == 3 for b in channel_sections)
    for block in message["blocks"]:
        if block["type"] == "section" and "text" in block:
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "section" and "fields" in block:
            assert len(block["fields"]) <= 10
            assert all(len(field["text"]) <= 2000 for field in block["fields"])
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150


def busy_week(channels: int, *, quote_chars: int = 2_000):
    """`channels` channels with three judges each, four answers apiece, every answer quotable at length."""
    rows = [
        pair(
            f"C{i:03d}",
            judgments=[verdict(i % 5), verdict(i % 3, judge="correctness", top=2), verdict(1, judge="grounded", top=5)],
        )
        for i in range(channels)
        for _ in range(4)
    ]
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    text = "Why is the sky blue on some days and grey on others? " * (quote_chars // 54 + 1)
    quotes = {row.id: (text[:quote_chars], text[:quote_chars]) for row in rows}
    links = {row.id: f"https://example.slack.com/archives/C1/p17000000{row.id:08d}" for row in rows}
    return report, links, quotes


def channel_sections(message: dict) -> list[str]:
    return [b["text"]["text"] for b in message["blocks"] if b.get("text", {}).get("text", "").startswith("*<#C")]


def closing_context(message: dict) -> str:
    return message["blocks"][-2]["elements"][0]["text"]


def thirty_busy_channels() -> dict:
    report, links, quotes = busy_week(30)
    return digest_message(report, links, quotes, PRICES, chart_in_thread=True)


def test_thirty_busy_channels_fit_slacks_total():
    """30 channel sections of up to 2,900 characters (12 channels with three judges were already ≈ 21.5k): Slack
    answered `msg_blocks_too_long`, and the week's digest was never sent."""
    blocks = thirty_busy_channels()["blocks"]
    assert block_kit.text_length(blocks) <= block_kit.MAX_MESSAGE_TEXT and len(blocks) <= MAX_BLOCKS


def test_thirty_busy_channels_keep_the_overall_section_whole():
    blocks = thirty_busy_channels()["blocks"]
    assert blocks[0]["type"] == "header" and "fields" in blocks[2]  # the overall figures, whole
    assert [f["text"].split("\n")[0] for f in blocks[2]["fields"]][:4] == [
        "*Answers*", "*Relevancy*", "*Correctness*", "*Grounded*",
    ]  # fmt: skip
    worst = next(b["text"]["text"] for b in blocks if b.get("text", {}).get("text", "").startswith("*Worst answers*"))
    assert worst.count("view answer") == 3 and "sky blue" in worst  # the week's worst answers stay whole


def test_thirty_busy_channels_end_with_a_count_of_those_left_out():
    message = thirty_busy_channels()
    shown = channel_sections(message)
    assert 0 < len(shown) < 30
    assert closing_context(message) == (
        f"…and {30 - len(shown)} more channels: see `/judge stats #channel` or the App Home"
    )


def test_thirty_busy_channels_link_to_their_answers_instead_of_quoting_them():
    shown = channel_sections(thirty_busy_channels())
    assert all(s.count("scores ") == 3 and "view answer" in s and "sky blue" not in s for s in shown)


def test_thirty_busy_channels_show_the_first_ones():
    shown = channel_sections(thirty_busy_channels())
    assert [s.split("*")[1] for s in shown] == [f"<#C{i:03d}>" for i in range(len(shown))]


def test_quotes_become_links_before_any_channel_is_left_out():
    """8 channels with quotes were ≈ 14k characters in all: without the quotes of their worst answers, all 8 fit."""
    report, links, quotes = busy_week(8, quote_chars=160)
    full = digest_message(report, links, quotes, PRICES)
    assert block_kit.text_length(full["blocks"]) <= block_kit.MAX_MESSAGE_TEXT
    shown = channel_sections(full)
    assert len(shown) == 8 and "more channels" not in str(full["blocks"])
    assert all("view answer" in s and "sky blue" not in s for s in shown)  # the channels' quotes go first
    assert "sky blue" in str(full["blocks"][3])  # the week's worst answers keep theirs
    # A quiet week fits whole: the quotes stay.
    report, links, quotes = busy_week(2, quote_chars=160)
    small = digest_message(report, links, quotes, PRICES)
    assert all("sky blue" in s for s in channel_sections(small))
    assert "sky blue" in str(small["blocks"][3])  # and in the week's worst answers
