"""How a judge's change of prompt or model reads in the digest and App Home: pure text from
`common.reports.trust.Comparability`. A rate is never set against one made with another version without saying so:

    refund_policy v3 since Tue 10:00 (v2 before: this week's rate mixes them); last week's rate was v2: not compared
    relevancy: model `m2` this week; last week's figures were `m1`: not compared
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from common.reports.stats import is_team_judge
from common.reports.trust import Comparability, Trust, Version, VersionChange


def version_name(version: Version, what: str, numbers: Mapping[str, int]) -> str:
    """`v3` (its number among the judge's prompts), `prompt 3f2a1c9e` when not numbered, or a model's name."""
    model, prompt = version
    if what == "model":
        return f"`{model or '?'}`"
    number = numbers.get(prompt or "")
    return f"v{number}" if number else f"prompt {(prompt or '?')[:8]}"


def _names(versions, what: str, numbers: Mapping[str, int]) -> str:
    shown: list[str] = []
    for version in versions:
        name = version_name(version, what, numbers)
        if name not in shown:
            shown.append(name)
    return ", ".join(shown)


def _when(moment: datetime | None, timezone: str | None) -> str:
    if moment is None:
        return ""
    local = moment.astimezone(ZoneInfo(timezone)) if timezone else moment
    return f" since {local:%a %H:%M}"


def change_text(judge: str, change: VersionChange, numbers: Mapping[str, int], timezone: str | None = None) -> str:
    text = within_text(judge, change, numbers, timezone)
    rate = "rate" if is_team_judge(judge) else "figures"
    if change.before:
        was = "was" if rate == "rate" else "were"
        return f"{text}; last week's {rate} {was} {_names(change.before, change.what, numbers)}: not compared"
    return f"{text}: not compared with last week"


def within_text(
    judge: str,
    change: VersionChange,
    numbers: Mapping[str, int],
    timezone: str | None = None,
    whose: str = "this week's",
) -> str:
    """The change within the period alone (`/judge stats`, which compares with no other week, says it so):
    `refund_policy v3 since Tue 10:00 (v2 before: this week's rate mixes them)`."""
    what = change.what
    rate = "rate" if is_team_judge(judge) else "figures"
    (newest, since), earlier = change.now[-1], [version for version, _ in change.now[:-1]]
    subject = f"{judge} {version_name(newest, what, numbers)}" if what == "prompt" else f"{judge}: model "
    if what == "model":
        subject += version_name(newest, what, numbers)
    if change.during:
        mixes = "mixes them" if rate == "rate" else "mix them"
        before = _names(earlier, what, numbers)
        return f"{subject}{_when(since, timezone)} ({before} before: {whose} {rate} {mixes})"
    return f"{subject} this week"


def comparability_text(found: Comparability, numbers: Mapping[str, int], timezone: str | None = None) -> str | None:
    """The note for one judge; None when its weeks compare."""
    if found.comparable:
        return None
    if found.change is None:
        return found.note
    return change_text(found.judge, found.change, numbers, timezone)


def version_notes(trust: Trust, timezone: str | None = None) -> list[str]:
    """A line per judge whose weeks do not compare, its versions named as people number them."""
    notes = []
    for judge, found in trust.comparability.items():
        text = comparability_text(found, trust.version_numbers.get(judge, {}), timezone)
        if text:
            notes.append(text)
    return notes
