"""On-demand judgments (`/judge <link>`, the "Judge this answer" shortcut, the /judge modal): find the answer and
its question, store the pair and queue it for judging; the verdict comes back from the workers, privately.

An answer relmon captured and paired is judged as stored. Any other answer is read from Slack through capture's
rate-limited history fallback (one call: the answer's thread up to it, or the channel's top level in the pairing
window before it, the answer included), and its question is the one capture's pairing rules pick from those
messages (`capture.pairing.find_question`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import asdict, dataclass
from typing import Any

from slack_sdk import WebClient

from bot.on_demand_limits import take_on_demand
from bot.replies import tell
from capture.conversation_log import HistoryFallback
from capture.directory import channel_is_private
from capture.notices import is_notice
from capture.pairing import Author, Identity, LoggedMessage, author_of, find_question, logged_message
from capture.redact import redact_if
from capture.text import message_text
from common import task_names
from common.celery_app import celery
from common.membership import MembershipCache, Refusal
from common.messages.verdicts import accepted_message, error_message
from common.replies import Asker, remember_reply_channel
from common.runtime import Runtime
from store import pairs
from store.models import PairSource

log = logging.getLogger("relmon.commands")


@dataclass(frozen=True)
class Place:
    """Where a judged answer was said."""

    channel_id: str | None
    channel_is_private: bool
    thread_ts: str | None
    question_ts: str | None


PASTED = Place(None, False, None, None)  # pasted text belongs to no channel


@dataclass(frozen=True)
class OnDemand:
    question: str
    answer: str
    place: Place = PASTED


def as_logged(raw: list[dict[str, Any]], monitored: Collection[str]) -> list[LoggedMessage]:
    """Slack's messages as the conversation log keeps them, by capture's rules. relmon's own messages count as
    another bot's here: neither is ever a question."""
    return [logged_message(m, author_of(m, monitored, Identity())) for m in raw if m.get("ts") and not is_notice(m)]


def find_on_demand(
    runtime: Runtime, client: WebClient, channel_id: str, ts: str, thread_ts: str | None, message: dict | None = None
) -> OnDemand:
    """The answer at (channel, ts) and its question: a captured pair when relmon stored one, else Slack's copy
    of the message (`message` when the shortcut brought it) and the question capture's rules find before it."""
    settings = runtime.settings
    with runtime.db.session() as session:
        stored = pairs.captured_texts(session, channel_id, ts)
    if stored is not None and stored.question_text and stored.answer_text:
        place = Place(channel_id, bool(stored.channel_is_private), stored.thread_ts, stored.question_ts)
        return OnDemand(stored.question_text, stored.answer_text, place)
    stored_question = stored.question_text if stored is not None else None
    thread_ts = thread_ts or (message or {}).get("thread_ts")
    answer = LoggedMessage(ts=ts, thread_ts=thread_ts, author=Author.MONITORED_BOT)
    raw: list[dict[str, Any]] = []
    if message is None or not stored_question:
        fallback = HistoryFallback(runtime.redis, client)
        raw = fallback.fetch(channel_id, answer, settings.toplevel_window_seconds)
    if message is None:
        message = next((m for m in raw if m.get("ts") == ts), None)
    if message is None:
        raise Refusal("not_found")
    answer_text = redact_if(settings.redact_pii, message_text(message)) or ""
    if not answer_text.strip():
        raise Refusal("no_answer")
    if stored is not None and stored_question:
        question, question_ts = stored_question, stored.question_ts
    else:
        asked = find_question(answer, as_logged(raw, settings.monitored_bots), settings.toplevel_window_seconds)
        if asked is None:
            raise Refusal("no_question")
        question, question_ts = redact_if(settings.redact_pii, message_text(asked.content)) or "", asked.ts
    private = channel_is_private(runtime.redis, client, channel_id, None)
    place = Place(channel_id, private, message.get("thread_ts") or thread_ts, question_ts)
    return OnDemand(question, answer_text, place)


def enqueue_on_demand(
    runtime: Runtime,
    wanted: OnDemand,
    *,
    source: str,
    asker: Asker,
    judges: list[str] | None = None,
    reference: str | None = None,
) -> int:
    """Store an on-demand pair and queue it for judging; its id."""
    with runtime.db.session() as session:
        pair_id = pairs.add_on_demand(
            session,
            **asdict(wanted.place),  # the pair's columns of the same names
            source=source,
            question_text=wanted.question,
            answer_text=wanted.answer,
            reference_text=reference,
            judges=judges,
            requested_by=asker.user_id,
            response_url=asker.response_url,
        )
    # The verdict's fallback when the response_url is gone: an ephemeral message where the person asked.
    remember_reply_channel(runtime.redis, pair_id, asker.channel_id)
    celery.send_task(task_names.JUDGE_PAIR, args=[pair_id])
    log.info("on-demand judgment queued", extra={"pair_id": pair_id, "source": source})
    return pair_id


def judge_message(
    runtime: Runtime,
    client: WebClient,
    asker: Asker,
    membership: MembershipCache,
    *,
    channel_id: str,
    ts: str,
    thread_ts: str | None,
    source: str,
    message: dict | None = None,
    judges: list[str] | None = None,
    note_when_taken: bool = False,
) -> None:
    """The link and the shortcut: check access first, then find, store and enqueue. `note_when_taken`: say
    "Judging…" once the answer is found (the link's ack already said it; a shortcut's ack cannot)."""
    assert asker.user_id is not None
    try:
        membership.require_member(client, channel_id, asker.user_id)
        take_on_demand(runtime.redis, runtime.settings, asker.user_id)
        wanted = find_on_demand(runtime, client, channel_id, ts, thread_ts, message)
        if note_when_taken:  # before the enqueue, so it cannot arrive after the verdict
            tell(client, asker, accepted_message())
        enqueue_on_demand(runtime, wanted, source=source, asker=asker, judges=judges)
    except Refusal as refusal:
        tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("on-demand judgment failed to start", extra={"channel": channel_id, "source": source})
        tell(client, asker, error_message("unavailable"))


def judge_pasted(
    runtime: Runtime, client: WebClient, asker: Asker, *, question: str, answer: str, reference: str | None, judge: str
) -> None:
    """The modal: judge pasted texts (redacted first when RELMON_REDACT_PII says so)."""
    redact = runtime.settings.redact_pii
    wanted = OnDemand(redact_if(redact, question) or "", redact_if(redact, answer) or "")
    try:
        take_on_demand(runtime.redis, runtime.settings, asker.user_id)
        tell(client, asker, accepted_message("the answer you pasted"))  # the modal closed on the ack
        enqueue_on_demand(
            runtime,
            wanted,
            source=PairSource.COMMAND,
            asker=asker,
            judges=[judge],
            reference=redact_if(redact, reference),
        )
    except Refusal as refusal:
        tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("modal judgment failed to start")
        tell(client, asker, error_message("unavailable"))
