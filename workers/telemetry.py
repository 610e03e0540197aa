"""Logging (one structured line per event, never message texts above debug) and Sentry set-up."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from store.settings import Settings


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message and any `extra={...}` fields."""

    RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        line.update({k: v for k, v in vars(record).items() if k not in self.RESERVED})
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def setup_logging(settings: Settings, component: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    logging.getLogger("relmon").info("starting", extra={"component": component})
