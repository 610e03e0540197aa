"""What a report says when RELMON_SAMPLE judged a share of the answers: how much was judged, and that its rates are
weighted (common.reports.weighted); the n each figure shows stays the judged n."""

from __future__ import annotations

from common.messages.blocks import pct
from store.settings_sampling import SamplePlan

WEIGHTED = "rates are weighted"


def sampled_text(share: float | None) -> str | None:
    """`judged 20% of unsignalled answers; rates are weighted`, when sampling left answers out; else None."""
    if share is None:
        return None
    return f"judged {pct(share)} of unsignalled answers; {WEIGHTED}"


def plan_text(plan: SamplePlan) -> str:
    """The setting as App Home shows it: `20% of unsignalled answers`, `at most 500 a day`, or every answer."""
    if plan.daily_cap is not None:
        return f"about {plan.daily_cap:,} unsignalled answers a day, and every signalled one"
    rate = plan.rate if plan.rate is not None else 1.0
    if rate >= 1:
        return "100% of answers"
    return f"{pct(rate)} of unsignalled answers, and every signalled one"
