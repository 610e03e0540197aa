"""Bounds on what a hostile or careless input can make relmon do, a fields class `store.settings.Settings` inherits:
the spool's size, how often one alert is redrawn, and how many reports one person may ask for."""

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
    # App Home, `/judge digest` and `/judge stats`: the reports one person may ask for in a minute.
    reports_per_person_minute: int = Field(6, ge=1, **_env("RELMON_REPORTS_PER_PERSON_MINUTE"))
