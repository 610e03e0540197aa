"""A channel's or a bot's rule as an admin changed it in Slack (`/judge config`): one row a scope (a channel ID, or a
bot's key `bot:NAME`, store.bot_groups) holding only the fields set there, laid over the rules file's entry by
`store.rules.ChannelRules.with_overrides`.

`RuleSource` is the one place a process reads the rules in force (`common.runtime.Runtime.rules`): the file and
these rows, kept for RULES_REFRESH_SECONDS and read again after, so a change made in another process is in force
within that time; the process that made the change forgets its copy at once (`forget`)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from store.db import Database
from store.rule_override_models import RuleOverride
from store.rules import ChannelRules

log = logging.getLogger("relmon.rules")

RULES_REFRESH_SECONDS = 20.0  # a change made in another process is in force within this (well under a minute)


def all_overrides(session: Session) -> dict[str, dict[str, Any]]:
    return {row.scope: dict(row.rule_values or {}) for row in session.scalars(select(RuleOverride))}


def override_of(session: Session, scope: str) -> dict[str, Any]:
    row = session.get(RuleOverride, scope)
    return dict(row.rule_values or {}) if row is not None else {}


def save_override(session: Session, scope: str, values: dict[str, Any], user_id: str | None) -> None:
    """Store `scope`'s fields set in Slack (replacing what was stored); no fields left: the row is removed."""
    row = session.get(RuleOverride, scope, with_for_update=True)
    if not values:
        if row is not None:
            session.delete(row)
            session.flush()
        return
    if row is None:
        session.add(RuleOverride(scope=scope, rule_values=values, updated_by=user_id, updated_at=datetime.now(UTC)))
    else:
        row.rule_values = dict(values)  # a new dict: JSON columns track assignment only
        row.updated_by, row.updated_at = user_id, datetime.now(UTC)


class RuleSource:
    """The rules in force for this process: the rules file (read again when it changes) with the changes made in
    Slack over it, kept `refresh_seconds`. A file that fails to read after a good one keeps the good one (logged);
    rows that cannot be read (the database away) keep the last ones read."""

    def __init__(
        self,
        path: Path | None,
        database: Callable[[], Database],
        *,
        refresh_seconds: float = RULES_REFRESH_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path, self._database, self.refresh_seconds, self._clock = path, database, refresh_seconds, clock
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()  # held while a `peek`'s read runs in the background
        self._file: ChannelRules | None = None
        self._file_stamp: tuple | None = None
        self._overrides: dict[str, dict[str, Any]] = {}
        self._rules: ChannelRules | None = None
        self._read_at = 0.0

    def current(self) -> ChannelRules:
        with self._lock:
            if self._rules is None or self._clock() - self._read_at >= self.refresh_seconds:
                self._read()
            assert self._rules is not None
            return self._rules

    def peek(self) -> ChannelRules:
        """The rules last read, never waiting for the database (the bot's acknowledgement path): a read that is due
        runs on a thread of its own, and the next peek sees it."""
        rules = self._rules
        if rules is None:
            return self.current()
        if self._clock() - self._read_at >= self.refresh_seconds and self._refreshing.acquire(blocking=False):
            threading.Thread(target=self._refresh_in_background, name="relmon-rules", daemon=True).start()
        return rules

    def _refresh_in_background(self) -> None:
        try:
            self.current()
        except Exception:  # the copy in use stays; the next peek tries again
            log.exception("rules not read again")
        finally:
            self._refreshing.release()

    def file_rules(self) -> ChannelRules:
        """The rules file alone (what `/judge config` shows values coming from)."""
        self.current()
        assert self._file is not None
        return self._file

    def forget(self) -> None:
        """Read everything again on the next use (after a change made in this process)."""
        with self._lock:
            self._read_at = float("-inf")  # stale: `current` reads again; `peek` keeps the copy until then

    def _read(self) -> None:
        self._read_file()
        try:
            with self._database().reading() as session:
                self._overrides = all_overrides(session)
        except SQLAlchemyError as error:
            log.warning("rules changed in Slack not read: the last ones read stay", extra={"error": str(error)[:300]})
        assert self._file is not None
        self._rules = self._file.with_overrides(self._overrides)
        self._read_at = self._clock()

    def _read_file(self) -> None:
        stamp = _stamp(self.path)
        if self._file is not None and stamp == self._file_stamp:
            return
        try:
            self._file = ChannelRules.load(self.path)
        except Exception as error:
            if self._file is None:
                raise  # at start: a broken file stops relmon, as it always has (doctor says why)
            log.error("rules file not read again: the last good one stays", extra={"error": str(error)[:300]})
        self._file_stamp = stamp


def _stamp(path: Path | None) -> tuple | None:
    if path is None:
        return None
    try:
        info = Path(path).stat()
    except OSError:
        return ("missing",)
    return (info.st_size, info.st_mtime_ns)
