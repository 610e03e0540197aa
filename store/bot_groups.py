"""Where an ingested exchange without a Slack channel is reported: under its bot, as a channel is.

The reports (digest, App Home, `/judge stats`, topics, gaps, export) group answers by channel; an exchange sent
to the ingest API with no `slack` channel (an agent's DMs, a web widget) has none, so the report rows carry a key
of its bot instead (`bot:helpdesk`). Every rule keyed by channel then reads it as one more "channel": thresholds
from the defaults, quoting from the bot's own rule (`store.rules`, its `bots:` section), names from `label`.
Pure: no Slack ID starts with `bot:`, so a key is never mistaken for a channel.
"""

from __future__ import annotations

PREFIX = "bot:"


def key_of(bot: str) -> str:
    """The reports' key of a bot's exchanges that happened in no Slack channel."""
    return PREFIX + bot


def bot_of(key: str | None) -> str | None:
    """The bot a report key stands for, or None when it is a Slack channel (or nothing)."""
    return key[len(PREFIX) :] if key and key.startswith(PREFIX) else None


def label(bot: str) -> str:
    """How people see a bot's block: its exchanges are its own conversations (agent DMs, a widget)."""
    return f"{bot} (bot conversations)"
