"""A change alert as Block Kit: a group's failure rate rose above its own baseline (`workers.alerts.changes`).

    Refunds: 9% → 31% of answers failed since Tue 1 Dec 10:00, n=48; 5 examples

Pure: from the evidence stored on the alert row (`ChangeAlert.of_details`) to chat.postMessage's arguments. The
examples are links (or a note saying why there is none): an alert of change never quotes a conversation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from common.messages import rates
from common.messages.blocks import channel_mention, context, escape, header, message, section, shorten
from common.messages.readable import short_time
from common.reports.intervals import proportion
from store import bot_groups

KIND_CHANNEL, KIND_BOT, KIND_TOPIC = "channel", "bot", "topic"
NO_LINK = {
    "private": "an answer in a private channel: not linked here",
    "exchange": "a bot conversation (no Slack message to link)",
    "gone": "link unavailable",
}


@dataclass(frozen=True)
class Example:
    link: str | None
    why_not: str | None = None  # a NO_LINK key when there is no link


@dataclass(frozen=True)
class ChangeAlert:
    """The evidence of one change: whose rate, the baseline, and since the change point n, failures, examples."""

    kind: str  # KIND_CHANNEL | KIND_BOT | KIND_TOPIC
    group: str  # the channel ID, the bot's report key (`bot:helpdesk`), or the topic's key
    name: str | None  # the topic's name
    baseline: float
    baseline_n: int
    since: datetime
    n: int
    failed: int
    examples: tuple[Example, ...]
    false_alarms_per_month: float
    timezone: str = "UTC"

    @classmethod
    def of_details(cls, details: Mapping, timezone: str) -> ChangeAlert:
        return cls(
            kind=details["group_kind"],
            group=details["group"],
            name=details.get("topic_name"),
            baseline=float(details["baseline"]),
            baseline_n=int(details["baseline_n"]),
            since=datetime.fromisoformat(details["since"]),
            n=int(details["n"]),
            failed=int(details["failed"]),
            examples=tuple(Example(item.get("link"), item.get("why_not")) for item in details.get("examples", [])),
            false_alarms_per_month=float(details["false_alarms_per_month"]),
            timezone=timezone,
        )

    @property
    def rate(self) -> float:
        return self.failed / self.n if self.n else 0.0


def group_label(alert: ChangeAlert) -> str:
    """`<#C123>`, `helpdesk (bot conversations)`, `Topic “Refunds”`."""
    if alert.kind == KIND_TOPIC:
        return f"Topic “{escape(shorten(alert.name or alert.group, 80))}”"
    bot = bot_groups.bot_of(alert.group)
    return escape(bot_groups.label(bot)) if bot is not None else channel_mention(alert.group)


def headline(alert: ChangeAlert) -> str:
    """`Refunds: 9% → 31% of answers failed since Tue 1 Dec 10:00, n=48; 5 examples`."""
    examples = len(alert.examples)
    return (
        f"{group_label(alert)}: {alert.baseline:.0%} → {alert.rate:.0%} of answers failed since "
        f"{short_time(alert.since, alert.timezone)}, n={alert.n}; {examples} example{'s' if examples != 1 else ''}"
    )


def example_line(number: int, example: Example) -> str:
    if example.link:
        return f"<{example.link}|answer {number}>"
    return f"answer {number} ({NO_LINK.get(example.why_not or 'gone', NO_LINK['gone'])})"


def change_alert(alert: ChangeAlert) -> dict:
    since = short_time(alert.since, alert.timezone)
    blocks = [
        header("Failure rate rising"),
        section(f"*{headline(alert)}*"),
        section(
            f"Since {since} ({alert.timezone}): {alert.failed} failed of {alert.n} answers, "
            f"{rates.rate_text(proportion(alert.failed, alert.n))}, against its own baseline of "
            f"*{alert.baseline:.0%}* (from {alert.baseline_n:,} earlier answers). relmon will not repeat this alert "
            "until the rate is back at its baseline."
        ),
    ]
    if alert.examples:
        lines = " · ".join(example_line(i, example) for i, example in enumerate(alert.examples, start=1))
        blocks.append(section(f"Failed answers since then: {lines}"))
    blocks.append(
        context(
            "A sequential test (Bernoulli CUSUM) watching for a doubling of the failure rate, set for at most "
            f"{alert.false_alarms_per_month:g} false alarm{'s' if alert.false_alarms_per_month != 1 else ''} per "
            "month on stable traffic · failed: relevancy at or below the channel's threshold"
        )
    )
    return message(headline(alert), blocks)
