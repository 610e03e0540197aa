"""Slack message links ("Copy link") parsed into a channel and message timestamp.

    https://acme.slack.com/archives/C0123ABCD/p1712345678123456
    https://acme.slack.com/archives/C0123ABCD/p1712345678123456?thread_ts=1712345600.000100&cid=C0123ABCD
    https://acme.enterprise.slack.com/archives/C0123ABCD/p1712345678123456

Slack may wrap a link in angle brackets in slash-command text (`<https://…>` or `<https://…|label>`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class MessageLink:
    channel_id: str
    ts: str
    thread_ts: str | None = None  # the thread's root, when the message is a reply


_LINK = re.compile(r"https://[A-Za-z0-9.-]*slack\.com/archives/[^\s|>]+")
_PATH = re.compile(r"^/archives/([CGD][A-Z0-9_]{2,})/p(\d{10})(\d{6})$")
_TS = re.compile(r"^\d{10}\.\d{6}$")


def find_link(text: str) -> str | None:
    """The first Slack message URL in a text (slash-command text may wrap it in <…|…>)."""
    match = _LINK.search(text or "")
    return match.group(0) if match else None


def parse_message_link(text: str) -> MessageLink | None:
    """The message a link points at, or None when the text holds no Slack message link."""
    url = find_link(text)
    if url is None:
        return None
    parts = urlsplit(url)
    path = _PATH.match(parts.path.rstrip("/"))
    if path is None:
        return None
    channel_id, seconds, micros = path.groups()
    thread = parse_qs(parts.query).get("thread_ts", [None])[-1]
    thread_ts = thread if thread and _TS.match(thread) else None
    return MessageLink(channel_id=channel_id, ts=f"{seconds}.{micros}", thread_ts=thread_ts)
