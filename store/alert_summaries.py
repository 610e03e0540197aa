"""The queries of the hour's summary: which alert channel-hours have held alerts, and what they are."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import case, select
from sqlalchemy.orm import Session

from store.alerts import KIND_DEGRADATION, KIND_LOW, KIND_MISSED, STATUS_HELD
from store.exchange_models import Exchange
from store.exchanges import Origin
from store.models import Alert, Judgment, Pair, PairSource


def held_channel_hours(session: Session, since: datetime) -> list[tuple[str, datetime]]:
    """(alert channel, claim time) of every held alert (low score or degradation) since `since`; the caller
    buckets by hour."""
    rows = session.execute(
        select(Alert.alert_channel_id, Alert.created_at).where(
            Alert.kind.in_((KIND_LOW, KIND_MISSED, KIND_DEGRADATION)),
            Alert.status == STATUS_HELD,
            Alert.created_at >= since,
        )
    )
    return [(channel, created) for channel, created in rows if channel]


def held_in_hour(
    session: Session, alert_channel_id: str, since: datetime, until: datetime
) -> list[tuple[Alert, Judgment, bool, Origin | None]]:
    """The low scores held for `alert_channel_id` in [since, until), from every source channel, oldest first:
    (alert row, its judgment, whether the answer's channel is private, an ingested pair's (first) exchange's bot and
    visibility, as store.exchanges.origin reads them)."""

    def first_exchange(column: Any) -> Any:
        found = select(column).where(Exchange.pair_id == Pair.id).order_by(Exchange.id).limit(1).scalar_subquery()
        return case((Pair.source == PairSource.INGEST, found), else_=None)

    rows = session.execute(
        select(
            Alert, Judgment, Pair.channel_is_private, first_exchange(Exchange.bot), first_exchange(Exchange.visibility)
        )
        .join(Judgment, Judgment.id == Alert.judgment_id)
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(
            Alert.kind.in_((KIND_LOW, KIND_MISSED)),
            Alert.status == STATUS_HELD,
            Alert.alert_channel_id == alert_channel_id,
            Alert.created_at >= since,
            Alert.created_at < until,
        )
        .order_by(Alert.id)
    )
    return [
        (alert, judgment, bool(private), Origin(bot, seen_by) if bot is not None else None)
        for alert, judgment, private, bot, seen_by in rows
    ]


def held_degradations(session: Session, alert_channel_id: str, since: datetime, until: datetime) -> list[Alert]:
    """The degradation alerts held for `alert_channel_id` in [since, until) by its hourly cap, oldest first."""
    return list(
        session.execute(
            select(Alert)
            .where(
                Alert.kind == KIND_DEGRADATION,
                Alert.status == STATUS_HELD,
                Alert.alert_channel_id == alert_channel_id,
                Alert.created_at >= since,
                Alert.created_at < until,
            )
            .order_by(Alert.id)
        ).scalars()
    )
