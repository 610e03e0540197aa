"""Per-channel rules: which judges run, thresholds, sampling, where alerts go and whether a private
channel's text may be quoted there, the hourly cap, and the degradation windows and floor. Read from a YAML
file (RELMON_CHANNEL_RULES); the environment gives the defaults.

    defaults:
      judges: [relevancy]
      sample_rate: 1.0
    channels:
      C0123456789:
        threshold: 3          # relevancy alert at or below 3
        sample_rate: 0.25
        alert_channel: C0ALERTS2
        quote_private: true   # this channel is private, and its alert channel may quote it
        alert_cap_per_hour: 5           # low-score alerts an hour from this channel (the rest: the summary)
        degradation_floor: 3.0          # degradation when the mean relevancy falls below 3.0...
        degradation_window: 50          # ...over the last 50 answers
        degradation_window_minutes: 30  # ...or over the last 30 minutes' answers (0: count window only)
        degradation_min_answers: 8      # ...when there are at least 8 of them
    bots:                     # exchanges sent to the ingest API in no Slack channel, by their `bot`
      helpdesk:
        alert_channel: C0ALERTS2
        quote_private: true   # its dm/private exchanges may be quoted in C0ALERTS2 (default: never)
        viewers: [U0LEAD123, S0SUPPORT]  # may open "Show the exchange" on its alerts (users or user groups)

What an admin changes in Slack with `/judge config` (store.rule_overrides) is layered over a channel's or a bot's
entry here (`with_overrides`): a value set in Slack wins over the file's, which wins over the defaults.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from judges.names import CORRECTNESS, GROUNDED, RELEVANCY
from store import bot_groups
from store.judge_catalog import judge_catalog
from store.settings import TIME_WINDOW_MOST_ANSWERS, Settings

log = logging.getLogger("relmon.rules")

# The judge each seed threshold field is for.
THRESHOLD_FIELDS = {RELEVANCY: "threshold", CORRECTNESS: "correctness_threshold", GROUNDED: "grounded_threshold"}

# Where a value of the rule in force comes from (`value_sources`).
FROM_SLACK, FROM_FILE, FROM_FILE_DEFAULTS, FROM_DEFAULT = "Slack", "file", "file defaults", "default"


class ChannelRule(BaseModel):
    """Every field optional: what a channel does not say comes from the defaults."""

    model_config = ConfigDict(extra="forbid")

    judges: list[str] | None = None
    threshold: int | None = Field(None, ge=0, le=4)
    correctness_threshold: int | None = Field(None, ge=0, le=2)
    grounded_threshold: int | None = Field(None, ge=1, le=5)
    sample_rate: float | None = Field(None, ge=0, le=1)
    alert_channel: str | None = None
    quote_private: bool | None = None
    watch: bool | None = None  # false: ignore this channel even when relmon is in it
    alert_cap_per_hour: int | None = Field(None, ge=1)
    degradation_window: int | None = Field(None, ge=2)
    degradation_window_minutes: int | None = Field(None, ge=0, le=24 * 60)
    degradation_min_answers: int | None = Field(None, ge=1, le=TIME_WINDOW_MOST_ANSWERS)
    degradation_floor: float | None = Field(None, ge=0, le=4)
    # A team's own judge's failing score here (name -> at or below this fails), over its file's `fails_at`.
    thresholds: dict[str, int] | None = None

    @field_validator("thresholds")
    @classmethod
    def _team_judges_only(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        seeds = sorted(set(value or {}) & set(THRESHOLD_FIELDS))
        if seeds:
            raise ValueError(f"{', '.join(seeds)}: use {', '.join(THRESHOLD_FIELDS[name] for name in seeds)}")
        return value


class BotRule(ChannelRule):
    """A bot's rule (`bots:`), for its ingested exchanges in no Slack channel: a channel rule (its alerts go to its
    `alert_channel`; `quote_private: true` lets its dm and private exchanges be quoted there, never elsewhere), and
    `viewers`: the Slack users (U…/W…) and user groups (S…) who may open a dm or private exchange's words from its
    alert ("Show the exchange")."""

    viewers: list[str] = Field(default_factory=list)


class EffectiveRule(BaseModel):
    """The rule in force for one channel, every field decided."""

    judges: list[str]
    thresholds: dict[str, float]  # judge name -> alert when score <= this
    sample_rate: float
    # RELMON_SAMPLE's daily cap, when it is in force for this channel (no rate of its own in the rules file): the
    # rate is then decided each day (workers.sampling.daily_probability) and `sample_rate` is not used.
    daily_cap: int | None = None
    alert_channel: str | None
    quote_private: bool
    watch: bool
    alert_cap_per_hour: int
    degradation_window: int
    degradation_window_minutes: int
    degradation_min_answers: int
    degradation_floor: float


class ChannelRules(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: ChannelRule = ChannelRule()
    channels: dict[str, ChannelRule] = {}
    bots: dict[str, BotRule] = {}
    # Channels whose entry exists only because of a change made in Slack (`with_overrides`): not "named in the
    # file", so such a change never starts watching a channel by itself.
    _slack_only: frozenset[str] = PrivateAttr(default_factory=frozenset)

    def own(self, channel_id: str | None) -> ChannelRule | None:
        """The entry a channel (or a bot's report key, `store.bot_groups`) has of its own, not the defaults."""
        if not channel_id:
            return None
        bot = bot_groups.bot_of(channel_id)
        return self.bots.get(bot) if bot is not None else self.channels.get(channel_id)

    def bot(self, bot: str) -> BotRule | None:
        return self.bots.get(bot)

    @classmethod
    def load(cls, path: Path | None) -> ChannelRules:
        if path is None:
            return cls()
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return cls.model_validate(data)

    def for_channel(self, channel_id: str | None, settings: Settings) -> EffectiveRule:
        layers = [self.defaults]
        own = self.own(channel_id)
        if own is not None:
            layers.append(own)

        def pick(name: str, fallback):
            value = fallback
            for layer in layers:
                if getattr(layer, name) is not None:
                    value = getattr(layer, name)
            return value

        # A bot's exchanges are sent to relmon on purpose: watched, whatever RELMON_WATCHED_CHANNELS lists.
        watched_by_setting = (
            not settings.watched_channels
            or channel_id in settings.watched_channels
            or bot_groups.bot_of(channel_id) is not None
        )
        # A channel named in the rules file is watched unless it says `watch: false`.
        named = own is not None and channel_id not in self._slack_only
        return EffectiveRule(
            judges=pick("judges", list(settings.default_judges)),
            thresholds={
                **judge_catalog(settings).thresholds(),  # a team's judge fails at its file's fails_at...
                **{name: float(n) for layer in layers for name, n in (layer.thresholds or {}).items()},  # ...or here
                RELEVANCY: pick("threshold", settings.threshold),
                CORRECTNESS: pick("correctness_threshold", settings.correctness_threshold),
                GROUNDED: pick("grounded_threshold", settings.grounded_threshold),
            },
            sample_rate=pick("sample_rate", settings.sample_rate),
            daily_cap=settings.sample_plan.daily_cap if pick("sample_rate", None) is None else None,
            alert_channel=pick("alert_channel", settings.alert_channel),
            quote_private=pick("quote_private", False),
            watch=pick("watch", watched_by_setting or named),
            alert_cap_per_hour=pick("alert_cap_per_hour", settings.alert_cap_per_hour),
            degradation_window=pick("degradation_window", settings.degradation_window),
            degradation_window_minutes=pick("degradation_window_minutes", settings.degradation_window_minutes),
            degradation_min_answers=pick("degradation_min_answers", settings.degradation_min_answers),
            degradation_floor=pick("degradation_floor", settings.degradation_floor),
        )

    def with_overrides(self, overrides: Mapping[str, Mapping[str, Any]]) -> ChannelRules:
        """These rules with the changes made in Slack laid over them: `overrides` maps a scope (a channel ID, or a
        bot's key `bot:NAME`) to the fields set there. An override that no longer validates (a value out of range
        since a release) is left out and logged, never stopping the rules from being read."""
        channels, bots = dict(self.channels), dict(self.bots)
        slack_only = set()
        for scope, values in overrides.items():
            bot = bot_groups.bot_of(scope)
            base: ChannelRule | None = bots.get(bot) if bot is not None else channels.get(scope)
            model = BotRule if bot is not None else ChannelRule
            fields = {k: v for k, v in values.items() if bot is not None or k != "viewers"}
            if isinstance(fields.get("thresholds"), Mapping) and base is not None and base.thresholds:
                fields["thresholds"] = {**base.thresholds, **fields["thresholds"]}  # per judge, over the file's
            try:
                merged = model.model_validate({**(base.model_dump(exclude_unset=True) if base else {}), **fields})
            except ValidationError as error:
                log.warning("rule changed in Slack left out", extra={"scope": scope, "problem": str(error)[:300]})
                continue
            if bot is not None:
                bots[bot] = merged  # type: ignore[assignment]
            else:
                if base is None:
                    slack_only.add(scope)
                channels[scope] = merged
        layered = ChannelRules(defaults=self.defaults, channels=channels, bots=bots)
        layered._slack_only = frozenset(slack_only | self._slack_only)
        return layered


# A rule's fields a change in Slack may set (`/judge config`).
SLACK_FIELDS = ("alert_channel", "quote_private", "viewers", "judges", "threshold", "correctness_threshold",
                "grounded_threshold", "thresholds")  # fmt: skip


def value_sources(file_rules: ChannelRules, scope: str, overrides: Mapping[str, Any] | None) -> dict[str, str]:
    """Where each of SLACK_FIELDS of `scope`'s rule in force comes from: a change made in Slack, the file's entry
    for it, the file's defaults, or relmon's defaults (the environment); and each team judge's threshold set in a
    rule (`threshold:NAME`; one set nowhere comes from its judge file)."""
    own = file_rules.own(scope)
    sources = {}
    team_layers = (
        (file_rules.defaults.thresholds, FROM_FILE_DEFAULTS),
        (own.thresholds if own is not None else None, FROM_FILE),
        ((overrides or {}).get("thresholds"), FROM_SLACK),
    )
    for named, source in team_layers:
        for judge in named or {}:
            sources[f"threshold:{judge}"] = source
    for name in SLACK_FIELDS:
        if overrides and name in overrides:
            sources[name] = FROM_SLACK
        elif own is not None and name in own.model_fields_set:
            sources[name] = FROM_FILE
        elif name != "viewers" and getattr(file_rules.defaults, name) is not None:
            sources[name] = FROM_FILE_DEFAULTS
        else:
            sources[name] = FROM_DEFAULT
    return sources
