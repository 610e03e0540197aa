"""Alerts as Block Kit: a low score, a degradation, the hour's summary of held low scores.

Pure functions from plain data to `{"text": ..., "blocks": [...]}` (chat.postMessage's and chat.update's arguments).
Privacy is the caller's (`quote`): when False, nothing of the conversation is shown, not even the judge's reasoning
(it often repeats the answer): only the score and the link, which Slack opens only for members of the channel.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.feedback import ACTION_RIGHT, ACTION_WRONG, Tally, describe_votes
from common.messages.blocks import (
    MAX_BLOCKS,
    MAX_MESSAGE_TEXT,
    MAX_SECTION_TEXT,
    actions,
    button,
    channel_mention,
    context,
    escape,
    fit_quote,
    format_score,
    header,
    message,
    section,
    shorten,
    slack_date,
    text_length,
)
from common.messages.exchange_view import show_exchange_button
from common.messages.forgotten import forgotten_note
from common.messages.golden import golden_button
from common.reports.intervals import bootstrap_mean
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY

JUDGE_LABELS = {RELEVANCY: "Relevancy", CORRECTNESS: "Correctness", GROUNDED: "Groundedness"}
WITHHELD = (
    "_Question, answer and reasoning withheld: this is a private channel and its rules do not let this "
    "alert channel quote it. Open the message to read it (members of the channel only)._"
)
WITHHELD_EXCHANGE = (
    "_Question, answer and reasoning withheld: the bot sent this exchange as private (a DM or a private "
    "conversation), and its rule does not let this channel quote it. The people its rule names can open it._"
)
FEEDBACK_BLOCK_ID = "relmon_feedback"
SHOW_EXCHANGE_BLOCK_ID = "relmon_show_exchange"
OPEN_ACTION_ID = "open_message"
# Room for the label line and the "cut" note inside one section's 3,000 characters.
_QUOTE_BUDGET = MAX_SECTION_TEXT - 200


def judge_label(judge: str) -> str:
    """A seed judge's label, or a team's judge's name as words ("refund_policy" → "Refund policy")."""
    return JUDGE_LABELS.get(judge, judge.replace("_", " ").capitalize())


@dataclass(frozen=True)
class ScoredJudgment:
    """The judgment an alert or a summary line is about."""

    judgment_id: int
    judge: str
    score: float
    max_score: float | None


@dataclass(frozen=True)
class Revision:
    """The verdict on the answer's final text, when it was edited after the alert's judgment."""

    status: str
    score: float | None
    max_score: float | None
    reasoning: str | None = None


@dataclass(frozen=True)
class LowScoreAlert(ScoredJudgment):
    threshold: float | None
    channel_id: str
    answered_at: datetime
    quote: bool
    question: str | None = None
    answer: str | None = None
    reasoning: str | None = None
    permalink: str | None = None
    votes: Tally = field(default_factory=Tally)
    stream_errored: bool = False  # the bot's stream ended in an error: judged on what was shown
    context: str | None = None  # the conversation's earlier turns the judge read (judges.context.format_turns)
    revision: Revision | None = None  # the answer was edited after this judgment: the newer verdict
    signals: tuple[str, ...] = ()  # what the conversation did next, described (capture.outcomes.describe_signal)
    forgotten: str | None = None  # what was deleted in Slack since (question, answer, message, edit): its words gone
    origin: str | None = None  # an exchange sent to the ingest API, not in Slack: its bot and visibility instead
    show_exchange: bool = False  # a withheld ingested exchange: the "Show the exchange" button (its viewers only)


def where_of(alert: LowScoreAlert) -> str:
    """Where the answer was: its channel, or the ingested exchange's bot."""
    return alert.origin if alert.origin and not alert.channel_id else channel_mention(alert.channel_id)


CONTEXT_TURN_CHARS = 150  # each earlier turn's excerpt in an alert (the judge read up to judges.context's bound)
CONTEXT_TURNS_SHOWN = 6  # the latest ones


def earlier_turns_block(context_text: str) -> dict:
    """The earlier turns, collapsed: one short line each."""
    lines = [escape(shorten(line, CONTEXT_TURN_CHARS)) for line in context_text.splitlines() if line.strip()]
    lines = lines[-CONTEXT_TURNS_SHOWN:]
    return context("_Earlier in this conversation (the judge read these too):_\n" + "\n".join(lines))


def revision_section(revision: Revision, quote: bool) -> dict:
    """The newer verdict, on top of an alert whose answer was edited after it was judged."""
    if revision.status == "ok":
        verdict = f"its final text scores *{format_score(revision.score, revision.max_score)}*"
    else:
        verdict = f"its final text could not be scored ({revision.status})"
    text = f":pencil2: *The answer changed after this alert:* {verdict}."
    if quote and revision.reasoning and revision.reasoning.strip():
        text += f"\n_{escape(shorten(' '.join(revision.reasoning.split()), 500))}_"
    return section(text)


def quoted_section(label: str, text: str | None, *, what: str) -> dict:
    """A labelled block quote cut to the section limit, saying so (and how long it was) when cut."""
    if not text or not text.strip():
        return section(f"*{label}*\n_(empty)_")
    body, was_cut = fit_quote(text, _QUOTE_BUDGET)
    note = f"\n_{what} cut to fit Slack: {len(text):,} characters in all; open the message for the rest._"
    return section(f"*{label}*\n{body}{note if was_cut else ''}")


def reasoning_section(label: str, reasoning: str | None) -> dict:
    """The judge's reasoning, cut to the section limit with a note saying so (its full text is in the database
    and in `relmon export`, not in the source message)."""
    if not reasoning or not reasoning.strip():
        return section(f"*{label}*\n_(none)_")
    text = reasoning.strip()
    body = escape(text)
    if len(body) <= _QUOTE_BUDGET:
        return section(f"*{label}*\n{body}")
    note = f"\n_Reasoning cut to fit Slack: {len(text):,} characters in all._"
    return section(f"*{label}*\n{shorten(body, _QUOTE_BUDGET)}{note}")


def feedback_buttons(judgment_id: int, permalink: str | None) -> dict:
    elements = []
    if permalink:
        elements.append(button("Open the message", action_id=OPEN_ACTION_ID, url=permalink))
    value = str(judgment_id)
    elements.append(button("Judge was right", action_id=ACTION_RIGHT, value=value, style="primary"))
    elements += [button("Judge was wrong", action_id=ACTION_WRONG, value=value), golden_button(judgment_id)]
    return actions(*elements, block_id=FEEDBACK_BLOCK_ID)


def signals_block(signals: Sequence[str]) -> dict | None:
    """What the conversation did next: "asked again 2 min later · a teammate replied"."""
    if not signals:
        return None
    return context(shorten(":speech_balloon: *After the answer:* " + " · ".join(signals), MAX_SECTION_TEXT))


def low_score_alert(alert: LowScoreAlert) -> dict:
    score = format_score(alert.score, alert.max_score)
    label = judge_label(alert.judge)
    # The fallback shows in notifications: never any of the conversation's text.
    if alert.judge not in JUDGE_LABELS and alert.max_score == 1:  # a team's pass/fail judge: it failed
        text = f"{label} failed in {where_of(alert)}"
        return message(text, alert_blocks(alert, f"{label}: failed"))
    text = f"Low {label.lower()} score {score} in {where_of(alert)}"
    return message(text, alert_blocks(alert, f"Low {label.lower()} score: {score}"))


def alert_blocks(alert: LowScoreAlert, title: str) -> list[dict]:
    """The blocks of an alert about one judgment: where, what was said, why, what happened next, feedback."""
    score = format_score(alert.score, alert.max_score)
    label = judge_label(alert.judge)
    where = f"{where_of(alert)} · {slack_date(alert.answered_at)}"
    threshold = f" · alerts at {format_score(alert.threshold, None)} or lower" if alert.threshold is not None else ""
    blocks = [header(title), context(f"*{label} {score}*{threshold} · {where}")]
    if alert.forgotten:
        blocks.append(context(forgotten_note(alert.forgotten)))
    if alert.revision is not None:
        blocks.append(revision_section(alert.revision, alert.quote))
    if alert.quote:
        if alert.context and alert.context.strip():
            blocks.append(earlier_turns_block(alert.context))
        blocks.append(quoted_section("Question", alert.question, what="Question"))
        blocks.append(quoted_section("Answer", alert.answer, what="Answer"))
        blocks.append(reasoning_section(f"Why the judge scored it {score}", alert.reasoning))
    else:
        blocks.append(section(WITHHELD_EXCHANGE if alert.origin and not alert.channel_id else WITHHELD))
        if alert.show_exchange:
            blocks.append(actions(show_exchange_button(alert.judgment_id), block_id=SHOW_EXCHANGE_BLOCK_ID))
    if alert.stream_errored:
        blocks.append(context("_The answer's stream ended in an error: judged on what it showed._"))
    if not alert.permalink and not (alert.origin and not alert.channel_id):  # an ingested exchange has no link
        blocks.append(context("_The link to the message is unavailable (it may have been deleted)._"))
    happened = signals_block(alert.signals)
    if happened is not None:
        blocks.append(happened)
    blocks.append(feedback_buttons(alert.judgment_id, alert.permalink))
    blocks.append(context(describe_votes(alert.votes)))
    return blocks


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
