"""What a place shows of the topics ("What to fix first"): pure, from a fresh `TopicsReport` (the digest, the CLI)
or a stored run (App Home), with the audience's rules passed in.

`audience_sees(channel)` says whether the place's people may see a private channel's topics (they are its
members, or the place is where that channel's own rule sends its alerts): a topic made only of private-channel
questions nobody there may see is neither named nor counted. `may_quote(question)` says whether a question's text
may be shown there (common.privacy): an example that may not is replaced by a note. `place` says who reads the
names (`topics.audience`): a name made from private channels not every reader there may read shows as the neutral
name, in the list, the gaps and the chart alike."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.reports.intervals import Estimate, Shift, proportion, proportion_change
from common.reports.weighted import Weights, weighted_proportion, weighted_proportion_change
from topics.audience import Place, shown_name
from topics.figures import Figures, too_few_note
from topics.small_groups import FailedGroup

if TYPE_CHECKING:  # numpy and scikit-learn stay out of the processes that only show a stored run (App Home)
    from store.topics import Spend
    from topics.build import TopicsReport
    from topics.gaps import Gap
    from topics.questions import Question


def rate_weights_of(figures: Figures) -> Weights:
    """The failure rate's weights: a sampled topic's (1/π each judged question), else every question's 1."""
    stored = Weights.of_json(figures.rate_weights)
    return stored if stored is not None else Weights.of_share(figures.failed, figures.questions)


def failure_of(figures: Figures) -> Estimate:
    """A topic's failure rate with its interval: under sampling the Hájek share of its judged questions with the
    interval at its effective n (common.reports.weighted); else failed of questions (Wilson)."""
    if figures.rate_weights is None:
        return proportion(figures.failed, figures.questions)
    return weighted_proportion(rate_weights_of(figures))


def failure_change(before: Figures, after: Figures) -> Shift:
    """The failure rate's change against the week before, weighted when either week was sampled."""
    if before.rate_weights is None and after.rate_weights is None:
        return proportion_change((before.failed, before.questions), (after.failed, after.questions))
    return weighted_proportion_change(rate_weights_of(before), rate_weights_of(after))


TOP_TOPICS = 3
TOP_GAPS = 3


@dataclass(frozen=True)
class TopicLine:
    name: str
    figures: Figures
    previous: Figures | None
    example: str | None  # a question that may be quoted here, or None
    example_withheld: bool = False  # there was an example, from a channel whose text is not quoted here
    key: str | None = None  # the topic's stable key (its "Mark fixed" button's value)


@dataclass(frozen=True)
class TopicBar:
    """One topic in the digest's chart: its failed questions this week and the week before."""

    name: str
    failed: int
    previous_failed: int | None


def chart_bars(view: TopicsView, top: int = 8) -> list[TopicBar]:
    return [
        TopicBar(line.name, line.figures.failed, line.previous.failed if line.previous else None)
        for line in view.topics[:top]
    ]


@dataclass(frozen=True)
class GapLine:
    topic: str
    question: str
    answer: str | None
    asked: int


@dataclass(frozen=True)
class FailedLine:
    """A failed question of a period with too few to group, shown on its own."""

    text: str | None  # None: from a channel whose text is not quoted here
    reasons: tuple[str, ...]  # `topics.questions.REASONS`
    group: str | None = None  # the keyword it shares with the failed lines next to it (None: on its own)


@dataclass(frozen=True)
class TooFew:
    """The period had too few questions to group into topics: how many, how many grouping needs, and its failed
    questions shown here (`hidden`: failed ones of private channels whose people are not here)."""

    questions: int
    needed: int
    failed: tuple[FailedLine, ...]
    hidden: int = 0


@dataclass(frozen=True)
class SpendSummary:
    calls: str  # "2 embedding calls (4,321 tokens), 9 naming calls (1,234 tokens)"
    usd: float


@dataclass(frozen=True)
class TopicsView:
    questions: int
    left_out: int
    embedding: str
    topics: tuple[TopicLine, ...]  # every topic shown here, ranked
    gaps: tuple[GapLine, ...] = ()
    notes: tuple[str, ...] = ()
    hidden: int = 0  # topics of private channels not shown here
    cost: SpendSummary | None = None  # the topics' LLM spend, for the cost line
    too_few: TooFew | None = None  # too few questions to group: said first, with the failed ones


def _shown(
    channels: Sequence[str], private: Sequence[str], only_private: bool, audience: Callable[[str], bool]
) -> bool:
    return not only_private or any(audience(channel) for channel in private or channels)


def _example(examples: Sequence[Question], may_quote: Callable[[Question], bool]) -> tuple[str | None, bool]:
    for question in examples:
        if may_quote(question):
            return question.text, False
    return None, bool(examples)


def view_of(
    report: TopicsReport,
    *,
    audience_sees: Callable[[str], bool],
    may_quote: Callable[[Question], bool],
    place: Place | None = None,
    cost: SpendSummary | None = None,
) -> TopicsView:
    place = place or Place()
    lines, hidden, hidden_questions = [], 0, 0
    shown_gaps: list[tuple[str, Gap]] = []
    for topic in report.topics:
        if not _shown(sorted(topic.channels), sorted(topic.private_channels), topic.only_private, audience_sees):
            hidden += 1
            hidden_questions += topic.figures.questions  # not counted here either
            continue
        example, withheld = _example(topic.examples, may_quote)
        name = shown_name(topic.name, topic.name_sources, place)
        lines.append(TopicLine(name, topic.figures, topic.previous, example, withheld, topic.key))
        shown_gaps += [(name, gap) for gap in topic.gaps if may_quote(gap.question)]
    shown_gaps.sort(key=lambda item: (-item[1].asked, item[1].kind != "teammate_answer"))
    gaps = tuple(GapLine(name, g.question.text, g.answer, g.asked) for name, g in shown_gaps[:TOP_GAPS])
    questions = report.questions - hidden_questions
    notes, too_few = report.notes, None
    if report.too_few:
        too_few = _too_few(report, audience_sees, may_quote)
        notes = tuple(note for note in notes if note != too_few_note(report.questions, report.needed))
    return TopicsView(questions, report.left_out, report.embedding, tuple(lines), gaps, notes, hidden, cost, too_few)


def _too_few(
    report: TopicsReport, audience_sees: Callable[[str], bool], may_quote: Callable[[Question], bool]
) -> TooFew:
    """The failed questions of a period too small to group, as this place may see them: a private channel's whose
    people are not here only counted, a text quoted only where the quoting rule allows."""
    shown, hidden = [], 0
    groups = report.failed_groups or tuple(FailedGroup(None, (q,)) for q in report.failed_questions)
    for group in groups:
        here = [q for q in group.questions if not q.private or (q.channel_id and audience_sees(q.channel_id))]
        hidden += len(group.questions) - len(here)
        # A keyword is a question's word: named only where every question of its group is quoted.
        keyword = group.keyword if len(here) > 1 and all(may_quote(q) for q in here) else None
        shown += [FailedLine(q.text if may_quote(q) else None, q.failures, keyword) for q in here]
    return TooFew(report.questions, report.needed, tuple(shown), hidden)


def stored_view(
    run,
    periods: Sequence,
    texts: Mapping[int, tuple[str | None, bool, str | None]],
    *,
    audience_sees: Callable[[str], bool],
    may_quote: Callable[[str | None, bool], bool],
    place: Place | None = None,
) -> TopicsView:
    """The view of a stored run (`store.topics.latest_run`); `texts`: pair id → (question, private, channel)."""
    place = place or Place()
    lines, hidden, hidden_questions = [], 0, 0
    for period in periods:
        if not _shown(period.channels, period.private_channels, period.only_private, audience_sees):
            hidden += 1
            hidden_questions += period.questions
            continue
        example, withheld = None, False
        for pair_id in period.examples:
            text, private, channel = texts.get(pair_id, (None, False, None))
            if not text:
                continue
            if may_quote(channel, private):
                example, withheld = text, False
                break
            withheld = True
        relevancy = (period.mean_relevancy, 1) if period.mean_relevancy is not None else (0.0, 0)
        figures = Figures(
            period.questions,
            period.failed,
            period.resolved,
            period.decided,
            *relevancy,
            tiers=dict(period.tiers or {}),
            rate_weights=getattr(period, "rate_weights", None),
        )
        previous = None
        if period.previous_questions is not None:
            weights = getattr(period, "previous_rate_weights", None)
            previous = Figures(period.previous_questions, period.previous_failed or 0, rate_weights=weights)
        sources = tuple(period.name_sources) if period.name_sources is not None else None
        name = shown_name(period.name, sources, place)
        lines.append(TopicLine(name, figures, previous, example, withheld, period.topic_key))
    shown = run.questions - hidden_questions
    return TopicsView(shown, run.left_out, run.embedding, tuple(lines), (), tuple(run.notes or ()), hidden)


def spend_summary(
    spend: Sequence[Spend], *, embedding_price: float, input_price: float, output_price: float
) -> SpendSummary | None:
    """What the topics' LLM calls cost (embeddings at their price, naming at the judge model's), None when none."""
    if not spend:
        return None
    parts, cost = [], 0.0
    for item in spend:
        tokens = item.prompt_tokens + item.completion_tokens
        parts.append(f"{item.calls:,} {item.kind} call{'s' if item.calls != 1 else ''} ({tokens:,} tokens)")
        if item.kind == "embedding":
            cost += item.prompt_tokens / 1e6 * embedding_price
        else:
            cost += item.prompt_tokens / 1e6 * input_price + item.completion_tokens / 1e6 * output_price
    return SpendSummary(", ".join(parts), cost)
