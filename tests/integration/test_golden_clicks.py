"""Who clicks "Add to test set", through the served bot (signed Slack requests), the fake Slack's members, the broker
and the real task (SQLite and PostgreSQL): a private channel's item is changed only by its members or its own alert
channel's, the modal quotes only what the clicker may read where they clicked, and the typed expected answer travels
in a Redis note, never in the task's message. Real processes: tests/system/test_golden_audience_processes.py."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from sqlalchemy import select, update

from common import golden_notes, task_names
from common.celery_app import QUEUES
from common.messages.golden import EXPECTED_BLOCK, GOLDEN_ACTION_ID, GOLDEN_MODAL_ID
from store.golden_models import GoldenItem
from store.models import Pair
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment, write_rules
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from workers.tasks.golden import save_from_modal

PRIVATE = "G_PRIVATE"  # its own rule sends its alerts to PRIVATE_ALERTS, quoting it there
PRIVATE_ALERTS = "C_PRIVATE_ALERTS"
ALERTS = "C_ALERTS"  # the default alert channel: quotes no private channel
SUPPORT = "C_SUPPORT"
QUESTION = "Where is the staging VPN key for ACME?"
REPLY = "In the vault under ops/acme/vpn, ask Dana for access."
TYPED = "The typed expected answer: vault path ops/acme/vpn (marker 7f3a)."


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """A private channel (asker and member), its own alert channel (member and an alert-channel teammate), the
    default alert channel (everyone, a stranger to the private channel too) and a public support channel."""
    with FakeSlack() as fake:
        for user in ("U_ASKER", "U_MEMBER", "U_ALERTEE", "U_STRANGER"):
            fake.add_user(user, user.lower(), user.title())
        fake.add_channel(PRIVATE, "private", is_private=True, members=["U_ASKER", "U_MEMBER", "U_RELMON"])
        fake.add_channel(
            PRIVATE_ALERTS, "private-alerts", is_private=True, members=["U_MEMBER", "U_ALERTEE", "U_RELMON"]
        )
        fake.add_channel(ALERTS, "alerts", members=["U_MEMBER", "U_ALERTEE", "U_STRANGER", "U_RELMON"])
        fake.add_channel(SUPPORT, "support", members=["U_ASKER", "U_STRANGER", "U_RELMON"])
        yield fake


@pytest.fixture
def bot(make_bot, tmp_path: Path) -> ServedBot:
    rules = write_rules(tmp_path, {"channels": {PRIVATE: {"alert_channel": PRIVATE_ALERTS, "quote_private": True}}})
    return make_bot(channel_rules_file=rules)


def private_judgment(bot: ServedBot, *, channel: str = PRIVATE, private: bool = True) -> int:
    """A judged pair of `channel` whose thread a teammate answered (the modal's pre-filled expected answer)."""
    judgment_id = add_judgment(bot.runtime, score=0, channel_id=channel, private=private, question=QUESTION)
    with bot.runtime.db.session() as session:
        session.execute(update(Pair).values(reference_text=REPLY))
    return judgment_id


def click(bot: ServedBot, slack: FakeSlack, judgment_id: int, user: str, channel: str) -> str:
    """The button clicked by `user` in `channel`; returns the response_url key its private replies land in."""
    key = f"{user}-{channel}-{len(slack.views)}"
    body = si.block_actions(GOLDEN_ACTION_ID, str(judgment_id), user_id=user, channel_id=channel,
                            response_url=slack.response_url(key))  # fmt: skip
    assert sr.post(bot.url, body, SECRET).status_code == 200
    return key


def opened_modal(slack: FakeSlack, before: int) -> dict:
    return wait_for(lambda: next((v for v in slack.views[before:] if v.get("callback_id") == GOLDEN_MODAL_ID), None),
                    timeout=10, what="the modal")  # fmt: skip


def submit(bot: ServedBot, metadata: str, user: str, expected: str | None) -> None:
    values = {EXPECTED_BLOCK: {"value": {"type": "plain_text_input", "value": expected}}}
    payload = {
        "type": "view_submission",
        "team": {"id": sr.TEAM_ID, "domain": "example"},
        "user": {"id": user, "username": user.lower(), "team_id": sr.TEAM_ID},
        "api_app_id": "A_RELMON",
        "token": "verification-token-unused",
        "trigger_id": "1.2.3",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": GOLDEN_MODAL_ID,
            "private_metadata": metadata,
            "state": {"values": values},
        },
        "response_urls": [],
    }
    response = sr.post(bot.url, si.payload_body(payload), SECRET)
    assert response.status_code == 200 and response.text in ("", "{}")


def metadata_for(judgment_id: int, channel: str) -> str:
    """What the modal carries (common.messages.golden.golden_modal): a forged submission can carry the same."""
    return json.dumps({"judgment_id": judgment_id, "channel_id": channel})


def queued_saves(client: redis.Redis) -> list[tuple[bytes, list, dict]]:
    """The GOLDEN_SAVE messages on the broker (nothing consumes them here): (raw message, args, kwargs)."""
    found = []
    for queue in QUEUES:
        for raw in client.lrange(queue, 0, -1):
            message = json.loads(raw)
            if message["headers"]["task"] == task_names.GOLDEN_SAVE:
                args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
                found.append((raw, args, kwargs))
    return found


def the_save(bot: ServedBot) -> tuple[bytes, list, dict]:
    """The one GOLDEN_SAVE message the submission put on the broker."""
    [save] = wait_for(lambda: queued_saves(bot.runtime.redis), timeout=10, what="the task on the broker")
    return save


def items(bot: ServedBot) -> list[GoldenItem]:
    with bot.runtime.db.session() as session:
        found = list(session.execute(select(GoldenItem)).scalars())
        session.expunge_all()
    return found


def ephemerals_to(slack: FakeSlack, user: str) -> list[str]:
    return [e["text"] for e in slack.ephemerals if e.get("user") == user]


def test_a_stranger_to_the_private_channel_sees_none_of_it_and_changes_nothing(bot: ServedBot, slack: FakeSlack):
    judgment_id = private_judgment(bot)
    before = len(slack.views)
    key = click(bot, slack, judgment_id, "U_STRANGER", ALERTS)
    [refusal] = wait_for(lambda: slack.responses.get(key), timeout=10, what="the refusal")
    assert refusal["text"].startswith(f"Only members of <#{PRIVATE}>") and "ask one of them" in refusal["text"]
    assert slack.views[before:] == []  # no modal: nothing of the channel's reached them
    assert QUESTION not in json.dumps(refusal) and REPLY not in json.dumps(refusal)

    # A submission forged with the modal's metadata: the worker checks again and writes nothing.
    submit(bot, metadata_for(judgment_id, ALERTS), "U_STRANGER", TYPED)
    raw, args, kwargs = the_save(bot)
    assert TYPED.encode() not in raw and "7f3a" not in raw.decode()
    outcome = save_from_modal.apply(args=args, kwargs=kwargs, throw=True).get()
    assert outcome["outcome"] == "refused" and items(bot) == []
    assert golden_notes.read(bot.runtime.redis, args[2]) is None  # the typed text is gone from Redis too
    [note] = ephemerals_to(slack, "U_STRANGER")
    assert note.startswith(f"Only members of <#{PRIVATE}>") and note.endswith("Nothing was saved.")


def test_the_private_channels_alert_channel_may_save_without_reading_it(bot: ServedBot, slack: FakeSlack):
    """A teammate of the channel's own alert channel (not of the channel) may add its question; the modal shows
    them none of its text and says why. The typed answer goes through a Redis note, not the task's message."""
    judgment_id = private_judgment(bot)
    click(bot, slack, judgment_id, "U_ALERTEE", PRIVATE_ALERTS)
    modal = opened_modal(slack, 0)
    shown = json.dumps(modal)
    assert QUESTION not in shown and REPLY not in shown
    assert f"You are not a member of <#{PRIVATE}>" in shown
    assert "initial_value" not in shown

    submit(bot, modal["private_metadata"], "U_ALERTEE", TYPED)
    raw, args, kwargs = the_save(bot)
    assert TYPED.encode() not in raw and "7f3a" not in raw.decode()  # body, argsrepr and kwargsrepr alike
    assert args[:2] == [judgment_id, "U_ALERTEE"] and args[3] is False and kwargs == {"channel_id": PRIVATE_ALERTS}
    assert golden_notes.is_note_key(args[2]) and golden_notes.read(bot.runtime.redis, args[2]) == TYPED
    ttl = bot.runtime.redis.ttl(golden_notes.note_key(args[2]))
    assert golden_notes.NOTE_TTL_SECONDS - 60 < ttl <= golden_notes.NOTE_TTL_SECONDS

    outcome = save_from_modal.apply(args=args, kwargs=kwargs, throw=True).get()
    [item] = items(bot)
    assert outcome == {"outcome": "saved", "item_id": item.id}
    assert item.expected == TYPED and item.edited_by == "U_ALERTEE" and item.channel_is_private
    assert golden_notes.read(bot.runtime.redis, args[2]) is None  # read, saved, deleted
    # A redelivered message (acks late) finds the "saved" mark: the same item, said again, nothing written twice.
    assert save_from_modal.apply(args=args, kwargs=kwargs, throw=True).get() == outcome
    assert [i.id for i in items(bot)] == [item.id]
    notes = ephemerals_to(slack, "U_ALERTEE")
    assert len(notes) == 2 and all(n.startswith(f"Saved in the test set (item {item.id})") for n in notes)


def test_a_member_reads_the_channel_only_where_it_is_quoted(bot: ServedBot, slack: FakeSlack):
    judgment_id = private_judgment(bot)
    click(bot, slack, judgment_id, "U_MEMBER", PRIVATE_ALERTS)  # the channel's own alert channel, quoting it
    modal = opened_modal(slack, 0)
    shown = json.dumps(modal)
    assert QUESTION in shown and "initial_value" in shown and REPLY in shown
    [field] = [b for b in modal["blocks"] if b.get("block_id") == EXPECTED_BLOCK]
    assert field["element"]["initial_value"] == REPLY

    before = len(slack.views)
    click(bot, slack, judgment_id, "U_MEMBER", ALERTS)  # the default alert channel quotes no private channel
    elsewhere = opened_modal(slack, before)
    shown = json.dumps(elsewhere)
    assert QUESTION not in shown and REPLY not in shown and "not quoted here" in shown
    submit(bot, elsewhere["private_metadata"], "U_MEMBER", None)  # the member may save there: no text, no note
    _raw, args, kwargs = the_save(bot)
    assert args[2] is None
    outcome = save_from_modal.apply(args=args, kwargs=kwargs, throw=True).get()
    [item] = items(bot)
    assert outcome["outcome"] == "saved" and item.expected == REPLY and not item.expected_edited


def test_a_public_channels_text_is_shown_to_its_members_only(bot: ServedBot, slack: FakeSlack):
    judgment_id = private_judgment(bot, channel=SUPPORT, private=False)
    click(bot, slack, judgment_id, "U_STRANGER", ALERTS)  # a member of #support
    assert QUESTION in json.dumps(opened_modal(slack, 0))
    before = len(slack.views)
    click(bot, slack, judgment_id, "U_MEMBER", ALERTS)  # not in #support: may add, but reads nothing of it
    shown = json.dumps(opened_modal(slack, before))
    assert QUESTION not in shown and REPLY not in shown and f"You are not a member of <#{SUPPORT}>" in shown


def test_an_expired_note_saves_nothing_and_says_so(bot: ServedBot, slack: FakeSlack):
    judgment_id = private_judgment(bot)
    submit(bot, metadata_for(judgment_id, PRIVATE_ALERTS), "U_MEMBER", TYPED)
    _raw, args, kwargs = the_save(bot)
    bot.runtime.redis.delete(golden_notes.note_key(args[2]))  # as a day without a worker leaves it
    outcome = save_from_modal.apply(args=args, kwargs=kwargs, throw=True).get()
    assert outcome == {"outcome": "expired", "item_id": None}
    assert items(bot) == []  # not even the question without its answer
    [note] = ephemerals_to(slack, "U_MEMBER")
    assert "nothing was saved" in note and "Add to test set" in note
    # An older message carrying the typed text in the note's place is not looked up: it saves nothing either.
    stale = save_from_modal.apply(args=[judgment_id, "U_MEMBER", TYPED, False], kwargs=kwargs, throw=True).get()
    assert stale["outcome"] == "expired" and items(bot) == []
