"""The App Home tab: the last 7 days per channel and the settings in effect (at most 100 blocks)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from zoneinfo import ZoneInfo

from common.messages.agreement import channel_parts, judge_lines
from common.messages.blocks import channel_ref, pct
from common.messages.digest import judge_line
from common.messages.outcomes import NOTE as OUTCOME_NOTE
from common.messages.outcomes import outcome_lines
from common.messages.sampling import plan_text, sampled_text
from common.messages.team_judges import shown_judges
from common.messages.trust import precision_text, trust_section
from common.reports.stats import ChannelStats, Report
from store.rules import EffectiveRule
from store.settings import Settings
from store.settings_sampling import SamplePlan

MAX_BLOCKS = 100  # Slack's limit for Home tabs
MAX_CHANNELS = 60  # one section each, leaving room for the rest
DAY_NAMES = {"mon": "Monday", "tue": "Tuesday", "wed": "Wednesday", "thu": "Thursday", "fri": "Friday"}
DAY_NAMES |= {"sat": "Saturday", "sun": "Sunday"}


def _figures(stats: ChannelStats, report: Report | None = None) -> str:
    parts = [f"{stats.judged} judged of {stats.seen}"]
    sampled = sampled_text(stats.sampled_share)
    if sampled:
        parts.append(sampled)
    for name in shown_judges(stats):  # a team judge where it runs, with its pass rate
        parts.append(f"{name} {judge_line(stats.judges[name])}")
        found = report.trust.precision_of(stats.channel_id, name) if report is not None else None
        if found is not None and found.voted:
            parts.append(f"{name} alerts: {precision_text(found)}")
    if report is not None and stats.channel_id is not None:  # every channel's: the trust section's fuller lines
        parts += channel_parts(report.agreement, stats.channel_id, stats.judges)
    parts.append(f"{stats.errors} error{'s' if stats.errors != 1 else ''}")
    outcomes = outcome_lines(report.outcomes, stats.channel_id) if report is not None else []
    return "\n".join([" · ".join(parts), *(f"outcomes: {line}" for line in outcomes)])


def _rule_text(rule: EffectiveRule, default: EffectiveRule) -> str:
    """What this channel's rule changes from the defaults."""
    changes = []
    if rule.judges != default.judges:
        changes.append("judges " + ", ".join(rule.judges))
    for judge, threshold in rule.thresholds.items():
        if judge in rule.judges and default.thresholds.get(judge) != threshold:
            changes.append(f"{judge} alert ≤ {threshold:g}")
    if rule.sample_rate != default.sample_rate:
        changes.append(f"sampling {pct(rule.sample_rate)}")
    if rule.alert_channel != default.alert_channel and rule.alert_channel:
        changes.append(f"alerts to <#{rule.alert_channel}>")
    if rule.alert_cap_per_hour != default.alert_cap_per_hour:
        changes.append(f"at most {rule.alert_cap_per_hour} alerts an hour")
    return " · ".join(changes)


def _sampling_text(settings: Settings, default: EffectiveRule) -> str:
    if default.daily_cap is None:
        return plan_text(SamplePlan(rate=default.sample_rate))
    return plan_text(settings.sample_plan)


def settings_fields(settings: Settings, default: EffectiveRule) -> list[dict]:
    """The environment's settings, and the default rule in force (the rules file's `defaults` over them)."""
    thresholds = " · ".join(f"{judge} ≤ {default.thresholds[judge]:g}" for judge in default.judges)
    day = DAY_NAMES.get(settings.digest_day, settings.digest_day)
    digest_to = f" to <#{settings.digest_channel}>" if settings.digest_channel else " (no channel set)"
    alerts_to = f"<#{default.alert_channel}>" if default.alert_channel else "not set"
    return [
        {"type": "mrkdwn", "text": f"*Judge model*\n`{settings.judge_model}`"},
        {"type": "mrkdwn", "text": f"*Judges*\n{', '.join(default.judges)}"},
        {"type": "mrkdwn", "text": f"*Alert thresholds*\n{thresholds}"},
        {"type": "mrkdwn", "text": f"*Sampling*\n{_sampling_text(settings, default)}"},
        {"type": "mrkdwn", "text": f"*Daily budget*\n{settings.daily_budget:,} judgments"},
        {"type": "mrkdwn", "text": f"*Alerts*\n{alerts_to}, at most {default.alert_cap_per_hour} an hour"},
        {
            "type": "mrkdwn",
            "text": f"*Weekly digest*\n{day}s {settings.digest_hour:02d}:00 {settings.timezone}{digest_to}",
        },
        {"type": "mrkdwn", "text": f"*Retention*\n{settings.retention_days} days"},
        {"type": "mrkdwn", "text": f"*Low scores confirmed*\n{confirm_text(settings)}"},
    ]


def confirm_text(settings: Settings) -> str:
    if settings.confirm == "off":
        return "no: alerts on the first verdict"
    model = f" by `{settings.confirm_model}`" if settings.confirm_model else ""
    return f"by a second opinion{model} before alerting"


def hidden_note(count: int) -> str:
    if count == 1:
        return "1 private channel you are not in is not shown."
    return f"{count} private channels you are not in are not shown."


def home_view(
    report: Report,
    settings: Settings,
    default_rule: EffectiveRule,
    channel_rules: Mapping[str, EffectiveRule],
    *,
    now: datetime,
    hidden_private: int = 0,
    topics: list[dict] | None = None,
) -> dict:
    """The view for views.publish. `report` holds only what the viewer may see; `hidden_private` private channels
    they are not in were left out of it (and of the "All channels" line)."""
    local = now.astimezone(ZoneInfo(report.period.timezone))
    overall = "All channels you can see" if hidden_private else "All channels"
    blocks: list[dict] = [
        {"type": "header", "text": {"type": "plain_text", "text": "relmon: how the support bot is doing"}},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": f"Last 7 days, as of {local:%a %d %b %H:%M} {report.period.timezone}. "
                    "Open this tab again to refresh." + (f" {OUTCOME_NOTE}" if report.outcomes.any_closed else ""),
                }
            ],
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": f"*{overall}*\n{_figures(report.overall, report)}"}},
    ]
    if hidden_private:
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": hidden_note(hidden_private)}]})
    judges = list(report.overall.judges)  # the digest's trust lines, over what they may see; no links (no Slack call)
    trust = trust_section(report.trust, judges, judge_lines(report.agreement, judges, {}), report.period.timezone)
    if trust is not None:
        blocks.append(trust)
    if topics:  # what to fix first (common.messages.topics.home_blocks)
        blocks += [{"type": "divider"}, *topics]
    blocks += [
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "Channels"}},
    ]
    shown = report.channels[:MAX_CHANNELS]
    if not shown:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": "No answers captured yet."}})
    for stats in shown:
        text = f"*{channel_ref(stats.channel_id)}*\n{_figures(stats, report)}"
        rule = channel_rules.get(stats.channel_id or "")
        changed = _rule_text(rule, default_rule) if rule is not None else ""
        if changed:
            text += f"\n_{changed}_"
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": text[:2900]}})
    if len(report.channels) > len(shown):
        more = len(report.channels) - len(shown)
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"…and {more} more channels"}]})
    blocks += [
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "Settings in effect"}},
        {"type": "section", "fields": settings_fields(settings, default_rule)},
        {
            "type": "context",
            "elements": [
                {
                    "type": "mrkdwn",
                    "text": "Per-channel rules come from RELMON_CHANNEL_RULES; the rest from the environment.",
                }
            ],
        },
    ]
    assert len(blocks) <= MAX_BLOCKS
    return {"type": "home", "blocks": blocks}
