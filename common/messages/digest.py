"""The weekly digest as Block Kit (for Slack) and as plain text (for `relmon digest --dry-run`).

Pure functions of a `common.reports.stats.Report` plus the links and the quotes the caller may show: the
caller has already applied the privacy rule, so every quote passed in may be printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from zoneinfo import ZoneInfo

from common.messages import blocks as block_kit
from common.messages import rates
from common.messages.agreement import channel_parts, judge_lines
from common.messages.blocks import WEEK_BEFORE, channel_ref, escape, no_data
from common.messages.fixes import FixLine, fixes_blocks, fixes_text
from common.messages.golden import digest_line
from common.messages.outcomes import NOTE as OUTCOME_NOTE
from common.messages.outcomes import outcome_lines
from common.messages.readable import Readable
from common.messages.sampling import sampled_text
from common.messages.team_judges import shown_judges, team_judge_line, team_section
from common.messages.topics import cost_text, fix_first_blocks, topics_text
from common.messages.trust import TRUST_HEADING, precision_text, trust_lines, trust_section
from common.reports.costs import Prices
from common.reports.intervals import MIN_N
from common.reports.stats import Change, ChannelStats, JudgeStats, Report, WorstAnswer
from common.reports.topics import TopicsView

MAX_BLOCKS = block_kit.MAX_BLOCKS  # Slack's limit per message
MAX_CHANNEL_SECTIONS = 30  # leaves room for the header, overall figures and footer
QUOTE_CHARS = 160
SECTION_CHARS = 2900  # under the 3,000 a section's text may hold

Quotes = Mapping[int, tuple[str | None, str | None]]  # pair id -> (question, answer) that may be shown
Links = Mapping[int, str]  # pair id -> permalink


# Small formatters shared with the App Home ------------------------------------------------------


def mean_text(stats: JudgeStats | None) -> str:
    mean = stats.weighted_mean if stats is not None else None  # reweighted when the answers were sampled
    if stats is None or mean is None:
        return "no scores"
    return f"{mean:.2f} / {stats.scale[1]}"


def threshold_text(stats: JudgeStats) -> str:
    if not stats.thresholds:
        return "at or below threshold"
    return "≤ " + "/".join(f"{t:g}" for t in stats.thresholds)


def judge_line(stats: JudgeStats, change: Change | None = None, before: str = WEEK_BEFORE) -> str:
    """`mean 3.10 / 4 (2.95–3.24, n=48), no clear change (n=48 vs 40) · 12% ≤ 2 (6–24%, n=48), ▼ 31% → 12%
    (significant)`: each figure with its 95% interval and n, "too few (n=4)" below the minimum, a change only
    when significant (`common.messages.rates`); `· no data the week before` when the week (`before`: the period)
    compared with had no scores. A team's judge leads with its pass rate (`common.messages.team_judges`)."""
    if stats.team:
        return team_judge_line(stats, change, before)
    if stats.scored == 0:
        extra = f" · {stats.nulls} unscorable" if stats.nulls else ""
        return f"no scores{extra}"
    mean = f"mean {rates.mean_text(stats.mean_estimate, stats.scale[1])}"
    low = rates.rate_text(stats.low_estimate, threshold_text(stats))
    # A figure already "too few" this period says nothing more of its change.
    if change is not None and change.mean_shift is not None and change.mean_shift.after.enough:
        mean += f", {rates.shift_text(change.mean_shift, share=False)}"
    if change is not None and change.share_shift is not None and change.share_shift.after.enough:
        low += f", {rates.shift_text(change.share_shift)}"
    parts = [mean, low]
    if change is not None and change.no_previous:
        parts.append(no_data(before))
    if stats.nulls:
        parts.append(f"{stats.nulls} unscorable")
    return " · ".join(parts)


def distribution_line(stats: JudgeStats) -> str:
    """`scores 0:12 · 1:22 · 2:18 · 3:44 · 4:58`: answers per score, every score of the scale shown."""
    return "scores " + " · ".join(f"{score}:{count}" for score, count in stats.distribution.items())


def money(usd: float) -> str:
    return f"${usd:.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.4f}"


def period_text(report: Report) -> str:
    tz = ZoneInfo(report.period.timezone)
    start = report.period.start.astimezone(tz)
    end = report.period.end.astimezone(tz)
    days = report.period.compared_days
    before = f"the {days} day{'s' if days != 1 else ''} before"
    return f"{start:%a %d %b %H:%M} – {end:%a %d %b %Y %H:%M} {report.period.timezone}, compared with {before}"


def title_of(report: Report) -> str:
    """What the report is: the week's digest, or the history a backfill or an import read (its own title)."""
    return report.period.title or f"Weekly digest · {report.period.week_key}"


def _golden_line(report: Report) -> str:
    span = "this week" if report.period.title is None else "in this period"
    return digest_line(report.golden, report.period.timezone, span=span)


def _nothing_captured(report: Report) -> str:
    if report.period.title is None:
        return "No answers were captured in the last 7 days."
    return "No answers were found in this period."


# Pieces ---------------------------------------------------------------------------------------------


def _volume_line(stats: ChannelStats) -> str:
    parts = [f"{stats.seen} seen", f"{stats.judged} judged"]
    if stats.skipped_sampling:
        parts.append(f"{stats.skipped_sampling} skipped by sampling")
    if stats.skipped_budget:
        parts.append(f"{stats.skipped_budget} over the daily budget")
    if stats.not_judged:
        parts.append(f"{stats.not_judged} without a question")
    if stats.waiting:
        parts.append(f"{stats.waiting} still waiting")
    sampled = sampled_text(stats.sampled_share)
    if sampled:
        parts.append(sampled)
    return " · ".join(parts)


def _agreement_line(stats: ChannelStats) -> str:
    votes = stats.votes_right + stats.votes_wrong
    if not votes:
        return "no votes yet"
    found = stats.agreement_estimate
    if not found.enough:
        return f"{rates.too_few(votes)} votes to say how often the judge was right"
    return f"{rates.rate_text(found)} of votes say the judge was right"


def _usage_line(stats: ChannelStats) -> str:
    tokens = stats.tokens
    cached = f" of which {tokens.cached:,} cached" if tokens.cached else ""
    if tokens.cache_unknown:  # the server did not say: priced as uncached, and said so
        cached += f"{',' if cached else ' of which'} {tokens.cache_unknown:,} not known to be cached or not"
    spent = f"{tokens.prompt:,} in{cached}, {tokens.completion:,} out"
    line = f"{tokens.total:,} tokens ({spent}) · ≈ {money(tokens.cost_usd)}"
    if tokens.cache_unknown:
        line += " (at most: input of unknown caching priced in full)"
    if tokens.calls_without_usage:
        calls = tokens.calls_without_usage
        line += f" · {calls} call{'s' if calls != 1 else ''} reported no token counts (not included)"
    return line


def price_line(prices: Prices) -> str:
    """The prices the cost estimate uses."""
    return (
        f"Cost estimated at ${prices.input_per_million:g} / ${prices.cached_input:g} / ${prices.output_per_million:g} "
        "per million input / cached input / output tokens."
    )


def _short_usage(stats: ChannelStats) -> str:
    """`12,345 tokens ≈ $0.02`: one channel's share of the bill, short enough for its section."""
    return f"LLM {stats.tokens.total:,} tokens ≈ {money(stats.tokens.cost_usd)}"


def _worst_line(
    worst: WorstAnswer, links: Links, quotes: Quotes, *, slack: bool = True, readable: Readable | None = None
) -> str:
    """One of the worst answers: in Slack its channel mention and link; in a terminal (`slack` False) its channel's
    name and the answer's local time (`readable`), or the link when there is one."""
    scale = f"{worst.score:g}/{worst.max_score:g}" if worst.max_score is not None else f"{worst.score:g}"
    link = links.get(worst.pair_id)
    if slack:
        where = channel_ref(worst.channel_id)
        head = f"• *{scale}* {worst.judge} in {where}" + (f" · <{link}|view answer>" if link else "")
    else:
        readable = readable or Readable()
        ref = link or readable.time(worst.answer_ts)
        head = f"- {scale} {worst.judge} in {readable.channel(worst.channel_id)} ({ref})"
    quote = quotes.get(worst.pair_id)
    if not quote:
        return head
    question, answer = quote
    lines = [head]
    for label, text in (("Q", question), ("A", answer)):
        if text:
            body = block_kit.one_line(text, QUOTE_CHARS)
            lines.append(f">_{label}:_ {escape(body)}" if slack else f"    {label}: {body}")
    return "\n".join(lines)


def _overall_fields(report: Report, topics: TopicsView | None = None) -> list[dict]:
    overall = report.overall
    fields = [
        {"type": "mrkdwn", "text": f"*Answers*\n{_volume_line(overall)}"},
    ]
    seeds = [(name, stats) for name, stats in overall.judges.items() if not stats.team]
    for name, stats in seeds[:3]:  # the team's judges have a section of their own (`team_section`)
        text = f"*{name.capitalize()}*\n{judge_line(stats, report.change(overall, name), report.period.before)}"
        if stats.scored:
            text += f"\n{distribution_line(stats)}"
        fields.append({"type": "mrkdwn", "text": block_kit.shorten(text, block_kit.MAX_FIELD_TEXT)})
    errors = overall.errors
    errored = f" ({overall.errored} answers unjudged)" if overall.errored else ""
    fields.append({"type": "mrkdwn", "text": f"*Judge errors*\n{errors}{errored}"})
    fields.append({"type": "mrkdwn", "text": f"*Agreement with the judge*\n{_agreement_line(overall)}"})
    topics_cost = cost_text(topics) if topics is not None else None
    usage = _usage_line(overall) + (f"\n{topics_cost}" if topics_cost else "")
    fields.append({"type": "mrkdwn", "text": f"*LLM usage*\n{usage}"})
    outcomes = outcome_lines(report.outcomes, None, report.period.before)
    if outcomes:
        text = block_kit.shorten("*Outcomes*\n" + "\n".join(outcomes), block_kit.MAX_FIELD_TEXT)
        fields.append({"type": "mrkdwn", "text": text})
    return fields[:10]


def _channel_section(report: Report, stats: ChannelStats, links: Links, quotes: Quotes) -> dict:
    lines = [f"*{channel_ref(stats.channel_id)}* — {_volume_line(stats)}"]
    for name in shown_judges(stats):
        judge = stats.judges[name]
        line = f"{name}: {judge_line(judge, report.change(stats, name), report.period.before)}"
        # The distribution on the judge's own line keeps a channel's section short when there are many.
        lines.append(line + (f" · {distribution_line(judge)}" if judge.scored else ""))
    extras = []
    if stats.errors:
        extras.append(f"{stats.errors} judge error{'s' if stats.errors != 1 else ''}")
    if stats.votes_right + stats.votes_wrong:
        extras.append(f"agreement {rates.rate_text(stats.agreement_estimate)}")
    for name in stats.judges:
        found = report.trust.precision_of(stats.channel_id, name)
        if found is not None and found.voted:
            extras.append(f"{name} alerts: {precision_text(found)}")
    extras += channel_parts(report.agreement, stats.channel_id, stats.judges, report.period.before)
    if stats.tokens.total:
        extras.append(_short_usage(stats))
    if extras:
        lines.append(" · ".join(extras))
    lines += [f"outcomes: {line}" for line in outcome_lines(report.outcomes, stats.channel_id, report.period.before)]
    if stats.worst:
        lines.append("Worst:")
        lines += [_worst_line(w, links, quotes) for w in stats.worst]
    return {"type": "section", "text": {"type": "mrkdwn", "text": _fit("\n".join(lines))}}


def _worst_section(report: Report, links: Links, quotes: Quotes) -> dict:
    worst = "\n".join(_worst_line(w, links, quotes) for w in report.overall.worst)
    return {"type": "section", "text": {"type": "mrkdwn", "text": _fit(f"*Worst answers*\n{worst}")}}


def _more_channels(count: int) -> dict:
    text = f"…and {count} more channel{'s' if count != 1 else ''}: see `/judge stats #channel` or the App Home"
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text}]}


def _fit(text: str, limit: int = SECTION_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _within_budget(report: Report, links: Links, quotes: Quotes, *, budget: int, room: int) -> list[dict]:
    """The week's worst answers and the channels' sections, in at most `room` blocks and `budget` characters of
    text (Slack refuses a message whose blocks hold too much text in all: `block_kit.MAX_MESSAGE_TEXT`). The
    week's worst answers always stay whole; what matters least goes first: the quotes of each channel's worst
    answers (they keep the score and the link), then the last channels, counted in a line that says where to
    see them."""
    channels = report.channels
    if _sole_channel(report) is not None:  # its worst answers are the week's, shown just above: not twice
        channels = [replace(stats, worst=[]) for stats in channels]
    more = _more_channels(len(channels))
    head = [_worst_section(report, links, quotes)] if report.overall.worst else []
    if block_kit.text_length([*head, more]) > budget:  # not with Slack's sizes, but the digest must go out
        head = [_worst_section(report, links, {})]
    head.append({"type": "divider"})
    most = min(MAX_CHANNEL_SECTIONS, room - len(head) - 1)  # with a block left for `more`
    for channel_quotes in (quotes, {}):
        sections = [_channel_section(report, stats, links, channel_quotes) for stats in channels]
        fits = len(sections) <= min(MAX_CHANNEL_SECTIONS, room - len(head))
        if fits and block_kit.text_length(head + sections) <= budget:
            return head + sections
        if len(sections) > most and block_kit.text_length([*head, *sections[:most], more]) <= budget:
            break  # only the number of blocks leaves channels out: keep their quotes
    left = budget - block_kit.text_length([*head, more])
    shown: list[dict] = []
    for section in sections[:most]:
        left -= block_kit.text_length(section)
        if left < 0:
            break
        shown.append(section)
    return [*head, *shown, _more_channels(len(channels) - len(shown))]


# Messages --------------------------------------------------------------------------------------------


def digest_message(
    report: Report,
    links: Links,
    quotes: Quotes,
    prices: Prices | None = None,
    *,
    chart_in_thread: bool = False,
    topics: TopicsView | None = None,
    fixes: Sequence[FixLine] = (),
) -> dict:
    """`{"text", "blocks"}` for chat.postMessage (at most 50 blocks). `chart_in_thread`: the chart follows
    as a reply, and the message says where to find it. `topics`: "What to fix first" opens it; `fixes`: the
    followed fixes' verdicts ("Fixes") follow it."""
    title = title_of(report)
    sole = _sole_channel(report)
    period = period_text(report) + (f" · {channel_ref(sole.channel_id)} only" if sole is not None else "")
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": title}},
        {"type": "context", "elements": [{"type": "mrkdwn", "text": period}]},
    ]
    if report.empty:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _nothing_captured(report)}})
        if report.golden is not None:
            blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": _golden_line(report)}})
        return {"text": f"{title}: no answers captured", "blocks": blocks}
    if topics is not None:
        blocks += fix_first_blocks(topics)
    blocks += fixes_blocks(fixes)
    blocks.append({"type": "section", "fields": _overall_fields(report, topics)})
    team = team_section(report, channel_ref)
    if team is not None:
        blocks.append(team)
    judges = list(report.overall.judges)
    agreement = judge_lines(report.agreement, judges, links, before=report.period.before)
    trust = trust_section(report.trust, judges, agreement, report.period.timezone)
    tail = [] if trust is None else [trust]
    if chart_in_thread:
        resolution = ", the daily resolution rate" if report.outcomes.any_closed else ""
        chart = f":chart_with_upwards_trend: The chart (daily mean {report.primary_judge}, answers per day{resolution} "
        chart += "and the week's score distribution"
        if topics is not None and topics.topics:
            compared = any(line.previous is not None for line in topics.topics)
            chart += f", failed questions by topic {f'against {WEEK_BEFORE}' if compared else f'({no_data()})'}"
        chart += ") is in this message's thread."
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": chart}]})
    footer = f"Changes are against {report.period.before}. "
    footer += f"Figures show their 95% interval and n; ▲/▼ marks only a significant change; under {MIN_N}: too few. "
    footer += "Shares count scores at or below each channel's alert threshold."
    if report.outcomes.any_closed:
        footer += " " + OUTCOME_NOTE
    if prices is not None:
        footer += " " + price_line(prices)
    if report.golden is not None:
        tail.append({"type": "section", "text": {"type": "mrkdwn", "text": _golden_line(report)}})
    tail.append({"type": "context", "elements": [{"type": "mrkdwn", "text": footer}]})
    blocks += _within_budget(
        report,
        links,
        quotes,
        budget=block_kit.MAX_MESSAGE_TEXT - block_kit.text_length([*blocks, *tail]),
        room=MAX_BLOCKS - len(blocks) - len(tail),
    )
    blocks += tail
    assert len(blocks) <= MAX_BLOCKS
    overall = report.overall
    main = overall.judge(report.primary_judge)
    summary = f"{title}: {overall.judged} of {overall.seen} answers judged"
    if main is not None and main.mean is not None:
        summary += f", mean {report.primary_judge} {mean_text(main)}"
    return {"text": summary, "blocks": blocks}


def _labels(channels: list[ChannelStats], readable: Readable) -> dict[str | None, str]:
    """Each channel's heading: its name, with its ID too when two channels of the report share a name."""
    shown = {stats.channel_id: readable.channel(stats.channel_id) for stats in channels}
    counts = Counter(shown.values())
    return {c: f"{label} ({c})" if counts[label] > 1 else label for c, label in shown.items()}


def _sole_channel(report: Report) -> ChannelStats | None:
    """The report's one channel when every figure of "all channels" is that channel's: its block is printed
    once, not under both headings."""
    if len(report.channels) != 1:
        return None
    only = report.channels[0]
    return only if replace(report.overall, channel_id=only.channel_id) == only else None


def digest_text(
    report: Report,
    links: Links,
    quotes: Quotes,
    prices: Prices | None = None,
    topics: TopicsView | None = None,
    *,
    readable: Readable | None = None,
    fixes: Sequence[FixLine] = (),
) -> str:
    """The same digest for a terminal: channels by name and answers by local time (`readable`: the names known;
    the report's own zone), each channel's block once."""
    readable = readable or Readable(report.period.timezone)
    out = [title_of(report), period_text(report), ""]
    if report.empty:
        out.append(_nothing_captured(report))
        return "\n".join(out) + "\n"
    if topics is not None:
        out += [topics_text(topics)]
    if fixes:
        out += ["== Fixes ==", *(fixes_text(line) for line in fixes), ""]

    def block(stats: ChannelStats) -> list[str]:
        lines = [f"Answers: {_volume_line(stats)}"]
        for name in shown_judges(stats):
            judge = stats.judges[name]
            lines.append(f"{name}: {judge_line(judge, report.change(stats, name), report.period.before)}")
            if judge.scored:
                lines.append(f"  {distribution_line(judge)}")
        lines.append(f"Judge errors: {stats.errors}")
        lines.append(f"Agreement: {_agreement_line(stats)}")
        lines.append(f"LLM usage: {_usage_line(stats)}")
        outcomes = outcome_lines(report.outcomes, stats.channel_id, report.period.before)
        lines += [f"Outcomes: {line}" for line in outcomes]
        if stats.worst:
            lines.append("Worst answers:")
            lines += [_worst_line(w, links, quotes, slack=False, readable=readable) for w in stats.worst]
        return lines

    labels = _labels(report.channels, readable)
    sole = _sole_channel(report)
    out.append("== All channels ==" if sole is None else f"== All channels: {labels[sole.channel_id]} only ==")
    out += block(report.overall)
    judges = list(report.overall.judges)
    agreement = judge_lines(report.agreement, judges, links, slack=False, before=report.period.before)
    trust = trust_lines(report.trust, judges, slack=False, agreement=agreement, timezone=report.period.timezone)
    if trust:
        out += ["", f"== {TRUST_HEADING} ==", *trust]
    for stats in report.channels if sole is None else []:
        out += ["", f"== {labels[stats.channel_id]} =="]
        out += block(stats)
    if report.golden is not None:
        out += ["", _golden_line(report).replace("*", "")]
    notes = [price_line(prices)] if prices is not None else []
    notes += [OUTCOME_NOTE] if report.outcomes.any_closed else []
    if notes:
        out += ["", *notes]
    return "\n".join(out) + "\n"
