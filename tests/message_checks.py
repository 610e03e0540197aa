"""Rendered Slack messages in the message tests: a low-score alert to render (`alert`), a payload's whole text,
and every Block Kit limit a payload must keep (`check_limits`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from common.messages import blocks as bk
from common.messages.alerts import LowScoreAlert

AT = datetime(2026, 11, 27, 14, 5, tzinfo=UTC)
PERMALINK = "https://example.slack.com/archives/C1/p1764252300000100"


def alert(**changes) -> LowScoreAlert:
    values = {
        "judgment_id": 42,
        "judge": "relevancy",
        "score": 1.0,
        "max_score": 4.0,
        "threshold": 2,
        "channel_id": "C1",
        "answered_at": AT,
        "quote": True,
        "question": "How do I reset my password?",
        "answer": "Our office is open 9 to 5 <weekdays> & weekends.",
        "reasoning": "The answer talks about opening hours, not passwords.",
        "permalink": PERMALINK,
    }
    values.update(changes)
    return LowScoreAlert(**values)


def all_text(payload: dict) -> str:
    return json.dumps(payload, ensure_ascii=False)


def check_limits(payload: dict, max_blocks: int = bk.MAX_BLOCKS) -> None:
    """Every Block Kit limit from NOTES.md that these messages can reach."""
    assert payload["text"] and len(payload["text"]) <= bk.MAX_FALLBACK_TEXT
    assert len(payload["blocks"]) <= max_blocks
    for block in payload["blocks"]:
        if block.get("block_id"):
            assert len(block["block_id"]) <= bk.MAX_ID
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text" and len(block["text"]["text"]) <= bk.MAX_HEADER_TEXT
        if block["type"] == "section":
            if "text" in block:
                assert 0 < len(block["text"]["text"]) <= bk.MAX_SECTION_TEXT
            for field in block.get("fields", []):
                assert len(field["text"]) <= bk.MAX_FIELD_TEXT
        if block["type"] == "context":
            assert len(block["elements"]) <= bk.MAX_CONTEXT_ELEMENTS
        if block["type"] == "actions":
            assert len(block["elements"]) <= bk.MAX_ACTION_ELEMENTS
            for element in block["elements"]:
                assert len(element["text"]["text"]) <= bk.MAX_BUTTON_TEXT
                assert len(element.get("value", "")) <= bk.MAX_BUTTON_VALUE
                assert len(element["action_id"]) <= bk.MAX_ID
                assert len(element.get("url", "")) <= bk.MAX_URL
    # Slack refuses more text than about 12,000 characters in all (`msg_blocks_too_long`).
    assert bk.text_length(payload["blocks"]) <= bk.MAX_MESSAGE_TEXT
