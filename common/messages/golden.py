"""The golden set in Slack: the alert's "Add to test set" button, its modal, and the digest's line about the set.
Rendering only: the listeners (bot/listeners/golden.py) and the worker (workers.tasks.golden) do the rest."""

from __future__ import annotations

import json

from common.messages.blocks import button, context, plain, section, text_input
from common.reports.golden import GoldenFigures

GOLDEN_ACTION_ID = "golden_add"
GOLDEN_MODAL_ID = "golden_modal"
EXPECTED_BLOCK = "expected"
REMOVE_BLOCK = "remove"
REMOVE_VALUE = "remove"
MAX_EXPECTED = 3000


def golden_button(judgment_id: int) -> dict:
    return button("Add to test set", action_id=GOLDEN_ACTION_ID, value=str(judgment_id))


def golden_modal(
    judgment_id: int, *, expected: str | None, in_set: bool, hidden: bool, times: int = 0, channel_id: str | None = None
) -> dict:
    """The modal: the expected answer to write or edit (pre-filled with what the set holds, unless `hidden`: the
    alert may not quote that channel's text), and, for a question already in the set, a box to remove it."""
    field = text_input(EXPECTED_BLOCK, "Expected answer", optional=in_set, max_length=MAX_EXPECTED,
                       placeholder="The answer that worked: what the bot should have said")  # fmt: skip
    if expected and not hidden:
        field["element"]["initial_value"] = expected[:MAX_EXPECTED]
    if in_set:
        asked = f", asked {times} times" if times > 1 else ""
        intro = f"This question is in the test set{asked}. Edit its expected answer, or remove it."
    else:
        intro = "The question of this alert joins the test set that `relmon regress` checks new bot versions on."
    blocks = [section(intro), field]
    if hidden:
        blocks.insert(1, context("Its expected answer comes from a channel whose text this alert does not quote: "
                                 "leave the field empty to keep it, or write a new one."))  # fmt: skip
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


def digest_line(figures: GoldenFigures) -> str:
    """The digest's line: how the set grew this week, and the last regression run with its pass rate."""
    line = f"*Test set:* {figures.size} question(s), {figures.grown} new this week."
    if figures.last_run is None:
        return line + " No `relmon regress` run yet."
    when, rate, items = figures.last_run
    rate_text = f"{rate:.0%} of {items} passed" if rate is not None else f"{items} items"
    return line + f" Last `relmon regress` on {when:%Y-%m-%d %H:%M} UTC: {rate_text}."


def saved_text(outcome: str, item_id: int | None) -> str | None:
    """The private note the person who saved the modal gets (None: nothing to say)."""
    return {
        "saved": f"Saved in the test set (item {item_id}): `relmon regress` checks the next bot version on it.",
        "removed": f"Removed from the test set (item {item_id}).",
        "no_question": "That answer has no question with words to test on, so it was not added to the test set.",
        "removed_before": "That question was removed from the test set, so it stays out.",
    }.get(outcome)
