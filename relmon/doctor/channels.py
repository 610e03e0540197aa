"""Which channels doctor looks at, from the settings and the channel rules: plain functions of the settings."""

from __future__ import annotations

from store.settings import Settings


def _rules(settings: Settings):
    """The channel rules, or None (no file, or a bad one: check_settings reports it)."""
    if not settings.channel_rules_file:
        return None
    from store.rules import ChannelRules

    try:
        return ChannelRules.load(settings.channel_rules_file)
    except Exception:  # reported by check_settings
        return None


def channels_to_check(settings: Settings) -> list[tuple[str, str]]:
    """(channel ID, why relmon must be in it): the alert and digest channels, rule alert channels, watched ones."""
    wanted: dict[str, str] = {}
    if settings.alert_channel:
        wanted[settings.alert_channel] = "alert channel (RELMON_ALERT_CHANNEL)"
    if settings.digest_channel and settings.digest_channel not in wanted:
        wanted[settings.digest_channel] = "digest channel (RELMON_DIGEST_CHANNEL)"
    rules = _rules(settings)
    if rules is not None:
        for channel_id, rule in rules.channels.items():
            if rule.alert_channel:
                wanted.setdefault(rule.alert_channel, f"alert channel for {channel_id} (channel rules)")
        for bot, bot_rule in rules.bots.items():
            if bot_rule.alert_channel:
                wanted.setdefault(bot_rule.alert_channel, f"alert channel for bot {bot} (channel rules)")
    for channel_id in watched_channel_ids(settings):
        wanted.setdefault(channel_id, f"watched channel ({_why_watched(settings, channel_id)})")
    return list(wanted.items())


def _why_watched(settings: Settings, channel_id: str) -> str:
    return "RELMON_WATCHED_CHANNELS" if channel_id in settings.watched_channels else "channel rules"


def watched_channel_ids(settings: Settings) -> list[str]:
    """The channels the settings name as watched: the rules' (unless `watch: false`) and RELMON_WATCHED_CHANNELS.
    A channel may also be the alert or digest channel: it is watched all the same (and read for bots)."""
    rules = _rules(settings)
    named = [c for c, rule in rules.channels.items() if rule.watch is not False] if rules is not None else []
    return list(dict.fromkeys([*named, *settings.watched_channels]))


def unwatched_channel_ids(settings: Settings) -> set[str]:
    """Channels whose rule says `watch: false`."""
    rules = _rules(settings)
    return {c for c, rule in rules.channels.items() if rule.watch is False} if rules is not None else set()
