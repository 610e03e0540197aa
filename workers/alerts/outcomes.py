"""Alerts and outcome signals: when a pair's signals change, its posted alerts are redrawn in place (under their
lease, like a vote), and when the conversation says a well-scored answer failed (`capture.outcomes.failed`) a
missed-failure alert is claimed and posted, once per pair.

The missed failure counts as a judge disagreement: a system vote "wrong" (user `OUTCOME_VOTER`) on each
well-scored judgment of the pair, so the feedback tally, `voted_scores` and `relmon eval --from-feedback` count
it like a person's vote. One vote per (judgment, voter): a retry records nothing twice.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from capture.outcomes import failed
from common.feedback import VOTE_WRONG
from common.runtime import Runtime
from store import alerts as alert_store
from store.alert_reads import AlertRow
from store.feedback import record_vote
from store.judgments import is_current
from store.models import Judgment, PairSource
from store.outcomes import signal_names
from workers.alerts import delivery, planning
from workers.alerts.policy import Action, ChannelPolicy, HourCounts, JudgmentFacts, hour_start, is_low
from workers.pair_view import PairView

log = logging.getLogger("relmon.alerts")

OUTCOME_VOTER = "relmon:outcomes"  # the feedback "voter" of missed failures


def missed_key(pair_id: int) -> str:
    return f"missed:{pair_id}"


@dataclass(frozen=True)
class MissedDecision:
    action: Action
    reason: str
    judgment_id: int | None = None  # the well-scored judgment the alert is about
    disagreed: tuple[int, ...] = ()  # every well-scored judgment: each gets the system vote


def decide_missed(
    signals: Collection[str],
    judgments: Sequence[JudgmentFacts],
    policy: ChannelPolicy,
    counts: HourCounts = HourCounts(0, 0),
) -> MissedDecision:
    """Pure: whether a missed-failure alert is due, on which judgment, and whether a cap holds it."""
    if not failed(signals):
        return MissedDecision(Action.NONE, "not_failed")
    scored_well = [
        facts
        for facts in judgments
        if facts.status == "ok"
        and facts.score is not None
        and facts.judge in policy.thresholds
        and not is_low(facts, policy.thresholds)
    ]
    if not scored_well:
        return MissedDecision(Action.NONE, "not_scored_well")
    about, disagreed = scored_well[0].judgment_id, tuple(facts.judgment_id for facts in scored_well)
    if not policy.alert_channel:
        return MissedDecision(Action.NONE, "no_alert_channel", about, disagreed)
    if counts.source_channel >= policy.cap_per_hour:
        return MissedDecision(Action.HOLD, "hourly_cap", about, disagreed)
    if policy.alert_channel_cap is not None and counts.alert_channel >= policy.alert_channel_cap:
        return MissedDecision(Action.HOLD, "alert_channel_cap", about, disagreed)
    return MissedDecision(Action.ALERT, "missed_failure", about, disagreed)


def _current_facts(session: Session, pair: PairView) -> list[JudgmentFacts]:
    rows = session.scalars(
        select(Judgment).where(Judgment.pair_id == pair.id, is_current(Judgment)).order_by(Judgment.id)
    )
    return [planning.facts_of(judgment, pair) for judgment in rows]


@dataclass(frozen=True)
class FollowedUp:
    """What a follow-up did: its missed-failure alert (why none, or what became of it) and the alerts redrawn."""

    missed: str
    redrawn: int = 0

    def __str__(self) -> str:  # the task's result, in the worker's log
        return f"missed: {self.missed}; redrawn: {self.redrawn}"


def follow_up(runtime: Runtime, pair_id: int, now: datetime | None = None) -> FollowedUp:
    """After a pair's signals changed: claim (once) and post its missed-failure alert if due, then redraw its
    posted alerts with the signals so far. Idempotent: a retry finds the claim and the post-once receipt. The pair
    is read once; the alert is drawn from that read."""
    now = now or datetime.now(UTC)
    with runtime.db.reading() as session:
        pair = planning.read_pair(session, pair_id)
    # A captured answer in its channel, or an ingested exchange (its own channel's policy, or the rules' defaults).
    if pair is None or pair.source not in (PairSource.CAPTURE, PairSource.INGEST):
        return FollowedUp("missing")
    policy = planning.policy_for_pair(runtime, pair)
    if policy is None:
        return FollowedUp("missing")
    outcome, row = _claim_missed(runtime, pair, policy, now)
    if outcome == alert_store.STATUS_CLAIMED and row is not None:
        with runtime.db.reading() as session:
            judged = planning.judged_of(session, session.get(Judgment, row.judgment_id), pair, policy)
        outcome = delivery.post_alert(runtime, row, judged)
    elif outcome == alert_store.STATUS_HELD:
        delivery.schedule_summary_flush(runtime)
    with runtime.db.session() as session:
        posted = alert_store.posted_about_pair(session, pair_id, kinds=(alert_store.KIND_LOW, alert_store.KIND_MISSED))
    for alert_id in posted:
        delivery.refresh_votes(runtime, alert_id)
    return FollowedUp(outcome, len(posted))


def _claim_missed(
    runtime: Runtime, pair: PairView, policy: ChannelPolicy, now: datetime
) -> tuple[str, AlertRow | None]:
    """The missed-failure alert's claim: (its status or why there is none, its row)."""
    hour = hour_start(now)
    until = hour + timedelta(hours=1)
    channel = pair.channel_id
    with runtime.db.reading() as session:
        found = alert_store.by_key(session, missed_key(pair.id))
        if found is not None:
            return found.status, AlertRow.of(found)
        if not failed(signal_names(session, pair.id)):
            return "not_failed", None
    link = delivery.permalink(runtime, channel, pair.answer_ts)  # a Slack call: before the locks
    with runtime.db.session() as session:
        signals = signal_names(session, pair.id)
        alert_store.lock_channel(session, channel)  # the same locks, in the same order, as a low-score claim
        if policy.alert_channel:
            alert_store.lock_alert_channel(session, policy.alert_channel)
        counts = HourCounts(*alert_store.hour_counts(session, channel, policy.alert_channel, hour, until))
        decided = decide_missed(signals, _current_facts(session, pair), policy, counts)
        for judgment_id in decided.disagreed:
            record_vote(session, judgment_id, OUTCOME_VOTER, VOTE_WRONG, now)
        if decided.action is Action.NONE:
            return decided.reason, None
        row, created = alert_store.claim_alert(
            session,
            dedupe_key=missed_key(pair.id),
            kind=alert_store.KIND_MISSED,
            status=alert_store.STATUS_HELD if decided.action is Action.HOLD else alert_store.STATUS_CLAIMED,
            judgment_id=decided.judgment_id,
            source_channel_id=channel,
            alert_channel_id=policy.alert_channel,
            details={"permalink": link, "reason": decided.reason},
            now=now,
        )
    if created:
        log.info("missed failure claimed", extra={"pair_id": pair.id, "alert_id": row.id, "status": row.status})
    return row.status, AlertRow.of(row)
