"""Forwarding one turn of the agent's conversation to relmon's ingest API (docs/ingest.md in relmon): relmon cannot
read an agent's DMs, so the bot sends what it answered. A failure is logged and never breaks the bot's answer."""

from __future__ import annotations

import logging
import os
from datetime import datetime

import httpx

log = logging.getLogger("agent_bot.relmon")


def forward_to_relmon(
    question: str,
    answer: str,
    *,
    exchange_id: str,
    conversation_id: str,
    turn: int,
    asked_at: datetime,
    answered_at: datetime,
    asker: str | None = None,
    url: str | None = None,
    token: str | None = None,
) -> bool:
    body = {"id": exchange_id, "bot": os.environ.get("RELMON_BOT_NAME", "agent-bot"), "turn": turn, "visibility": "dm",
            "conversation_id": conversation_id, "question": question, "answer": answer, "asker": asker,
            "asked_at": asked_at.isoformat(), "answered_at": answered_at.isoformat()}  # fmt: skip
    body = {key: value for key, value in body.items() if value is not None}
    headers = {"Authorization": f"Bearer {token or os.environ['RELMON_INGEST_TOKEN']}"}
    try:
        sent = httpx.post(f"{url or os.environ['RELMON_URL']}/v1/exchanges", json=body, headers=headers, timeout=5)
        sent.raise_for_status()  # 202: relmon holds it durably; a retry of the same id is stored once
        return True
    except httpx.HTTPError as error:
        log.warning("relmon did not take the exchange %s: %s", exchange_id, error)
        return False
