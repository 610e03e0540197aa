"""Change alerts: a channel's, a bot's or a topic's failure rate rising above its own baseline, one alert per change.

`watch` runs on beat's tick (`workers.tasks.slack.watch_changes`): it reads the judgments made since its last look
and the pairs a topics run assigned since (`store.change_reads`, two bounded reads), feeds each group's detector
(`common.reports.change_detection`, a Bernoulli CUSUM) the answers in order, and claims an alert row for every alarm
(kind `change`, keyed by the group and its change point: at most once), then posts the claimed rows by the alerts'
one post protocol (`workers.alerts.delivery.post_alert`). The detectors' states and the cursors live in Redis, saved
after the claims: a look that dies before saving is replayed whole by the next one, which meets the same keys.

What fails: an answer whose relevancy verdict is at or below its channel's threshold (the low-score rule, before any
second opinion). Groups: the answer's channel; an ingested exchange in no channel, its bot (`store.bot_groups`);
and its topic, once a topics run stored one for it (a day or so later) and the answer is not private (a topic's
name is drawn from its questions: a private conversation never feeds a group whose name is shown). A topic's alert
goes to the default alert channel; a channel's and a bot's to their rule's.

Under sampling (RELMON_SAMPLE) the reads take the uniform subsample only (`store.sampling.in_uniform_sample`): the
judged answers hold every signalled one, and a detector fed them would see a failure rate the traffic does not have.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial

import redis

from common.messages.change_alerts import KIND_BOT, KIND_CHANNEL, KIND_TOPIC
from common.privacy import QUOTABLE_VISIBILITY, may_show_figures
from common.reports.change_detection import Alarm, ChangeParams, ChangeState, Outcome, observe
from common.runtime import Runtime
from judges.names import RELEVANCY
from store import alert_reads, bot_groups, change_reads
from store import alerts as alert_store
from store.change_reads import JudgedAnswer
from workers.alerts import delivery
from workers.alerts.policy import to_utc

log = logging.getLogger("relmon.alerts")

STATE_KEY = "relmon:change-alerts:state"  # hash: group key -> the detector's state (JSON)
CURSOR_KEY = "relmon:change-alerts:cursor"  # the last judgment id fed
TOPIC_CURSOR_KEY = "relmon:change-alerts:topic-cursor"  # the last pair id fed to its topic
UNPOSTED_KEY = "relmon:change-alerts:unposted"  # ids of change alerts claimed and not posted yet
LOCK_KEY = "relmon:change-alerts:lock"
LOCK_SECONDS = 300
BATCH = 5_000  # judgments one look reads at most; the next tick reads on
FIRST_LOOK = timedelta(days=60)  # a first look (or one after Redis lost its state) replays this much history
# An alarm raised by a judgment made longer ago than this (a replay after a lost state) updates the detector only.
STALE_ALARM = timedelta(days=3)
STALE_TOPIC_ALARM = timedelta(days=8)  # a topic's answers come when a topics run assigns them: up to a week late
TOPIC_PREFIX = "topic:"


def params_of(runtime: Runtime) -> ChangeParams:
    settings = runtime.settings
    return ChangeParams(settings.change_alert_false_alarms, settings.change_alert_min_baseline)


def report_key(answer: JudgedAnswer) -> str | None:
    """The answer's channel, or its bot's key when it happened in no channel."""
    if answer.channel_id:
        return answer.channel_id
    return bot_groups.key_of(answer.bot) if answer.bot else None


def topic_group(answer: JudgedAnswer) -> str | None:
    """The answer's topic's group, when it has a stored topic and is not private (a topic's name is drawn from its
    questions: a private conversation never feeds a group whose name is shown)."""
    public = not answer.channel_is_private and answer.visibility in (None, QUOTABLE_VISIBILITY)
    return TOPIC_PREFIX + answer.topic_key if answer.topic_key and public else None


def failed(runtime: Runtime, answer: JudgedAnswer) -> bool:
    threshold = runtime.rules.for_channel(report_key(answer), runtime.settings).thresholds.get(RELEVANCY)
    return threshold is not None and answer.score <= threshold


@dataclass(frozen=True)
class Raised:
    group: str
    alarm: Alarm
    judged_at: datetime  # the judgment that raised it: a replay's old alarms are not posted


@dataclass(frozen=True)
class Watched:
    """What one look did: judgments read, alarms raised (claimed when fresh), change alerts posted."""

    read: int = 0
    alarms: int = 0
    posted: int = 0
    skipped: str | None = None

    def __str__(self) -> str:
        return self.skipped or f"read {self.read}, alarms {self.alarms}, posted {self.posted}"


def watch(runtime: Runtime, now: datetime | None = None) -> Watched:
    """One look: feed the judgments made since the last, claim and post what alarmed. One look at a time."""
    now = now or datetime.now(UTC)
    if not runtime.settings.change_alerts:
        return Watched(skipped="off")
    lock = runtime.redis.lock(LOCK_KEY, timeout=LOCK_SECONDS, blocking_timeout=0)
    if not lock.acquire(blocking=False):
        return Watched(skipped="busy")
    try:
        read, raised = _feed(runtime, now)
        return Watched(read, len(raised), post_claimed(runtime))
    finally:
        with suppress(redis.exceptions.LockError):  # held past its timeout: the next look takes it anew
            lock.release()


def _cursor(runtime: Runtime, key: str, first: Callable[[], int]) -> int:
    """A stored cursor, or where a first look starts."""
    stored = runtime.redis.get(key)
    return int(stored) if stored is not None else first()


def _feed(runtime: Runtime, now: datetime) -> tuple[int, list[Raised]]:
    """Feed each group's detector what was judged since the last look (channels and bots), and the pairs a topics
    run assigned since (topics); claim the fresh alarms; then save the states and the cursors."""
    params = params_of(runtime)
    since = now - FIRST_LOOK
    with runtime.db.reading() as session:
        cursor = _cursor(runtime, CURSOR_KEY, partial(change_reads.first_judgment_since, session, since))
        answers = change_reads.judged_since(session, cursor, RELEVANCY, limit=BATCH)
        topic_cursor = _cursor(runtime, TOPIC_CURSOR_KEY, partial(change_reads.first_pair_since, session, since))
        topical = change_reads.topical_since(session, topic_cursor, RELEVANCY, limit=BATCH)
    by_group: dict[str, list[JudgedAnswer]] = defaultdict(list)
    for answer in answers:
        if key := report_key(answer):
            by_group[key].append(answer)
    for answer in topical:
        if group := topic_group(answer):
            by_group[group].append(answer)
    raised = _observe(runtime, by_group, params)
    stale = {False: now - STALE_ALARM, True: now - STALE_TOPIC_ALARM}
    for item in raised:  # claimed before the states are saved: a look that dies here is replayed to the same keys
        if item.judged_at >= stale[item.group.startswith(TOPIC_PREFIX)]:
            claim(runtime, item, params, now)
    runtime.redis.set(CURSOR_KEY, answers[-1].judgment_id if answers else cursor)
    runtime.redis.set(TOPIC_CURSOR_KEY, topical[-1].pair_id if topical else topic_cursor)
    return len(answers) + len(topical), raised


def _observe(runtime: Runtime, by_group: dict[str, list[JudgedAnswer]], params: ChangeParams) -> list[Raised]:
    """Each group's answers fed to its detector (its state read from Redis and saved back), in the answers' order
    within a look (a backlog judged at once: its answers' own times)."""
    keys = sorted(by_group)
    if not keys:
        return []
    states = {
        key: ChangeState.of_json(json.loads(raw) if raw else None)
        for key, raw in zip(keys, runtime.redis.hmget(STATE_KEY, keys), strict=True)
    }
    raised: list[Raised] = []
    recovered: list[tuple[str, datetime]] = []
    for key in keys:
        for answer in sorted(by_group[key], key=lambda item: (to_utc(item.at), item.judgment_id)):
            outcome = Outcome(failed(runtime, answer), to_utc(answer.at).timestamp(), answer.pair_id)
            step = observe(states[key], outcome, params)
            if step.alarm is not None:
                raised.append(Raised(key, step.alarm, to_utc(answer.judged_at)))
            if step.ended is not None:
                recovered.append((dedupe_key(key, step.ended), to_utc(answer.at)))
    if recovered:  # an episode's alert row says when its group was back at baseline (and the next may alert)
        with runtime.db.session() as session:
            for key, at in recovered:
                if (row := alert_store.by_key(session, key)) is not None:
                    alert_store.mark_recovered(session, row.id, at)
    runtime.redis.hset(STATE_KEY, mapping={key: json.dumps(state.as_json()) for key, state in states.items()})
    return raised


def dedupe_key(group: str, since: float) -> str:
    """One alert per group and change point: a replayed look meets the same key."""
    return f"change:{group}:{int(since)}"[:200]


def alert_channel_of(runtime: Runtime, group: str) -> str | None:
    """A channel's or a bot's rule's alert channel; a topic spans channels: the default one."""
    channel = None if group.startswith(TOPIC_PREFIX) else group
    return runtime.rules.for_channel(channel, runtime.settings).alert_channel


def claim(runtime: Runtime, raised: Raised, params: ChangeParams, now: datetime) -> None:
    """The alert row of an alarm, its evidence in its details (examples' links fetched here, before the claim)."""
    group, alarm = raised.group, raised.alarm
    alert_channel = alert_channel_of(runtime, group)
    if alert_channel is None:
        log.info("change alarm without an alert channel", extra={"group": group})
        return
    topic = group[len(TOPIC_PREFIX) :] if group.startswith(TOPIC_PREFIX) else None
    with runtime.db.reading() as session:
        names = change_reads.topic_names(session, [topic]) if topic else {}
        answers = change_reads.answers_of(session, list(alarm.examples))
    examples = [example_of(runtime, answers.get(pair_id), alert_channel) for pair_id in alarm.examples]
    kind = KIND_TOPIC if topic else KIND_BOT if bot_groups.bot_of(group) else KIND_CHANNEL
    since = datetime.fromtimestamp(alarm.since, UTC)
    details = {
        "group_kind": kind,
        "group": topic or group,
        "topic_name": names.get(topic) if topic else None,
        "baseline": round(alarm.baseline, 4),
        "baseline_n": alarm.baseline_n,
        "since": since.isoformat(),
        "n": alarm.n,
        "failed": alarm.failed,
        "examples": examples,
        "example_pairs": list(alarm.examples),
        "episode": alarm.episode,
        "false_alarms_per_month": params.false_alarms_per_month,
    }
    with runtime.db.session() as session:
        row, _ = alert_store.claim_alert(
            session,
            dedupe_key=dedupe_key(group, alarm.since),
            kind=alert_store.KIND_CHANGE,
            source_channel_id=None if topic else group,
            alert_channel_id=alert_channel,
            details=details,
            now=now,
        )
        if row.status == alert_store.STATUS_CLAIMED:  # new, or left unposted by a look that died before saving
            runtime.redis.sadd(UNPOSTED_KEY, row.id)
    log.info("change alarm claimed", extra={"group": group, "n": alarm.n, "failed": alarm.failed})


def example_of(runtime: Runtime, answer: tuple[str | None, str | None, bool] | None, alert_channel: str) -> dict:
    """A link to a failed answer where its channel's figures may be shown in the alert channel; else why not."""
    if answer is None:
        return {"link": None, "why_not": "gone"}
    channel, answer_ts, private = answer
    if channel is None:
        return {"link": None, "why_not": "exchange"}
    if not may_show_figures(channel, private, runtime.rules, runtime.settings, alert_channel):
        return {"link": None, "why_not": "private"}
    link = delivery.permalink(runtime, channel, answer_ts)
    return {"link": link, "why_not": None if link else "gone"}


def post_claimed(runtime: Runtime) -> int:
    """Post the change alerts claimed and not posted yet (this look's, or ones whose post failed and is retried): at
    most once each, by the alerts' post protocol. The claims are noted in a Redis set (no scan of `alerts` each tick):
    a row is taken off once posted or refused for good; any other error leaves it for the task's retry."""
    posted = 0
    for raw in sorted(runtime.redis.smembers(UNPOSTED_KEY), key=int):
        with runtime.db.reading() as session:
            row = alert_reads.row_by_id(session, int(raw))
        status = delivery.post_alert(runtime, row, None) if row is not None else "missing"
        posted += status == alert_store.STATUS_POSTED
        runtime.redis.srem(UNPOSTED_KEY, raw)
    return posted
