"""The alert policy applied to a stored judgment: read the facts it needs (`load`, once per task), decide the low
score's intent once lock-free (`policy.low_intent`), and under the channels' SQL locks complete that decision with
the hour's counts and the degradation history (`policy.complete`) and claim what it says. No Slack calls here:
what is claimed is posted by `workers.alerts.delivery` once the locks are released.

The claims are the at-most-once guarantee: rows unique on `dedupe_key`, inserted under the source channel's
lock (and the alert channel's, whose cap counts every source channel), so a burst handled by many workers at once
cannot all see "under the cap", and two workers with the same judgment meet one row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection
from sqlalchemy.orm import Session

from common.messages.alerts import Revision
from common.runtime import Runtime
from store import alert_reads, bot_groups, channel_scores, confirmations, exchanges
from store import alerts as alert_store
from store.alert_reads import AlertRow, BeforePost
from store.confirmations import SecondOpinion
from store.judgments import current_judgment, pair_for_judging
from store.models import Judgment, PairSource
from store.rules import EffectiveRule
from store.settings import Settings
from workers.alerts.policy import (
    DEGRADATION_JUDGE,
    Action,
    AlertPlan,
    ChannelPolicy,
    Decision,
    DegradationFacts,
    DegradationState,
    DegradationWindow,
    HourCounts,
    JudgmentFacts,
    ScoredAt,
    complete,
    degradation_blocked,
    degradation_key,
    hour_start,
    low_key,
    mean_key,
    to_utc,
)
from workers.pair_view import PairView


def channel_policy(runtime: Runtime, channel_id: str | None) -> ChannelPolicy:
    """What the policy reads of the channel's rule (the rules file, else the settings): resolved once per task, in
    `load` (or once per judging run's hand-on), and passed on."""
    return policy_of(runtime.rules.for_channel(channel_id, runtime.settings), runtime.settings, channel_id)


def policy_of(rule: EffectiveRule, settings: Settings, key: str | None = None) -> ChannelPolicy:
    """The policy's view of a resolved channel rule (`key`: what it was resolved for, a channel or a bot's key)."""
    return ChannelPolicy(
        thresholds=rule.thresholds,
        alert_channel=rule.alert_channel,
        cap_per_hour=rule.alert_cap_per_hour,
        alert_channel_cap=settings.alert_channel_cap_per_hour,
        window=DegradationWindow(
            rule.degradation_window, rule.degradation_window_minutes, rule.degradation_min_answers
        ),
        floor=rule.degradation_floor,
        key=key,
    )


def read_degradation(
    connection: Session | Connection, policy: ChannelPolicy, channel_id: str, now: datetime
) -> tuple[DegradationFacts, alert_store.DegradationHistory]:
    """The scores both windows need (one bounded read) and the channel's degradation history (`channel_id`: a
    channel, or a bot's key: policy.mean_key)."""
    minutes = policy.window.minutes
    since = to_utc(now) - timedelta(minutes=minutes) if minutes > 0 else None
    scores = channel_scores.recent_scores(
        connection, channel_id, DEGRADATION_JUDGE, last=policy.window.answers, since=since
    )
    history = alert_store.degradation_history(connection, channel_id)
    state = DegradationState(
        active=history.open_alert_id is not None, last_alert_at=history.last_alert_at, episodes=history.episodes
    )
    facts = DegradationFacts([ScoredAt(score, at) for score, at in scores], state, history.open_unposted)
    return facts, history


@dataclass(frozen=True)
class Judged:
    """A stored judgment as the alert path sees it, read once per task (`load`): what the policy decides on, what a
    second opinion reads, and what its alert shows but the votes and signals (read when it is drawn)."""

    facts: JudgmentFacts
    pair: PairView  # what its verdict read: a second opinion reads the same (PairView.judge_input)
    policy: ChannelPolicy | None  # its channel's rule, resolved once for the whole alert path (None: no channel)
    pair_version: int  # the version of the answer judged
    low_row: tuple[int, str] | None  # (alert id, status)
    max_score: float | None = None
    reasoning: str | None = None
    revision: Revision | None = None  # the newer verdict, when a later version of the answer was judged since
    earlier_alerts: tuple[int, ...] = ()  # posted alerts about earlier versions of the answer: to update in place
    second_opinion: SecondOpinion | None = None  # stored on the judgment already

    @property
    def answer_ts(self) -> str | None:
        return self.pair.answer_ts

    @property
    def superseded(self) -> bool:
        """A judgment of a later version of the answer replaces it."""
        return self.revision is not None


def load(runtime: Runtime, judgment_id: int) -> Judged | None:
    """The judgment, its pair, its alert and its channel's policy, read once for the whole alert path (second
    opinion and the alert's message included): the frozen context a task decides and draws on."""
    with runtime.db.reading() as session:
        return load_in(session, runtime, judgment_id)


def load_in(session: Session, runtime: Runtime, judgment_id: int) -> Judged | None:
    """`load` in a session the task has open already (a redraw reads its alert row in the same one)."""
    return _read_judged(session, judgment_id, lambda pair: policy_for_pair(runtime, pair, session))


def policy_for_pair(runtime: Runtime, pair: PairView, session: Session | None = None) -> ChannelPolicy | None:
    """Its channel's policy; an ingested exchange without a Slack channel has its bot's rule (`bots:`, over the
    defaults: its alerts go to the bot's alert channel, else the default one); any other pair without a channel has
    none (it never alerts)."""
    if pair.channel_id:
        return channel_policy(runtime, pair.channel_id)
    if pair.source == PairSource.INGEST:
        sent = exchanges.origin(session, pair.id) if session is not None else None
        return channel_policy(runtime, bot_groups.key_of(sent.bot) if sent else None)
    return None


def _read_judged(
    session: Session, judgment_id: int, policy_for: Callable[[PairView], ChannelPolicy | None]
) -> Judged | None:
    """The judgment, its pair, its alert row and the newest version judged, in one read (`alert_reads`); the rest
    drawn from them. None when the judgment or its pair is gone (a forgotten pair's judgments go with it)."""
    found = alert_reads.judgment_in_context(session, judgment_id, low_key(judgment_id))
    if found is None:
        return None
    pair = PairView.of(found.pair)
    return _judged(session, found.judgment, pair, policy_for(pair), found.alert, found.newest_version)


def current(session: Session, judged: Judged, stamp: BeforePost) -> Judged | None:
    """`judged` as it stands now, for a message about to go out: a deletion or an edit since the task loaded it
    (during the second opinion, say) scrubbed words it must not show. `stamp`, read under the alert's lease
    (`alert_reads.before_post`), holds the pair's change stamp and the verdict's reasoning (which a deletion
    scrubs with it); only when either moved is the judgment read again. None: the judgment is gone."""
    if stamp.pair_updated_at == judged.pair.updated_at and stamp.reasoning == judged.reasoning:
        return judged
    return _read_judged(session, judged.facts.judgment_id, lambda _pair: judged.policy)


def read_pair(session: Session, pair_id: int) -> PairView | None:
    """The pair as the alert path and its messages see it (texts included): one read."""
    fields = pair_for_judging(session, pair_id)
    return PairView.of(fields) if fields is not None else None


def facts_of(judgment: Judgment, pair: PairView) -> JudgmentFacts:
    """What the policy knows of a stored judgment of `pair`."""
    return JudgmentFacts(judgment.id, judgment.judge, judgment.status, judgment.score, pair.source, pair.channel_id)


def judged_of(session: Session, judgment: Judgment, pair: PairView, policy: ChannelPolicy | None) -> Judged:
    """A `Judged` for a judgment read by itself (a missed failure's): its alert row and the newer verdict read."""
    row = alert_store.by_key(session, low_key(judgment.id))
    newest = current_judgment(session, judgment)
    low_row = (row.id, row.status) if row else None
    return _judged(session, judgment, pair, policy, low_row, newest.pair_version, newest)


def _judged(
    session: Session,
    judgment: Judgment,
    pair: PairView,
    policy: ChannelPolicy | None,
    low_row: tuple[int, str] | None,
    newest_version: int,
    newest: Judgment | None = None,
) -> Judged:
    """A `Judged` once its judgment, pair, alert row and newest version are at hand. Read only when an edited
    answer was judged again: the newer verdict (superseded), or the posted alerts about earlier versions."""
    revision = None
    if newest_version > judgment.pair_version:
        latest = newest if newest is not None else current_judgment(session, judgment)
        revision = Revision(latest.status, latest.score, latest.max_score, latest.reasoning)
    earlier: list[int] = []
    if judgment.pair_version > 1 and revision is None:
        earlier = alert_store.posted_about_earlier(session, pair.id, judgment.judge, judgment.pair_version)
    return Judged(
        facts_of(judgment, pair),
        pair,
        policy,
        judgment.pair_version,
        low_row,
        max_score=judgment.max_score,
        reasoning=judgment.reasoning,
        revision=revision,
        earlier_alerts=tuple(earlier),
        second_opinion=confirmations.stored(judgment),
    )


@dataclass(frozen=True)
class Claim:
    """An alert row the locked plan claimed or found: its status and, when it is to be posted (claimed), the row."""

    status: str
    row: AlertRow | None = None


@dataclass(frozen=True)
class Claimed:
    """What the locked plan claimed: the rows to post or hold once the locks are released."""

    plan: AlertPlan
    low: Claim | None  # the judgment's low-score alert, new or found
    degradation: Claim | None  # a degradation alert to post (claimed) or held, new or unposted


def plan_without_locks(
    runtime: Runtime, judged: Judged, policy: ChannelPolicy, intent: Decision, now: datetime
) -> AlertPlan | None:
    """The plan, when the lock-free decision changes nothing (most judgments: a good score in a healthy channel,
    decided without taking a lock); None when the locked path has something to decide: a low-score row to act on, a
    low score, or a degradation alert that the channel's history, read without a lock, says may open or close. The
    locked path reads that history again, consistently with its claim. Never a false "nothing": this task runs
    after its judgment committed, so the last of concurrent judgments reads all their scores."""
    if judged.low_row is not None or intent.action is not Action.NONE:
        return None
    degradation = None
    if degradation_blocked(judged.facts, policy) is None:
        with runtime.db.autocommit() as connection:  # plain reads, no transaction needed
            degradation, _ = read_degradation(connection, policy, mean_key(judged.facts, policy), now)
    plan = complete(intent, judged.facts, policy, degradation=degradation, now=now)
    return None if plan.changes_anything else plan


def plan_and_claim(
    runtime: Runtime, judged: Judged, policy: ChannelPolicy, intent: Decision, permalink: str | None, now: datetime
) -> Claimed:
    """Under the source channel's lock (then the alert channel's, never the other way round: no lock cycle),
    count, complete the plan and claim. The low score's intent comes decided (second opinion applied); what only
    the locks make consistent with the claim is decided here: the hour's caps, and the degradation history."""
    facts, channel = judged.facts, judged.facts.channel_id
    hour = hour_start(now)
    key = low_key(facts.judgment_id)
    averaged = mean_key(facts, policy)
    with runtime.db.session() as session:
        alert_store.lock_channel(session, channel)
        if averaged != channel:  # a bot's mean (its exchanges in no channel): its own lock, after the source's
            alert_store.lock_channel(session, averaged)
        if policy.alert_channel:
            alert_store.lock_alert_channel(session, policy.alert_channel)  # its cap counts every source channel
        # With the counts, the low row's key looked up again: a twin task may have claimed it since the load, and
        # only under the locks is that read consistent with the counts and the claim.
        check = alert_store.claim_check(session, key, channel, policy.alert_channel, hour, hour + timedelta(hours=1))
        degradation = history = None
        if degradation_blocked(facts, policy) is None:
            degradation, history = read_degradation(session, policy, averaged, now)
        decided = complete(
            intent,
            facts,
            policy,
            counts=HourCounts(check.source_channel, check.alert_channel),
            low_claimed=check.found is not None,
            degradation=degradation,
            now=now,
        )
        low = _found(session, check.found)
        if low is None and decided.low.action is not Action.NONE:
            row, _ = alert_store.claim_alert(
                session,
                dedupe_key=key,
                kind=alert_store.KIND_LOW,
                status=_status(decided.low.action),
                judgment_id=facts.judgment_id,
                source_channel_id=channel,
                alert_channel_id=policy.alert_channel,
                details={"permalink": permalink, "reason": decided.low.reason},
                now=now,
            )
            low = Claim(row.status, AlertRow.of(row))
        degradation_claim = None
        if decided.degradation_delivery is not None:
            degradation_claim = _claim_degradation(session, facts, policy, decided, now)
        elif decided.degradation.action is Action.REARM:
            alert_store.mark_recovered(session, history.open_alert_id, now)
        if decided.post_unposted:
            degradation_claim = Claim(alert_store.STATUS_CLAIMED, history.open_row)
    return Claimed(decided, low, degradation_claim)


def _found(session: Session, found: tuple[int, str] | None) -> Claim | None:
    """The low row claimed before this task's locks (by an earlier attempt, or a twin task): its whole row read
    only when it is still to be posted. Not this task's own claim, which it has as written."""
    if found is None:
        return None
    alert_id, status = found
    if status != alert_store.STATUS_CLAIMED:
        return Claim(status)
    return Claim(status, alert_reads.row_by_id(session, alert_id))


def _status(action: Action) -> str:
    return alert_store.STATUS_HELD if action is Action.HOLD else alert_store.STATUS_CLAIMED


def _claim_degradation(
    session: Session, facts: JudgmentFacts, policy: ChannelPolicy, decided: AlertPlan, now: datetime
) -> Claim:
    decision, delivery = decided.degradation, decided.degradation_delivery
    averaged = mean_key(facts, policy)  # a channel, or a bot's key: its alert names the bot (channel_mention)
    row, _ = alert_store.claim_alert(
        session,
        dedupe_key=degradation_key(averaged, decision.episode),
        kind=alert_store.KIND_DEGRADATION,
        source_channel_id=averaged,
        alert_channel_id=policy.alert_channel,
        details={
            "mean": round(decision.mean, 4),
            "count": decision.count,
            "floor": policy.floor,
            "judge": DEGRADATION_JUDGE,
            "window": decision.window,  # which window tripped: the last N answers or the last M minutes
            "window_answers": policy.window.answers,
            "window_minutes": policy.window.minutes,
            "min_answers": policy.window.min_answers,
            # score -> answers of the window: the mean's bootstrap interval in the alert and the hour's summary
            "scores": {f"{score:g}": count for score, count in sorted(Counter(decision.scores).items())},
            "reason": delivery.reason,
        },
        status=_status(delivery.action),
        now=now,
    )
    return Claim(row.status, AlertRow.of(row))
