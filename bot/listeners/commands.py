"""`/judge`, the "Judge this answer" message shortcut, the /judge modal, and the feedback buttons on alerts.

Every handler acknowledges at once (Slack allows 3 seconds) from the request alone; anything that
touches Slack, the database or the broker runs after the ack in a lazy listener. Judging itself runs in
the workers: an on-demand pair is stored and `workers.tasks.judging.judge_pair` enqueued; the verdict
comes back privately from `workers.tasks.slack.deliver_verdict` (the response_url, else an ephemeral message
in the channel where the person asked, else a direct message). Every other reply (the "Judging…" note,
refusals, stats) goes the same way through `common.replies`, without the direct message and without waiting
out a rate-limited response_url (an ephemeral message at once instead).

Access: a person can only have judged, or see the figures of, a channel they are a member of
(conversations.members, cached for a minute); otherwise relmon refuses in one sentence and reveals nothing.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_bolt import Ack, App
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from bot.permalinks import find_link, parse_message_link
from capture.directory import channel_is_private
from capture.pairing import is_bot_message
from capture.redact import redact_if
from capture.text import message_text
from common import task_names
from common.celery_app import celery
from common.feedback import ACTION_RIGHT, ACTION_WRONG, VOTE_FOR_ACTION
from common.messages.alerts import OPEN_ACTION_ID
from common.messages.verdicts import (
    ERRORS,
    MODAL_CALLBACK_ID,
    StatsRow,
    accepted_message,
    error_message,
    help_message,
    judge_modal,
    stats_message,
)
from common.replies import Asker, remember_reply_channel, reply_privately
from common.runtime import Runtime, get_runtime
from store.alerts import by_message, channel_stats, low_alert_for_judgment
from store.feedback import record_vote
from store.models import Pair, PairStatus
from store.rules import JUDGE_NAMES
from store.settings import Settings

log = logging.getLogger("relmon.commands")

SHORTCUT_CALLBACK_ID = "judge_this_answer"
STATS_DAYS = 7
MEMBERS_TTL_SECONDS = 60.0
JUDGES_NEEDING_REFERENCE = frozenset({"correctness", "grounded"})
# Slack errors meaning relmon cannot see the channel at all.
UNSEEN_CHANNEL_ERRORS = frozenset(
    {"channel_not_found", "not_in_channel", "missing_scope", "method_not_supported_for_channel_type"}
)


# Routing (pure) -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    kind: str  # modal | help | stats | digest | link | bad_link | unknown
    argument: str = ""


def route(text: str | None) -> Route:
    """What `/judge <text>` asks for, from the text alone."""
    words = (text or "").strip()
    if not words:
        return Route("modal")
    first, _, rest = words.partition(" ")
    keyword = first.lower()
    if keyword in ("help", "?"):
        return Route("help")
    if keyword == "stats":
        return Route("stats", rest.strip())
    if keyword == "digest":
        return Route("digest", rest.strip())
    if find_link(words):
        return Route("link", words) if parse_message_link(words) else Route("bad_link")
    if "slack.com/" in words or "://" in words:
        return Route("bad_link")
    return Route("unknown")


_CHANNEL_MENTION = re.compile(r"^<#([CG][A-Z0-9_]+)(?:\|[^>]*)?>$")
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9_]{6,}$")


def named_judge(text: str) -> str | None:
    """A judge named after the link (`/judge <link> relevancy`), as the manifest's usage hint shows."""
    for word in re.split(r"[\s<>|]+", text.lower()):
        if word in JUDGE_NAMES:
            return word
    return None


def channel_reference(argument: str) -> tuple[str | None, str | None]:
    """(channel ID, channel name) from `<#C123|name>`, `C123` or `#name`; (None, None) for nothing."""
    argument = argument.strip()
    if not argument:
        return None, None
    mention = _CHANNEL_MENTION.match(argument)
    if mention:
        return mention.group(1), None
    if _CHANNEL_ID.match(argument):
        return argument, None
    return None, argument.lstrip("#").lower()


# Membership -------------------------------------------------------------------------------------------


class MembershipCache:
    """Channel members from conversations.members, kept briefly (joins and leaves show within a minute)."""

    def __init__(self, ttl_seconds: float = MEMBERS_TTL_SECONDS) -> None:
        self.ttl = ttl_seconds
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def is_member(self, client: WebClient, channel_id: str, user_id: str) -> bool | None:
        """True or False; None when relmon cannot see the channel (so cannot vouch for anyone)."""
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(channel_id)
        if cached is None or now - cached[0] > self.ttl:
            try:
                members = self._fetch(client, channel_id)
            except SlackApiError as error:
                if error.response.get("error") in UNSEEN_CHANNEL_ERRORS:
                    return None
                raise
            cached = (now, members)
            with self._lock:
                self._members[channel_id] = cached
        return user_id in cached[1]

    @staticmethod
    def _fetch(client: WebClient, channel_id: str) -> frozenset[str]:
        members: set[str] = set()
        for page in client.conversations_members(channel=channel_id, limit=1000):
            members.update(page.get("members", []))
        return frozenset(members)


MEMBERSHIP = MembershipCache()


class Refusal(Exception):
    """Stop and tell the person one sentence (an ERRORS code)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def require_member(client: WebClient, channel_id: str, user_id: str) -> None:
    """The link and the shortcut: relmon must see the channel, and the person be a member of it."""
    member = MEMBERSHIP.is_member(client, channel_id, user_id)
    if member is None:
        raise Refusal("not_found")
    if not member:
        raise Refusal("not_member")


# Finding the answer and its question -------------------------------------------------------------------


@dataclass(frozen=True)
class OnDemand:
    channel_id: str | None
    channel_is_private: bool
    question: str
    answer: str
    question_ts: str | None = None
    thread_ts: str | None = None
    reference: str | None = None
    judges: list[str] | None = None


def _is_human(message: dict[str, Any]) -> bool:
    return (
        bool(message.get("user"))
        and not is_bot_message(message)
        and message.get("subtype") in (None, "thread_broadcast")
    )


def fetch_message(client: WebClient, channel_id: str, ts: str, thread_ts: str | None) -> dict[str, Any] | None:
    try:
        if thread_ts and thread_ts != ts:
            page = client.conversations_replies(
                channel=channel_id, ts=thread_ts, oldest=ts, latest=ts, inclusive=True, limit=10
            )
        else:
            page = client.conversations_history(channel=channel_id, oldest=ts, latest=ts, inclusive=True, limit=1)
    except SlackApiError as error:
        log.info("message fetch failed", extra={"channel": channel_id, "error": error.response.get("error")})
        return None
    return next((m for m in page.get("messages", []) if m.get("ts") == ts), None)


def previous_human_message(
    client: WebClient, channel_id: str, message: dict[str, Any], window_seconds: float
) -> dict[str, Any] | None:
    """The question: the latest human message before the answer in its thread, or at channel top level
    within the pairing window (the same rule capture uses)."""
    ts = message["ts"]
    thread_ts = message.get("thread_ts")
    try:
        if thread_ts and thread_ts != ts:
            page = client.conversations_replies(channel=channel_id, ts=thread_ts, latest=ts, inclusive=False, limit=200)
            earlier = sorted(
                (m for m in page.get("messages", []) if float(m["ts"]) < float(ts)), key=lambda m: float(m["ts"])
            )
            humans = [m for m in earlier if _is_human(m)]
            return humans[-1] if humans else None
        page = client.conversations_history(channel=channel_id, latest=ts, inclusive=False, limit=20)
    except SlackApiError:
        return None
    for candidate in page.get("messages", []):  # newest first
        if float(ts) - float(candidate["ts"]) > window_seconds:
            return None
        if _is_human(candidate):
            return candidate
    return None


def find_on_demand(
    runtime: Runtime, client: WebClient, channel_id: str, ts: str, thread_ts: str | None, message: dict | None = None
) -> OnDemand:
    """The answer at (channel, ts) and its question: a captured pair when relmon stored one, else Slack's
    copy of the message and the human message before it."""
    settings = runtime.settings
    with runtime.db.session() as session:
        stored = session.execute(
            select(Pair.question_text, Pair.answer_text, Pair.question_ts, Pair.thread_ts, Pair.channel_is_private)
            .where(Pair.channel_id == channel_id, Pair.answer_ts == ts)
            .limit(1)
        ).first()
    if stored is not None and stored.question_text and stored.answer_text:
        return OnDemand(
            channel_id, bool(stored.channel_is_private), stored.question_text, stored.answer_text, stored.question_ts,
            stored.thread_ts,
        )  # fmt: skip
    if message is None:
        message = fetch_message(client, channel_id, ts, thread_ts)
    if message is None:
        raise Refusal("not_found")
    message = {**message, "ts": message.get("ts") or ts}
    if thread_ts and not message.get("thread_ts"):
        message["thread_ts"] = thread_ts
    answer = redact_if(settings.redact_pii, message_text(message)) or ""
    if not answer.strip():
        raise Refusal("no_answer")
    if stored is not None and stored.question_text:
        question, question_ts = stored.question_text, stored.question_ts
    else:
        asked = previous_human_message(client, channel_id, message, settings.toplevel_window_seconds)
        if asked is None:
            raise Refusal("no_question")
        question, question_ts = redact_if(settings.redact_pii, message_text(asked)) or "", asked.get("ts")
    private = channel_is_private(runtime.redis, client, channel_id, None)
    return OnDemand(channel_id, private, question, answer, question_ts, message.get("thread_ts"))


def enqueue_on_demand(runtime: Runtime, wanted: OnDemand, *, source: str, asker: Asker) -> int:
    """Store an on-demand pair (pending: no settling needed) and queue it for judging.

    `answer_ts` stays empty: the (channel, answer_ts) key belongs to the captured pair, and one answer may be
    judged on demand any number of times (the judgment cache spares the repeat LLM calls)."""
    with runtime.db.session() as session:
        pair = Pair(
            source=source,
            channel_id=wanted.channel_id,
            channel_is_private=wanted.channel_is_private,
            thread_ts=wanted.thread_ts,
            question_ts=wanted.question_ts,
            question_text=wanted.question,
            answer_text=wanted.answer,
            reference_text=wanted.reference,
            judges=wanted.judges,
            status=PairStatus.PENDING,
            requested_by=asker.user_id,
            response_url=asker.response_url,
        )
        session.add(pair)
        session.flush()
        pair_id = pair.id
    # The verdict's fallback when the response_url is gone: an ephemeral message where the person asked.
    remember_reply_channel(runtime.redis, pair_id, asker.channel_id)
    celery.send_task(task_names.JUDGE_PAIR, args=[pair_id])
    log.info("on-demand judgment queued", extra={"pair_id": pair_id, "source": source})
    return pair_id


def judge_message(
    client: WebClient,
    asker: Asker,
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
    runtime = get_runtime()
    assert asker.user_id is not None
    try:
        require_member(client, channel_id, asker.user_id)
        wanted = find_on_demand(runtime, client, channel_id, ts, thread_ts, message)
        if judges:
            wanted = replace(wanted, judges=judges)
        if note_when_taken:  # before the enqueue, so it cannot arrive after the verdict
            _tell(client, asker, accepted_message())
        enqueue_on_demand(runtime, wanted, source=source, asker=asker)
    except Refusal as refusal:
        _tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("on-demand judgment failed to start", extra={"channel": channel_id, "source": source})
        _tell(client, asker, error_message("unavailable"))


def _tell(client: WebClient, asker: Asker, payload: dict) -> None:
    """Reply privately: the response_url, else an ephemeral message; logged when neither works (a DM is kept
    for verdicts). A rate-limited response_url is not waited for: these listeners share Bolt's few threads,
    and one sleeping out a Retry-After could hold up a /judge whose modal must open within 3 seconds."""
    reply_privately(client, asker, payload, wait_rate_limits=False)


def _command_asker(command: dict) -> Asker:
    return Asker(command.get("user_id"), command.get("channel_id"), command.get("response_url"))


# /judge stats ------------------------------------------------------------------------------------------


def channel_named(client: WebClient, name: str) -> str | None:
    for page in client.conversations_list(types="public_channel,private_channel", limit=1000, exclude_archived=True):
        for channel in page.get("channels", []):
            if channel.get("name", "").lower() == name:
                return channel["id"]
    return None


def stats_channel(client: WebClient, argument: str, current_channel: str, user_id: str) -> str:
    """The channel whose figures this person may see, or a Refusal."""
    channel_id, name = channel_reference(argument)
    if channel_id is None and name is None:  # this conversation: a DM, or a channel relmon may not be in
        member = MEMBERSHIP.is_member(client, current_channel, user_id)
        if member is None:
            raise Refusal("stats_not_here")
        if not member:
            raise Refusal("stats_refused")
        return current_channel
    if channel_id is None:
        channel_id = channel_named(client, name or "")
    # One answer for a name relmon doesn't know, a channel it can't see and a channel the person isn't in:
    # a non-member learns nothing, not even whether a private channel of that name exists.
    if channel_id is None or not MEMBERSHIP.is_member(client, channel_id, user_id):
        raise Refusal("stats_refused")
    return channel_id


def show_stats(client: WebClient, asker: Asker, *, argument: str) -> None:
    runtime = get_runtime()
    assert asker.user_id is not None and asker.channel_id is not None
    try:
        channel_id = stats_channel(client, argument, asker.channel_id, asker.user_id)
        rule = runtime.rules.for_channel(channel_id, runtime.settings)
        since = datetime.now(UTC) - timedelta(days=STATS_DAYS)
        with runtime.db.session() as session:
            stats = channel_stats(session, channel_id, since, dict(rule.thresholds))
        rows = [
            StatsRow(s.judge, s.judged, s.mean, s.low, rule.thresholds[s.judge], s.max_score, s.errors) for s in stats
        ]
        _tell(client, asker, stats_message(channel_id, rows, days=STATS_DAYS))
    except Refusal as refusal:
        _tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("stats failed")
        _tell(client, asker, error_message("unavailable"))


# Listeners ---------------------------------------------------------------------------------------------


def ack_judge(ack: Ack, command: dict) -> None:
    """Answer within Slack's 3 seconds from the text alone."""
    wanted = route(command.get("text"))
    if wanted.kind == "help":
        ack(**help_message(), response_type="ephemeral")
    elif wanted.kind in ("bad_link", "unknown"):
        ack(**error_message("bad_link" if wanted.kind == "bad_link" else "unknown_command"), response_type="ephemeral")
    elif wanted.kind == "link" and named_judge(wanted.argument) in JUDGES_NEEDING_REFERENCE:
        ack(**error_message("link_needs_reference"), response_type="ephemeral")
    elif wanted.kind == "link":
        ack(**accepted_message(), response_type="ephemeral")
    elif wanted.kind == "stats":
        ack(text="Counting the last 7 days…", response_type="ephemeral")
    elif wanted.kind == "digest":
        ack(text="Preparing a digest preview…", response_type="ephemeral")
    else:
        ack()  # the modal opens next


def work_judge(command: dict, client: WebClient) -> None:
    """After the ack: the slow part of /judge."""
    wanted = route(command.get("text"))
    asker = _command_asker(command)
    user_id, channel_id, response_url = asker.user_id, asker.channel_id, asker.response_url
    if wanted.kind == "link":
        link = parse_message_link(wanted.argument)
        assert link is not None  # route() checked
        judge = named_judge(wanted.argument)
        if judge in JUDGES_NEEDING_REFERENCE:
            return  # refused in the ack
        judge_message(
            client,
            asker,
            channel_id=link.channel_id,
            ts=link.ts,
            thread_ts=link.thread_ts,
            source="command",
            judges=[judge] if judge else None,
        )
    elif wanted.kind == "stats":
        show_stats(client, asker, argument=wanted.argument)
    elif wanted.kind == "digest":
        try:
            celery.send_task(
                task_names.SEND_DIGEST_PREVIEW,
                kwargs={"user_id": user_id, "channel_id": channel_id, "response_url": response_url},
            )
        except Exception:
            log.exception("digest preview not queued")
            _tell(client, asker, error_message("unavailable"))
    elif wanted.kind == "modal":
        metadata = {"response_url": response_url, "channel_id": channel_id}
        try:
            client.views_open(trigger_id=command["trigger_id"], view=judge_modal(metadata))
        except SlackApiError as error:
            log.warning("views.open failed", extra={"error": error.response.get("error")})
            _tell(client, asker, error_message("unavailable"))


def ack_shortcut(ack: Ack) -> None:
    ack()  # Slack shows nothing from a shortcut's ack: the "Judging…" note follows on the response_url


def work_shortcut(body: dict, client: WebClient) -> None:
    message = body.get("message") or {}
    channel_id = (body.get("channel") or {}).get("id")
    asker = Asker(body["user"]["id"], channel_id, body.get("response_url"))
    ts = message.get("ts") or body.get("message_ts")
    if not channel_id or not ts:
        _tell(client, asker, error_message("not_found"))
        return
    thread_ts = message.get("thread_ts")
    judge_message(
        client,
        asker,
        channel_id=channel_id,
        ts=ts,
        thread_ts=thread_ts if thread_ts != ts else None,
        source="shortcut",
        message=message,
        note_when_taken=True,
    )


def _modal_values(view: dict) -> dict[str, str | None]:
    state = view.get("state", {}).get("values", {})

    def text(block: str) -> str | None:
        value = (state.get(block, {}).get("value") or {}).get("value")
        return value.strip() if value and value.strip() else None

    selected = (state.get("judge", {}).get("value") or {}).get("selected_option") or {}
    return {
        "question": text("question"),
        "answer": text("answer"),
        "reference": text("reference"),
        "judge": selected.get("value") or "relevancy",
    }


def modal_errors(values: dict[str, str | None]) -> dict[str, str]:
    """Field errors shown in the modal (Slack keeps it open), keyed by block_id."""
    errors = {}
    if not values["question"]:
        errors["question"] = "Paste the question the person asked."
    if not values["answer"]:
        errors["answer"] = "Paste the answer to judge."
    if values["judge"] in JUDGES_NEEDING_REFERENCE and not values["reference"]:
        errors["reference"] = ERRORS["needs_reference"]
    return errors


def ack_modal(ack: Ack, view: dict) -> None:
    errors = modal_errors(_modal_values(view))
    if errors:
        ack(response_action="errors", errors=errors)
    else:
        ack()


def work_modal(body: dict, view: dict, client: WebClient) -> None:
    values = _modal_values(view)
    if modal_errors(values):
        return
    try:
        metadata = json.loads(view.get("private_metadata") or "{}")
    except ValueError:
        metadata = {}
    # The modal has no response_url of its own: the /judge that opened it passed its own, and its channel.
    asker = Asker(body["user"]["id"], metadata.get("channel_id"), metadata.get("response_url"))
    runtime = get_runtime()
    redact = runtime.settings.redact_pii
    wanted = OnDemand(
        channel_id=None,  # pasted text belongs to no channel
        channel_is_private=False,
        question=redact_if(redact, values["question"]) or "",
        answer=redact_if(redact, values["answer"]) or "",
        reference=redact_if(redact, values["reference"]),
        judges=[values["judge"]],
    )
    _tell(client, asker, accepted_message("the answer you pasted"))  # the modal closed on the ack
    try:
        enqueue_on_demand(runtime, wanted, source="command", asker=asker)
    except Exception:
        log.exception("modal judgment failed to start")
        _tell(client, asker, error_message("unavailable"))


def ack_feedback(ack: Ack) -> None:
    ack()


def work_feedback(body: dict, client: WebClient) -> None:
    """Record the click as this person's vote (changeable), then refresh the alert's tally."""
    action = body["actions"][0]
    vote = VOTE_FOR_ACTION[action["action_id"]]
    user_id = body["user"]["id"]
    container = body.get("container") or {}
    asker = Asker(user_id, container.get("channel_id"), body.get("response_url"))
    runtime = get_runtime()
    try:
        judgment_id = int(action.get("value") or "")
    except ValueError:
        return
    try:
        with runtime.db.session() as session:
            recorded = record_vote(session, judgment_id, user_id, vote)
            alert = None
            if container.get("channel_id") and container.get("message_ts"):
                alert = by_message(session, container["channel_id"], container["message_ts"])
            if alert is None:
                alert = low_alert_for_judgment(session, judgment_id)
            alert_id = alert.id if alert is not None else None
        if not recorded:  # the judgment was deleted (retention) since the alert was posted
            _tell(client, asker, error_message("vote_gone"))
            return
        if alert_id is not None:
            celery.send_task(task_names.REFRESH_ALERT_VOTES, args=[alert_id])
    except Exception:
        log.exception("feedback not recorded")
        _tell(client, asker, error_message("unavailable"))


def register(app: App, settings: Settings) -> None:
    """Wire this module's listeners onto the app."""
    app.command("/judge")(ack=ack_judge, lazy=[work_judge])
    app.shortcut(SHORTCUT_CALLBACK_ID)(ack=ack_shortcut, lazy=[work_shortcut])
    app.view(MODAL_CALLBACK_ID)(ack=ack_modal, lazy=[work_modal])
    app.action(ACTION_RIGHT)(ack=ack_feedback, lazy=[work_feedback])
    app.action(ACTION_WRONG)(ack=ack_feedback, lazy=[work_feedback])
    app.action(OPEN_ACTION_ID)(ack_feedback)  # a link button still sends an action: ack it, nothing else
