"""An ingested dm exchange's alert and its "Show the exchange" button, through the served bot (signed Slack
requests) and the fake Slack (real HTTP), on SQLite and PostgreSQL: the alert withholds the words and carries the
button; a viewer the bot's rule names (directly, or through a user group) gets a modal with the question and the
answer; anyone else a private refusal naming whom to ask, and no view. A bot's rule that names the alert channel
and turns quoting on quotes its exchanges there (and routes them there), and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.messages.exchange_view import EXCHANGE_MODAL_ID, SHOW_EXCHANGE_ACTION_ID
from common.messages.golden import GOLDEN_ACTION_ID, GOLDEN_MODAL_ID
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.alert_helpers import write_rules
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_ingest_alerts import ANSWER, QUESTION, REASONING, ingested_judgment
from tests.processes import wait_for
from workers.alerts import delivery

ALERTS = "C_ALERTS"
BOT_ALERTS = "C_BOT_ALERTS"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        for user in ("U_LEAD", "U_GROUPIE", "U_STRANGER"):
            fake.add_user(user, user.lower(), user.title())
        fake.add_channel(ALERTS, "alerts", members=["U_LEAD", "U_GROUPIE", "U_STRANGER", "U_RELMON"])
        fake.add_channel(BOT_ALERTS, "bot-alerts", is_private=True, members=["U_LEAD", "U_RELMON"])
        fake.add_usergroup("S_SUPPORT_LEADS", ["U_GROUPIE"])
        yield fake


@pytest.fixture
def bot(make_bot, tmp_path: Path) -> ServedBot:
    rules = write_rules(tmp_path, {"bots": {"helpdesk": {"viewers": ["U_LEAD", "S_SUPPORT_LEADS"]}}})
    return make_bot(channel_rules_file=rules, alert_channel=ALERTS, degradation_window_minutes=0)


def posted_alert(bot: ServedBot, slack: FakeSlack, channel: str = ALERTS) -> tuple[int, dict]:
    judgment_id = ingested_judgment(bot.runtime, "dm")
    assert delivery.consider(bot.runtime, judgment_id).low == "posted"
    [alert] = slack.posted(channel)
    return judgment_id, alert


def click(bot: ServedBot, slack: FakeSlack, judgment_id: int, user: str) -> str:
    key = f"{user}-{len(slack.views)}"
    body = si.block_actions(SHOW_EXCHANGE_ACTION_ID, str(judgment_id), user_id=user, channel_id=ALERTS,
                            response_url=slack.response_url(key))  # fmt: skip
    response = sr.post(bot.url, body, SECRET)
    assert response.status_code == 200  # acknowledged at once; the lazy half reads and answers
    return key


def modal_after(slack: FakeSlack, before: int) -> dict:
    return wait_for(lambda: next((v for v in slack.views[before:] if v.get("callback_id") == EXCHANGE_MODAL_ID), None),
                    timeout=10, what="the exchange's modal")  # fmt: skip


def test_the_alert_withholds_the_dm_and_offers_the_button(bot: ServedBot, slack: FakeSlack) -> None:
    judgment_id, alert = posted_alert(bot, slack)
    text = json.dumps(alert)
    assert QUESTION not in text and ANSWER not in text and REASONING not in text
    buttons = [e for b in alert["blocks"] if b["type"] == "actions" for e in b["elements"]]
    [show] = [b for b in buttons if b.get("action_id") == SHOW_EXCHANGE_ACTION_ID]
    assert show["value"] == str(judgment_id)


@pytest.mark.parametrize("viewer", ["U_LEAD", "U_GROUPIE"], ids=["named", "in-a-named-group"])
def test_a_viewer_the_rule_names_opens_the_exchange(bot: ServedBot, slack: FakeSlack, viewer: str) -> None:
    judgment_id, _alert = posted_alert(bot, slack)
    click(bot, slack, judgment_id, viewer)
    modal = modal_after(slack, 0)
    shown = json.dumps(modal)
    assert QUESTION in shown and ANSWER in shown and "helpdesk" in shown
    assert all(m.get("user") != viewer for m in slack.ephemerals)  # nothing else said to them
    assert QUESTION not in json.dumps(slack.posted(ALERTS))  # still nothing in the channel


def test_a_stranger_is_refused_privately_and_sees_no_view(bot: ServedBot, slack: FakeSlack) -> None:
    judgment_id, _alert = posted_alert(bot, slack)
    key = click(bot, slack, judgment_id, "U_STRANGER")
    [refusal] = wait_for(lambda: slack.responses.get(key), timeout=10, what="the refusal")
    assert refusal["text"].startswith("Only the people bot helpdesk's rule names can read this exchange")
    assert "<@U_LEAD>" in refusal["text"] and "<!subteam^S_SUPPORT_LEADS>" in refusal["text"]
    assert QUESTION not in json.dumps(refusal) and ANSWER not in json.dumps(refusal)
    assert slack.views == []


def test_a_forged_or_stale_click_opens_nothing(bot: ServedBot, slack: FakeSlack) -> None:
    key = click(bot, slack, 987654, "U_LEAD")  # no such judgment
    [gone] = wait_for(lambda: slack.responses.get(key), timeout=10, what="the reply")
    assert "no longer stored" in gone["text"] and slack.views == []


def test_a_bots_rule_routes_and_quotes_its_exchanges_in_its_own_alert_channel(
    make_bot, slack: FakeSlack, tmp_path: Path
) -> None:
    rules = write_rules(tmp_path, {"bots": {"helpdesk": {"alert_channel": BOT_ALERTS, "quote_private": True}}})
    served = make_bot(channel_rules_file=rules, alert_channel=ALERTS, degradation_window_minutes=0)
    _judgment_id, alert = posted_alert(served, slack, BOT_ALERTS)
    text = json.dumps(alert)
    assert QUESTION in text and ANSWER in text and SHOW_EXCHANGE_ACTION_ID not in text
    assert slack.posted(ALERTS) == []


def test_only_the_bots_viewers_may_put_its_dm_in_the_test_set(bot: ServedBot, slack: FakeSlack) -> None:
    """ "Add to test set" on the dm's alert: a viewer the bot's rule names gets the modal (without the words: the
    alert channel does not quote the bot); a stranger the refusal and no view."""
    judgment_id, _alert = posted_alert(bot, slack)
    key = f"stranger-{len(slack.views)}"
    body = si.block_actions(GOLDEN_ACTION_ID, str(judgment_id), user_id="U_STRANGER", channel_id=ALERTS,
                            response_url=slack.response_url(key))  # fmt: skip
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [refusal] = wait_for(lambda: slack.responses.get(key), timeout=10, what="the refusal")
    assert refusal["text"].startswith("Only the people bot helpdesk's rule names") and slack.views == []

    body = si.block_actions(GOLDEN_ACTION_ID, str(judgment_id), user_id="U_LEAD", channel_id=ALERTS,
                            response_url=slack.response_url("lead"))  # fmt: skip
    assert sr.post(bot.url, body, SECRET).status_code == 200
    modal = wait_for(lambda: next((v for v in slack.views if v.get("callback_id") == GOLDEN_MODAL_ID), None),
                     timeout=10, what="the test set's modal")  # fmt: skip
    assert QUESTION not in json.dumps(modal) and "not quoted here" in json.dumps(modal)
