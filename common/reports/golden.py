"""The golden set's figures for the digest: how the set grew in the period, and the last `relmon regress` run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from store import golden, regress_runs
from store.models import as_utc


@dataclass(frozen=True)
class GoldenFigures:
    size: int  # items in the set now
    grown: int  # items that joined in the period
    last_run: tuple[datetime, float | None, int] | None  # (finished, pass rate, items) of the last regress run


def golden_figures(session: Session, since: datetime) -> GoldenFigures:
    last = regress_runs.last_finished_summary(session)
    if last is not None:
        last = (as_utc(last[0]), last[1], last[2])
    return GoldenFigures(golden.size(session), golden.grown_since(session, since), last)
