"""The declarative base every SQL table derives from and the columns most tables share. A leaf of its own so that
`store.models` and the tables kept in modules of their own (`store.golden_models`, `store.topic_models`) all build
on it, and `store.models` can import those modules without either importing the other back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from sqlalchemy import BigInteger, DateTime, Integer
from sqlalchemy.orm import DeclarativeBase, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


# An integer primary key that is BIGINT on PostgreSQL and INTEGER (rowid alias) on SQLite.
IdType = BigInteger().with_variant(Integer(), "sqlite")

# The columns most tables share, declared once: `id: Mapped[IdKey]`, `created_at: Mapped[CreatedAt]`.
IdKey = Annotated[int, mapped_column(IdType, primary_key=True, autoincrement=True)]
CreatedAt = Annotated[datetime, mapped_column(DateTime(timezone=True), default=utcnow)]
UpdatedAt = Annotated[datetime, mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)]
