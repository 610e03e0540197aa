"""Fixes as people read them: the "Mark fixed" buttons under a place's topics, the mark's own message, the verdict
(a thread reply under the mark, a line of the digest's "Fixes" section, a line of `relmon topics fixed`).

Pure functions of plain data (`common.reports.fixes.FixVerdict`); the name given is the one the place may show
(`topics.audience`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from common.messages import blocks as block_kit
from common.messages import rates
from common.messages.blocks import escape, one_line, slack_date
from common.reports.fixes import IMPROVED, NO_EVIDENCE, NOT_IMPROVED, WORSE, FixVerdict

MARK_ACTION_ID = "relmon_mark_fixed"
MARK_BLOCK_ID = "relmon-fixes-mark"
HEADING = "Fixes"
NAME_CHARS = 60
OUTCOME_WORDS = {
    IMPROVED: ":white_check_mark: improved",
    NO_EVIDENCE: ":hourglass_flowing_sand: no evidence yet",
    NOT_IMPROVED: ":x: not improved",
    WORSE: ":warning: worse",
}
PLAIN_WORDS = {IMPROVED: "improved", NO_EVIDENCE: "no evidence yet", NOT_IMPROVED: "not improved", WORSE: "worse"}


@dataclass(frozen=True)
class FixLine:
    """One followed fix as a place shows it."""

    name: str
    marked_at: datetime
    verdict: FixVerdict


def mark_buttons(topics: Sequence[tuple[str, str]]) -> list[dict]:
    """An actions block of "Mark fixed" buttons, one per (topic key, shown name), or none without keys."""
    buttons = [
        block_kit.button(f"Mark fixed: {one_line(name, 40)}", action_id=f"{MARK_ACTION_ID}:{rank}", value=key)
        for rank, (key, name) in enumerate(topics, start=1)
        if key
    ]
    return [block_kit.actions(*buttons, block_id=MARK_BLOCK_ID)] if buttons else []


def _pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def evidence_text(verdict: FixVerdict) -> str:
    """`failed 30% (22–39%, n=100) before → 5% (2–11%, n=100) since; difference −25 pts (−34 to −15)`."""
    shift = verdict.shift
    text = f"failed {rates.rate_text(shift.before)} before → {rates.rate_text(shift.after)} since"
    if shift.difference is not None and shift.before.enough and shift.after.enough:
        low, high = shift.difference.low * 100, shift.difference.high * 100
        change = (shift.after.value or 0.0) - (shift.before.value or 0.0)
        text += f"; difference {change * 100:+.0f} pts ({low:+.0f} to {high:+.0f})"
    return text.replace("-", "−")


def needed_text(verdict: FixVerdict) -> str | None:
    """What a "no evidence yet" still waits for."""
    if verdict.outcome != NO_EVIDENCE:
        return None
    if verdict.wait_until is not None:
        return f"answers enough; the verdict waits for a whole week after the mark ({verdict.wait_until:%a %d %b})"
    if verdict.needed is None:
        before = verdict.shift.before
        if before.n and before.value == 0:
            return "nothing failed before the mark: nothing to show a fix by"
        return f"too few answers before the mark to show a fall (n={before.n})"
    return f"about {verdict.needed:,} more answers needed"


def golden_text(verdict: FixVerdict) -> str | None:
    rerun = verdict.golden
    if rerun is None:
        return None
    return f"test set: {rerun.passed} of {rerun.total} of its items pass (relmon regress run {rerun.run_id})"


def verdict_line(name: str, verdict: FixVerdict, *, mrkdwn: bool = True) -> str:
    words = OUTCOME_WORDS[verdict.outcome] if mrkdwn else PLAIN_WORDS[verdict.outcome]
    title = f"*{escape(one_line(name, NAME_CHARS))}*" if mrkdwn else one_line(name, NAME_CHARS)
    parts = [evidence_text(verdict), needed_text(verdict), golden_text(verdict)]
    return f"{title}: {words} · " + " · ".join(part for part in parts if part)


def fixes_blocks(lines: Sequence[FixLine]) -> list[dict]:
    """The digest's "Fixes" section: each followed fix's verdict (none followed: nothing)."""
    if not lines:
        return []
    text = [f"*{HEADING}*"] + [
        f"• {verdict_line(line.name, line.verdict)} _(marked {slack_date(line.marked_at)})_" for line in lines
    ]
    return [block_kit.section("\n".join(text)), block_kit.divider()]


def fixes_text(line: FixLine) -> str:
    """A followed fix for a terminal (the digest's dry run)."""
    return f"- {verdict_line(line.name, line.verdict, mrkdwn=False)} (marked {line.marked_at:%Y-%m-%d %H:%M} UTC)"


def mark_message(name: str, by: str, at: datetime, verdict: FixVerdict) -> dict:
    """The mark's own message (App Home, the CLI: in the alert channel), whose thread the verdicts go in."""
    who = f"<@{by}>" if by != "cli" else "The operator (relmon topics fixed)"
    head = f"{who} marked *{escape(one_line(name, NAME_CHARS))}* fixed {slack_date(at)}."
    follow = "relmon follows its failure rate and replies here when the verdict changes."
    text = f"{head} {follow}\n{verdict_line(name, verdict)}"
    return block_kit.message(f"Marked fixed: {one_line(name, NAME_CHARS)}", [block_kit.section(text)])


def verdict_reply(name: str, marked_at: datetime, verdict: FixVerdict) -> dict:
    """The thread reply under the mark when its verdict changes."""
    text = f"Fix marked {slack_date(marked_at)}: {verdict_line(name, verdict)}"
    fallback = f"{one_line(name, NAME_CHARS)}: {PLAIN_WORDS[verdict.outcome]}"
    return block_kit.message(fallback, [block_kit.section(text)])


def unknown_topic_text() -> str:
    return "That topic is no longer known to relmon: mark it again from this week's digest or App Home."
