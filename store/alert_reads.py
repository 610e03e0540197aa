"""The alert path's reads of a judgment and its alert row, each one round trip: the judgment with everything the
alert task decides on (`judgment_in_context`), and the check made under an alert's lease just before it is posted
(`before_post`). `AlertRow` carries a row as plain data from the claim that wrote it to the post, so the post does
not read it back."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session, aliased

from store.judgments import PAIR_FIELDS
from store.models import Alert, Judgment, Pair


@dataclass(frozen=True)
class AlertRow:
    """An alert row as plain data: as the claim's INSERT returned it (or as read when another worker wrote it)."""

    id: int
    dedupe_key: str
    kind: str
    status: str
    judgment_id: int | None
    source_channel_id: str | None
    alert_channel_id: str | None
    details: dict[str, Any]
    created_at: datetime

    @classmethod
    def of(cls, row: Any) -> AlertRow:
        """From an `Alert` or a result row of its columns."""
        return cls(
            row.id,
            row.dedupe_key,
            row.kind,
            row.status,
            row.judgment_id,
            row.source_channel_id,
            row.alert_channel_id,
            dict(row.details or {}),
            row.created_at,
        )


def row_by_id(session: Session, alert_id: int) -> AlertRow | None:
    row = session.get(Alert, alert_id)
    return AlertRow.of(row) if row is not None else None


@dataclass(frozen=True)
class JudgmentInContext:
    """A judgment with what the alert path decides on, read together."""

    judgment: Judgment
    pair: dict[str, Any]  # its pair's PAIR_FIELDS (store.judgments.pair_for_judging)
    alert: tuple[int, str] | None  # (id, status) of the alert row under the key asked about, if there is one
    newest_version: int  # the highest answer version this judge judged: above the judgment's, it is superseded


@functools.cache
def _in_context_statement():
    """Built once: every judgment of a captured answer runs it. The alert by its unique key and the newest version
    by uq_judgments_pair_judge_version: index look-ups in the same round trip."""
    newer = aliased(Judgment)
    newest = (
        select(func.max(newer.pair_version))
        .where(newer.pair_id == Judgment.pair_id, newer.judge == Judgment.judge)
        .scalar_subquery()
    )
    return (
        select(
            Judgment,
            *[getattr(Pair, name).label(f"pair_{name}") for name in PAIR_FIELDS],
            Alert.id.label("alert_id"),
            Alert.status.label("alert_status"),
            newest.label("newest_version"),
        )
        .join(Pair, Pair.id == Judgment.pair_id)
        .outerjoin(Alert, Alert.dedupe_key == bindparam("alert_key"))
        .where(Judgment.id == bindparam("judgment_id"))
    )


def judgment_in_context(session: Session, judgment_id: int, alert_key: str) -> JudgmentInContext | None:
    """The judgment, its pair, the alert row under `alert_key` and the newest version judged: one read. None when
    the judgment or its pair is gone."""
    row = session.execute(_in_context_statement(), {"judgment_id": judgment_id, "alert_key": alert_key}).first()
    if row is None:
        return None
    found = row._mapping
    alert = (row.alert_id, row.alert_status) if row.alert_id is not None else None
    pair = {name: found[f"pair_{name}"] for name in PAIR_FIELDS}
    return JudgmentInContext(row.Judgment, pair, alert, row.newest_version or row.Judgment.pair_version)


@dataclass(frozen=True)
class BeforePost:
    """An alert row's status under its lease and, for an alert about a judgment, the change stamp of what it
    shows: its pair's `updated_at` and the verdict's reasoning (a deletion scrubs both)."""

    status: str
    pair_updated_at: datetime | None
    reasoning: str | None


@functools.cache
def _before_post_statement():
    return (
        select(Alert.status, Pair.updated_at, Judgment.reasoning)
        .select_from(Alert)
        .outerjoin(Judgment, Judgment.id == Alert.judgment_id)
        .outerjoin(Pair, Pair.id == Judgment.pair_id)
        .where(Alert.id == bindparam("alert_id"))
    )


def before_post(session: Session, alert_id: int) -> BeforePost | None:
    """The one read under an alert's lease before it is posted (None: the row is gone)."""
    row = session.execute(_before_post_statement(), {"alert_id": alert_id}).first()
    return BeforePost(row.status, row.updated_at, row.reasoning) if row is not None else None
