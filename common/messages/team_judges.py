"""How a team's own judges (judges.d) read in the digest and App Home: pure text from `common.reports.stats`.

A team judge's headline is its pass rate with its n and 95% Wilson interval (a pass is a score above the alert
threshold), its change against last week only when significant, and the channels where it runs:

    refund_policy: 92% passed (85–96%, n=60), no clear change (n=60 vs 55) · #support 90% passed (80–95%, n=30)
"""

from __future__ import annotations

from collections.abc import Callable

from common.messages import rates
from common.messages.blocks import no_data
from common.reports.stats import Change, ChannelStats, JudgeStats, Report

HEADING = "Your judges"
SECTION_CHARS = 2900  # under the 3,000 a section's text may hold


def pass_text(stats: JudgeStats) -> str:
    """`92% passed (85–96%, n=60)`; `passed: too few (n=4)` below the minimum."""
    return rates.rate_text(stats.pass_estimate, "passed")


def team_judge_line(stats: JudgeStats, change: Change | None = None, before: str | None = None) -> str:
    """The pass rate, its change when both weeks have enough, the mean on a range scale, unscorable and errors."""
    if stats.scored == 0:
        extra = [f"{stats.nulls} not judged (the pair lacked what it needs)"] if stats.nulls else []
        extra += [f"{stats.errors} error{'s' if stats.errors != 1 else ''}"] if stats.errors else []
        return " · ".join(["no verdicts", *extra])
    line = pass_text(stats)
    if change is not None and change.pass_shift is not None and change.pass_shift.after.enough:
        line += f", {rates.shift_text(change.pass_shift)}"
    parts = [line]
    if change is not None and change.no_previous:
        parts.append(no_data(before) if before else no_data())
    low, high = stats.scale
    if high - low > 1:  # a range scale: its mean says more than pass or fail
        parts.append(f"mean {rates.mean_text(stats.mean_estimate, high)}")
    if stats.nulls:
        parts.append(f"{stats.nulls} not judged")
    if stats.errors:
        parts.append(f"{stats.errors} error{'s' if stats.errors != 1 else ''}")
    return " · ".join(parts)


def team_judges(stats: ChannelStats) -> list[str]:
    return [name for name in stats.judges if stats.judges[name].team]


def shown_judges(stats: ChannelStats) -> list[str]:
    """The judges a channel's figures list: every seed judge, and the team judges that gave a verdict there (a team
    judge runs only where its rules say)."""
    return [name for name, judge in stats.judges.items() if not judge.team or judge.active]


def team_lines(report: Report, where: Callable[[str | None], str]) -> list[str]:
    """A line per team judge: over every channel, then in each channel where it runs (`where` names a channel)."""
    lines = []
    for name in team_judges(report.overall):
        overall = report.overall.judges[name]
        line = f"{name}: {team_judge_line(overall, report.change(report.overall, name), report.period.before)}"
        channels = [
            f"{where(stats.channel_id)} {pass_text(stats.judges[name])}"
            for stats in report.channels
            if name in stats.judges and stats.judges[name].active
        ]
        if channels and len(report.channels) > 1:
            line += " · " + "; ".join(channels)
        lines.append(line)
    return lines


def team_section(report: Report, where: Callable[[str | None], str]) -> dict | None:
    """The digest's section of the team's judges; None without any."""
    lines = team_lines(report, where)
    if not lines:
        return None
    text = f"*{HEADING}*\n" + "\n".join(lines)
    return {"type": "section", "text": {"type": "mrkdwn", "text": text[: SECTION_CHARS - 1]}}
