"""Stored alert rows as message models: what a low-score alert, a degradation alert and the lines of the hour's
summary show. Rendering them as Block Kit stays in `common.messages.alerts` and `common.messages.summaries`."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from capture.outcomes import describe_signal
from common.feedback import tally
from common.messages.alerts import LowScoreAlert, low_score_alert
from common.messages.change_alerts import ChangeAlert, change_alert
from common.messages.missed_failure import missed_failure_alert
from common.messages.summaries import DegradationAlert, SummaryItem, degradation_alert
from common.privacy import may_quote, may_quote_exchange
from common.runtime import Runtime
from judges.names import JUDGE_NAMES
from store import alerts as alert_store
from store import bot_groups, exchanges
from store.alert_reads import AlertRow
from store.canary import recent_runs
from store.feedback import votes_for
from store.models import Alert, Judgment, PairSource
from store.outcomes import signals_with_times
from workers.alerts.planning import Judged
from workers.alerts.policy import DEGRADATION_JUDGE, WINDOW_ANSWERS, to_utc
from workers.canary import RECENT_CANARY


def quote_allowed(
    runtime: Runtime, channel_id: str | None, channel_is_private: bool, alert_channel: str | None
) -> bool:
    """Privacy, for the alert channel the message lives in (`common.privacy.may_quote`): a private channel is
    quoted only where its own rule sends alerts and allows it. A redraw asks for the channel the alert was posted
    in, so a rule changed since cannot make it quote."""
    return may_quote(channel_id, channel_is_private, runtime.rules, runtime.settings, alert_channel)


def render_alert(runtime: Runtime, session: Session, row: AlertRow, judged: Judged | None) -> dict:
    """The message of a claimed alert row: a change in a failure rate, a degradation, or a low score (or missed
    failure) about `judged`."""
    if row.kind == alert_store.KIND_CHANGE:
        return change_alert(ChangeAlert.of_details(row.details, runtime.settings.timezone))
    if row.kind == alert_store.KIND_DEGRADATION:
        return degradation_alert(replace(degradation_of(row), judge_note=canary_note(session, to_utc(row.created_at))))
    assert judged is not None and judged.facts.judgment_id == row.judgment_id, "a low alert is drawn from its judgment"
    return render_low(runtime, session, row, judged)


def canary_note(session: Session, at: datetime) -> str | None:
    """Whether the judge or the bot moved, by the canary's last run in the week before `at` (None: no run)."""
    found = recent_runs(session, before=at + timedelta(seconds=1), limit=1, judges=JUDGE_NAMES)  # the seeds'
    if not found or to_utc(found[0].created_at) < at - RECENT_CANARY:
        return None
    run = found[0]
    if run.moved:
        return f":warning: The judge moved this week (canary: {run.moved}): the drop may be the judge's, not the bot's."
    kappa = "" if run.kappa is None else f", κ {run.kappa:.2f}"
    return f"The judge held steady on this week's canary{kappa}: the bot moved."


def degradation_of(row: Alert | AlertRow) -> DegradationAlert:
    """What a degradation alert's row says, for its own message or its line in the hour's summary."""
    details = row.details or {}
    return DegradationAlert(
        channel_id=row.source_channel_id,
        judge=details.get("judge", DEGRADATION_JUDGE),
        mean=float(details["mean"]),
        floor=float(details["floor"]),
        count=int(details["count"]),
        at=to_utc(row.created_at),
        # rows claimed before the time window existed name no window: theirs was the count window
        window=details.get("window", WINDOW_ANSWERS),
        window_answers=int(details.get("window_answers", details["count"])),
        window_minutes=int(details.get("window_minutes", 0)),
        min_answers=int(details.get("min_answers", 0)),
        scores={float(score): int(count) for score, count in (details.get("scores") or {}).items()},
    )


def render_low(runtime: Runtime, session: Session, row: Alert | AlertRow, judged: Judged) -> dict:
    """A low-score (or missed-failure) alert with the current feedback tally, the outcome signals so far, and the
    newer verdict when the answer was edited after it was judged (the pair holds the final text). Everything but
    the votes and the signals, which change after the post, comes read with the judgment (`planning.load`)."""
    pair, policy = judged.pair, judged.policy
    # An ingested exchange's bot and visibility (a dm or private one is never quoted, common.privacy). A captured
    # pair an exchange joined keeps its channel's rules (capture read it in that channel).
    sent = exchanges.origin(session, pair.id) if pair.source == PairSource.INGEST else None
    quote = exchange_quote(runtime, pair.channel_id, pair.channel_is_private, row.alert_channel_id, sent)
    draw = missed_failure_alert if row.kind == alert_store.KIND_MISSED else low_score_alert
    return draw(
        LowScoreAlert(
            judgment_id=judged.facts.judgment_id,
            judge=judged.facts.judge,
            score=judged.facts.score,
            max_score=judged.max_score,
            threshold=policy.thresholds.get(judged.facts.judge) if policy else None,
            channel_id=pair.channel_id,
            answered_at=pair.answered_at,
            quote=quote,
            question=pair.question,
            answer=pair.answer,
            reasoning=judged.reasoning,
            permalink=(row.details or {}).get("permalink"),
            stream_errored=pair.stream_errored,
            votes=tally(votes_for(session, judged.facts.judgment_id)),
            context=pair.context,
            revision=judged.revision,
            signals=tuple(describe_signal(name, after) for name, after in signals_with_times(session, pair.id)),
            forgotten=(row.details or {}).get("forgotten"),
            origin=sent.label if sent else None,
            show_exchange=sent is not None and not quote,
        )
    )


def exchange_quote(
    runtime: Runtime, channel_id: str | None, private: bool, alert_channel: str | None, sent: exchanges.Origin | None
) -> bool:
    """Whether an alert quotes its pair: the channel's rule (an ingested exchange in no channel: its bot's, under its
    report key, store.bot_groups) and, for a dm or private exchange, its bot's own rule naming this alert channel."""
    if sent is None:
        return quote_allowed(runtime, channel_id, private, alert_channel)
    where = channel_id or bot_groups.key_of(sent.bot)
    bot_rule = runtime.rules.bot(sent.bot)
    return quote_allowed(runtime, where, private, alert_channel) and may_quote_exchange(
        sent.visibility, bot_rule, alert_channel
    )


def summary_item(
    runtime: Runtime, alert: Alert, judgment: Judgment, channel_is_private: bool, sent: exchanges.Origin | None = None
) -> SummaryItem:
    """A held low score as a line of the hour's summary: its reasoning quoted as its own alert would quote it
    (`exchange_quote`: an ingested `dm` or `private` exchange's only where its bot's rule allows it here)."""
    details = alert.details or {}
    source = alert.source_channel_id or ""
    return SummaryItem(
        judgment.id,
        judgment.judge,
        judgment.score,
        judgment.max_score,
        to_utc(alert.created_at),
        details.get("permalink"),
        judgment.reasoning,
        channel_id=source,
        quote=exchange_quote(runtime, alert.source_channel_id, channel_is_private, alert.alert_channel_id, sent),
        held_by=details.get("reason", "hourly_cap"),
    )
