"""common.replies against the fake Slack over real HTTP: a response_url's 429 is waited out (Retry-After) in
the workers but not in the bot, an expired or unreachable one falls back to an ephemeral message, a post whose
outcome is unknown (no answer in time, the connection closed after the post) is never sent again, and a direct
message is only the verdict's last resort. The verdict task (workers.alerts.verdicts.deliver) runs in-process."""

from __future__ import annotations

import time
from urllib.error import URLError

import pytest
from slack_sdk import WebClient

from common import replies
from common.replies import Asker, reply_privately
from store.models import Judgment
from tests.alert_helpers import SUPPORT, on_demand_pair
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.services import free_port
from workers.alerts import verdicts

PAYLOAD = {"text": "Judging that answer…", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "x"}}]}
SHORT_TIMEOUT = 0.5  # seconds a test lets a response_url take to answer


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_channel("C1", "support", members=["U1", "U_RELMON"])
        fake.add_channel(SUPPORT, "support", members=["U_ASKER", "U_RELMON"])
        yield fake


@pytest.fixture
def short_timeout(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(replies, "RESPONSE_URL_TIMEOUT_SECONDS", SHORT_TIMEOUT)
    return SHORT_TIMEOUT


def test_a_rate_limited_response_url_is_retried_after_the_wait(slack: FakeSlack, client: WebClient) -> None:
    slack.rate_limit_response_url("r", times=2, retry_after=1)
    started = time.monotonic()
    where = reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD)
    assert where == "response_url" and time.monotonic() - started >= 2.0  # two waits of Retry-After
    assert [body["text"] for body in slack.responses["r"]] == ["Judging that answer…"]
    assert slack.responses["r"][0]["response_type"] == "ephemeral" and slack.ephemerals == []


def test_without_waiting_a_rate_limited_response_url_falls_back_at_once(slack: FakeSlack, client: WebClient) -> None:
    """The bot's listeners share a small thread pool: they never sleep out a Retry-After."""
    slack.rate_limit_response_url("r", times=1, retry_after=30)
    started = time.monotonic()
    where = reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD, wait_rate_limits=False)
    assert where == "ephemeral" and time.monotonic() - started < 2.0
    assert len(slack.response_attempts["r"]) == 1 and slack.responses["r"] == []
    assert [e["text"] for e in slack.ephemerals] == ["Judging that answer…"]


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


def test_an_unreachable_response_url_falls_back(slack: FakeSlack, client: WebClient) -> None:
    """Connection refused: nothing was sent, so the ephemeral cannot be a second copy."""
    nobody_listens = f"http://127.0.0.1:{free_port()}/response/x"
    assert reply_privately(client, Asker("U1", "C1", nobody_listens), PAYLOAD) == "ephemeral"
    assert len(slack.ephemerals) == 1


def test_a_post_answered_too_late_is_not_sent_again(slack: FakeSlack, client: WebClient, short_timeout) -> None:
    """Slack took the post but did not answer within the timeout: it may have shown it, so no fallback."""
    slack.slow_response_url("r", short_timeout * 3)
    started = time.monotonic()
    where = reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD, direct_message_last=True)
    assert where == "response_url_unconfirmed" and time.monotonic() - started < short_timeout * 3
    wait_for(lambda: slack.response_answers["r"] == 1, timeout=10, what="the late answer sent")
    assert len(slack.responses["r"]) == 1 and len(slack.response_attempts["r"]) == 1
    assert slack.ephemerals == [] and slack.posted() == []


def test_a_connection_closed_after_the_post_is_not_posted_again(slack: FakeSlack, client: WebClient) -> None:
    """Slack took the post and closed the connection without answering (RemoteDisconnected): no re-post."""
    slack.drop_response_url("r", times=5)
    where = reply_privately(client, Asker("U1", "C1", slack.response_url("r")), PAYLOAD, direct_message_last=True)
    assert where == "response_url_unconfirmed"
    assert len(slack.responses["r"]) == 1 and slack.ephemerals == [] and slack.posted() == []


def test_a_direct_message_only_when_asked_for(slack: FakeSlack, client: WebClient) -> None:
    outsider = Asker("U_OUT", "C1", None)  # not a member of C1: the ephemeral is refused
    assert reply_privately(client, outsider, PAYLOAD) == "nowhere"
    assert slack.posted() == []
    assert reply_privately(client, outsider, PAYLOAD, direct_message_last=True) == "direct_message"
    assert [p["channel"] for p in slack.posted()] == ["U_OUT"]


def test_an_ephemeral_or_direct_message_slack_took_without_answering_is_not_sent_again(
    slack: FakeSlack, client: WebClient
) -> None:
    """As on the response_url: Slack carried out the post and closed the connection unanswered. It may be showing:
    no second copy, there or by the next way (relmon's own client never re-sends such a request either)."""
    client.retry_handlers.clear()
    slack.drop_method("chat.postEphemeral")
    where = reply_privately(client, Asker("U1", "C1", None), PAYLOAD, direct_message_last=True)
    assert where == "ephemeral_unconfirmed"
    assert len(slack.ephemerals) == 1 and slack.posted() == []

    slack.drop_method("chat.postMessage")
    outsider = Asker("U_OUT", "C1", None)  # not a member of C1: the ephemeral is refused, the DM is the last resort
    assert reply_privately(client, outsider, PAYLOAD, direct_message_last=True) == "direct_message_unconfirmed"
    assert [p["channel"] for p in slack.posted()] == ["U_OUT"]


def test_a_reply_that_could_not_be_sent_at_all_raises_for_the_retry(client: WebClient) -> None:
    """Nothing listening: the request never left, so nothing is showing, and the task's retry may send it."""
    dead = WebClient(token="xoxb-test", base_url=f"http://127.0.0.1:{free_port()}/api/", timeout=2)
    dead.retry_handlers.clear()
    with pytest.raises(URLError):
        reply_privately(dead, Asker("U1", "C1", None), PAYLOAD)


# The verdict task -------------------------------------------------------------------------------------------


@pytest.fixture
def runtime(settings_for, slack, runtime_for):
    settings = settings_for(slack_api_url=slack.api_url)
    return runtime_for(settings)


def verdict_pair(runtime, response_url: str) -> int:
    """A judged on-demand pair asked for by U_ASKER in #support, with its response_url."""
    pair_id = on_demand_pair(runtime, response_url)
    with runtime.db.session() as session:
        session.add(Judgment(pair_id=pair_id, judge="relevancy", status="ok", score=0, max_score=4, reasoning="r"))
    return pair_id


def test_a_verdict_answered_too_late_is_delivered_exactly_once(runtime, slack: FakeSlack, short_timeout) -> None:
    slack.slow_response_url("verdict", short_timeout * 3)
    pair_id = verdict_pair(runtime, slack.response_url("verdict"))
    assert verdicts.deliver(runtime, pair_id) == "response_url_unconfirmed"
    assert verdicts.deliver(runtime, pair_id) == "posted"  # a redelivered task sends nothing more
    wait_for(lambda: slack.response_answers["verdict"] == 1, timeout=10, what="the late answer sent")
    [verdict] = slack.responses["verdict"]
    assert verdict["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
    assert slack.ephemerals == [] and slack.posted() == []


def test_a_verdict_on_an_expired_response_url_is_an_ephemeral(runtime, slack: FakeSlack, short_timeout) -> None:
    slack.expire_response_url("verdict")
    pair_id = verdict_pair(runtime, slack.response_url("verdict"))
    assert verdicts.deliver(runtime, pair_id) == "ephemeral"
    [ephemeral] = slack.ephemerals
    assert (ephemeral["channel"], ephemeral["user"]) == (SUPPORT, "U_ASKER") and "Relevancy 0 / 4" in ephemeral["text"]
    assert slack.responses["verdict"] == [] and slack.posted() == []


def test_a_verdict_waits_out_a_short_retry_after(runtime, slack: FakeSlack) -> None:
    slack.rate_limit_response_url("verdict", times=1, retry_after=1)
    pair_id = verdict_pair(runtime, slack.response_url("verdict"))
    started = time.monotonic()
    assert verdicts.deliver(runtime, pair_id) == "response_url" and time.monotonic() - started >= 1.0
    assert len(slack.response_attempts["verdict"]) == 2 and len(slack.responses["verdict"]) == 1
    assert slack.ephemerals == []
