"""The alert's "Add to test set" button and its modal (common/messages/golden.py). The click is acknowledged at
once; the lazy half checks who clicked (common.golden_access: a private channel's item is changed by its members or
its alert channel's only; the modal quotes only what that person may read where they clicked), reads what the set
holds for the alert's question and opens the modal (its trigger_id is valid 3 seconds). The submission is
acknowledged at once too; the typed text goes in a Redis note and the worker, checking the person again, saves it
(workers.tasks.golden)."""

from __future__ import annotations

import json
import logging

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.deps import BotDeps
from bot.listeners.clicks import ack_now, alert_click, judgment_id_of
from bot.replies import open_view, tell
from common import golden_notes, task_names
from common.celery_app import celery
from common.golden_access import Clicker, Source, pair_source
from common.membership import MembershipCache
from common.messages.blocks import message, section
from common.messages.golden import (
    EXPECTED_BLOCK,
    GOLDEN_ACTION_ID,
    GOLDEN_MODAL_ID,
    MAX_EXPECTED,
    REMOVE_BLOCK,
    REMOVE_VALUE,
    golden_modal,
    refusal_text,
)
from common.messages.verdicts import error_message
from common.replies import Asker
from common.runtime import Runtime
from store import golden as golden_store
from store.judgments import pair_of_judgment

log = logging.getLogger("relmon.golden")


def open_modal(runtime: Runtime, membership: MembershipCache, body: dict, client: WebClient) -> None:
    """The lazy half of a click: the modal, pre-filled with the question and the item's expected answer (or the
    teammate's reply) as far as this person may read them here (common.golden_access); a person who may not change
    the item is told so instead."""
    click = alert_click(body)
    if click is None:
        return  # not a judgment's id: a forged click
    asker, judgment_id = click.asker, click.judgment_id
    try:
        with runtime.db.reading() as session:
            pair = pair_of_judgment(session, judgment_id)
            if pair is None:
                tell(client, asker, error_message("vote_gone"))
                return
            item = golden_store.item_of_pair(session, pair.id)
            sources = [pair_source(session, pair.id, pair.channel_id, pair.channel_is_private)]
            if item is not None and item.channel_id != pair.channel_id:
                sources.append(Source(item.channel_id, item.channel_is_private))
            clicker = Clicker(runtime, client, membership, asker.user_id, asker.channel_id)
            if not clicker.may_change(sources):
                log.info("test set change refused", extra={"judgment_id": judgment_id})
                text = refusal_text(sources[0].channel_id)
                tell(client, asker, message(text, [section(text)]))
                return
            expected = item.expected if item is not None else pair.reference_text
            view = golden_modal(judgment_id, question=pair.question_text, expected=expected, in_set=item is not None,
                                withheld=clicker.withheld(sources), source_channel=pair.channel_id,
                                times=item.times if item is not None else 0, channel_id=asker.channel_id)  # fmt: skip
        open_view(client, asker, body["trigger_id"], view)
    except Exception:
        log.exception("the test set's modal could not open")
        tell(client, asker, error_message("unavailable"))


def modal_values(view: dict) -> tuple[str | None, bool]:
    """(the expected answer written, or None; whether "remove" is ticked), from a submitted view."""
    state = ((view.get("state") or {}).get("values")) or {}
    field = (state.get(EXPECTED_BLOCK) or {}).get("value") or {}
    text = field.get("value") if isinstance(field, dict) else None
    boxes = ((state.get(REMOVE_BLOCK) or {}).get("value") or {}).get("selected_options") or []
    remove = any(isinstance(option, dict) and option.get("value") == REMOVE_VALUE for option in boxes)
    return (text.strip() or None) if isinstance(text, str) else None, remove


def ack_modal(ack: Ack, view: dict) -> None:
    expected, _remove = modal_values(view)
    if expected is not None and len(expected) > MAX_EXPECTED:
        ack(response_action="errors", errors={EXPECTED_BLOCK: f"At most {MAX_EXPECTED:,} characters."})
    else:
        ack()


def save_modal(runtime: Runtime, body: dict, view: dict, client: WebClient) -> None:
    """The lazy half of a submission: the typed text goes in a Redis note (common.golden_notes), and the worker gets
    its key and IDs, checks who submitted, and adds, edits or removes the item."""
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
        judgment_id = judgment_id_of(str(metadata.get("judgment_id")))
    except (ValueError, AttributeError):
        metadata, judgment_id = {}, None
    if judgment_id is None:
        return
    expected, remove = modal_values(view)
    channel = metadata.get("channel_id") if isinstance(metadata.get("channel_id"), str) else None
    user = body["user"]["id"]
    try:
        note = golden_notes.put(runtime.redis, expected) if expected is not None and not remove else None
        args = [judgment_id, user, note, remove]  # IDs only: the typed text stays in the note
        celery.send_task(task_names.GOLDEN_SAVE, args=args, kwargs={"channel_id": channel})
    except Exception:  # Redis or the broker down: nothing was handed on, and the person is told so
        log.exception("the test set change could not be handed on")
        tell(client, Asker(user, channel, None), error_message("unavailable"))
        return
    log.info("test set change handed on", extra={"judgment_id": judgment_id, "remove": remove})


def register(app: App, deps: BotDeps) -> None:
    runtime = deps.runtime

    def open_modal_for_click(body: dict, client: WebClient) -> None:
        open_modal(runtime, deps.membership, body, client)

    def save_submission(body: dict, view: dict, client: WebClient) -> None:
        save_modal(runtime, body, view, client)

    app.action(GOLDEN_ACTION_ID)(ack=ack_now, lazy=[open_modal_for_click])
    app.view(GOLDEN_MODAL_ID)(ack=ack_modal, lazy=[save_submission])
