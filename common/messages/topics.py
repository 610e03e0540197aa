""" "What to fix first" as Block Kit (the digest, App Home) and as plain text (`relmon topics`, the dry run).

Pure functions of a `common.reports.topics.TopicsView`: the caller has applied the privacy rule (the topics shown,
the examples that may be quoted)."""

from __future__ import annotations

from common.messages import blocks as block_kit
from common.messages import rates, resolution
from common.messages.blocks import escape, no_data, one_line
from common.messages.fixes import mark_buttons
from common.reports.intervals import Estimate, proportion
from common.reports.topics import (
    TOP_TOPICS,
    FailedLine,
    GapLine,
    TooFew,
    TopicLine,
    TopicsView,
    failure_change,
    failure_of,
)
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, REASK

HEADING = "What to fix first"
EXAMPLE_CHARS = 160
ANSWER_CHARS = 200
WITHHELD = "example from a private channel: not quoted here"
NOT_QUOTED = "a question from a private channel: not quoted here"
MARKED_ON_HOME = 5  # App Home's "Mark fixed" buttons: its first topics (one actions block)
TOP_FAILED = 10  # failed questions a message lists when there were too few to group (the terminal lists them all)
# Why a question failed (`topics.questions.REASONS`), as a reader says it.
REASON_WORDS = {
    "low_score": "low score",
    "missed_failure": "missed failure",
    REASK: "re-asked",
    ESCALATION: "escalated",
    HUMAN_TAKEOVER: "taken over",
    NEGATIVE_REACTION: "👎",
    "no_document": "no document answers it",
}


def figures_text(line: TopicLine) -> str:
    """`12 failed of 31 questions: 39% (24–56%, n=31), no clear change (n=31 vs 29) · resolved without help 23%
    (10–44%, n=22) · resolved by a teammate … · escalated … · unresolved … · relevancy 1.4 / 4 (n=20)`: the failure
    rate with its interval and a change only when significant (`common.messages.rates`), `(too few for a rate)` under
    10 questions, `(no data the week before)` instead of the change when the week before had no questions to compare
    with; the resolution tiers (`common.messages.resolution`), or the single resolved share of a run stored before
    them."""
    figures = line.figures
    failed = f"{figures.failed} failed of {figures.questions} question{'s' if figures.questions != 1 else ''}"
    rate = failure_of(figures)  # weighted under sampling: its n is the questions judged (common.reports.weighted)
    failed += f": {rates.rate_text(rate)}" if rate.enough else " (too few for a rate)"
    if line.previous is None:
        failed += f" ({no_data()})"
    elif rate.enough:
        failed += f", {rates.shift_text(failure_change(line.previous, figures))}"
    parts = [failed]
    if figures.tiers and sum(figures.tiers.values()):
        parts.append(resolution.topic_text(figures.tiers))
    elif figures.resolution_rate is not None:  # a run stored before the tiers
        parts.append(rates.rate_text(proportion(figures.resolved, figures.decided), "resolved"))
    if figures.mean_relevancy is not None:
        relevancy = Estimate(figures.mean_relevancy, figures.relevancy_scored, None)
        parts.append(f"relevancy {rates.mean_text(relevancy, 4, digits=1)}")
    return " · ".join(parts)


def summary_text(view: TopicsView) -> str:
    """`342 questions in 12 topics, 72 left out (outliers) · grouped with text-embedding-3-small`."""
    topics = len(view.topics) + view.hidden
    text = f"{view.questions:,} questions in {topics} topics, {view.left_out:,} left out (outliers)"
    if view.hidden:
        text += f" · {view.hidden} topic{'s' if view.hidden != 1 else ''} of private channels not shown here"
    return text + f" · grouped with {view.embedding}"


def cost_text(view: TopicsView) -> str | None:
    if view.cost is None:
        return None
    usd = view.cost.usd
    money = f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"
    return f"topics: {view.cost.calls} ≈ {money}"


def too_few_text(too_few: TooFew) -> str:
    """`12 questions in this period: too few to group into topics (needs 30); the 3 failed ones are listed below.`"""
    questions = too_few.questions
    text = (
        f"{questions} question{'s' if questions != 1 else ''} in this period: too few to group into topics "
        f"(needs {too_few.needed})"
    )
    failed = len(too_few.failed)
    if failed == 1:
        text += "; the 1 failed one is listed below"
    elif failed:
        text += f"; the {failed} failed ones are listed below"
    elif not too_few.hidden:
        text += "; none of them failed"
    if too_few.hidden:
        text += f" ({too_few.hidden} failed one{'s' if too_few.hidden != 1 else ''} of private channels not shown here)"
    return text + "."


def reasons_text(line: FailedLine) -> str:
    return ", ".join(REASON_WORDS.get(reason, reason) for reason in line.reasons)


def _failed_mrkdwn(line: FailedLine) -> str:
    question = f"_{escape(one_line(line.text, EXAMPLE_CHARS))}_" if line.text else f"_({NOT_QUOTED})_"
    return f"• {question} ({escape(reasons_text(line))})"


def _group_heading(lines: tuple[FailedLine, ...], index: int) -> str | None:
    """The heading before the `index`th failed line when a group of them sharing a keyword starts there."""
    group = lines[index].group
    if group is None or (index and lines[index - 1].group == group):
        return None
    count = sum(1 for line in lines if line.group == group)
    return f"{group} ({count} failed)"


def _too_few_mrkdwn(too_few: TooFew, *, top: int = TOP_FAILED) -> str:
    lines = [escape(too_few_text(too_few))]
    for index, line in enumerate(too_few.failed[:top]):
        heading = _group_heading(too_few.failed, index)
        if heading:
            lines.append(f"*{escape(heading)}*")
        lines.append(_failed_mrkdwn(line))
    more = len(too_few.failed) - top
    if more > 0:
        lines.append(f"…and {more} more: `relmon topics` lists them all")
    return "\n".join(lines)


def _topic_mrkdwn(rank: int, line: TopicLine) -> str:
    text = f"{rank}. *{escape(line.name)}*: {figures_text(line)}"
    if line.example:
        text += f"\n>_e.g._ {escape(one_line(line.example, EXAMPLE_CHARS))}"
    elif line.example_withheld:
        text += f"\n>_({WITHHELD})_"
    return text


def _gap_mrkdwn(gap: GapLine) -> str:
    asked = "asked once" if gap.asked == 1 else f"asked {gap.asked} times"
    text = f"• _{escape(one_line(gap.question, EXAMPLE_CHARS))}_ ({escape(gap.topic)}, {asked})"
    if gap.answer:
        text += f"\n>a teammate answered: {escape(one_line(gap.answer, ANSWER_CHARS))}"
    else:
        text += "\n>no document answers it"
    return text


def fix_first_blocks(view: TopicsView, *, top: int = TOP_TOPICS) -> list[dict]:
    """The digest's opening: the top topics with their figures and one example each, then the top gaps."""
    if view.too_few is not None:
        out = [block_kit.section(f"*{HEADING}*\n{_too_few_mrkdwn(view.too_few)}")]
        if view.notes:
            out.append(block_kit.context(escape(" · ".join(view.notes))))
        return [*out, block_kit.divider()]
    if not view.topics:
        why = " ".join(view.notes) or "No topics to show here this week."
        if view.hidden:
            why = f"{why} {summary_text(view)}."
        return [block_kit.section(f"*{HEADING}*\n{escape(why)}"), block_kit.divider()]
    lines = [f"*{HEADING}*"] + [_topic_mrkdwn(rank, line) for rank, line in enumerate(view.topics[:top], start=1)]
    out = [block_kit.section("\n".join(lines)), *mark_buttons([(t.key, t.name) for t in view.topics[:top]])]
    if view.gaps:
        gaps = ["*Knowledge gaps* (draft entries: `relmon gaps --format markdown`)"]
        out.append(block_kit.section("\n".join(gaps + [_gap_mrkdwn(gap) for gap in view.gaps])))
    notes = [summary_text(view), *view.notes]
    out.append(block_kit.context(escape(" · ".join(notes))))
    out.append(block_kit.divider())
    return out


def home_blocks(view: TopicsView | None, *, top: int = 10) -> list[dict]:
    """App Home's topics of the last seven days."""
    title = block_kit.header("Topics of the last 7 days")
    if view is None:
        return [title, block_kit.section("No topics yet: they are grouped daily and with each weekly digest.")]
    if view.too_few is not None:
        return [title, block_kit.section(_too_few_mrkdwn(view.too_few, top=top))]
    if not view.topics:
        return [title, block_kit.section(escape(" ".join(view.notes) or "No topics in the last 7 days."))]
    lines = [_topic_mrkdwn(rank, line) for rank, line in enumerate(view.topics[:top], start=1)]
    return [
        title,
        block_kit.section("\n".join(lines)),
        *mark_buttons([(t.key, t.name) for t in view.topics[:MARKED_ON_HOME]]),
        block_kit.context(escape(" · ".join([summary_text(view), *view.notes]))),
    ]


def topics_text(view: TopicsView) -> str:
    """Every topic, for a terminal; when there were too few to group, every failed question."""
    if view.too_few is not None:
        out = [f"== {HEADING} ==", too_few_text(view.too_few), *view.notes, ""]
        for index, line in enumerate(view.too_few.failed):
            heading = _group_heading(view.too_few.failed, index)
            if heading:
                out.append(f"{heading}:")
            out.append(f"- {one_line(line.text, EXAMPLE_CHARS) if line.text else f'({NOT_QUOTED})'}")
            out.append(f"  failed: {reasons_text(line)}")
        cost = cost_text(view)
        return "\n".join([*out, *([cost] if cost else [])]) + "\n"
    out = [f"== {HEADING} ==", summary_text(view), *view.notes, ""]
    for rank, line in enumerate(view.topics, start=1):
        out.append(f"{rank}. {line.name}: {figures_text(line)}")
        if line.example:
            out.append(f"   e.g. {one_line(line.example, EXAMPLE_CHARS)}")
    if view.gaps:
        out += ["", "Knowledge gaps:"]
        for gap in view.gaps:
            answer = one_line(gap.answer, ANSWER_CHARS) if gap.answer else "(no document answers it)"
            out.append(f"- {one_line(gap.question, EXAMPLE_CHARS)} [{gap.topic}, asked {gap.asked}×] → {answer}")
    cost = cost_text(view)
    if cost:
        out.append(cost)
    return "\n".join(out) + "\n"
