"""On-demand verdicts, delivered to whoever asked: on the response_url (its Retry-After waited out), else as an
ephemeral message in the channel where they asked, else (not in that channel) as a direct message. Once: a post
the response_url took without answering (timeout, connection closed) is not sent again anywhere
(`response_url_unconfirmed`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from common import replies
from common.messages.blocks import context
from common.messages.verdicts import VerdictItem, verdict_message
from common.post_once import PostOnce, Receipts
from common.runtime import Runtime
from store import alerts as alert_store
from store.models import Alert, Judgment, Pair, PairStatus
from workers.alerts.delivery import lease


@dataclass(frozen=True)
class _VerdictJob:
    requested_by: str | None
    response_url: str | None
    reply_channel: str | None  # where the person asked (else the answer's channel): the ephemeral fallback
    payload: dict


def deliver(runtime: Runtime, pair_id: int, reply_channel: str | None = None) -> str:
    # A private reply carries no mark: its receipt and its claim are the records.
    once = PostOnce(runtime.slack, Receipts(runtime.redis), f"verdict:{pair_id}")
    with runtime.db.session() as session:
        pair = session.get(Pair, pair_id)
        if pair is None:
            return "missing"
        row, _ = alert_store.claim_alert(
            session,
            dedupe_key=once.key,
            kind=alert_store.KIND_VERDICT,
            source_channel_id=pair.channel_id,
            alert_channel_id=pair.requested_by,
        )
        alert_id = row.id
    with lease(runtime, alert_id):
        with runtime.db.session() as session:
            row = session.get(Alert, alert_id)
            if row.status != alert_store.STATUS_CLAIMED:
                return row.status
            job = _job(runtime, session, pair_id, reply_channel)
        dm: dict[str, str | None] = {}  # a direct message's channel and ts: retention redraws or deletes it
        where = once.deliver(lambda: _send_privately(runtime, job, dm))  # its receipt: sent, the database missed it
        with runtime.db.session() as session:
            alert_store.mark_alert_posted(session, alert_id, dm.get("ts"))
            alert_store.merge_details(
                session, alert_id, delivered_via=where, **({"dm_channel": dm["channel"]} if dm else {})
            )
    return where


def redraw(runtime: Runtime, pair_id: int, note: str | None = None) -> str:
    """Show a verdict sent as a direct message as the store has it now (after a deletion scrubbed its words), with
    `note` under it. A response_url's or ephemeral reply cannot be changed, and does not stay."""
    with runtime.db.session() as session:
        row = alert_store.by_key(session, f"verdict:{pair_id}")
        channel = ((row.details or {}).get("dm_channel") if row is not None else None) or None
        if row is None or row.status != alert_store.STATUS_POSTED or not row.message_ts or not channel:
            return "not_a_direct_message"
        payload = _job(runtime, session, pair_id, None).payload
        message_ts = row.message_ts
    if note:
        payload = {**payload, "blocks": [*payload.get("blocks", []), context(note)]}
    runtime.slack.chat_update(channel=channel, ts=message_ts, **payload)
    return "updated"


def _job(runtime: Runtime, session, pair_id: int, reply_channel: str | None) -> _VerdictJob:
    pair = session.get(Pair, pair_id)
    judgments = session.execute(select(Judgment).where(Judgment.pair_id == pair_id).order_by(Judgment.id))
    items = [VerdictItem(j.judge, j.status, j.score, j.max_score, j.reasoning) for j in judgments.scalars()]
    payload = verdict_message(
        items,
        question=pair.question_text,
        answer=pair.answer_text,
        channel_id=pair.channel_id,
        budget_spent=pair.status == PairStatus.SKIPPED_BUDGET,
    )
    # The person is a member of the answer's channel (checked before judging): a fair second choice.
    where_asked = reply_channel or replies.reply_channel(runtime.redis, pair_id) or pair.channel_id
    return _VerdictJob(pair.requested_by, pair.response_url, where_asked, payload)


def _send_privately(runtime: Runtime, job: _VerdictJob, dm: dict[str, str | None]) -> str:
    if not job.requested_by and not job.response_url:
        return "nobody"
    asker = replies.Asker(job.requested_by, job.reply_channel, job.response_url)
    return replies.reply_privately(
        runtime.slack, asker, job.payload, direct_message_last=True, on_posted=lambda c, ts: dm.update(channel=c, ts=ts)
    )
