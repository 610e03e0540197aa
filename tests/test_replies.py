"""workers.replies against the fake Slack over real HTTP: a response_url's 429 is waited out (Retry-After),
an expired one falls back to an ephemeral message, and a direct message is only the verdict's last resort."""

from __future__ import annotations

import time

import pytest
from slack_sdk import WebClient

from tests.fakes.slack_server import FakeSlack
from workers.replies import Asker, reply_privately

PAYLOAD = {"text": "Judging that answer…", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}]}


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_channel("C1", "support", members=["U1", "U_RELMON"])
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> WebClient:
    return WebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)


def test_a_rate_limited_response_url_is_retried_after_the_wait(slack: FakeSlack, client: WebClient) -> None:
    slack.rate_limit_response_url("r", times=2, retry_after=1)
    started = time.monotonic()
    where = reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD)
    assert where == "response_url" and time.monotonic() - started >= 2.0  # two waits of Retry-After
    assert [body["text"] for body in slack.responses["r"]] == ["Judging that answer…"]
    assert slack.responses["r"][0]["response_type"] == "ephemeral" and slack.ephemerals == []


def test_an_expired_response_url_falls_back_to_an_ephemeral_message(slack: FakeSlack, client: WebClient) -> None:
    slack.expire_response_url("old")
    assert reply_privately(client, Asker("U1", "C1", slack.response_url("old")), PAYLOAD) == "ephemeral"
    [ephemeral] = slack.ephemerals
    assert (ephemeral["channel"], ephemeral["user"], ephemeral["text"]) == ("C1", "U1", "Judging that answer…")
    assert slack.posted() == []


def test_still_rate_limited_after_the_retries_falls_back(slack: FakeSlack, client: WebClient) -> None:
    slack.rate_limit_response_url("r", times=10, retry_after=0)
    assert reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD) == "ephemeral"
    assert len(slack.response_attempts["r"]) == 4  # the post and three retries


def test_a_direct_message_only_when_asked_for(slack: FakeSlack, client: WebClient) -> None:
    outsider = Asker("U_OUT", "C1", None)  # not a member of C1: the ephemeral is refused
    assert reply_privately(client, outsider, PAYLOAD) == "nowhere"
    assert slack.posted() == []
    assert reply_privately(client, outsider, PAYLOAD, direct_message_last=True) == "direct_message"
    assert [p["channel"] for p in slack.posted()] == ["U_OUT"]
