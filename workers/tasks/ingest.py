"""`ingest_exchanges`: the exchanges of a request the bot accepted on its ingest API (bot.ingest, bot.otlp_ingest)
and handed on noted (common.task_notes) or through its spool, up to bot.publishing.EXCHANGES_PER_TASK a call; each
stored and sent to judging here (the step: workers.ingesting). Idempotent: the same exchange run twice is one.
`ingest_exchange`: one exchange, as a bot before batches handed them on (its messages and notes still run).
`ingest_signal`: what the bot's side said of one after it (the step: workers.bot_signals)."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy.exc import OperationalError

from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from workers.bot_signals import ingest_signal_in
from workers.handed_on import HANDED_ON_RETRIES
from workers.ingesting import RETRIED, ingest, ingest_all


# Retried as every task the bot hands on is (workers.handed_on). IntegrityError too: capture stored the same
# Slack message's pair meanwhile; the retry joins it.
@celery.task(name=task_names.INGEST_EXCHANGE, bind=True, autoretry_for=RETRIED, **HANDED_ON_RETRIES)
def ingest_exchange(self, exchange: dict[str, Any]) -> str:
    return ingest(get_runtime(), exchange)


@celery.task(name=task_names.INGEST_EXCHANGES, bind=True, autoretry_for=RETRIED, **HANDED_ON_RETRIES)
def ingest_exchanges(self, exchanges: list[dict[str, Any]]) -> str:
    return ingest_all(get_runtime(), exchanges)


@celery.task(
    name=task_names.INGEST_SIGNAL, bind=True, autoretry_for=(redis.RedisError, OperationalError), **HANDED_ON_RETRIES
)
def ingest_signal(self, exchange_id: str, signal: dict[str, Any]) -> str:
    """A signal of the bot's side (POST /v1/exchanges/{id}/signals): recorded, or waiting for its exchange."""
    return ingest_signal_in(get_runtime(), exchange_id, signal)
