"""The "Mark fixed" buttons under a topic (the digest's "What to fix first", App Home's topics): the click is
acknowledged at once and handed to the worker (workers.tasks.fixes) with the topic's key, who clicked, when, and
the message clicked in (none from App Home); the worker stores the mark and tells its verdicts."""

from __future__ import annotations

import logging
import re
import time

from slack_bolt import App
from slack_sdk import WebClient

from bot.deps import BotDeps
from bot.listeners.clicks import ack_now
from bot.replies import tell
from common import task_names
from common.celery_app import celery
from common.messages.fixes import MARK_ACTION_ID
from common.messages.verdicts import error_message
from common.replies import Asker

log = logging.getLogger("relmon.fixes")

ACTION_PATTERN = re.compile(rf"^{MARK_ACTION_ID}(:[0-9]{{1,3}})?$")
_KEY = re.compile(r"[A-Za-z0-9_.:-]{1,40}")
_TS = re.compile(r"[0-9]{1,12}(\.[0-9]{1,8})?")


def _clicked_at(action: dict) -> float:
    """The click's own time (Slack's action_ts), else now: a redelivered task then finds the same mark."""
    stamp = action.get("action_ts")
    return float(stamp) if isinstance(stamp, str) and _TS.fullmatch(stamp) else time.time()


def hand_off(body: dict, client: WebClient) -> None:
    """The lazy half of a click: the task gets the key and IDs; a forged value is dropped."""
    action = (body.get("actions") or [{}])[0]
    key = action.get("value")
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        return  # not a topic's key: a forged click
    container = body.get("container") or {}
    user = body["user"]["id"]
    in_message = container.get("type") == "message"
    channel = container.get("channel_id") if in_message else None
    message_ts = container.get("message_ts") if in_message else None
    if in_message and not (isinstance(channel, str) and isinstance(message_ts, str) and _TS.fullmatch(message_ts)):
        return
    try:
        celery.send_task(task_names.MARK_FIXED, args=[key, user, _clicked_at(action)],
                         kwargs={"channel_id": channel, "message_ts": message_ts})  # fmt: skip
    except Exception:  # the broker down: nothing was handed on, and the person is told so
        log.exception("the mark could not be handed on")
        tell(client, Asker(user, channel, body.get("response_url")), error_message("unavailable"))
        return
    log.info("mark handed on", extra={"topic_key": key})


def register(app: App, deps: BotDeps) -> None:
    app.action(ACTION_PATTERN)(ack=ack_now, lazy=[hand_off])
