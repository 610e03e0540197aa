"""What `/judge config` says (bot.judge_config): a channel's or a bot's rule in force with where each value comes
from, and its short refusals. Shown only to the person who asked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common.messages.blocks import channel_mention, context, message, person_mention, section
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY
from store import bot_groups
from store.rules import THRESHOLD_FIELDS, EffectiveRule

USAGE = (
    "Usage: `/judge config [#channel | bot:NAME]` shows a rule; add `alert #channel`, `quote on|off`, "
    "`viewers @person @group` (a bot's), `judges NAME,NAME`, `threshold [JUDGE] N`, or `reset [FIELD]` to change it."
)
HELP_LINE = (
    "• `/judge config [#channel | bot:NAME] [alert #channel | quote on|off | viewers @person @group | "
    "judges NAME,NAME | threshold [JUDGE] N | reset [FIELD]]`: show, or (admins) change, a channel's or a bot's rule."
)
SEED_MAXIMA = {RELEVANCY: 4, CORRECTNESS: 2, GROUNDED: 5}


def scope_name(scope: str) -> str:
    bot = bot_groups.bot_of(scope)
    return f"bot {bot}" if bot is not None else f"<#{scope}>"


def _people(ids: Iterable[str]) -> str:
    named = [person_mention(i) for i in ids]
    return ", ".join(named) if named else "nobody"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def rule_message(
    scope: str,
    rule: EffectiveRule,
    sources: Mapping[str, str],
    *,
    own_alert_channel: str | None,
    viewers: list[str] | None,
    changed: bool,
) -> dict:
    """The rule in force for `scope` (a channel ID or a bot's key), each value with its source: Slack (changed with
    /judge config), file (the rules file's entry), file defaults, or default (the environment)."""
    is_bot = bot_groups.bot_of(scope) is not None
    lines = [
        f"• Alert channel: {channel_mention(rule.alert_channel) if rule.alert_channel else 'none'}"
        f" _({sources['alert_channel']})_",
        f"• Quote {'dm and private exchanges' if is_bot else 'private text'} there: "
        f"{'on' if rule.quote_private else 'off'} _({sources['quote_private']})_",
    ]
    if is_bot:
        lines.append(f"• Viewers (“Show the exchange”): {_people(viewers or [])} _({sources['viewers']})_")
    lines.append(f"• Judges: {', '.join(rule.judges) or 'none'} _({sources['judges']})_")
    thresholds = []
    for judge in rule.judges:
        if judge in rule.thresholds:
            field = THRESHOLD_FIELDS.get(judge)
            where = sources[field] if field else sources.get(f"threshold:{judge}", "its judge file")
            thresholds.append(f"{judge} ≤ {_number(rule.thresholds[judge])} _({where})_")
    if thresholds:
        lines.append("• Alert at or below: " + " · ".join(thresholds))
    notes = []
    if rule.quote_private and own_alert_channel is None:
        notes.append(
            "Quoting needs an alert channel of its own: add `alert #channel` (the defaults' never quotes private text)."
        )
    notes.append("Change it with `/judge config … SETTING`; `reset` goes back to the rules file.")
    title = f"Rule {'changed' if changed else 'in force'} for {scope_name(scope)}"
    text = title + "\n" + "\n".join(lines)
    return message(title, [section(text), context(*notes)])


def config_error_message(problem: str) -> dict:
    text = f"{problem} {USAGE}"
    return message(text, [section(text)])


def not_allowed_message(admins: Iterable[str]) -> dict:
    named = list(admins)
    who = "a workspace admin or owner" + (f", or {_people(named)}" if named else "")
    text = f"Only admins can change relmon's rules (and see a channel's you are not in): ask {who}."
    return message(text, [section(text)])


def not_here_message() -> dict:
    text = "Run `/judge config` in a channel, or name one: `/judge config #channel` or `/judge config bot:NAME`."
    return message(text, [section(text)])
