"""How the judge's agreement with the team reads (digest, App Home, the fall alert): pure text from
`common.reports.agreement`. Disagreements are links and scores, never words: a link shows a private channel's answer
only to its members.

    relevancy vs the team: kappa 0.62 (0.41–0.83, n=40: 12 votes, 28 outcomes) · judge × team: fail·fail 10,
    fail·pass 3, pass·fail 5, pass·pass 22
    relevancy failure rate: the judge says 12% failed (n=200); corrected by 40 team labels: 18% (11–25%)
    relevancy, latest disagreements: judge fail, team pass (vote) · …
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common.messages.blocks import WEEK_BEFORE, channel_ref
from common.reports.agreement import OUTCOME, AgreementReport, Disagreement, JudgeAgreement
from common.reports.intervals import Interval
from common.reports.kappa import MIN_LABELS, MIN_PER_VERDICT, Kappa, KappaFall

Links = Mapping[int, str]  # pair id -> permalink


def _pct(share: float) -> str:
    return f"{share * 100:.0f}%"


def _share(value: float, interval: Interval) -> str:
    """`18% (11–25%)`."""
    return f"{_pct(value)} ({interval.low * 100:.0f}–{_pct(interval.high)})"


def kappa_text(kappa: Kappa) -> str:
    """`kappa 0.62 (0.41–0.83, n=40)`; `too few team labels (n=4)`; undefined when one side always said the same."""
    if kappa.n < MIN_LABELS:
        return f"too few team labels (n={kappa.n})"
    if kappa.value is None or kappa.interval is None:
        return f"kappa undefined: the judge or the team said the same of every answer (n={kappa.n})"
    low, high = kappa.interval.low, kappa.interval.high
    span = f"{_num(low)}–{_num(high)}" if low >= 0 else f"{_num(low)} to {_num(high)}"
    return f"kappa {_num(kappa.value)} ({span}, n={kappa.n})"


def _num(value: float) -> str:
    """`0.62`, `−0.10` (a minus sign, not a hyphen, so a negative kappa reads as one)."""
    return f"{value:.2f}".replace("-", "−")


def sources_text(found: JudgeAgreement) -> str:
    parts = []
    if found.votes:
        parts.append(f"{found.votes} vote{'s' if found.votes != 1 else ''}")
    if found.outcomes:
        parts.append(f"{found.outcomes} outcome{'s' if found.outcomes != 1 else ''}")
    return ", ".join(parts)


def matrix_text(found: JudgeAgreement) -> str:
    """`judge × team: fail·fail 10, fail·pass 3, pass·fail 5, pass·pass 22` (the judge's verdict first)."""
    (ff, fp), (pf, pp) = found.table
    return f"judge × team: fail·fail {ff}, fail·pass {fp}, pass·fail {pf}, pass·pass {pp}"


def fall_text(fall: KappaFall | None, before: str = WEEK_BEFORE) -> str | None:
    """`▼ from kappa 0.80 the week before (significant)` when it fell (`before`: the period compared with); nothing
    otherwise (a rise or noise is not news)."""
    if fall is None or not fall.fell:
        return None
    return f"▼ from kappa {_num(fall.before.value)} {before} (significant)"


def agreement_text(found: JudgeAgreement, fall: KappaFall | None = None, before: str = WEEK_BEFORE) -> str:
    """`kappa 0.62 (0.41–0.83, n=40: 12 votes, 28 outcomes) · judge × team: …`, the matrix only with enough labels."""
    text = kappa_text(found.kappa)
    if found.kappa.n >= MIN_LABELS:
        text = text[:-1] + f": {sources_text(found)})"
        text += f" · {matrix_text(found)}"
    fell = fall_text(fall, before)
    return text + (f" · {fell}" if fell else "")


def corrected_text(found: JudgeAgreement) -> str:
    """`the judge says 12%; corrected by 40 team labels: 18% (11–25%)`, or why it cannot be corrected."""
    corrected = found.corrected
    if corrected.judge_rate is None:
        return "no scores"
    said = f"the judge says {_pct(corrected.judge_rate)} failed (n={corrected.judged})"
    rate = corrected.rate
    if rate.value is None or rate.interval is None:
        needed = f"{MIN_LABELS} needed, {MIN_PER_VERDICT} among the answers it failed and among those it passed"
        return f"{said}; too few team labels to correct it (n={rate.n}; {needed})"
    return f"{said}; corrected by {rate.n} team labels: {_share(rate.value, rate.interval)}"


def disagreement_text(found: Disagreement, links: Links, *, slack: bool = True) -> str:
    """`judge fail 1, team pass (vote)`, a link to the answer when there is one; never its words."""
    team = "pass" if found.judge_failed else "fail"
    source = "outcome" if found.source == OUTCOME else "vote"
    said = f"judge {'fail' if found.judge_failed else 'pass'} {found.score:g}, team {team} ({source})"
    link = links.get(found.pair_id)
    if link:
        return f"<{link}|{said}>" if slack else f"{said} {link}"
    return f"{said} in {channel_ref(found.channel_id, slack=slack)}"


def judge_lines(
    agreement: AgreementReport, judges: Iterable[str], links: Links, *, slack: bool = True, before: str = WEEK_BEFORE
) -> list[str]:
    """The trust section's lines over every channel: for each judge the team labelled answers of, its kappa and
    matrix, the corrected failure rate, and its latest disagreements (a week without labels says nothing)."""
    lines = []
    for judge in judges:
        found = agreement.of(None, judge)
        if found is None or not found.labelled:
            continue
        lines.append(f"{judge} vs the team: {agreement_text(found, agreement.fall(None, judge), before)}")
        lines.append(f"{judge} failure rate: {corrected_text(found)}")
        if found.disagreements:
            shown = " · ".join(disagreement_text(d, links, slack=slack) for d in found.disagreements)
            lines.append(f"{judge}, latest disagreements: {shown}")
    return lines


def channel_parts(
    agreement: AgreementReport, channel_id: str | None, judges: Iterable[str], before: str = WEEK_BEFORE
) -> list[str]:
    """A channel's short figures, only for judges with team labels in it: `relevancy vs the team kappa 0.62
    (0.41–0.83, n=40), corrected failure rate 18% (11–25%)`."""
    parts = []
    for judge in judges:
        found = agreement.of(channel_id, judge)
        if found is None or not found.labelled:
            continue
        if found.kappa.n < MIN_LABELS:
            parts.append(f"{judge} vs the team: {kappa_text(found.kappa)}")
            continue
        text = f"{judge} vs the team {kappa_text(found.kappa)}"
        rate = found.corrected.rate
        if rate.value is not None and rate.interval is not None:
            text += f", corrected failure rate {_share(rate.value, rate.interval)}"
        fell = fall_text(agreement.fall(channel_id, judge), before)
        parts.append(text + (f" {fell}" if fell else ""))
    return parts


def linked_disagreements(agreement: AgreementReport) -> list[Disagreement]:
    """The disagreements the digest shows (every channel's, per judge): the answers to link."""
    return [d for (channel, _judge), found in agreement.current.items() if channel is None for d in found.disagreements]


def fall_alert_text(found: JudgeAgreement, fall: KappaFall, links: Links) -> str:
    """The alert when a judge's agreement with the team fell significantly since last week."""
    where = channel_ref(found.channel_id, slack=True)
    return (
        f":warning: *The {found.judge} judge agrees less with the team* in {where}: "
        f"kappa {_num(fall.before.value)} last week (n={fall.before.n}) → {kappa_text(fall.after)} this week, "
        f"a fall of {_num(-fall.difference)} ({_num(-fall.interval.high)}–{_num(-fall.interval.low)} at 95%). "
        f"{matrix_text(found)}. Failure rate: {corrected_text(found)}. Its low scores and alerts may not mean what "
        "they did: check its latest disagreements"
        + (": " + " · ".join(disagreement_text(d, links) for d in found.disagreements) if found.disagreements else ".")
    )
