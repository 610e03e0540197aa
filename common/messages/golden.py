"""The golden set in Slack: the alert's "Add to test set" button, its modal, and the digest's line about the set.
Rendering only: the listeners (bot/listeners/golden.py) and the worker (workers.tasks.golden) do the rest."""

from __future__ import annotations

import json
import unicodedata
from zoneinfo import ZoneInfo

from common.golden_access import WITHHELD_NOT_MEMBER
from common.messages.blocks import button, channel_mention, context, one_line, plain, section, text_input
from common.reports.golden import GoldenFigures
from store import bot_groups

GOLDEN_ACTION_ID = "golden_add"
GOLDEN_MODAL_ID = "golden_modal"
EXPECTED_BLOCK = "expected"
REMOVE_BLOCK = "remove"
REMOVE_VALUE = "remove"
MAX_EXPECTED = 3000
MAX_QUESTION = 500  # of the question shown above the field (the alert has the whole of it)


def _printable(text: str) -> str:
    """Text a modal may hold: control characters (a terminal escape's ESC, NUL), surrogates and noncharacters
    (U+FFFF) left out; line breaks and tabs kept."""
    return "".join(
        ch
        for ch in text
        if ch in "\n\t"
        or not (unicodedata.category(ch) in ("Cc", "Cs") or 0xFDD0 <= ord(ch) <= 0xFDEF or ord(ch) & 0xFFFE == 0xFFFE)
    )


def golden_button(judgment_id: int) -> dict:
    return button("Add to test set", action_id=GOLDEN_ACTION_ID, value=str(judgment_id))


def withheld_note(reason: str, channel_id: str | None) -> str:
    """Why the modal quotes nothing (common.golden_access.WITHHELD_*), and what the person can do."""
    where = channel_mention(channel_id)
    if reason == WITHHELD_NOT_MEMBER:
        return (f"You are not a member of {where}, so its question and expected answer are not shown here: "
                "join it (or ask one of its members to add you) to see them.")  # fmt: skip
    return f"{where} is a private channel not quoted here, so its question and expected answer are not shown."


def golden_modal(
    judgment_id: int,
    *,
    question: str | None,
    expected: str | None,
    in_set: bool,
    withheld: str | None,
    source_channel: str | None = None,
    times: int = 0,
    channel_id: str | None = None,
) -> dict:
    """The modal: the alert's question and the expected answer to write or edit (pre-filled with what the set holds,
    or the teammate's reply), and, for a question already in the set, a box to remove it. `withheld` (a
    common.golden_access.WITHHELD_* reason): the clicker may not read that text here, so none of it is in the view
    and a note says why."""
    # Optional when the set (or the teammate's reply) may hold an answer the person cannot see: empty keeps it.
    optional = in_set or withheld is not None
    field = text_input(EXPECTED_BLOCK, "Expected answer", optional=optional, max_length=MAX_EXPECTED,
                       placeholder="The answer that worked: what the bot should have said")  # fmt: skip
    if expected and withheld is None:
        field["element"]["initial_value"] = _printable(expected)[:MAX_EXPECTED]
    if in_set:
        asked = f", asked {times} times" if times > 1 else ""
        intro = f"This question is in the test set{asked}. Edit its expected answer, or remove it."
    else:
        intro = "The question of this alert joins the test set that `relmon regress` checks new bot versions on."
    blocks = [section(intro)]
    if withheld is not None:
        keep = " Leave the field empty to keep the expected answer it has, or write a new one."
        blocks.append(context(withheld_note(withheld, source_channel) + keep))
    elif question and question.strip():
        # plain_text: the asker's words shown as written, no mrkdwn, mentions or links
        blocks.append(
            {"type": "section", "text": plain("Question: " + one_line(_printable(question), MAX_QUESTION), 3000)}
        )
    blocks.append(field)
    if in_set:
        option = {"text": plain("Remove this question from the test set", 75), "value": REMOVE_VALUE}
        blocks.append({"type": "input", "block_id": REMOVE_BLOCK, "optional": True, "label": plain("Remove", 2000),
                       "element": {"type": "checkboxes", "action_id": "value", "options": [option]}})  # fmt: skip
    return {
        "type": "modal",
        "callback_id": GOLDEN_MODAL_ID,
        "title": plain("Add to test set", 24),
        "submit": plain("Save", 24),
        "close": plain("Cancel", 24),
        "private_metadata": json.dumps({"judgment_id": judgment_id, "channel_id": channel_id}),  # where to confirm
        "blocks": blocks,
    }


def refusal_text(channel_id: str | None) -> str:
    """To a person who may not change a private channel's item (common.golden_access.Clicker.may_change); a bot's
    exchange in no channel (its key, store.bot_groups): the viewers its rule names."""
    bot = bot_groups.bot_of(channel_id)
    if bot is not None:
        return (f"Only the people bot {bot}'s rule names (or the members of the alert channel it names) can add, "
                "edit or remove its questions in the test set: ask a relmon admin.")  # fmt: skip
    return (f"Only members of {channel_mention(channel_id)} (or of the alert channel it names) can add, edit or "
            "remove its questions in the test set: ask one of them, or to be added to the channel.")  # fmt: skip


def digest_line(figures: GoldenFigures, timezone: str = "UTC", *, span: str = "this week") -> str:
    """The digest's line: how the set grew in the report's `span`, and the last regression run with its pass rate
    (its time in the team's `timezone`, the zone named)."""
    line = f"*Test set:* {figures.size} question(s), {figures.grown} new {span}."
    if figures.last_run is None:
        return line + " No `relmon regress` run yet."
    when, rate, items = figures.last_run
    rate_text = f"{rate:.0%} of {items} passed" if rate is not None else f"{items} items"
    local = when.astimezone(ZoneInfo(timezone))
    return line + f" Last `relmon regress` on {local:%Y-%m-%d %H:%M} {timezone}: {rate_text}."


def saved_text(outcome: str, item_id: int | None, channel_id: str | None = None) -> str | None:
    """The private note the person who saved the modal (or voted) gets (None: nothing to say). `channel_id`: the
    source channel, for a refusal."""
    if outcome == "refused":
        return refusal_text(channel_id) + " Nothing was saved."
    return {
        "saved": f"Saved in the test set (item {item_id}): `relmon regress` checks the next bot version on it.",
        "removed": f"Removed from the test set (item {item_id}).",
        "no_question": "That answer has no question with words to test on, so it was not added to the test set.",
        "removed_before": "That question was removed from the test set, so it stays out.",
        "expired": "Your expected answer waited too long to be saved, so nothing was saved: use “Add to test set” "
        "on the alert again and write it once more.",
        "vote_refused": f"Your vote counts, but its question did not join the test set: only members of "
        f"{channel_mention(channel_id)} (or of the alert channel it names) can add it.",
    }.get(outcome)
