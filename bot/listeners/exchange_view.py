"""The alert's "Show the exchange" button (common/messages/exchange_view.py), on an ingested dm or private
exchange's alert, which never quotes it. The click is acknowledged at once; the lazy half checks the clicker
against the bot's rule (`viewers:`, common.exchange_access) right where the text is read, then opens the modal with
the question and answer (views.open, its trigger_id valid 3 seconds), or tells anyone else privately whom to ask.
Nothing of the exchange is ever posted in the channel."""

from __future__ import annotations

import logging

from slack_bolt import App
from slack_sdk import WebClient

from bot.deps import BotDeps
from bot.listeners.clicks import ack_now, alert_click
from bot.replies import open_view, tell
from common.exchange_access import may_view, slack_group_members
from common.messages.blocks import message, section
from common.messages.exchange_view import SHOW_EXCHANGE_ACTION_ID, exchange_modal, gone_text, refusal_text
from common.messages.verdicts import error_message
from common.replies import Asker
from common.runtime import Runtime
from store import exchanges
from store.judgments import pair_of_judgment

log = logging.getLogger("relmon.exchange_view")


def _say(client: WebClient, asker: Asker, text: str) -> None:
    tell(client, asker, message(text, [section(text)]))


def open_exchange(runtime: Runtime, body: dict, client: WebClient) -> None:
    """The lazy half of a click: the modal for a viewer the bot's rule names, a private refusal for anyone else."""
    click = alert_click(body)
    if click is None:
        return  # not a judgment's id: a forged click
    asker, judgment_id = click.asker, click.judgment_id
    try:
        with runtime.db.reading() as session:
            pair = pair_of_judgment(session, judgment_id)
            sent = exchanges.origin(session, pair.id) if pair is not None else None
            if pair is None or sent is None:
                _say(client, asker, gone_text())
                return
            rule = runtime.rules.bot(sent.bot)
            viewers = list(rule.viewers) if rule is not None else []
            if not may_view(asker.user_id, viewers, slack_group_members(client)):
                log.info("exchange view refused", extra={"judgment_id": judgment_id, "bot": sent.bot})
                _say(client, asker, refusal_text(sent.bot, viewers))
                return
            view = exchange_modal(sent.bot, sent.visibility, pair.question_text, pair.answer_text)
        open_view(client, asker, body["trigger_id"], view)
        log.info("exchange shown", extra={"judgment_id": judgment_id, "bot": sent.bot, "user": asker.user_id})
    except Exception:
        log.exception("the exchange's modal could not open")
        tell(client, asker, error_message("unavailable"))


def register(app: App, deps: BotDeps) -> None:
    runtime = deps.runtime

    def open_for_click(body: dict, client: WebClient) -> None:
        open_exchange(runtime, body, client)

    app.action(SHOW_EXCHANGE_ACTION_ID)(ack=ack_now, lazy=[open_for_click])
