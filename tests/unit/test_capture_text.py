"""Slack messages become readable plain text: markup, rich text blocks, sections, attachments, files."""

from __future__ import annotations

import pytest

from capture.text import blocks_text, message_text, render_markup

NAMES = {"U1": "Ana", "U2": "Bo"}


def names(user_id: str) -> str | None:
    return NAMES.get(user_id)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("hi <@U1>", "hi @Ana"),
        ("<@U9> unknown", "@U9 unknown"),
        ("legacy <@U9|zed>", "legacy @zed"),
        ("see <#C1|general>", "see #general"),
        ("private <#C2|>", "private #C2"),
        ("<https://docs.example.com|the docs>", "the docs (https://docs.example.com)"),
        ("<https://x.example>", "https://x.example"),
        ("<mailto:a@b.c|a@b.c>", "a@b.c"),
        ("<!here> and <!channel>", "@here and @channel"),
        ("<!subteam^S1|@support>", "@support"),
        ("<!date^1392734382^{date}|Feb 18, 2014>", "Feb 18, 2014"),
        ("a &amp; b &lt;c&gt;", "a & b <c>"),
        ("&lt;@U1&gt; stays literal", "<@U1> stays literal"),
        (":wave: hello :+1:", ":wave: hello :+1:"),
        ("", ""),
    ],
)
def test_render_markup(raw: str, expected: str) -> None:
    assert render_markup(raw, names) == expected


RICH = [
    {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_section",
                "elements": [
                    {"type": "text", "text": "Hi "},
                    {"type": "user", "user_id": "U2"},
                    {"type": "text", "text": ", steps:\n"},
                ],
            },
            {
                "type": "rich_text_list",
                "style": "ordered",
                "elements": [
                    {"type": "rich_text_section", "elements": [{"type": "text", "text": "open settings"}]},
                    {
                        "type": "rich_text_section",
                        "elements": [
                            {"type": "text", "text": "read "},
                            {"type": "link", "url": "https://d.example", "text": "docs"},
                        ],
                    },
                ],
            },
            {"type": "rich_text_quote", "elements": [{"type": "text", "text": "quoted\nlines"}]},
            {"type": "rich_text_preformatted", "elements": [{"type": "text", "text": "pip install x"}]},
            {
                "type": "rich_text_section",
                "elements": [
                    {"type": "emoji", "name": "tada"},
                    {"type": "text", "text": " in "},
                    {"type": "channel", "channel_id": "C7"},
                    {"type": "broadcast", "range": "here"},
                ],
            },
        ],
    }
]


def test_rich_text_blocks() -> None:
    assert blocks_text(RICH, names) == (
        "Hi @Bo, steps:\n"
        "1. open settings\n"
        "2. read docs (https://d.example)\n"
        "> quoted\n> lines\n"
        "```\npip install x\n```\n"
        ":tada: in #C7@here"
    )


def test_bullet_list_with_indent() -> None:
    block = {
        "type": "rich_text",
        "elements": [
            {
                "type": "rich_text_list",
                "style": "bullet",
                "indent": 1,
                "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "nested"}]}],
            }
        ],
    }
    assert blocks_text([block]) == "  - nested"


def test_sections_headers_context_fields() -> None:
    blocks = [
        {"type": "header", "text": {"type": "plain_text", "text": "Reset your password"}},
        {"type": "section", "text": {"type": "mrkdwn", "text": "Ask <@U1> &amp; go to <https://a.example|A>"}},
        {
            "type": "section",
            "fields": [{"type": "mrkdwn", "text": "*Plan*: Pro"}, {"type": "plain_text", "text": "Seats: 5"}],
        },
        {"type": "divider"},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": "from the FAQ"}, {"type": "image"}]},
        {"type": "actions", "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Ok"}}]},
    ]
    assert blocks_text(blocks, names) == (
        "Reset your password\nAsk @Ana & go to A (https://a.example)\n*Plan*: Pro\nSeats: 5\nfrom the FAQ"
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ({"text": "plain <@U1>"}, "plain @Ana"),
        # Blocks win over a notification fallback in text.
        ({"text": "New answer", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Full"}}]}, "Full"),
        # Blocks with no words: fall back to text.
        ({"text": "fallback", "blocks": [{"type": "divider"}]}, "fallback"),
        (
            {
                "text": "",
                "attachments": [
                    {
                        "fallback": "unused",
                        "pretext": "Pre",
                        "title": "Title",
                        "text": "Body <@U2>",
                        "fields": [{"title": "Status", "value": "open"}, {"value": "untitled"}],
                    }
                ],
            },
            "Pre\nTitle\nBody @Bo\nStatus: open\nuntitled",
        ),
        ({"attachments": [{"fallback": "only the fallback"}]}, "only the fallback"),
        ({"text": "", "files": [{"id": "F1", "name": "guide.pdf", "title": "Setup guide"}]}, "[file: Setup guide]"),
        ({"text": "see file", "files": [{"id": "F1", "name": "a.png"}]}, "see file\n[file: a.png]"),
        ({"text": ""}, ""),
    ],
)
def test_message_text(message: dict, expected: str) -> None:
    assert message_text(message, names) == expected
