"""The golden set built from signed Slack requests through a real `relmon bot` and a real `relmon worker` on the fake
Slack and LLM: a teammate's reply after a failed answer, a "Judge was right" vote on a low-score alert, the alert's
"Add to test set" button and its modal (edit, then remove), and a deleted message taking its item away."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from common.messages.golden import EXPECTED_BLOCK, GOLDEN_ACTION_ID, GOLDEN_MODAL_ID, REMOVE_BLOCK, REMOVE_VALUE
from store.db import Database
from store.golden_models import GoldenItem
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, CHANNEL, add_support_channel, relmon_processes

pytestmark = pytest.mark.slow


def items(database: Database, *, removed: bool = False) -> dict[str, GoldenItem]:
    with database.session() as session:
        rows = session.execute(select(GoldenItem)).scalars().all()
        session.expunge_all()
    return {row.question: row for row in rows if (row.removed_at is not None) == removed}


def low_alert_for(slack: FakeSlack, question_text: str) -> dict:
    """The low-score alert that quotes this question, once posted."""

    def found() -> dict | None:
        with slack._lock:
            posted = list(slack.messages.get(ALERTS, {}).values())
        return next((m for m in posted if question_text in json.dumps(m.get("blocks", []))), None)

    return wait_for(found, timeout=45, what=f"the alert on {question_text!r}")


def button(alert: dict, action_id: str) -> dict:
    elements = next(block for block in alert["blocks"] if block["type"] == "actions")["elements"]
    return next(element for element in elements if element["action_id"] == action_id)


def submission(view: dict, expected: str | None, *, remove: bool = False, user: str = "U_AGENT") -> bytes:
    values = {EXPECTED_BLOCK: {"value": {"type": "plain_text_input", "value": expected}}}
    if remove:
        option = {"text": {"type": "plain_text", "text": "Remove"}, "value": REMOVE_VALUE}
        values[REMOVE_BLOCK] = {"value": {"type": "checkboxes", "selected_options": [option]}}
    payload = {
        "type": "view_submission",
        "team": {"id": sr.TEAM_ID, "domain": "example"},
        "user": {"id": user, "username": "sam", "team_id": sr.TEAM_ID},
        "api_app_id": "A_RELMON",
        "token": "verification-token-unused",
        "trigger_id": "1.2.3",
        "view": {
            "id": view["id"],
            "type": "modal",
            "callback_id": view["callback_id"],
            "private_metadata": view["private_metadata"],
            "state": {"values": values},
        },
        "response_urls": [],
    }
    return si.payload_body(payload)


def test_the_golden_set_follows_the_conversation(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with FakeSlack() as slack:
        add_support_channel(slack, members=("U_ASKER", "U_AGENT", "U_RELMON"))
        slack.add_user("U_AGENT", "sam", "Sam Lee")
        slack.add_channel(ALERTS, "alerts", members=["U_AGENT", "U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=db_url,
            directory=tmp_path,
            slack=slack,
            start=("bot", "worker"),
            RELMON_SETTLE_SECONDS="0.5",
            RELMON_CONFIRM="off",
        ) as system:
            database = Database(db_url)
            events = system.base_url + "/slack/events"
            try:
                # 1. The bot fails, a teammate answers in the thread: the question joins with their reply.
                asked = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
                failed = sr.bot_message(CHANNEL, sr.next_ts(), "offtopic: our office is open 9 to 5",
                                        thread_ts=asked["ts"])  # fmt: skip
                for event in (asked, failed):
                    assert system.post_event(event).status_code == 200
                low_alert_for(slack, "How do I reset my password?")
                reply = sr.human_message(CHANNEL, sr.next_ts(), "Settings > Security > Reset password.",
                                         user="U_AGENT", thread_ts=asked["ts"])  # fmt: skip
                for _ in range(2):  # Slack's retry of a delivery that worked: one item, counted once
                    assert sr.post(events, sr.envelope(reply, event_id="EvGOLD_REPLY"), SECRET).status_code == 200
                item = wait_for(lambda: items(database).get("How do I reset my password?"), timeout=30,
                                what="the takeover's golden item")  # fmt: skip
                assert item.expected == "Settings > Security > Reset password." and item.origin == "takeover"
                assert item.bot_answer == "offtopic: our office is open 9 to 5" and item.times == 1
                assert item.channel_id == CHANNEL and item.permalink and not item.channel_is_private

                # 2. Another failure; someone says the judge was right: its question joins, no expected answer yet.
                other = sr.human_message(CHANNEL, sr.next_ts(), "Which plans include SSO?")
                wrong = sr.bot_message(CHANNEL, sr.next_ts(), "offtopic: we sell hats", thread_ts=other["ts"])
                for event in (other, wrong):
                    assert system.post_event(event).status_code == 200
                alert = low_alert_for(slack, "Which plans include SSO?")
                judgment_id = button(alert, "feedback_right")["value"]
                body = si.block_actions("feedback_right", judgment_id, user_id="U_AGENT", message_ts=alert["ts"])
                assert sr.post(events, body, SECRET).status_code == 200
                voted = wait_for(lambda: items(database).get("Which plans include SSO?"), timeout=30,
                                 what="the vote's golden item")  # fmt: skip
                assert voted.origin == "vote" and voted.expected is None

                # 3. "Add to test set" opens the modal; the expected answer written there is saved.
                assert button(alert, GOLDEN_ACTION_ID)["text"]["text"] == "Add to test set"
                body = si.block_actions(GOLDEN_ACTION_ID, judgment_id, user_id="U_AGENT", message_ts=alert["ts"])
                assert sr.post(events, body, SECRET).status_code == 200
                view = wait_for(lambda: next((v for v in slack.views if v.get("callback_id") == GOLDEN_MODAL_ID),
                                             None), timeout=20, what="the modal")  # fmt: skip
                assert [b.get("block_id") for b in view["blocks"] if b["type"] == "input"] == [
                    EXPECTED_BLOCK,
                    REMOVE_BLOCK,
                ]  # in the set already (the vote): editable, removable
                response = sr.post(events, submission(view, "Business and Enterprise."), SECRET)
                assert response.status_code == 200 and response.text in ("", "{}")
                edited = wait_for(lambda: (i := items(database).get("Which plans include SSO?")) and i.expected_edited
                                  and i, timeout=30, what="the modal's expected answer saved")  # fmt: skip
                assert edited.expected == "Business and Enterprise." and edited.edited_by == "U_AGENT"
                notes = wait_for(lambda: slack.calls_to("chat.postEphemeral"), timeout=20, what="the confirmation")
                assert notes[0]["channel"] == ALERTS and notes[0]["user"] == "U_AGENT"
                assert notes[0]["text"].startswith(f"Saved in the test set (item {edited.id})")

                # ... and ticking "remove" takes it out for good.
                assert sr.post(events, submission(view, None, remove=True), SECRET).status_code == 200
                wait_for(lambda: "Which plans include SSO?" not in items(database), timeout=30, what="the removal")
                assert [row.removed_by for row in items(database, removed=True).values()] == ["U_AGENT"]

                # 4. The teammate deletes their reply: the item quoting it leaves the set.
                assert system.post_event(sr.message_deleted(reply)).status_code == 200
                wait_for(lambda: not items(database), timeout=30, what="the deleted reply's item gone")
            finally:
                database.dispose()
