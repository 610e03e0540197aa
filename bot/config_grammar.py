"""What `/judge config …` asks, from its text alone (pure; names are checked against the judges later).

/judge config [TARGET]                         show the rule in force and where each value comes from
/judge config [TARGET] SETTING [SETTING …]     change it (stored, laid over the rules file)
/judge config [TARGET] reset [FIELD …]         drop what was changed in Slack (all, or those fields)

TARGET   #channel | bot:NAME        (none: this channel)
SETTING  alert #channel             where its alerts go
         quote on|off               may a private channel's, or a bot's dm/private exchange's, text be quoted there
         viewers @user @group …     who may open "Show the exchange" (a bot's; `viewers none`: nobody)
         judges NAME[,NAME …]       the judges that run (seed judges and the team's own)
         threshold [JUDGE] N        alert at or below N (JUDGE: relevancy, correctness, grounded; none: relevancy)
FIELD    alert | quote | viewers | judges | threshold
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from judges.names import RELEVANCY
from store.rules import THRESHOLD_FIELDS

SETTING_WORDS = ("alert", "quote", "viewers", "judges", "threshold")
FIELD_OF_WORD = {"alert": ("alert_channel",), "quote": ("quote_private",), "viewers": ("viewers",),
                 "judges": ("judges",), "threshold": (*THRESHOLD_FIELDS.values(), "thresholds")}  # fmt: skip
ON, OFF = ("on", "true", "yes"), ("off", "false", "no")

_CHANNEL_MENTION = re.compile(r"<#([CG][A-Z0-9_]+)(?:\|[^>]*)?>")
_CHANNEL_ID = re.compile(r"[CG][A-Z0-9_]{6,}")
_CHANNEL_NAME = re.compile(r"#([a-z0-9_\-]{1,80})")
_BOT = re.compile(r"bot:([A-Za-z0-9_.\-]{1,80})")
_USER_MENTION = re.compile(r"<@([UW][A-Z0-9_]+)(?:\|[^>]*)?>")
_GROUP_MENTION = re.compile(r"<!subteam\^(S[A-Z0-9_]+)(?:\|[^>]*)?>")
_PERSON_ID = re.compile(r"[UWS][A-Z0-9_]{4,}")
_HANDLE = re.compile(r"@[A-Za-z0-9._\-]{1,80}")  # typed unescaped: looked up in Slack later (bot.judge_config)
_JUDGE_NAME = re.compile(r"[a-z][a-z0-9_\-]{0,63}")
_NUMBER = re.compile(r"\d{1,2}(?:\.\d+)?")
MAX_VIEWERS = 50


class ConfigError(ValueError):
    """Bad input, said in one short sentence and followed by the usage line."""


@dataclass(frozen=True)
class ChannelRef:
    channel_id: str | None = None
    name: str | None = None  # `#name` as typed (looked up in Slack later)


@dataclass(frozen=True)
class Target:
    channel: ChannelRef | None = None  # None with bot None: the channel the command was typed in
    bot: str | None = None


@dataclass(frozen=True)
class ConfigRequest:
    target: Target
    action: str  # show | set | reset
    values: dict[str, Any] = field(default_factory=dict)  # set: rule field -> value (alert_channel: a ChannelRef)
    reset_fields: tuple[str, ...] = ()  # reset: the rule fields to drop; empty: all of them


def channel_id_of(word: str) -> str | None:
    """The channel a command's word names by ID: a mention `<#C123|name>` (how Slack sends `#name` with escaping on)
    or a bare `C123`; None otherwise (a name is looked up by its caller)."""
    if m := _CHANNEL_MENTION.fullmatch(word):
        return m.group(1)
    return word if _CHANNEL_ID.fullmatch(word) else None


def channel_ref(word: str) -> ChannelRef | None:
    if (channel_id := channel_id_of(word)) is not None:
        return ChannelRef(channel_id=channel_id)
    if m := _CHANNEL_NAME.fullmatch(word.lower()):
        return ChannelRef(name=m.group(1))
    return None


def person(word: str) -> str | None:
    """A user (U…/W…) or user group (S…) from a mention or an ID; a plain `@handle` as typed (`is_handle`)."""
    for pattern in (_USER_MENTION, _GROUP_MENTION):
        if m := pattern.fullmatch(word):
            return m.group(1)
    return word if _PERSON_ID.fullmatch(word) or _HANDLE.fullmatch(word) else None


def is_handle(viewer: str) -> bool:
    return viewer.startswith("@")


def _words(text: str) -> list[str]:
    # Mentions may hold spaces after `|` (`<!subteam^S1|@support team>`): keep each <…> one word.
    return re.findall(r"<[^>]*>|[^\s,]+", text)


def parse_config(text: str) -> ConfigRequest:
    """The request in `text` (what follows `/judge config`), or ConfigError."""
    words = _words(text.strip())
    target = Target()
    if words:
        if m := _BOT.fullmatch(words[0]):
            target, words = Target(bot=m.group(1)), words[1:]
        elif (ref := channel_ref(words[0])) is not None:
            target, words = Target(channel=ref), words[1:]
    if not words:
        return ConfigRequest(target, "show")
    keyword = words[0].lower()
    if keyword == "reset":
        fields: list[str] = []
        for word in words[1:]:
            if word.lower() == "all":
                continue
            if word.lower() not in FIELD_OF_WORD:
                raise ConfigError(
                    f"Nothing called “{word[:40]}” to reset: name alert, quote, viewers, judges or threshold."
                )
            fields.extend(FIELD_OF_WORD[word.lower()])
        return ConfigRequest(target, "reset", reset_fields=tuple(dict.fromkeys(fields)))
    values: dict[str, Any] = {}
    while words:
        keyword, words = words[0].lower(), words[1:]
        if keyword not in SETTING_WORDS:
            raise ConfigError(f"relmon doesn't know “{keyword[:40]}”.")
        arguments = []
        while words and words[0].lower() not in SETTING_WORDS:
            arguments.append(words.pop(0))
        _set(values, keyword, arguments, target)
    return ConfigRequest(target, "set", values)


def _set(values: dict[str, Any], keyword: str, arguments: list[str], target: Target) -> None:
    if keyword == "alert":
        ref = channel_ref(arguments[0]) if len(arguments) == 1 else None
        if ref is None:
            raise ConfigError("Name one alert channel: `alert #channel`.")
        values["alert_channel"] = ref
    elif keyword == "quote":
        word = arguments[0].lower() if len(arguments) == 1 else ""
        if word not in ON + OFF:
            raise ConfigError("Say `quote on` or `quote off`.")
        values["quote_private"] = word in ON
    elif keyword == "viewers":
        if target.bot is None:
            raise ConfigError("Viewers are a bot's: `/judge config bot:NAME viewers @person @group`.")
        if [a.lower() for a in arguments] == ["none"]:
            values["viewers"] = []
            return
        found = [person(a) for a in arguments]
        if not arguments or None in found:
            raise ConfigError("Name viewers as @person or @group mentions (or their IDs), or say `viewers none`.")
        if len(found) > MAX_VIEWERS:
            raise ConfigError(f"Name at most {MAX_VIEWERS} viewers: use a user group for more.")
        values["viewers"] = list(dict.fromkeys(v for v in found if v))
    elif keyword == "judges":
        names = [a.lower() for a in arguments]
        if not names or not all(_JUDGE_NAME.fullmatch(n) for n in names):
            raise ConfigError("Name the judges: `judges relevancy,refund_policy`.")
        values["judges"] = list(dict.fromkeys(names))
    else:  # threshold
        judge = arguments[0].lower() if len(arguments) == 2 else RELEVANCY
        number = arguments[-1] if arguments else ""
        if len(arguments) not in (1, 2) or not _NUMBER.fullmatch(number) or not _JUDGE_NAME.fullmatch(judge):
            raise ConfigError("Give a judge and a score: `threshold relevancy 2`.")
        score = float(number)
        value = int(score) if score.is_integer() else score
        if judge in THRESHOLD_FIELDS:
            values[THRESHOLD_FIELDS[judge]] = value
        else:  # a team's judge: over its file's fails_at (checked against its scale once the judges are known)
            values.setdefault("thresholds", {})[judge] = value
