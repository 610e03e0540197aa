"""Who clicks "Add to test set" on an alert about a private channel, through a real `relmon bot` and a real `relmon
worker` on the fake Slack and LLM, with signed Slack requests: a teammate of the alert channel who is not in the
private channel sees none of its text and can neither add (button, forged submission, "Judge was right" vote) nor
remove its question; a member of the channel can add it, and the expected answer they type never rides in the
task's message on the broker. In-process, with more places and people: tests/integration/test_golden_clicks.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from sqlalchemy import select

from common import golden_notes, task_names
from common.celery_app import QUEUES
from common.messages.golden import GOLDEN_ACTION_ID, GOLDEN_MODAL_ID
from store.db import Database
from store.golden_models import GoldenItem
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, relmon_processes
from tests.system.test_golden_processes import button, submission

pytestmark = pytest.mark.slow

PRIVATE = "G_PRIVATE"  # no rule of its own: its alerts go to the default alert channel, which does not quote it
QUESTION = "Is the Acme merger announced on the 14th?"
TYPED = "Expected: not before the board meets (marker 9c2e)."


def items(database: Database) -> list[GoldenItem]:
    with database.session() as session:
        rows = list(session.execute(select(GoldenItem)).scalars())
        session.expunge_all()
    return rows


def private_alert(slack: FakeSlack) -> dict | None:
    with slack._lock:  # what the fake stored (its `posted` are the calls)
        posted = list(slack.messages.get(ALERTS, {}).values())
    return next((m for m in posted if PRIVATE in m.get("text", "")), None)


def saves_on(broker: redis.Redis) -> list[bytes]:
    """The raw GOLDEN_SAVE messages waiting on relmon's queues."""
    return [m for queue in QUEUES for m in broker.lrange(queue, 0, -1) if task_names.GOLDEN_SAVE.encode() in m]


def ephemerals_to(slack: FakeSlack, user: str) -> list[str]:
    return [e["text"] for e in list(slack.ephemerals) if e.get("user") == user]


def test_only_the_private_channels_members_change_its_test_set_items(
    redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    with FakeSlack() as slack:
        for user in ("U_ASKER", "U_MEMBER", "U_STRANGER"):
            slack.add_user(user, user.lower(), user.title())
        slack.add_channel(PRIVATE, "deals", is_private=True, members=["U_ASKER", "U_MEMBER", "U_RELMON"])
        slack.add_channel(ALERTS, "alerts", members=["U_MEMBER", "U_STRANGER", "U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=fresh_db_url,
            directory=tmp_path,
            slack=slack,
            start=("bot", "worker"),
            RELMON_SETTLE_SECONDS="0.5",
            RELMON_CONFIRM="off",
        ) as system:
            database = Database(fresh_db_url)
            broker = redis.Redis.from_url(redis_url)
            events = system.base_url + "/slack/events"
            try:
                asked = sr.human_message(PRIVATE, sr.next_ts(), QUESTION)
                failed = sr.bot_message(PRIVATE, sr.next_ts(), "offtopic: our office is open 9 to 5",
                                        thread_ts=asked["ts"])  # fmt: skip
                for event in (asked, failed):
                    assert system.post_event(event).status_code == 200
                alert = wait_for(lambda: private_alert(slack), timeout=45, what="the private channel's alert")
                assert QUESTION not in json.dumps(alert)
                judgment_id = button(alert, GOLDEN_ACTION_ID)["value"]

                # 1. The stranger (in the alert channel, not in the private one) says the judge was right: the vote
                # counts, its question does not join the test set.
                vote = si.block_actions("feedback_right", judgment_id, user_id="U_STRANGER", message_ts=alert["ts"],
                                        response_url=slack.response_url("vote"))  # fmt: skip
                assert sr.post(events, vote, SECRET).status_code == 200
                [refused_vote] = wait_for(lambda: ephemerals_to(slack, "U_STRANGER"), timeout=30, what="the vote note")
                assert refused_vote.startswith("Your vote counts, but its question did not join the test set")

                # 2. Their click opens no modal: a private reply says whom to ask.
                click = si.block_actions(GOLDEN_ACTION_ID, judgment_id, user_id="U_STRANGER", message_ts=alert["ts"],
                                         response_url=slack.response_url("stranger"))  # fmt: skip
                assert sr.post(events, click, SECRET).status_code == 200
                [refusal] = wait_for(lambda: slack.responses.get("stranger"), timeout=20, what="the click's refusal")
                assert refusal["text"].startswith(f"Only members of <#{PRIVATE}>")
                assert not [v for v in slack.views if v.get("callback_id") == GOLDEN_MODAL_ID]

                # 3. A submission forged with the modal's metadata: the worker refuses it, nothing is saved.
                metadata = json.dumps({"judgment_id": int(judgment_id), "channel_id": ALERTS})
                forged = {"id": "V_FORGED", "callback_id": GOLDEN_MODAL_ID, "private_metadata": metadata}
                assert sr.post(events, submission(forged, TYPED, user="U_STRANGER"), SECRET).status_code == 200
                wait_for(lambda: len(ephemerals_to(slack, "U_STRANGER")) == 2, timeout=30, what="the forged refusal")
                assert ephemerals_to(slack, "U_STRANGER")[1].endswith("Nothing was saved.")
                assert items(database) == []

                # 4. The member clicks: the modal opens, quoting nothing (the default alert channel does not quote
                # a private channel) and saying why.
                click = si.block_actions(GOLDEN_ACTION_ID, judgment_id, user_id="U_MEMBER", message_ts=alert["ts"],
                                         response_url=slack.response_url("member"))  # fmt: skip
                assert sr.post(events, click, SECRET).status_code == 200
                view = wait_for(lambda: next((v for v in slack.views if v.get("callback_id") == GOLDEN_MODAL_ID),
                                             None), timeout=20, what="the member's modal")  # fmt: skip
                assert QUESTION not in json.dumps(view) and "not quoted here" in json.dumps(view)

                # 5. Their typed answer: with the worker stopped, the task waits on the broker holding the note's key
                # and IDs, never the text; started again, the worker saves it and the note goes.
                system.worker.stop()
                assert sr.post(events, submission(view, TYPED, user="U_MEMBER"), SECRET).status_code == 200
                queued = wait_for(lambda: saves_on(broker), timeout=20, what="the save on the broker")
                assert len(queued) == 1 and b"9c2e" not in queued[0] and TYPED.encode() not in queued[0]
                notes = [k for k in broker.scan_iter(golden_notes.note_key("*"))]
                assert [broker.get(k).decode() for k in notes] == [TYPED]
                system.start("worker")
                [item] = wait_for(lambda: items(database), timeout=60, what="the member's item")
                assert item.expected == TYPED and item.edited_by == "U_MEMBER" and item.channel_is_private
                assert list(broker.scan_iter(golden_notes.note_key("*"))) == []
                wait_for(lambda: ephemerals_to(slack, "U_MEMBER"), timeout=20, what="the confirmation")
                assert ephemerals_to(slack, "U_MEMBER")[0].startswith(f"Saved in the test set (item {item.id})")

                # 6. The stranger cannot take it out either.
                assert (
                    sr.post(events, submission(forged, None, remove=True, user="U_STRANGER"), SECRET).status_code == 200
                )
                wait_for(lambda: len(ephemerals_to(slack, "U_STRANGER")) == 3, timeout=30, what="the removal's refusal")
                [kept] = items(database)
                assert kept.removed_at is None and kept.expected == TYPED
            finally:
                broker.close()
                database.dispose()
