"""An ingested dm or private exchange's withheld note and "Show the exchange" button (on its alert, which never
quotes it), its modal with the question and answer, and the private refusal to a person the bot's rule does not
name. Rendering only: the listener (bot/listeners/exchange_view.py) checks who clicked (common.exchange_access)."""

from __future__ import annotations

from common.messages.blocks import button, context, person_mention, plain, shorten

SHOW_EXCHANGE_ACTION_ID = "show_exchange"
SHOW_EXCHANGE_BLOCK_ID = "relmon_show_exchange"  # the alert's block that holds the button
WITHHELD_EXCHANGE = (
    "_Question, answer and reasoning withheld: the bot sent this exchange as private (a DM or a private "
    "conversation), and its rule does not let this channel quote it. The people its rule names can open it._"
)
EXCHANGE_MODAL_ID = "exchange_modal"
MAX_SHOWN = 2900  # of each text in one plain_text section (Slack: 3,000)


def show_exchange_button(judgment_id: int) -> dict:
    return button("Show the exchange", action_id=SHOW_EXCHANGE_ACTION_ID, value=str(judgment_id))


def _plain_section(label: str, text: str | None) -> dict:
    # plain_text: the person's and the bot's words as written, no mrkdwn, mentions or links
    body = shorten((text or "").strip() or "(empty)", MAX_SHOWN)
    return {"type": "section", "text": plain(f"{label}:\n{body}", 3000)}


def exchange_modal(bot: str, visibility: str, question: str | None, answer: str | None) -> dict:
    """The modal: the exchange's question and answer, for one person its bot's rule allows."""
    note = f"A {visibility} exchange of bot {bot}: shown to you only, because its rule names you. Do not share it."
    return {
        "type": "modal",
        "callback_id": EXCHANGE_MODAL_ID,
        "title": plain("The exchange", 24),
        "close": plain("Close", 24),
        "blocks": [context(note), _plain_section("Question", question), _plain_section("Answer", answer)],
    }


def refusal_text(bot: str, viewers: list[str]) -> str:
    """To a person the bot's rule does not name: whom to ask."""
    if viewers:
        named = ", ".join(person_mention(v) for v in viewers)
        return f"Only the people bot {bot}'s rule names can read this exchange: ask {named}."
    return (
        f"Nobody may read bot {bot}'s private exchanges in Slack: ask a relmon admin to name viewers in its rule "
        "(`bots:` in the channel rules file)."
    )


def gone_text() -> str:
    return "That exchange is no longer stored (forgotten, or past retention)."
