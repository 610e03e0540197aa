"""What a person sees privately after /judge, the shortcut or the modal: the verdict, `/judge stats`,
`/judge help`, the modal itself, and one-sentence errors that say what to do."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from common.messages import rates
from common.messages.alerts import judge_label, quoted_section
from common.messages.blocks import (
    MAX_SECTION_TEXT,
    channel_mention,
    context,
    escape,
    format_score,
    header,
    message,
    plain,
    section,
    shorten,
    text_input,
)
from common.messages.judge_config import HELP_LINE
from common.messages.resolution import resolution_lines
from common.messages.sampling import sampled_text
from common.messages.team_judges import team_judge_line
from common.messages.trust import precision_text
from common.reports.intervals import Estimate, bootstrap_mean, proportion
from common.reports.resolution import ResolutionStats
from common.reports.stats import JudgeStats
from common.reports.trust import Precision
from common.reports.weighted import Weights, weighted_mean, weighted_proportion
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY

# Errors a person may see: one short sentence each, "what happened: what to do" (tests check the action).
ERRORS = {
    # One answer for a channel the person is not in and one relmon cannot see: nobody learns where relmon is.
    "not_member": "You can judge messages of channels you are a member of and relmon is in: join the channel, or run "
    "`/judge` alone to paste them.",
    "bad_link": "That isn't a message link: use “Copy link” on the answer, then `/judge <link>`.",
    "not_found": "relmon can't find that message: check the link, and invite relmon to the channel if it isn't in it.",
    "no_question": "relmon can't tell which question that message answers: run `/judge` alone and paste both.",
    "no_answer": "That message has no text to judge: pick the bot's answer instead.",
    "unavailable": "relmon couldn't start that check just now: please try again in a minute.",
    "budget": "relmon has used today's judging budget: please try again tomorrow or ask an admin to raise it.",
    "on_demand_budget": "relmon has used today's budget for on-demand judgments: please try again tomorrow.",
    "rate_limited": "You have asked relmon for many judgments this hour: please try again later.",
    "reports_rate_limited": "You have asked relmon for many reports this minute: please try again in a minute.",
    "not_judged": "relmon couldn't judge that answer: please try again in a few minutes.",
    # /judge stats: one answer for an unknown name, a channel relmon can't see and one the person isn't in.
    "stats_refused": "relmon can only show figures for a channel you and relmon are both in: check the name, or "
    "pick one of yours.",
    "stats_not_here": "relmon isn't in this conversation: run `/judge stats #channel` for a channel it is in, or "
    "invite relmon here.",
    "vote_gone": "That judgment no longer exists, so your vote wasn't counted: use “Judge this answer” on the "
    "message to judge it again.",
    "unknown_command": "relmon didn't understand that: try `/judge help`.",
    "needs_reference": "The correctness and grounded judges compare with a reference answer: please add one.",
    "link_needs_reference": "Correctness and grounded need a reference answer: run `/judge` alone to paste one.",
}


def error_message(code: str) -> dict:
    text = ERRORS[code]
    return message(text, [section(text)])


def unknown_judge_message(name: str, known: Sequence[str]) -> dict:
    """`/judge <link> --judge NAME` with a name that is no judge here (or none at all)."""
    asked = f"relmon has no judge “{name[:40]}”" if name else "`--judge` needs a judge's name"
    text = f"{asked}: use `--judge` with one of {', '.join(known)}."
    return message(text, [section(text)])


@dataclass(frozen=True)
class VerdictItem:
    judge: str
    status: str  # ok | null | error
    score: float | None
    max_score: float | None
    reasoning: str | None = None


def verdict_message(
    items: Sequence[VerdictItem],
    *,
    question: str | None,
    answer: str | None,
    channel_id: str | None = None,
    permalink: str | None = None,
    budget_spent: bool = False,
) -> dict:
    """The private verdict. The reader asked for it and is a member of the channel (checked before
    judging), so the texts may be quoted back."""
    if not items:
        return error_message("budget" if budget_spent else "not_judged")
    scored = [item for item in items if item.status == "ok"]
    title = " · ".join(f"{judge_label(i.judge)} {format_score(i.score, i.max_score)}" for i in scored)
    blocks = [header(f"Verdict: {title}" if title else "Verdict: no score")]
    where = f"Answer in {channel_mention(channel_id)}" if channel_id else "The answer you pasted"
    if permalink:
        where += f" · <{permalink}|open the message>"
    blocks.append(context(where))
    for item in items:
        label = judge_label(item.judge)
        if item.status == "ok":
            reasoning = escape(item.reasoning.strip()) if item.reasoning and item.reasoning.strip() else "_(none)_"
            text = f"*{label}: {format_score(item.score, item.max_score)}*\n{reasoning}"
        elif item.status == "null":
            why = escape(item.reasoning.strip()) if item.reasoning and item.reasoning.strip() else ""
            text = f"*{label}: no score* (nothing to grade against)\n{why}".rstrip()
        else:
            text = f"*{label}: not judged*: the judge's model failed; please try again in a few minutes."
        blocks.append(section(shorten(text, MAX_SECTION_TEXT)))
    blocks.append(quoted_section("Question", question, what="Question"))
    blocks.append(quoted_section("Answer", answer, what="Answer"))
    text = f"relmon's verdict: {title}" if title else "relmon's verdict: no score"
    return message(text, blocks)


def accepted_message(what: str = "that answer") -> dict:
    text = f"Judging {what}… the verdict will appear here, only for you."
    return message(text, [context(text)])


@dataclass(frozen=True)
class StatsRow:
    judge: str
    judged: int
    mean: float | None
    low: int  # at or below the threshold
    threshold: float
    max_score: float | None
    errors: int = 0
    precision: Precision | None = None  # of the alerts people voted on
    disputed: int = 0  # low scores a second opinion disputed (not alerted)
    distribution: Mapping[int, int] = field(default_factory=dict)  # score -> answers: the mean's interval
    weights: Weights | None = None  # sampled answers' weights 1/π when they differ (common.reports.weighted)
    # A team's judge (judges.d): its figures as the digest reads them (a pass rate), and its version's change.
    team: JudgeStats | None = None
    version_note: str | None = None

    @property
    def mean_estimate(self) -> Estimate:
        """The mean with its n and bootstrap interval (none when the scores' counts are not known); reweighted for
        sampling."""
        if self.weights is not None:
            return weighted_mean(self.weights)
        if self.mean is None or sum(self.distribution.values()) != self.judged:
            return Estimate(self.mean, self.judged, None)
        return replace(bootstrap_mean(self.distribution), value=self.mean)

    @property
    def low_estimate(self) -> Estimate:
        """The share at or below the threshold; reweighted for sampling (Hájek, Wilson at Kish's n_eff)."""
        return weighted_proportion(self.weights) if self.weights is not None else proportion(self.low, self.judged)


def _seed_line(row: StatsRow) -> str:
    label = judge_label(row.judge)
    mean = rates.mean_text(row.mean_estimate, row.max_score) if row.judged else "no score"
    share = rates.rate_text(row.low_estimate, f"at or below {format_score(row.threshold, None)}")
    answers = f"{row.judged} answer{'s' if row.judged != 1 else ''}"
    line = f"*{label}*: {answers} judged · mean {mean} · {share if row.judged else 'n/a'}"
    if row.errors:
        line += f" · {row.errors} could not be judged"
    return line


def stats_message(
    channel_id: str,
    rows: Sequence[StatsRow],
    *,
    days: int = 7,
    resolution: ResolutionStats | None = None,
    window_seconds: int | None = None,
    sampled_share: float | None = None,
) -> dict:
    """`sampled_share`: the share of the unsignalled answers judged, when sampling left some out."""
    where = f"Answers judged in {channel_mention(channel_id)}"
    sampled = sampled_text(sampled_share)
    blocks = [header(f"The last {days} days"), context(f"{where} · {sampled}" if sampled else where)]
    lines = []
    for row in rows:
        if row.team is not None:
            if not row.team.active:
                continue  # a team's judge runs only where its rules say
            line = f"*{row.judge}*: {team_judge_line(row.team)}"  # as the digest and App Home show it
        elif row.judged == 0 and row.errors == 0:
            continue
        else:
            line = _seed_line(row)
        if row.precision is not None and row.precision.voted:
            line += f" · {precision_text(row.precision)}"
        if row.disputed:
            line += f" · {row.disputed} low score{'s' if row.disputed != 1 else ''} disputed by a second opinion"
        lines.append(line)
        if row.version_note:
            lines.append(f"Judge changed: {row.version_note}")
    tiers = resolution_lines(resolution, window_seconds) if resolution is not None else []
    if not lines and not tiers:
        text = f"No answers judged in {channel_mention(channel_id)} in the last {days} days."
        return message(text, [section(text)])
    lines += tiers
    blocks.append(section("\n".join(lines)))
    note = f" ({sampled})" if sampled else ""
    return message(f"The last {days} days in {channel_mention(channel_id)}{note}: " + "; ".join(lines), blocks)


HELP_TEXT = (
    """*relmon: how to judge an answer*
• `/judge <message link>`: judge that answer against its question (use “Copy link” on the bot's message).
• `/judge <message link> --judge NAME`: with that judge only (`relevancy`, or one of your team's judges).
• `/judge`: open a form to paste a question, an answer and an optional reference, and pick a judge.
• *Judge this answer* (message shortcut, in the message's ⋯ menu): judge the answer you are looking at.
• `/judge stats [#channel]`: the last 7 days: answers judged, mean score, share below the alert threshold, and how
  the answers were resolved (without help, by a teammate, escalated, unresolved).
"""
    + HELP_LINE
    + """
• `/judge help`: this message.
Verdicts are shown only to you, and only for channels you are a member of."""
)


def help_message() -> dict:
    return message(
        "How to use /judge: /judge <link>, /judge, /judge stats [#channel], /judge config, /judge help",
        [section(HELP_TEXT)],
    )


MODAL_CALLBACK_ID = "judge_modal"
JUDGE_CHOICES = (
    (RELEVANCY, "Relevancy (0–4): does it answer the question?"),
    (CORRECTNESS, "Correctness (0–2): does it match the reference?"),
    (GROUNDED, "Grounded (1–5): is it backed by the reference?"),
)


def judge_modal(private_metadata: dict) -> dict:
    """The /judge form. `private_metadata` (≤ 3,000 characters) carries where the verdict goes."""
    options = [{"text": plain(label, 75), "value": value} for value, label in JUDGE_CHOICES]
    return {
        "type": "modal",
        "callback_id": MODAL_CALLBACK_ID,
        "title": plain("Judge an answer", 24),
        "submit": plain("Judge", 24),
        "close": plain("Cancel", 24),
        "private_metadata": json.dumps(private_metadata)[:3000],
        "blocks": [
            text_input("question", "Question", optional=False, placeholder="What the person asked", max_length=3000),
            text_input("answer", "Answer", optional=False, placeholder="What the bot answered", max_length=3000),
            text_input(
                "reference",
                "Reference answer (optional)",
                optional=True,
                placeholder="A correct answer or source text (needed by correctness and grounded)",
                max_length=3000,
            ),
            {
                "type": "input",
                "block_id": "judge",
                "label": plain("Judge", 2000),
                "element": {
                    "type": "static_select",
                    "action_id": "value",
                    "options": options,
                    "initial_option": options[0],
                },
            },
        ],
    }
