"""Histories for the backfill tests and bench: a channel of questions and the support bot's answers, in threads
and at top level, in the fake Slack or as a workspace export zip."""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from collections import defaultdict
from datetime import UTC, datetime

BOT = "B_SUPPORT"
BASE_TS = 1_780_000_000  # seconds; ~2026-05-28


def history_messages(channel: str, pairs: int, *, start: float = BASE_TS, step: float = 900.0) -> list[dict]:
    """`pairs` question/answer exchanges, alternately in a thread (question root, bot reply) and at top level
    (question, then the bot's answer 30 s later); a notice between them. 2.5 messages a pair."""
    out: list[dict] = []
    for i in range(pairs):
        t = start + i * step
        question = {"type": "message", "ts": f"{t:.6f}", "user": "U_ASKER", "text": f"how do I reset item {i}?"}
        answer = {"type": "message", "ts": f"{t + 30:.6f}", "user": "U_SUPPORT", "bot_id": BOT,
                  "bot_profile": {"id": BOT, "app_id": "A_SUPPORT"},
                  "text": f"Open settings and reset item {i}."}  # fmt: skip
        if i % 2 == 0:
            question["thread_ts"] = question["ts"]
            question["reply_count"] = 1
            answer["thread_ts"] = question["ts"]
        out += [question, answer]
        if i % 2 == 1:
            out.append({"type": "message", "subtype": "channel_join", "ts": f"{t + 60:.6f}", "user": "U_NEW"})
    return out


def load_fake(fake_slack, channel: str, messages: list[dict]) -> None:
    for message in messages:
        with fake_slack._lock:
            fake_slack.messages[channel][message["ts"]] = dict(message)


def export_zip(
    channels: dict[str, tuple[str, list[dict]]],
    *,
    listed_in: dict[str, str] | None = None,
    entries: dict[str, dict] | None = None,
) -> bytes:
    """A workspace export: channels.json, users.json and one folder of day files per channel (id -> name, msgs).
    `listed_in` puts a channel in another list than channels.json (groups.json, mpims.json, dms.json), as Slack
    lists private channels and DMs; `entries` adds fields to a channel's entry (is_ext_shared, say)."""
    lists: dict[str, list[dict]] = defaultdict(list)
    for cid, (name, _) in channels.items():
        entry = {"id": cid, "name": name, **(entries or {}).get(cid, {})}
        lists[(listed_in or {}).get(cid, "channels.json")].append(entry)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("channels.json", json.dumps(lists.pop("channels.json", [])))
        for list_name, listed in lists.items():
            archive.writestr(list_name, json.dumps(listed))
        archive.writestr(
            "users.json", json.dumps([{"id": "U_ASKER", "name": "ana", "profile": {"display_name": "Ana"}}])
        )
        for _cid, (name, messages) in channels.items():
            days: dict[str, list[dict]] = defaultdict(list)
            for message in messages:
                days[datetime.fromtimestamp(float(message["ts"]), UTC).date().isoformat()].append(message)
            for day, content in days.items():
                archive.writestr(f"{name}/{day}.json", json.dumps(content))
    return buffer.getvalue()


def args(**values) -> argparse.Namespace:
    defaults = {"since": "2026-05-01", "channel": None, "limit": None, "batch": False, "dry_run": False,
                "post": False, "export": None}  # fmt: skip
    return argparse.Namespace(**{**defaults, **values})
