"""The alert policy: given plain facts about a new judgment and its channel's recent history, decide
what to post. No database, no Slack, no clock of its own (`now` comes in): every rule is tested directly.

Three decisions about one judgment, each made once per task:
- a low score: alert now, hold it for the hour's summary (the source channel's or the alert channel's hourly cap
  is reached), or nothing. Decided in two halves: `low_intent` from the judgment and its channel's rule (made
  lock-free, before the second opinion), then `capped` by the hour's counts (under the channel locks);
- degradation: the channel's rolling mean (last N answers, or last M minutes) fell below the floor (alert once,
  re-arm when it recovers); a bot's exchanges in no Slack channel make their bot's mean (`mean_key`);
- the dedupe keys that make each alert happen at most once (claimed in the `alerts` table before posting).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from judges.names import RELEVANCY
from store.models import ALERTING_SOURCES, ConfirmationStatus, PairSource

# The judge whose scale the degradation floor is written on (0–4).
DEGRADATION_JUDGE = RELEVANCY
# Degradation alerts at most once per channel per this period, even if the mean flaps around the floor.
DEGRADATION_PERIOD = timedelta(hours=1)


class Action(StrEnum):
    ALERT = "alert"  # post an alert now
    HOLD = "hold"  # low, but the channel's hourly cap is reached: gather into the hour's summary
    NONE = "none"  # nothing to post
    REARM = "rearm"  # degradation only: the mean recovered, the next drop may alert again


@dataclass(frozen=True)
class JudgmentFacts:
    """What the policy needs to know about one stored judgment."""

    judgment_id: int
    judge: str
    status: str  # ok | null | error
    score: float | None
    source: str = PairSource.CAPTURE
    channel_id: str | None = None
    # The second opinion on a low score (ConfirmationStatus), None when none is asked for (off, or not yet).
    confirmation: str | None = None


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str


def to_utc(moment: datetime) -> datetime:
    """The same moment in UTC (SQLite hands back naive datetimes; everything relmon stores is UTC). Unlike
    store.models.as_utc, an aware moment in another zone is converted: hours are bucketed in UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def hour_start(moment: datetime) -> datetime:
    return to_utc(moment).replace(minute=0, second=0, microsecond=0)


def hour_label(moment: datetime) -> str:
    """The UTC hour as it appears in dedupe keys: 2026112714."""
    return hour_start(moment).strftime("%Y%m%d%H")


def low_key(judgment_id: int) -> str:
    return f"low:{judgment_id}"


def summary_key(alert_channel_id: str, moment: datetime) -> str:
    """One summary per alert channel and hour, whichever source channels its held scores came from."""
    return f"summary:{alert_channel_id}:{hour_label(moment)}"


def degradation_key(channel_id: str, episode: int) -> str:
    """One key per degradation episode: two workers that see the same drop race for the same key."""
    return f"degr:{channel_id}:{episode}"


def is_low(facts: JudgmentFacts, thresholds: Mapping[str, float]) -> bool:
    """At or below the threshold of its judge. Errors and null scores are never low."""
    if facts.status != "ok" or facts.score is None:
        return False
    threshold = thresholds.get(facts.judge)
    return threshold is not None and facts.score <= threshold


def confirmation_outcome(status: str, score: float | None, threshold: float | None) -> str:
    """What a second opinion says of a low first verdict: low too → confirmed; scored above the threshold →
    disputed; no score to compare (an error, a null verdict, an unknown threshold) → unconfirmed. Only the
    confirmed alert: a judge that cannot make up its mind twice alerts nobody."""
    if status != "ok" or score is None or threshold is None:
        return ConfirmationStatus.UNCONFIRMED
    return ConfirmationStatus.CONFIRMED if score <= threshold else ConfirmationStatus.DISPUTED


def vetoed(confirmation: str | None) -> bool:
    """Whether a second opinion keeps a low score from alerting: only a confirmed one (or none asked) lets it."""
    return confirmation in (ConfirmationStatus.DISPUTED, ConfirmationStatus.UNCONFIRMED)


def decide_degradation_delivery(alert_channel_alerts_this_hour: int, alert_channel_cap: int | None) -> Decision:
    """A degradation alert is posted unless its alert channel already had its cap of alerts this hour (low-score
    and degradation, from every source channel): then it waits at the top of the hour's summary. When a bot
    breaks everywhere at once, twenty channels getting worse are one summary, not twenty more messages."""
    if alert_channel_cap is not None and alert_channel_alerts_this_hour >= alert_channel_cap:
        return Decision(Action.HOLD, "alert_channel_cap")
    return Decision(Action.ALERT, "degradation")


@dataclass(frozen=True)
class ScoredAt:
    score: float
    at: datetime


@dataclass(frozen=True)
class DegradationState:
    """The channel's degradation history: is an episode open (alerted, not yet recovered), and when
    the last degradation alert was claimed."""

    active: bool = False
    last_alert_at: datetime | None = None
    episodes: int = 0  # degradation alerts claimed so far for the channel


WINDOW_ANSWERS = "answers"  # the last N answers
WINDOW_MINUTES = "minutes"  # the answers of the last M minutes


@dataclass(frozen=True)
class DegradationWindow:
    """How a channel's rolling mean is taken: its last `answers` scores, and (when `minutes` > 0) the scores of
    its last `minutes` minutes if there are at least `min_answers` of them."""

    answers: int
    minutes: int = 0
    min_answers: int = 5


@dataclass(frozen=True)
class WindowMean:
    kind: str  # WINDOW_ANSWERS | WINDOW_MINUTES
    mean: float
    count: int
    scores: tuple[float, ...] = field(default=(), compare=False)  # the window's scores: the mean's interval


@dataclass(frozen=True)
class DegradationDecision:
    action: Action
    reason: str
    mean: float | None = None
    count: int = 0
    episode: int | None = None  # the episode number to claim when action is ALERT
    window: str | None = None  # which window's mean is reported: the one that tripped, if any
    means: tuple[WindowMean, ...] = ()  # every window that had enough answers
    scores: tuple[float, ...] = field(default=(), compare=False)  # the reported window's scores


def rolling_sample(recent: Sequence[ScoredAt], window: int) -> list[float]:
    """The count window: the channel's last `window` scores, newest first, however old. A quiet channel is
    judged on as many answers as a busy one; the time window (`time_sample`) catches a sharp drop in a channel
    whose last N answers reach back days."""
    newest_first = sorted(recent, key=lambda item: to_utc(item.at), reverse=True)
    return [item.score for item in newest_first[:window]]


def time_sample(recent: Sequence[ScoredAt], minutes: int, now: datetime) -> list[float]:
    """The time window: every score of the last `minutes` minutes (as many as the caller read)."""
    if minutes <= 0:
        return []
    since = to_utc(now) - timedelta(minutes=minutes)
    return [item.score for item in recent if to_utc(item.at) >= since]


def window_means(recent: Sequence[ScoredAt], window: DegradationWindow, now: datetime) -> list[WindowMean]:
    """The mean of each window that has enough answers to judge on: the count window needs all N, the time
    window its minimum."""
    means = []
    by_count = rolling_sample(recent, window.answers)
    if len(by_count) >= window.answers:
        means.append(WindowMean(WINDOW_ANSWERS, sum(by_count) / len(by_count), len(by_count), tuple(by_count)))
    by_time = time_sample(recent, window.minutes, now)
    if window.minutes > 0 and len(by_time) >= window.min_answers:
        means.append(WindowMean(WINDOW_MINUTES, sum(by_time) / len(by_time), len(by_time), tuple(by_time)))
    return means


def decide_degradation(
    recent: Sequence[ScoredAt],
    *,
    window: int | DegradationWindow,
    floor: float,
    state: DegradationState,
    now: datetime,
) -> DegradationDecision:
    """Alert when the mean of either window (the last N answers, or the last M minutes' answers when there are
    enough) is below the floor, once per episode and at most once per period; re-arm when every window with
    enough answers is back at or above the floor. No window with enough answers: too early to say."""
    if isinstance(window, int):
        window = DegradationWindow(window)
    means = tuple(window_means(recent, window, now))
    if not means:
        return DegradationDecision(Action.NONE, "too_few_answers", count=len(rolling_sample(recent, window.answers)))
    below = [m for m in means if m.mean < floor]
    # Report the tripped window with the lowest mean (the count window on a tie); else the count window if known.
    shown = min(below, key=lambda m: m.mean) if below else means[0]

    def decision(action: Action, reason: str, episode: int | None = None) -> DegradationDecision:
        return DegradationDecision(action, reason, shown.mean, shown.count, episode, shown.kind, means, shown.scores)

    if not below:
        return decision(Action.REARM, "recovered") if state.active else decision(Action.NONE, "healthy")
    if state.active:
        return decision(Action.NONE, "already_alerted")
    if state.last_alert_at is not None and to_utc(now) - to_utc(state.last_alert_at) < DEGRADATION_PERIOD:
        return decision(Action.NONE, "once_per_period")
    return decision(Action.ALERT, "below_floor", episode=state.episodes + 1)


# The plan: every decision about one judgment, from plain facts -------------------------------------------------


@dataclass(frozen=True)
class ChannelPolicy:
    """What the alert policy reads of a source channel's rule."""

    thresholds: Mapping[str, float]
    alert_channel: str | None
    cap_per_hour: int
    alert_channel_cap: int | None
    window: DegradationWindow
    floor: float
    # What the rule was resolved for: a Slack channel, or a bot's key (store.bot_groups) for its exchanges in no
    # channel, whose rolling mean is then the bot's.
    key: str | None = None


def mean_key(facts: JudgmentFacts, policy: ChannelPolicy) -> str | None:
    """Whose rolling mean a judgment moves: its Slack channel's, or, for an ingested exchange in no channel, its
    bot's (the key its rule was resolved for)."""
    return facts.channel_id or policy.key


@dataclass(frozen=True)
class HourCounts:
    """Alerts claimed this UTC hour that count against the caps (none known: zero, the pre-check's view)."""

    source_channel: int = 0  # low-score alerts of the source channel
    alert_channel: int = 0  # low-score and degradation alerts of the alert channel, from every source channel


@dataclass(frozen=True)
class DegradationFacts:
    """The channel's scores and degradation history, and whether its open alert was claimed but never posted
    (its worker died)."""

    recent: Sequence[ScoredAt]
    state: DegradationState
    unposted: bool = False


@dataclass(frozen=True)
class AlertPlan:
    low: Decision
    degradation: DegradationDecision
    degradation_delivery: Decision | None = None  # when degradation.action is ALERT: post it or hold it
    post_unposted: bool = False  # post the channel's open degradation alert, claimed but never posted

    @property
    def changes_anything(self) -> bool:
        """Whether acting on this plan could claim, hold, post or re-arm anything."""
        return (
            self.low.action is not Action.NONE
            or self.degradation.action in (Action.ALERT, Action.REARM)
            or self.post_unposted
        )


def degradation_blocked(facts: JudgmentFacts, policy: ChannelPolicy) -> str | None:
    """Why this judgment cannot move the degradation policy at all, or None when it can. Live answers make a rolling
    mean: captured ones and ingested ones, their channel's, or their bot's when they happened in no channel."""
    if facts.judge != DEGRADATION_JUDGE or facts.status != "ok" or facts.source not in ALERTING_SOURCES:
        return "not_applicable"
    if mean_key(facts, policy) is None:
        return "not_applicable"
    if not policy.alert_channel:
        return "no_alert_channel"
    return None


def low_intent(facts: JudgmentFacts, policy: ChannelPolicy) -> Decision:
    """The low-score decision before the hour's caps (only they can still turn its ALERT into a HOLD): made once
    per task, lock-free, and handed to `second_opinion` and `complete`."""
    if facts.source not in ALERTING_SOURCES:  # captured and ingested answers alert; on-demand and history never
        return Decision(Action.NONE, "on_demand")
    if facts.status != "ok":
        return Decision(Action.NONE, f"status_{facts.status}")
    if facts.score is None:
        return Decision(Action.NONE, "no_score")
    if facts.judge not in policy.thresholds:
        return Decision(Action.NONE, "unknown_judge")
    if not is_low(facts, policy.thresholds):
        return Decision(Action.NONE, "above_threshold")
    if vetoed(facts.confirmation):
        return Decision(Action.NONE, facts.confirmation)
    if not policy.alert_channel:
        return Decision(Action.NONE, "no_alert_channel")
    return Decision(Action.ALERT, "low_score")


def second_opinion(intent: Decision, confirmation: str | None) -> Decision:
    """The intent once the second opinion it asked for is in (None: confirmation is off): a disputed or unconfirmed
    low score alerts nobody (what `low_intent` gives on facts carrying it: only an intent to alert asks for one)."""
    return Decision(Action.NONE, confirmation) if intent.action is not Action.NONE and vetoed(confirmation) else intent


def capped(intent: Decision, policy: ChannelPolicy, counts: HourCounts) -> Decision:
    """The low-score intent under the hour's caps. `counts`: low-score alerts already claimed this UTC hour for the
    source channel (held ones not counted), and for the alert channel from every source channel (a burst across
    many channels is one flood there); none known (the pre-check): zero."""
    if intent.action is not Action.ALERT:
        return intent
    if counts.source_channel >= policy.cap_per_hour:
        return Decision(Action.HOLD, "hourly_cap")
    if policy.alert_channel_cap is not None and counts.alert_channel >= policy.alert_channel_cap:
        return Decision(Action.HOLD, "alert_channel_cap")
    return intent


def complete(
    intent: Decision,
    facts: JudgmentFacts,
    policy: ChannelPolicy,
    *,
    counts: HourCounts = HourCounts(),
    low_claimed: bool = False,
    degradation: DegradationFacts | None = None,
    now: datetime,
) -> AlertPlan:
    """The plan from a low-score intent already decided: its caps, and the channel's degradation (decided here,
    once). `low_claimed`: its low-score alert row exists already (a redelivery acts on that row). `degradation`:
    None when not read (the plan says so: "not_read"). A degradation alert's delivery counts a low-score alert this
    same plan posts: both go to the same channel."""
    low = Decision(Action.NONE, "claimed") if low_claimed else capped(intent, policy, counts)
    blocked = degradation_blocked(facts, policy)
    if blocked is not None or degradation is None:
        return AlertPlan(low, DegradationDecision(Action.NONE, blocked or "not_read"))
    decided = decide_degradation(
        degradation.recent, window=policy.window, floor=policy.floor, state=degradation.state, now=now
    )
    delivery = None
    if decided.action is Action.ALERT:
        posted_now = int(low.action is Action.ALERT)
        delivery = decide_degradation_delivery(counts.alert_channel + posted_now, policy.alert_channel_cap)
    return AlertPlan(low, decided, delivery, degradation.unposted)
