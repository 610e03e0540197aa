"""The SQL statements a block of code runs, for the tests that count round trips or look at what was read."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, event


@contextmanager
def statements_run(engine: Engine) -> Iterator[list[str]]:
    """The list fills with each statement `engine` sends while the block runs (as sent, with its placeholders)."""
    statements: list[str] = []

    def record(_connection, _cursor, statement: str, *_rest) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", record)
