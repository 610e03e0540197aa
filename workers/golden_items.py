"""The golden set in the workers: items collected from the conversation (a teammate's takeover, a "judge was right"
vote on a low-score alert) and curated from Slack (the alert's "Add to test set" modal). Thin adapters over
store.golden_rules and store.golden; each write is idempotent per asked question, so a retried task adds nothing twice.
The tasks: workers.tasks.golden; the takeover's collection runs inside the outcome task (workers.tasks.outcomes)."""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError

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


def collect(runtime: Runtime, pair_id: int, origin: str, *, reference_ts: str | None = None) -> int | None:
    """Add the pair's question to the set (once per asked question). Returns the item's id, or None when the
    pair is gone or its question has no words."""
    with runtime.db.reading() as session:
        pair = store.pair_fields(session, pair_id)
    if pair is None or not may_join(pair.get("question_text")):
        return None
    occurrence = occurrence_of_pair(pair, origin=origin, permalink=_permalink(runtime, pair), reference_ts=reference_ts)
    with runtime.db.session() as session:
        item_id, added = store.add_occurrence(session, occurrence)
    if added:
        log.info("golden item added", extra=event_fields(pair_id=pair_id, item_id=item_id, origin=origin))
    return item_id


def collect_takeover(runtime: Runtime, pair_id: int, reference_ts: str | None) -> int | None:
    """A teammate answered after the bot (their reply is the pair's reference now): the question joins the set."""
    with runtime.db.reading() as session:
        signals = outcome_store.signal_names(session, pair_id)
        pair = store.pair_fields(session, pair_id)
    if pair is None or not joins_from_takeover(signals, pair.get("reference_text")):
        return None
    return collect(runtime, pair_id, ORIGIN_TAKEOVER, reference_ts=reference_ts)


def collect_vote_in(runtime: Runtime, judgment_id: int, vote: str) -> int | None:
    """A "judge was right" vote on a low-score alert: the answer failed, its question joins the set."""
    with runtime.db.reading() as session:
        judgment = session.get(Judgment, judgment_id)
        alert = low_alert_for_judgment(session, judgment_id)
        pair_id = judgment.pair_id if judgment is not None else None
    if pair_id is None or not joins_from_vote(vote, alert.kind if alert is not None else None):
        return None
    return collect(runtime, pair_id, ORIGIN_VOTE)


def save_from_modal_in(
    runtime: Runtime, judgment_id: int, user: str, expected: str | None, remove: bool = False
) -> dict[str, int | str | None]:
    """The "Add to test set" modal was submitted: the question joins (or stays in) the set with the expected answer
    written there, or leaves it when the person ticked "remove"."""
    with runtime.db.reading() as session:
        judgment = session.get(Judgment, judgment_id)
        pair_id = judgment.pair_id if judgment is not None else None
        existing = store.item_of_pair(session, pair_id) if pair_id is not None else None
    if pair_id is None:
        return {"outcome": "gone", "item_id": None}
    if remove:
        if existing is None:
            return {"outcome": "not_in_set", "item_id": None}
        with runtime.db.session() as session:
            store.remove_item(session, existing.id, user)
        log.info("golden item removed", extra=event_fields(item_id=existing.id, user=user))
        return {"outcome": "removed", "item_id": existing.id}
    item_id = collect(runtime, pair_id, ORIGIN_BUTTON)
    if item_id is None:
        return {"outcome": "no_question", "item_id": None}
    if expected:
        with runtime.db.session() as session:
            if not store.set_expected(session, item_id, expected, user):
                return {"outcome": "removed_before", "item_id": item_id}
    return {"outcome": "saved", "item_id": item_id}


def acknowledge_save(runtime: Runtime, channel_id: str | None, user: str, outcome: dict) -> None:
    """Tell the person who saved the modal what became of it, privately where the alert is."""
    text = saved_text(str(outcome["outcome"]), outcome.get("item_id"))
    if not channel_id or text is None:
        return
    try:
        runtime.slack.chat_postEphemeral(channel=channel_id, user=user, text=text)
    except SlackApiError as error:  # the note is a courtesy: the item is saved whatever Slack says
        log.info("no confirmation of the test set change", extra={"error": error.response.get("error")})
