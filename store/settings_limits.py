"""Bounds on what a hostile or careless input can make relmon do, a fields class `store.settings.Settings` inherits:
the spool's size and how often one alert is redrawn."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class LimitSettings(BaseModel):
    # The bot's spool (bot/spool.py) holds at most this much; past it, events are answered 200 and dropped, with an
    # error line and one warning in the alert channel.
    spool_max_mb: float = Field(512, gt=0, **_env("RELMON_SPOOL_MAX_MB"))
    # One alert is redrawn (chat.update) at most once in this many seconds; what comes meanwhile is drawn once at
    # the end of the window.
    alert_redraw_seconds: float = Field(3.0, ge=0, **_env("RELMON_ALERT_REDRAW_SECONDS"))
