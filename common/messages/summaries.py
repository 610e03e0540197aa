"""The degradation alert ("answers are getting worse") and the hour's summary of the low scores and degradation
alerts an hourly cap held back. Pure functions from plain data to `{"text": ..., "blocks": [...]}`, like
`common.messages.alerts` (the low-score alert), whose judge labels and judgment shape they share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.messages.alerts import ScoredJudgment, judge_label
from common.messages.blocks import (
    MAX_BLOCKS,
    MAX_MESSAGE_TEXT,
    MAX_SECTION_TEXT,
    channel_mention,
    context,
    escape,
    format_score,
    header,
    message,
    section,
    shorten,
    slack_date,
    text_length,
)
from common.reports.intervals import bootstrap_mean


@dataclass(frozen=True)
class DegradationAlert:
    channel_id: str
    judge: str
    mean: float
    floor: float
    count: int  # answers in the window that tripped
    at: datetime
    window: str = "answers"  # which window tripped: "answers" (the last N) or "minutes" (the last M minutes)
    window_answers: int | None = None  # N
    window_minutes: int = 0  # M; 0: the time window is off
    min_answers: int = 0  # the time window's minimum sample
    judge_note: str | None = None  # what the week's canary says: the judge moved, or held steady (the bot moved)
    scores: Mapping[float, int] = field(default_factory=dict)  # score -> answers of the window (older rows: none)

    @property
    def interval_text(self) -> str:
        """` (1.40–2.20, n=20)`: the window's mean's 95% bootstrap interval; ` (n=5: too few for an interval)`
        below the minimum; empty when the window's scores are not known (alerts claimed before they were kept)."""
        found = bootstrap_mean(self.scores)
        if found.n != self.count or found.interval is None:
            return ""
        if not found.enough:
            return f" (n={found.n}: too few for an interval)"
        return f" ({found.interval.low:.2f}–{found.interval.high:.2f}, n={found.n})"


def window_description(alert: DegradationAlert) -> str:
    """The windows in force, with their values: "last 20 answers or last 60 minutes (5 answers at least)"."""
    parts = [f"last {alert.window_answers or alert.count} answers"]
    if alert.window_minutes > 0:
        minimum = f" ({alert.min_answers} answers at least)" if alert.min_answers else ""
        parts.append(f"last {alert.window_minutes} minutes{minimum}")
    return " or ".join(parts)


def _tripped_window(alert: DegradationAlert) -> str:
    if alert.window == "minutes":
        return f"the {alert.count} answers judged in the last {alert.window_minutes} minutes"
    return f"the last {alert.count} judged answers"


def degradation_alert(alert: DegradationAlert) -> dict:
    label = judge_label(alert.judge).lower()
    mean = f"{alert.mean:.2f}"
    over = _tripped_window(alert)
    blocks = [
        header(f"Answers are getting worse: mean {label} {mean}"),
        section(
            f"In {channel_mention(alert.channel_id)}, the mean {label} score of {over} is *{mean}*"
            f"{alert.interval_text}, below the "
            f"floor of *{alert.floor:g}*. relmon will not repeat this alert until the mean recovers."
        ),
        context(f"{slack_date(alert.at)} · floor {alert.floor:g} · window: {window_description(alert)}"),
    ]
    if alert.judge_note:
        blocks.append(context(alert.judge_note))
    text = f"Answers in {channel_mention(alert.channel_id)} are getting worse: mean {label} {mean} < {alert.floor:g}"
    return message(text, blocks)


@dataclass(frozen=True)
class SummaryItem(ScoredJudgment):
    answered_at: datetime
    permalink: str | None = None
    reasoning: str | None = None
    channel_id: str = ""  # the source channel
    quote: bool = True  # False: a private channel whose text may not be shown here (reasoning withheld)
    held_by: str = "hourly_cap"  # the cap that held it: its source channel's, or "alert_channel_cap"


def summary_line(item: SummaryItem, *, name_channel: bool = False) -> str:
    score = format_score(item.score, item.max_score)
    link = f"<{item.permalink}|open>" if item.permalink else "link unavailable"
    where = f"{channel_mention(item.channel_id)} · " if name_channel and item.channel_id else ""
    line = f"• {where}*{score}* {item.judge} · {slack_date(item.answered_at)} · {link}"
    if item.quote and item.reasoning and item.reasoning.strip():
        line += f"\n   _{escape(shorten(' '.join(item.reasoning.split()), 200))}_"
    return line


SUMMARY_CHANNELS_NAMED = 20  # the intro names at most this many source channels, then counts the rest


def degradation_line(alert: DegradationAlert) -> str:
    label = judge_label(alert.judge).lower()
    return (
        f"• {channel_mention(alert.channel_id)}: mean {label} *{alert.mean:.2f}*{alert.interval_text} over "
        f"{_tripped_window(alert)}, "
        f"below the floor of *{alert.floor:g}* · {slack_date(alert.at)}"
    )


def _degradation_section(degradations: Sequence[DegradationAlert], alert_channel_cap: int | None) -> str:
    """The channels getting worse whose alerts the alert channel's cap held back: the summary's first news."""
    cap = f" (this channel had its {alert_channel_cap} alerts for the hour)" if alert_channel_cap else ""
    text = f"*Getting worse*{cap}; relmon will not repeat these until the mean recovers:"
    room = MAX_SECTION_TEXT - len(text) - 60  # the closing "…and N more" fits in 60
    listed = 0
    for alert in degradations:
        line = degradation_line(alert)
        if len(line) + 1 > room:
            break
        text, room, listed = f"{text}\n{line}", room - len(line) - 1, listed + 1
    if listed < len(degradations):
        text += f"\n…and {len(degradations) - listed} more channels getting worse."
    return text


def _summary_title(lows: int, degraded: int) -> str:
    parts = [f"{degraded} channel{'s' if degraded != 1 else ''} getting worse"] if degraded else []
    if lows:
        parts.append(f"{lows} more low score{'s' if lows != 1 else ''}")
    return " and ".join(parts) + " this hour"


def _summary_intro(
    hour: datetime, items: Sequence[SummaryItem], caps: Mapping[str, int], alert_channel_cap: int | None
) -> str:
    # Say which caps held these scores: a channel that posted no alert at all did not reach its own.
    by_source = any(item.held_by != "alert_channel_cap" for item in items)
    by_alert_channel = bool(alert_channel_cap) and any(item.held_by == "alert_channel_cap" for item in items)
    held = Counter(item.channel_id for item in items)
    if len(held) == 1:
        [channel] = held
        if not by_source:
            return (
                f"This channel had its cap of {alert_channel_cap} alerts from all channels for the hour starting "
                f"{slack_date(hour)}, so further low scores from {channel_mention(channel)} are gathered here "
                "instead of posted one by one."
            )
        this_channel = (
            f", or this channel its cap of {alert_channel_cap} alerts from all channels," if by_alert_channel else ""
        )
        return (
            f"{channel_mention(channel)} reached its cap of {caps[channel]} alerts for the hour starting "
            f"{slack_date(hour)}{this_channel} so further low scores are gathered here instead of posted one by one."
        )
    named = [
        f"{channel_mention(channel)} ({count} held, cap {caps[channel]})"
        for channel, count in held.most_common(SUMMARY_CHANNELS_NAMED)
    ]
    if len(held) > SUMMARY_CHANNELS_NAMED:
        named.append(f"{len(held) - SUMMARY_CHANNELS_NAMED} more")
    caps_reached = ["each channel's own"] if by_source else []
    if by_alert_channel:
        caps_reached.append(f"this channel's {alert_channel_cap} from all channels")
    over = ", and ".join(caps_reached)
    return (
        f"Low scores from {len(held)} channels went over the hourly alert caps ({over}) for the hour starting "
        f"{slack_date(hour)}, so they are gathered here instead of posted one by one: {', '.join(named)}."
    )


def summary_message(
    hour: datetime,
    items: Sequence[SummaryItem],
    *,
    caps: Mapping[str, int],
    alert_channel_cap: int | None = None,
    degradations: Sequence[DegradationAlert] = (),
) -> dict:
    """One message per alert channel and hour for the low scores held back by a cap (their source channel's, or
    the alert channel's across all sources), from every source channel: a burst across many channels is one
    message, not one per channel. Updated in place (chat.update) as more gather. `caps`: each source channel's
    hourly cap. `degradations`: degradation alerts the alert channel's cap held back, listed first. `items` come
    oldest first; the message lists the newest first, packed into sections, as many as
    Slack's limits let one message hold (50 blocks, `MAX_MESSAGE_TEXT` characters in all), and counts the rest."""
    count = len(items)
    channels = {item.channel_id for item in items}
    blocks = [header(_summary_title(count, len(degradations)))]
    if degradations:
        blocks.append(section(shorten(_degradation_section(degradations, alert_channel_cap), MAX_SECTION_TEXT)))
    if items:
        blocks.append(section(shorten(_summary_intro(hour, items, caps, alert_channel_cap), MAX_SECTION_TEXT)))
    withheld = [item for item in items if not item.quote]
    if withheld:
        blocks.append(
            context(
                "_Reasoning withheld: private channel._"
                if len(withheld) == count
                else "_Reasoning withheld for scores from private channels._"
            )
        )
    # Room kept for the closing "and N more" (N < count, so its length is at most this).
    room = MAX_MESSAGE_TEXT - text_length(blocks) - len(_more_low_scores(count))
    sections: list[str] = []  # full ones
    chunk = ""  # the one being filled
    shown = 0
    for item in reversed(items):  # the newest first: in a burst they are the ones to look at
        line = shorten(summary_line(item, name_channel=len(channels) > 1), MAX_SECTION_TEXT)
        joins = bool(chunk) and len(chunk) + 1 + len(line) <= MAX_SECTION_TEXT
        cost = len(line) + joins  # the newline that joins it
        if cost > room:
            break
        if joins:
            chunk = f"{chunk}\n{line}"
        else:  # a section of its own: one more block, and the closing line still needs one
            if len(blocks) + len(sections) + bool(chunk) + 2 > MAX_BLOCKS:
                break
            if chunk:
                sections.append(chunk)
            chunk = line
        room -= cost
        shown += 1
    if chunk:
        sections.append(chunk)
    blocks += [section(text) for text in sections]
    if shown < count:
        blocks.append(context(_more_low_scores(count - shown)))
    if degradations:
        text = _summary_title(count, len(degradations))
    elif len(channels) == 1:
        text = f"{count} more low score{'s' if count != 1 else ''} in {channel_mention(next(iter(channels)))} this hour"
    else:
        text = f"{count} more low score{'s' if count != 1 else ''} from {len(channels)} channels this hour"
    return message(text, blocks)


def _more_low_scores(rest: int) -> str:
    scores = "low score" if rest == 1 else "low scores"
    return f"…and {rest} more {scores} this hour, the oldest (not shown: Slack limits a message's size)."
