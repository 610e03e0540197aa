"""Block Kit building blocks that keep to Slack's limits (NOTES.md): escaping, quoting, cutting.

Slack rejects a message that breaks a limit (`invalid_blocks`), so every builder here cuts instead. Slack also
rejects a message whose blocks hold too much text in all (`msg_blocks_too_long`), however well each block keeps to
its own limit: builders that fill many blocks measure the whole with `text_length` against `MAX_MESSAGE_TEXT`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from store import bot_groups

MAX_BLOCKS = 50  # per message (modals and Home allow 100)
MAX_SECTION_TEXT = 3_000
MAX_FIELD_TEXT = 2_000
MAX_HEADER_TEXT = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTION_ELEMENTS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2_000
MAX_URL = 3_000
MAX_ID = 255  # action_id and block_id
MAX_FALLBACK_TEXT = 40_000
# The text of all of a message's blocks together. Slack answers `msg_blocks_too_long` above about 12,000
# characters in all, even when every block keeps to its own limit; the limit is undocumented and containers seem
# to count too (slackapi/bolt-js issues #2509 and #2867: one message of 11,341 measured characters was refused).
# Hence a budget well under it, as `text_length` measures.
MAX_MESSAGE_TEXT = 10_000
ELLIPSIS = "…"

Block = dict[str, Any]


# @here, @channel and @everyone as words: Slack's mention parsing (mrkdwn text is not verbatim) may resolve them.
_BROADCAST_WORD = re.compile(r"(?<![\w@])@(here|channel|everyone)\b", re.IGNORECASE)
ZERO_WIDTH_SPACE = "\u200b"


def escape(text: str) -> str:
    """Text from people, bots or the judge, safe in mrkdwn: the control characters escaped as Slack asks (only
    &, < and >, so `<!here>`, `<!channel>`, `<!subteam^S1>` and `<@U1>` show as written and notify nobody), and
    the words @here, @channel and @everyone broken by a zero-width space, which Slack does not resolve. Every
    renderer quotes text through this one function."""
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _BROADCAST_WORD.sub(lambda match: f"@{ZERO_WIDTH_SPACE}{match.group(1)}", escaped)


def shorten(text: str, limit: int) -> str:
    """At most `limit` characters, ending in an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)].rstrip() + ELLIPSIS


def one_line(text: str, limit: int) -> str:
    """On one line (whitespace runs become one space), then `shorten`ed."""
    return shorten(" ".join(text.split()), limit)


def quote(text: str) -> str:
    """Escaped and shown as a block quote, line by line."""
    lines = escape(text.strip()).splitlines() or [""]
    return "\n".join(f">{line}" for line in lines)


def fit_quote(text: str, budget: int) -> tuple[str, bool]:
    """The longest quoted prefix of `text` whose rendering fits `budget` characters, and whether it
    was cut. Escaping and quote marks lengthen the text, so the cut is searched on the raw text."""
    full = quote(text)
    if len(full) <= budget:
        return full, False
    low, high = 0, len(text)
    while low < high:  # the largest n with quote(text[:n] + …) within budget
        middle = (low + high + 1) // 2
        if len(quote(text[:middle].rstrip() + ELLIPSIS)) <= budget:
            low = middle
        else:
            high = middle - 1
    return quote(text[:low].rstrip() + ELLIPSIS), True


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": shorten(text, limit) or " ", "emoji": True}


def mrkdwn(text: str, limit: int = MAX_SECTION_TEXT) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": shorten(text, limit) or " "}


def header(text: str) -> Block:
    return {"type": "header", "text": plain(text, MAX_HEADER_TEXT)}


def section(text: str, *, block_id: str | None = None) -> Block:
    block: Block = {"type": "section", "text": mrkdwn(text)}
    if block_id:
        block["block_id"] = block_id[:MAX_ID]
    return block


def context(*texts: str) -> Block:
    return {"type": "context", "elements": [mrkdwn(text) for text in texts[:MAX_CONTEXT_ELEMENTS]]}


def divider() -> Block:
    return {"type": "divider"}


def button(
    text: str, *, action_id: str, value: str | None = None, url: str | None = None, style: str | None = None
) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "text": plain(text, MAX_BUTTON_TEXT), "action_id": action_id[:MAX_ID]}
    if value is not None:
        element["value"] = value[:MAX_BUTTON_VALUE]
    if url is not None:
        element["url"] = url[:MAX_URL]
    if style is not None:
        element["style"] = style
    return element


def text_input(block_id: str, label: str, *, optional: bool, placeholder: str, max_length: int) -> dict:
    """A multiline text field of a modal; its value is read at state.values[block_id]["value"]."""
    return {
        "type": "input",
        "block_id": block_id,
        "optional": optional,
        "label": plain(label, 2000),
        "element": {
            "type": "plain_text_input",
            "action_id": "value",
            "multiline": True,
            "max_length": max_length,
            "placeholder": plain(placeholder, 150),
        },
    }


def actions(*elements: dict[str, Any], block_id: str | None = None) -> Block:
    block: Block = {"type": "actions", "elements": list(elements[:MAX_ACTION_ELEMENTS])}
    if block_id:
        block["block_id"] = block_id[:MAX_ID]
    return block


def text_length(blocks: Any) -> int:
    """The characters of text in `blocks` (a list of blocks, one block or any part of one), as Slack sums them
    for `msg_blocks_too_long`: every `text` string at any depth, so section text and fields, context elements,
    headers, button labels, confirm dialogs and rich text alike."""
    if isinstance(blocks, list):
        return sum(text_length(item) for item in blocks)
    if not isinstance(blocks, dict):
        return 0
    total = 0
    for key, value in blocks.items():
        if key == "text" and isinstance(value, str):
            total += len(value)
        elif isinstance(value, (dict, list)):
            total += text_length(value)
    return total


def message(text: str, blocks: list[Block]) -> dict[str, Any]:
    """A message payload: the fallback `text` (notifications, screen readers) and at most 50 blocks."""
    return {"text": shorten(text, MAX_FALLBACK_TEXT), "blocks": blocks[:MAX_BLOCKS]}


def slack_date(moment: datetime) -> str:
    """A date every reader sees in their own time zone, with a UTC fallback."""
    epoch = int(moment.timestamp())
    fallback = moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{epoch}^{{date_short_pretty}} at {{time}}|{fallback}>"


def channel_mention(channel_id: str | None) -> str:
    """A channel as Slack links it; a bot's ingested exchanges (their report key, store.bot_groups) by the bot."""
    bot = bot_groups.bot_of(channel_id)
    if bot is not None:
        return bot_groups.label(bot)
    return f"<#{channel_id}>" if channel_id else "a direct check"


def person_mention(person_id: str) -> str:
    """A user (U…/W…) or a user group (S…) as Slack mentions them."""
    return f"<!subteam^{person_id}>" if person_id.startswith("S") else f"<@{person_id}>"


def channel_ref(channel_id: str | None, *, slack: bool = True) -> str:
    """Where a report's figures are from: a channel (linked in Slack, `#C…` in a terminal), a bot's ingested
    exchanges by the bot, or every channel (None)."""
    if channel_id is None:
        return "all channels"
    bot = bot_groups.bot_of(channel_id)
    if bot is not None:
        return bot_groups.label(bot)
    return f"<#{channel_id}>" if slack else f"#{channel_id}"


def format_score(score: float | None, max_score: float | None, *, decimals: int = 1) -> str:
    """A score on its scale, such as "1 / 4"; whole numbers without decimals."""

    def number(value: float) -> str:
        return str(int(value)) if float(value).is_integer() else f"{value:.{decimals}f}"

    if score is None:
        return "no score"
    return f"{number(score)} / {number(max_score)}" if max_score is not None else number(score)


def pct(share: float | None) -> str:
    return "–" if share is None else f"{share * 100:.0f}%"


WEEK_BEFORE = "the week before"


def no_data(before: str = WEEK_BEFORE) -> str:
    """What a comparison says when the period it compares with had nothing to compare: `no data the week before`."""
    return f"no data {before}"


def signed(value: float | None, *, points: bool = False, digits: int = 1) -> str:
    """A change: `+0.2`, or in percentage points `−3 pts`; empty when there is nothing to compare."""
    if value is None:
        return ""
    if points:
        value *= 100
        return f"{'+' if value >= 0 else '−'}{abs(value):.0f} pts"
    return f"{'+' if value >= 0 else '−'}{abs(value):.{digits}f}"
