"""Stored alert rows as message models: what a low-score alert, a degradation alert and the lines of the hour's
summary show. Rendering them as Block Kit stays in `common.messages.alerts`."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from capture.outcomes import describe
from common.feedback import tally
from common.messages.alerts import (
    DegradationAlert,
    LowScoreAlert,
    Revision,
    SummaryItem,
    degradation_alert,
    low_score_alert,
)
from common.messages.missed_failure import missed_failure_alert
from common.privacy import may_quote
from common.runtime import Runtime
from store import alerts as alert_store
from store.canary import recent_runs
from store.feedback import votes_for
from store.judgments import current_judgment
from store.models import Alert, Judgment, Pair
from store.outcomes import signals_with_times
from workers.alerts.policy import DEGRADATION_JUDGE, WINDOW_ANSWERS, as_utc
from workers.canary import RECENT_CANARY


def quote_allowed(
    runtime: Runtime, channel_id: str | None, channel_is_private: bool, alert_channel: str | None
) -> bool:
    """Privacy, for the alert channel the message lives in (`common.privacy.may_quote`): a private channel is
    quoted only where its own rule sends alerts and allows it. A redraw asks for the channel the alert was posted
    in, so a rule changed since cannot make it quote."""
    return may_quote(channel_id, channel_is_private, runtime.rules, runtime.settings, alert_channel)


def answered_at(pair: Pair) -> datetime:
    if pair.answer_ts:
        with suppress(ValueError):
            return datetime.fromtimestamp(float(pair.answer_ts), UTC)
    return as_utc(pair.created_at)


def render(runtime: Runtime, session: Session, row: Alert) -> dict:
    """The message of a claimed alert row (low score or degradation)."""
    if row.kind == alert_store.KIND_DEGRADATION:
        return degradation_alert(replace(degradation_of(row), judge_note=canary_note(session, as_utc(row.created_at))))
    return render_low(runtime, session, row)


def canary_note(session: Session, at: datetime) -> str | None:
    """Whether the judge or the bot moved, by the canary's last run in the week before `at` (None: no run)."""
    found = recent_runs(session, before=at + timedelta(seconds=1), limit=1)
    if not found or as_utc(found[0].created_at) < at - RECENT_CANARY:
        return None
    run = found[0]
    if run.moved:
        return f":warning: The judge moved this week (canary: {run.moved}): the drop may be the judge's, not the bot's."
    kappa = "" if run.kappa is None else f", κ {run.kappa:.2f}"
    return f"The judge held steady on this week's canary{kappa}: the bot moved."


def degradation_of(row: Alert) -> DegradationAlert:
    """What a degradation alert's row says, for its own message or its line in the hour's summary."""
    details = row.details or {}
    return DegradationAlert(
        channel_id=row.source_channel_id,
        judge=details.get("judge", DEGRADATION_JUDGE),
        mean=float(details["mean"]),
        floor=float(details["floor"]),
        count=int(details["count"]),
        at=as_utc(row.created_at),
        # rows claimed before the time window existed name no window: theirs was the count window
        window=details.get("window", WINDOW_ANSWERS),
        window_answers=int(details.get("window_answers", details["count"])),
        window_minutes=int(details.get("window_minutes", 0)),
        min_answers=int(details.get("min_answers", 0)),
    )


def render_low(runtime: Runtime, session: Session, row: Alert) -> dict:
    """A low-score (or missed-failure) alert with the current feedback tally, the outcome signals so far, and the
    newer verdict when the answer was edited after it was judged (the pair holds the final text)."""
    judgment = session.get(Judgment, row.judgment_id)
    pair = session.get(Pair, judgment.pair_id)
    latest = current_judgment(session, judgment)
    revision = None
    if latest.id != judgment.id:
        revision = Revision(latest.status, latest.score, latest.max_score, latest.reasoning)
    rule = runtime.rules.for_channel(pair.channel_id, runtime.settings)
    draw = missed_failure_alert if row.kind == alert_store.KIND_MISSED else low_score_alert
    return draw(
        LowScoreAlert(
            judgment_id=judgment.id,
            judge=judgment.judge,
            score=judgment.score,
            max_score=judgment.max_score,
            threshold=rule.thresholds.get(judgment.judge),
            channel_id=pair.channel_id,
            answered_at=answered_at(pair),
            quote=quote_allowed(runtime, pair.channel_id, bool(pair.channel_is_private), row.alert_channel_id),
            question=pair.question_text,
            answer=pair.answer_text,
            reasoning=judgment.reasoning,
            permalink=(row.details or {}).get("permalink"),
            stream_errored=bool(pair.stream_errored),
            votes=tally(votes_for(session, judgment.id)),
            context=pair.context_text,
            revision=revision,
            signals=tuple(describe(name, after) for name, after in signals_with_times(session, pair.id)),
            forgotten=(row.details or {}).get("forgotten"),
        )
    )


def summary_item(runtime: Runtime, alert: Alert, judgment: Judgment, channel_is_private: bool) -> SummaryItem:
    """A held low score as a line of the hour's summary (its reasoning only where the channel may be quoted)."""
    details = alert.details or {}
    source = alert.source_channel_id or ""
    return SummaryItem(
        judgment.id,
        judgment.judge,
        judgment.score,
        judgment.max_score,
        as_utc(alert.created_at),
        details.get("permalink"),
        judgment.reasoning,
        channel_id=source,
        quote=quote_allowed(runtime, source, channel_is_private, alert.alert_channel_id),
        held_by=details.get("reason", "hourly_cap"),
    )
