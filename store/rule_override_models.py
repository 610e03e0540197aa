"""The table of the rules changed in Slack (`store.rule_overrides`), in a module of its own on `store.model_base` so
that `store.models` (which imports it for Base.metadata) does not load the rules and the judges' catalog."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, String
from sqlalchemy.orm import Mapped, mapped_column

from store.model_base import Base, utcnow


class RuleOverride(Base):
    __tablename__ = "rule_overrides"

    scope: Mapped[str] = mapped_column(String(100), primary_key=True)  # C…/G… or bot:NAME
    rule_values: Mapped[dict] = mapped_column(JSON)  # the ChannelRule/BotRule fields set in Slack
    updated_by: Mapped[str | None] = mapped_column(String(32))  # the Slack user who last changed it
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
