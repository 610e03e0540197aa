"""The low-score alert as Block Kit (the degradation alert and the hour's summary: `common.messages.summaries`).

Pure functions from plain data to `{"text": ..., "blocks": [...]}` (chat.postMessage's and chat.update's arguments).
Privacy is the caller's (`quote`): when False, nothing of the conversation is shown, not even the judge's reasoning
(it often repeats the answer): only the score and the link, which Slack opens only for members of the channel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.feedback import ACTION_RIGHT, ACTION_WRONG, Tally, describe_votes
from common.messages.blocks import (
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
)
from common.messages.exchange_view import SHOW_EXCHANGE_BLOCK_ID, WITHHELD_EXCHANGE, show_exchange_button
from common.messages.forgotten import forgotten_note
from common.messages.golden import golden_button
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY

JUDGE_LABELS = {RELEVANCY: "Relevancy", CORRECTNESS: "Correctness", GROUNDED: "Groundedness"}
WITHHELD = (
    "_Question, answer and reasoning withheld: this is a private channel and its rules do not let this "
    "alert channel quote it. Open the message to read it (members of the channel only)._"
)
FEEDBACK_BLOCK_ID = "relmon_feedback"
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
