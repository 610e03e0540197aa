"""The golden set in the workers: items collected from the conversation (a teammate's takeover, a "judge was right"
vote on a low-score alert) and curated from Slack (the alert's "Add to test set" modal), each by a person who may
change the item (common.golden_access; the typed text comes in a Redis note, common.golden_notes). Thin adapters over
store.golden_rules and store.golden; each write is idempotent per asked question, so a retried task adds nothing twice.
The tasks: workers.tasks.golden; the takeover's collection runs inside the outcome task (workers.tasks.outcomes)."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

from common import golden_notes
from common.golden_access import Source, pair_source, worker_clicker
from common.messages.golden import saved_text
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from store import golden as store
from store import outcomes as outcome_store
from store.alerts import low_alert_for_judgment
from store.golden_rules import (
    ORIGIN_BUTTON,
    ORIGIN_TAKEOVER,
    ORIGIN_VOTE,
    Occurrence,
    joins_from_takeover,
    joins_from_vote,
    may_join,
    occurrence_of_pair,
)
from store.models import Judgment
from workers.alerts.delivery import permalink  # the alert's own look-up (Slack's chat.getPermalink)

log = logging.getLogger("relmon.golden")


def _permalink(runtime: Runtime, pair: dict) -> str | None:
    return permalink(runtime, pair.get("channel_id"), pair.get("question_ts") or pair.get("answer_ts"))


def collect(
    runtime: Runtime, pair_id: int, origin: str, *, reference_ts: str | None = None, link: bool = True
) -> int | None:
    """Add the pair's question to the set (once per asked question). Returns the item's id, or None when the
    pair is gone or its question has no words. `link`: look up its permalink (an import without Slack cannot)."""
    occurrence = _occurrence(runtime, pair_id, origin, reference_ts=reference_ts, link=link)
    if occurrence is None:
        return None
    with runtime.db.session() as session:
        item_id, added = store.add_occurrence(session, occurrence)
    if added:
        log.info("golden item added", extra=event_fields(pair_id=pair_id, item_id=item_id, origin=origin))
    return item_id


def _occurrence(
    runtime: Runtime, pair_id: int, origin: str, *, reference_ts: str | None = None, link: bool = True
) -> Occurrence | None:
    with runtime.db.reading() as session:
        pair = store.pair_fields(session, pair_id)
    if pair is None or not may_join(pair.get("question_text")):
        return None
    link_to = _permalink(runtime, pair) if link else None
    return occurrence_of_pair(pair, origin=origin, permalink=link_to, reference_ts=reference_ts)


def collect_takeover(runtime: Runtime, pair_id: int, reference_ts: str | None, *, link: bool = True) -> int | None:
    """A teammate answered after the bot (their reply is the pair's reference now): the question joins the set."""
    with runtime.db.reading() as session:
        signals = outcome_store.signal_names(session, pair_id)
        pair = store.pair_fields(session, pair_id)
    if pair is None or not joins_from_takeover(signals, pair.get("reference_text")):
        return None
    return collect(runtime, pair_id, ORIGIN_TAKEOVER, reference_ts=reference_ts, link=link)


def pair_source_of(session, pair_id: int | None, pair: dict | None) -> Source | None:
    """The Source of a pair's text as `store.pair_fields` gives it (an ingested exchange's: its bot's key)."""
    if pair_id is None or pair is None:
        return None
    return pair_source(session, pair_id, pair.get("channel_id"), bool(pair.get("channel_is_private")))


def collect_vote_in(
    runtime: Runtime, judgment_id: int, vote: str, user: str | None = None, channel_id: str | None = None
) -> int | None:
    """A "judge was right" vote on a low-score alert: the answer failed, its question joins the set, when the voter
    may add it (common.golden_access: a private channel's question, by its members or its alert channel's). A
    vote from before votes named their voter (`user` None) adds only a public channel's question."""
    with runtime.db.reading() as session:
        judgment = session.get(Judgment, judgment_id)
        alert = low_alert_for_judgment(session, judgment_id)
        pair_id = judgment.pair_id if judgment is not None else None
        pair = store.pair_fields(session, pair_id) if pair_id is not None else None
        source = pair_source_of(session, pair_id, pair)
    if pair is None or source is None or not joins_from_vote(vote, alert.kind if alert is not None else None):
        return None
    if not worker_clicker(runtime, user, channel_id).may_change([source]):
        log.info("golden item not added: the voter may not add it", extra=event_fields(judgment_id=judgment_id))
        acknowledge_save(runtime, channel_id, user, {"outcome": "vote_refused", "item_id": None}, source.channel_id)
        return None
    return collect(runtime, pair_id, ORIGIN_VOTE)


def save_from_modal_in(
    runtime: Runtime,
    judgment_id: int,
    user: str,
    note: str | None,
    remove: bool = False,
    channel_id: str | None = None,
) -> dict[str, int | str | None]:
    """The "Add to test set" modal was submitted: the question joins (or stays in) the set with the expected answer
    typed there (read from its Redis note, common.golden_notes), or leaves it when the person ticked "remove".
    Nothing is written for a person who may not change the item, nor when the note expired unread."""
    with runtime.db.reading() as session:
        judgment = session.get(Judgment, judgment_id)
        pair_id = judgment.pair_id if judgment is not None else None
        pair = store.pair_fields(session, pair_id) if pair_id is not None else None
        existing = store.item_of_pair(session, pair_id) if pair_id is not None else None
        found = pair_source_of(session, pair_id, pair)
        sources = [found] if found is not None else []
        if existing is not None and existing.channel_id != (pair or {}).get("channel_id"):
            sources.append(Source(existing.channel_id, existing.channel_is_private))
        existing_id = existing.id if existing is not None else None
    if pair_id is None or pair is None:
        golden_notes.drop(runtime.redis, note)
        return {"outcome": "gone", "item_id": None}
    if not worker_clicker(runtime, user, channel_id).may_change(sources):
        golden_notes.drop(runtime.redis, note)
        log.info("test set change refused", extra=event_fields(judgment_id=judgment_id, user=user))
        return {"outcome": "refused", "item_id": None, "channel_id": sources[0].channel_id}
    if remove:
        golden_notes.drop(runtime.redis, note)
        if existing_id is None:
            return {"outcome": "not_in_set", "item_id": None}
        with runtime.db.session() as session:
            store.remove_item(session, existing_id, user)
        log.info("golden item removed", extra=event_fields(item_id=existing_id, user=user))
        return {"outcome": "removed", "item_id": existing_id}
    expected = golden_notes.read(runtime.redis, note) if note is not None else None
    if note is not None and expected is None:
        saved_before = golden_notes.saved_item(runtime.redis, note)
        if saved_before is not None:  # this task ran to the end before (a redelivery): nothing more to write
            return {"outcome": "saved", "item_id": saved_before}
        log.info("test set note expired before it was saved", extra=event_fields(judgment_id=judgment_id))
        return {"outcome": "expired", "item_id": None}
    occurrence = _occurrence(runtime, pair_id, ORIGIN_BUTTON)
    if occurrence is None:
        golden_notes.drop(runtime.redis, note)
        return {"outcome": "no_question", "item_id": None}
    # One transaction: nobody (a regress run, `golden list`) sees the new item without the answer typed for it.
    with runtime.db.session() as session:
        item_id, added = store.add_occurrence(session, occurrence)
        kept = store.set_expected(session, item_id, expected, user) if expected else True
    if added:
        log.info("golden item added", extra=event_fields(pair_id=pair_id, item_id=item_id, origin=ORIGIN_BUTTON))
    if not kept:
        golden_notes.drop(runtime.redis, note)
        return {"outcome": "removed_before", "item_id": item_id}
    if note is not None:
        golden_notes.mark_saved(runtime.redis, note, item_id)
    return {"outcome": "saved", "item_id": item_id}


def acknowledge_save(
    runtime: Runtime, channel_id: str | None, user: str | None, outcome: dict, source_channel: str | None = None
) -> None:
    """Tell the person who saved the modal (or voted) what became of it, privately where the alert is."""
    text = saved_text(str(outcome["outcome"]), outcome.get("item_id"), source_channel or outcome.get("channel_id"))
    if not channel_id or not user or text is None:
        return
    try:
        runtime.slack.chat_postEphemeral(channel=channel_id, user=user, text=text)
    except SlackApiError as error:  # the note is a courtesy: the item is saved whatever Slack says
        log.info("no confirmation of the test set change", extra={"error": error.response.get("error")})
