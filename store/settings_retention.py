"""Retention's settings beside RELMON_RETENTION_DAYS, a fields class `store.settings.Settings` inherits."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, BaseModel, Field


class RetentionSettings(BaseModel):
    # What happens to relmon's own posts (alerts, the hour's summaries, verdicts sent as direct messages) about what
    # retention removes: redrawn without their words (chat.update), or deleted (chat.delete).
    retention_slack: Literal["redraw", "delete"] = Field(
        "redraw", validation_alias=AliasChoices("RELMON_RETENTION_SLACK", "relmon_retention_slack")
    )
