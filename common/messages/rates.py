"""Rates, means and changes as a person reads them: always with their n and 95% interval, "too few" below
`common.reports.intervals.MIN_N`, and an arrow only for a significant change (docs/statistics.md).

    failed 31% (23–41%, n=48)          mean 3.10 / 4 (2.95–3.24, n=48)
    ▲ 9% → 31% (significant)          no clear change (n=48 vs 33)        too few (n=4)
"""

from __future__ import annotations

from common.reports.intervals import Estimate, Shift


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def too_few(n: int) -> str:
    return f"too few (n={n})"


def rate_text(estimate: Estimate, what: str = "") -> str:
    """`31% (23–41%, n=48)`, or with `what` ("≤ 2") `31% ≤ 2 (23–41%, n=48)`; `too few (n=4)` (`≤ 2: too few
    (n=4)`) below the minimum; `–` without observations."""
    named = f" {what}" if what else ""
    if estimate.n == 0 or estimate.value is None:
        return f"–{named}"
    if not estimate.enough or estimate.interval is None:
        return f"{what}: {too_few(estimate.n)}" if what else too_few(estimate.n)
    interval = estimate.interval
    return f"{_pct(estimate.value)}{named} ({interval.low * 100:.0f}–{_pct(interval.high)}, n={estimate.n})"


def mean_text(estimate: Estimate, top: float | None = None, digits: int = 2) -> str:
    """`3.10 / 4 (2.95–3.24, n=48)`; `too few (n=4)` below the minimum; `no scores` without any."""
    if estimate.n == 0 or estimate.value is None:
        return "no scores"
    if not estimate.enough:
        return too_few(estimate.n)
    scale = f" / {top:g}" if top is not None else ""
    if estimate.interval is None:  # the scores' counts are not known: the n alone
        return f"{estimate.value:.{digits}f}{scale} (n={estimate.n})"
    low, high = estimate.interval.low, estimate.interval.high
    return f"{estimate.value:.{digits}f}{scale} ({low:.{digits}f}–{high:.{digits}f}, n={estimate.n})"


def shift_text(shift: Shift, *, share: bool = True, digits: int = 2) -> str:
    """`▲ 9% → 31% (significant)` when the change rule finds one; else `no clear change (n=48 vs 33)`, or
    `too few to compare (n=4 vs 33)` (the period's n first, then the one compared with)."""
    counts = f"n={shift.after.n} vs {shift.before.n}"
    if shift.direction == "too_few":
        return f"too few to compare ({counts})"
    if not shift.significant or shift.before.value is None or shift.after.value is None:
        return f"no clear change ({counts})"
    arrow = "▲" if shift.direction == "up" else "▼"
    before, after = shift.before.value, shift.after.value
    figures = f"{_pct(before)} → {_pct(after)}" if share else f"{before:.{digits}f} → {after:.{digits}f}"
    return f"{arrow} {figures} (significant)"
