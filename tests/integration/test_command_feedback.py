"""The alerts' buttons through signed HTTP requests to the served bot (real Redis, SQLite/PostgreSQL and FakeSlack):
each person's latest vote recorded, the alert's refresh queued, a vote on a deleted judgment answered, the link
button acknowledged."""

from __future__ import annotations

import time

from common.celery_app import QUEUE_SLACK
from common.messages.verdicts import ERRORS
from store.feedback import votes_for
from tests import command_helpers
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.command_helpers import queued
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from workers.alerts import delivery

bot, slack = command_helpers.bot, command_helpers.slack  # the served bot's fixtures, for pytest to find here


def test_a_vote_on_a_deleted_judgment_says_what_to_do(bot, slack):
    body = si.block_actions("feedback_wrong", "987654", channel_id="C_ALERTS", response_url=slack.response_url("v"))
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [answer] = wait_for(lambda: slack.responses["v"], timeout=10, what="the answer")
    assert answer["text"] == ERRORS["vote_gone"]


def feedback_clicked(bot: ServedBot, slack: FakeSlack) -> int:
    """An alert posted, then clicked: U_ASKER's "right", U_TWO's "wrong", U_ASKER's change to "wrong". Returns the
    judgment alerted on."""
    runtime = bot.runtime
    judgment_id = add_judgment(runtime, score=0)
    delivery.consider(runtime, judgment_id)  # the alert, as the worker posts it
    [alert_ts] = slack.messages["C_ALERTS"].keys()
    for user, action in (("U_ASKER", "feedback_right"), ("U_TWO", "feedback_wrong"), ("U_ASKER", "feedback_wrong")):
        started = time.monotonic()
        body = si.block_actions(action, str(judgment_id), user_id=user, channel_id="C_ALERTS", message_ts=alert_ts)
        response = sr.post(bot.url, body, SECRET)
        assert response.status_code == 200 and time.monotonic() - started < 3.0
        vote = action.removeprefix("feedback_")

        def recorded(user=user, vote=vote):  # the click's work runs after the answer: let it land before the next
            with runtime.db.session() as session:
                return (user, vote) in set(votes_for(session, judgment_id))

        wait_for(recorded, timeout=10, what=f"{user}'s {vote} vote")
    return judgment_id


def test_feedback_buttons_record_each_persons_latest_vote(bot, slack):
    judgment_id = feedback_clicked(bot, slack)

    def votes():
        with bot.runtime.db.session() as session:
            found = sorted(votes_for(session, judgment_id))
        return found if found == [("U_ASKER", "wrong"), ("U_TWO", "wrong")] else None

    wait_for(votes, timeout=10, what="both votes, U_ASKER's changed")


def test_feedback_buttons_queue_a_refresh_of_the_alert(bot, slack, redis_url):
    feedback_clicked(bot, slack)
    jobs = wait_for(lambda: len(queued(redis_url, QUEUE_SLACK)) >= 3 and queued(redis_url, QUEUE_SLACK), timeout=5)
    assert {job["task"] for job in jobs} == {"workers.tasks.slack.refresh_alert_votes"}


def test_the_alerts_link_button_is_acknowledged(bot):
    """Slack sends an action for a link button too."""
    assert sr.post(bot.url, si.block_actions("open_message", "", channel_id="C_ALERTS"), SECRET).status_code == 200
