"""`/judge`, the "Judge this answer" message shortcut, the /judge modal, and the feedback buttons on alerts.

Every handler acknowledges at once (Slack allows 3 seconds) from the request alone, then hands the rest to a
lazy listener that parses and delegates: on-demand judgments to `bot.on_demand`, figures to `bot.stats`,
votes to `bot.votes`, channel and bot rules (`/judge config`) to `bot.judge_config`. Judging itself runs in the
workers; the verdict comes back privately from `workers.tasks.slack.deliver_verdict` (the response_url, else an
ephemeral message in the channel where the person asked, else a direct message).
Every other reply goes through `bot.replies.tell`.

Access: a person can only have judged, or see the figures of, a channel they are a member of
(`common.membership`); otherwise relmon refuses in one sentence and reveals nothing.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass

from slack_bolt import Ack, App
from slack_sdk import WebClient

from bot.config_grammar import ConfigError, parse_config
from bot.deps import BotDeps
from bot.judge_config import configure
from bot.listeners.clicks import alert_click
from bot.on_demand import judge_message, judge_pasted
from bot.on_demand_limits import take_report
from bot.permalinks import find_link, parse_message_link
from bot.replies import open_view, tell
from bot.stats import show_stats
from bot.votes import record_click
from common import task_names
from common.celery_app import celery
from common.feedback import ACTION_RIGHT, ACTION_WRONG, VOTE_FOR_ACTION
from common.membership import MembershipCache, Refusal
from common.messages.alerts import OPEN_ACTION_ID
from common.messages.judge_config import config_error_message
from common.messages.verdicts import (
    ERRORS,
    MODAL_CALLBACK_ID,
    accepted_message,
    error_message,
    help_message,
    judge_modal,
    unknown_judge_message,
)
from common.replies import Asker, keep_response_url
from common.runtime import Runtime
from judges.names import CORRECTNESS, GROUNDED, JUDGE_NAMES, RELEVANCY
from store.models import PairSource

log = logging.getLogger("relmon.commands")

SHORTCUT_CALLBACK_ID = "judge_this_answer"
JUDGES_NEEDING_REFERENCE = frozenset({CORRECTNESS, GROUNDED})


# Routing (pure) -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    kind: str  # modal | help | stats | digest | config | link | bad_link | unknown
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
    if keyword == "config":
        return Route("config", rest.strip())
    if find_link(words):
        return Route("link", words) if parse_message_link(words) else Route("bad_link")
    if "slack.com/" in words or "://" in words:
        return Route("bad_link")
    return Route("unknown")


@dataclass(frozen=True)
class JudgeChoice:
    """The judge a `/judge <link>` names: `name` (None: the channel's judges), or `unknown`, a name after `--judge`
    that is no judge here ("" when `--judge` has no name after it)."""

    name: str | None = None
    unknown: str | None = None


JUDGE_FLAG = "--judge"
# Some keyboards turn "--" into a dash as it is typed (macOS's smart punctuation): the flag is read either way.
_DASHES = re.compile(r"^[\u2013\u2014]")


def chosen_judge(text: str, names: tuple[str, ...] = JUDGE_NAMES) -> JudgeChoice:
    """The judge named after the link: `--judge NAME`, `--judge=NAME`, or a judge's name alone (`/judge <link>
    relevancy`, as the manifest's usage hint shows); `names`: the seed judges and the team's (store.judge_catalog).
    A word that is no judge's name is ignored unless it follows `--judge`."""
    words = [_DASHES.sub("--", word) for word in re.split(r"[\s<>|]+", text.lower()) if word]
    for at, word in enumerate(words):
        if word == JUDGE_FLAG or word.startswith(JUDGE_FLAG + "="):
            given = word[len(JUDGE_FLAG) + 1 :] if "=" in word else (words[at + 1] if at + 1 < len(words) else "")
            return JudgeChoice(name=given) if given in names else JudgeChoice(unknown=given)
    return JudgeChoice(name=next((word for word in words if word in names), None))


def named_judge(text: str, names: tuple[str, ...] = JUDGE_NAMES) -> str | None:
    """The judge named after the link, None for the channel's judges (or a name that is no judge)."""
    return chosen_judge(text, names).name


def _command_asker(command: dict) -> Asker:
    return Asker(command.get("user_id"), command.get("channel_id"), command.get("response_url"))


# Listeners ---------------------------------------------------------------------------------------------


def ack_judge(ack: Ack, command: dict, names: tuple[str, ...] = JUDGE_NAMES) -> None:
    """Answer within Slack's 3 seconds from the text alone (and `names`, the judges in force: read from files
    already in memory, store.judge_catalog)."""
    wanted = route(command.get("text"))
    choice = chosen_judge(wanted.argument, names) if wanted.kind == "link" else JudgeChoice()
    if wanted.kind == "help":
        ack(**help_message(), response_type="ephemeral")
    elif wanted.kind in ("bad_link", "unknown"):
        ack(**error_message("bad_link" if wanted.kind == "bad_link" else "unknown_command"), response_type="ephemeral")
    elif choice.unknown is not None:
        ack(**unknown_judge_message(choice.unknown, names), response_type="ephemeral")
    elif choice.name in JUDGES_NEEDING_REFERENCE:
        ack(**error_message("link_needs_reference"), response_type="ephemeral")
    elif wanted.kind == "link":
        ack(**accepted_message(), response_type="ephemeral")
    elif wanted.kind == "stats":
        ack(text="Counting the last 7 days…", response_type="ephemeral")
    elif wanted.kind == "digest":
        ack(text="Preparing a digest preview…", response_type="ephemeral")
    elif wanted.kind == "config":
        try:
            parse_config(wanted.argument)  # bad input is answered now; the rest after the ack (bot.judge_config)
        except ConfigError as error:
            ack(**config_error_message(str(error)), response_type="ephemeral")
        else:
            ack()
    else:
        ack()  # the modal opens next


def ack_shortcut(ack: Ack) -> None:
    ack()  # Slack shows nothing from a shortcut's ack: the "Judging…" note follows on the response_url


class SlowWork:
    """The lazy halves of /judge, the shortcut, the modal and the feedback buttons, after the ack, with the app's
    runtime and membership cache."""

    def __init__(self, runtime: Runtime, membership: MembershipCache) -> None:
        self.runtime, self.membership = runtime, membership

    def ack_judge(self, ack: Ack, command: dict) -> None:
        """/judge's ack, with the judges in force (the team's files may change while the bot runs)."""
        ack_judge(ack, command, self.runtime.judges.names)

    def judge(self, command: dict, client: WebClient) -> None:
        """The slow part of /judge."""
        wanted = route(command.get("text"))
        asker = _command_asker(command)
        if wanted.kind == "link":
            link = parse_message_link(wanted.argument)
            assert link is not None  # route() checked
            choice = chosen_judge(wanted.argument, self.runtime.judges.names)
            judge = choice.name
            if choice.unknown is not None or judge in JUDGES_NEEDING_REFERENCE:
                return  # refused in the ack
            judge_message(
                self.runtime,
                client,
                asker,
                self.membership,
                channel_id=link.channel_id,
                ts=link.ts,
                thread_ts=link.thread_ts,
                source=PairSource.COMMAND,
                judges=[judge] if judge else None,
            )
        elif wanted.kind == "stats":
            show_stats(self.runtime, client, asker, self.membership, argument=wanted.argument)
        elif wanted.kind == "digest":
            _queue_digest_preview(self.runtime, client, asker)
        elif wanted.kind == "config":
            configure(self.runtime, client, asker, self.membership, wanted.argument)
        elif wanted.kind == "modal":
            _open_modal(client, asker, command["trigger_id"])

    def shortcut(self, body: dict, client: WebClient) -> None:
        message = body.get("message") or {}
        channel_id = (body.get("channel") or {}).get("id")
        asker = Asker(body["user"]["id"], channel_id, body.get("response_url"))
        ts = message.get("ts") or body.get("message_ts")
        if not channel_id or not ts:
            tell(client, asker, error_message("not_found"))
            return
        thread_ts = message.get("thread_ts")
        judge_message(
            self.runtime,
            client,
            asker,
            self.membership,
            channel_id=channel_id,
            ts=ts,
            thread_ts=thread_ts if thread_ts != ts else None,
            source=PairSource.SHORTCUT,
            message=message,
            note_when_taken=True,
        )

    def modal(self, body: dict, view: dict, client: WebClient) -> None:
        values = _modal_values(view)
        if modal_errors(values):
            return
        try:
            metadata = json.loads(view.get("private_metadata") or "{}")
        except (TypeError, ValueError):
            metadata = {}
        if not isinstance(metadata, dict):
            metadata = {}
        # The modal has no response_url of its own: the /judge that opened it passed its own, and its channel.
        asker = Asker(body["user"]["id"], metadata.get("channel_id"), metadata.get("response_url"))
        judge_pasted(
            self.runtime,
            client,
            asker,
            question=values["question"] or "",
            answer=values["answer"] or "",
            reference=values["reference"],
            judge=values["judge"] or RELEVANCY,
        )

    def feedback(self, body: dict, client: WebClient) -> None:
        """A click on an alert's feedback button: this person's vote (changeable)."""
        click = alert_click(body)
        if click is None or click.action_id not in VOTE_FOR_ACTION:
            return  # not a judgment's id
        vote = VOTE_FOR_ACTION[click.action_id]
        record_click(self.runtime, client, click.asker, click.judgment_id, vote, message_ts=click.message_ts)


def _queue_digest_preview(runtime: Runtime, client: WebClient, asker: Asker) -> None:
    try:
        take_report(runtime.redis, runtime.settings, asker.user_id)  # a full report each: a few a minute a person
        # The response_url (a credential) stays in Redis: the task carries its ID, never the URL.
        url_id = keep_response_url(runtime.redis, asker.response_url)
        celery.send_task(
            task_names.SEND_DIGEST_PREVIEW,
            kwargs={"user_id": asker.user_id, "channel_id": asker.channel_id, "response_url_id": url_id},
        )
    except Refusal as refusal:
        tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("digest preview not queued")
        tell(client, asker, error_message("unavailable"))


def _open_modal(client: WebClient, asker: Asker, trigger_id: str) -> None:
    metadata = {"response_url": asker.response_url, "channel_id": asker.channel_id}
    open_view(client, asker, trigger_id, judge_modal(metadata))


def _field(value: object, *path: str) -> object:
    """value[path[0]][path[1]]…, or None where a level is missing or not an object (a forged view)."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _modal_values(view: dict) -> dict[str, str | None]:
    state = _field(view, "state", "values")

    def text(block: str) -> str | None:
        value = _field(state, block, "value", "value")
        return value.strip() if isinstance(value, str) and value.strip() else None

    judge = _field(state, "judge", "value", "selected_option", "value")
    return {
        "question": text("question"),
        "answer": text("answer"),
        "reference": text("reference"),
        "judge": judge if isinstance(judge, str) and judge in JUDGE_NAMES else RELEVANCY,
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


def ack_feedback(ack: Ack) -> None:
    ack()


def register(app: App, deps: BotDeps) -> None:
    """Wire this module's listeners onto the app."""
    work = SlowWork(deps.runtime, deps.membership)
    app.command("/judge")(ack=work.ack_judge, lazy=[work.judge])
    app.shortcut(SHORTCUT_CALLBACK_ID)(ack=ack_shortcut, lazy=[work.shortcut])
    app.view(MODAL_CALLBACK_ID)(ack=ack_modal, lazy=[work.modal])
    app.action(ACTION_RIGHT)(ack=ack_feedback, lazy=[work.feedback])
    app.action(ACTION_WRONG)(ack=ack_feedback, lazy=[work.feedback])
    app.action(OPEN_ACTION_ID)(ack_feedback)  # a link button still sends an action: ack it, nothing else
