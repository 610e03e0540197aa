"""How the trust figures read (digest, App Home, `/judge stats`): pure text from `common.reports.trust`."""

from __future__ import annotations

from collections.abc import Sequence

from common.messages import blocks as block_kit
from common.messages import rates
from common.messages.versions import version_notes
from common.reports.trust import DISPUTED_SHOWN, CanaryFigures, Precision, Suggestion, Trust
from store import bot_groups

TRUST_HEADING = "Can the alerts be trusted?"
SECTION_CHARS = 2900  # under the 3,000 a section's text may hold


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def precision_text(found: Precision | None) -> str:
    """`8 of 10 voted alerts agreed with: 80% (49–94%, n=10)`, the rate only from `MIN_N` votes on."""
    if found is None or found.voted == 0:
        return "no votes on alerts yet"
    noun = "alert" if found.voted == 1 else "alerts"
    counts = f"{found.agreed} of {found.voted} voted {noun} agreed with"
    if not found.estimate.enough:
        return f"{counts} (too few for a rate)"
    return f"{counts}: {rates.rate_text(found.estimate)}"


def suggestion_text(found: Suggestion, *, slack: bool = True) -> str:
    where = (
        "all channels"
        if found.channel_id is None
        else block_kit.channel_mention(found.channel_id)
        if slack or bot_groups.bot_of(found.channel_id)
        else f"#{found.channel_id}"
    )
    return (
        f"{found.judge} in {where}: an alert threshold of ≤ {found.threshold:g} instead of ≤ {found.current:g} "
        f"would have been {_pct(found.precision_then)} precise instead of {_pct(found.precision_now)} "
        f"on {found.votes} votes, missing none of the answers people marked bad"
    )


def canary_text(figures: CanaryFigures | None) -> str | None:
    if figures is None:
        return None
    latest = figures.latest
    kappa = "no kappa" if latest.kappa is None else f"κ {latest.kappa:.2f}"
    change = figures.kappa_change
    if change is not None:
        kappa += f" ({'+' if change >= 0 else '−'}{abs(change):.2f})"
    exact = "" if latest.exact_agreement is None else f", exact agreement {_pct(latest.exact_agreement)}"
    text = f"Canary ({latest.judge}, model `{latest.model or '?'}`): {kappa}{exact}"
    if latest.moved:
        text += f" · :warning: the judge moved: {latest.moved}"
    return text


def second_opinion_text(trust: Trust, *, slack: bool = True, shown: int = DISPUTED_SHOWN) -> str | None:
    """`2 low scores disputed by the second opinion (1 → 4, 0 → 3) · 5 confirmed · 1 unconfirmed`."""
    disputed = trust.disputed_count
    if not (disputed or trust.confirmed or trust.unconfirmed):
        return None
    parts = []
    scores = ", ".join(
        f"{d.score:g} → {'?' if d.second_score is None else f'{d.second_score:g}'}" for d in trust.disputed[:shown]
    )
    parts.append(f"{disputed} low score{'s' if disputed != 1 else ''} disputed" + (f" ({scores})" if scores else ""))
    parts.append(f"{trust.confirmed} confirmed")
    if trust.unconfirmed:
        parts.append(f"{trust.unconfirmed} unconfirmed (no second opinion: not alerted)")
    return "Second opinions: " + " · ".join(parts)


def trust_lines(
    trust: Trust,
    judges: list[str],
    *,
    slack: bool = True,
    agreement: Sequence[str] = (),
    timezone: str | None = None,
) -> list[str]:
    """The digest's lines on the alerts and the judge, overall; `agreement`: each judge against the team's labels
    (`common.messages.agreement.judge_lines`), after the alerts' precision; `timezone`: when a judge's new version
    began."""
    voted = [(judge, trust.precision_of(None, judge)) for judge in judges]
    lines = [f"Alert precision, {judge}: {precision_text(found)}" for judge, found in voted if found is not None]
    lines += agreement
    second = second_opinion_text(trust, slack=slack)
    if second:
        lines.append(second)
    lines += [f"Threshold: {suggestion_text(found, slack=slack)}" for found in trust.suggestions]
    for figures in (trust.canary, *trust.team_canaries.values()):  # the seed canary, then each team judge's
        canary = canary_text(figures)
        if canary:
            lines.append(canary)
    lines += [f"Judge changed: {note}" for note in version_notes(trust, timezone)]
    return lines


def trust_section(
    trust: Trust, judges: list[str], agreement: Sequence[str] = (), timezone: str | None = None
) -> dict | None:
    """The digest's and App Home's section of trust lines; None when there is nothing to say."""
    lines = trust_lines(trust, judges, agreement=agreement, timezone=timezone)
    if not lines:
        return None
    return block_kit.section(block_kit.shorten(f"*{TRUST_HEADING}*\n" + "\n".join(lines), SECTION_CHARS))
