"""The fake Slack Web API answers the real slack_sdk over HTTP the way Slack does."""

from __future__ import annotations

import time

import httpx
import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from tests import digest_helpers
from tests.fakes.slack_server import FakeSlack

# The empty fake Slack of tests/digest_helpers.py, bound here for pytest to find (over the integration conftest's
# `slack`); `client` (tests/integration/conftest.py) talks to it.
slack = digest_helpers.slack


def test_auth_test_names_relmon(client: WebClient) -> None:
    answer = client.auth_test()
    assert (answer["team_id"], answer["user_id"], answer["bot_id"]) == ("T_TEST", "U_RELMON", "B_RELMON")


def test_missing_token_is_not_authed(slack: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as error:
        WebClient(token=None, base_url=slack.api_url).users_info(user="U1")
    assert error.value.response["error"] == "not_authed"


def test_bots(slack: FakeSlack, client: WebClient) -> None:
    slack.add_bot("B9", "helper", app_id="A9", user_id="U9")
    assert client.bots_info(bot="B9")["bot"]["app_id"] == "A9"


def test_users(slack: FakeSlack, client: WebClient) -> None:
    slack.add_user("U1", "ana", "Ana Diaz")
    assert client.users_info(user="U1")["user"]["real_name"] == "Ana Diaz"
    with pytest.raises(SlackApiError):
        client.users_info(user="U404")
    assert slack.calls_to("users.info") == [{"user": "U1"}, {"user": "U404"}]


def test_conversations(slack: FakeSlack, client: WebClient) -> None:
    slack.add_channel("C1", "support", members=["U1", "U_RELMON"])
    slack.add_channel("G1", "secret", is_private=True, members=["U1"])
    slack.add_message("C1", "100.000001", user="U1", text="first question")
    slack.add_message("C1", "101.000001", user="U1", text="thread root")
    slack.add_message("C1", "102.000001", user="U1", text="in thread", thread_ts="101.000001")
    slack.add_message("C1", "103.000001", bot_id="B9", text="answer", thread_ts="101.000001")

    assert client.conversations_info(channel="G1")["channel"]["is_private"] is True
    assert client.conversations_members(channel="C1")["members"] == ["U1", "U_RELMON"]
    history = client.conversations_history(channel="C1", latest="101.5", inclusive=True)["messages"]
    assert [m["text"] for m in history] == ["thread root", "first question"]
    replies = client.conversations_replies(channel="C1", ts="101.000001")["messages"]
    assert [m["text"] for m in replies] == ["thread root", "in thread", "answer"]


def test_chat_methods_answer_as_slack_does(slack: FakeSlack, client: WebClient) -> None:
    posted = client.chat_postMessage(channel="C1", text="hello", blocks=[{"type": "divider"}])
    assert posted["ts"]
    client.chat_update(channel="C1", ts=posted["ts"], text="hello again")
    assert slack.messages["C1"][posted["ts"]]["text"] == "hello again"
    assert slack.messages["C1"][posted["ts"]]["blocks"] == [{"type": "divider"}]
    client.chat_postEphemeral(channel="C1", user="U1", text="psst")
    assert slack.ephemerals[0]["text"] == "psst"
    link = client.chat_getPermalink(channel="C1", message_ts="123.456")["permalink"]
    assert link == "https://example.slack.com/archives/C1/p123456"
    assert [p["text"] for p in slack.posted("C1")] == ["hello"]


def test_files_upload_v2(slack: FakeSlack, client: WebClient) -> None:
    answer = client.files_upload_v2(channel="C1", filename="chart.png", content=b"\x89PNG-bytes", title="Chart")
    file_id = answer["files"][0]["id"]
    assert slack.uploads[file_id] == b"\x89PNG-bytes"
    assert slack.files[file_id]["channels"] == ["C1"]
    assert "alt_txt" not in slack.files[file_id]


def test_files_upload_v2_alt_text(slack: FakeSlack, client: WebClient) -> None:
    """As Slack: the alt text goes with files.getUploadURLExternal, is kept on the file, and over 1,000
    characters is refused (alt_txt_too_large)."""
    answer = client.files_upload_v2(channel="C1", filename="c.png", content=b"\x89PNG", title="C", alt_txt="A chart")
    assert slack.files[answer["files"][0]["id"]]["alt_txt"] == "A chart"
    assert slack.calls_to("files.getUploadURLExternal")[0]["alt_txt"] == "A chart"
    with pytest.raises(SlackApiError) as error:
        client.files_upload_v2(channel="C1", filename="c.png", content=b"\x89PNG", title="C", alt_txt="x" * 1001)
    assert error.value.response["error"] == "alt_txt_too_large"


def test_views(slack: FakeSlack, client: WebClient) -> None:
    client.views_open(trigger_id="123.abc", view={"type": "modal", "title": {"type": "plain_text", "text": "x"}})
    client.views_publish(user_id="U1", view={"type": "home", "blocks": []})
    assert slack.published["U1"]["type"] == "home"
    assert [v["kind"] for v in slack.views] == ["open", "publish"]


def test_rate_limit_with_retry_after(slack: FakeSlack, client: WebClient) -> None:
    slack.rate_limit("users.info", times=1, retry_after=1)
    with pytest.raises(SlackApiError) as error:
        client.users_info(user="U_RELMON")
    assert error.value.response.status_code == 429
    assert error.value.response.headers["Retry-After"] == "1"

    slack.rate_limit("users.info", times=1, retry_after=1)
    patient = WebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)
    patient.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
    started = time.monotonic()
    assert patient.users_info(user="U_RELMON")["ok"]
    assert time.monotonic() - started >= 1.0


def test_response_urls_record_posts(slack: FakeSlack) -> None:
    url = slack.response_url("cmd-1")
    httpx.post(url, json={"text": "verdict", "response_type": "ephemeral"}, timeout=5)
    assert slack.responses["cmd-1"] == [{"text": "verdict", "response_type": "ephemeral"}]


def test_response_url_rate_limited_then_taken(slack: FakeSlack) -> None:
    slack.rate_limit_response_url("busy", times=1, retry_after=1)
    first = httpx.post(slack.response_url("busy"), json={"text": "one"}, timeout=5)
    assert first.status_code == 429 and first.headers["Retry-After"] == "1"
    assert slack.responses["busy"] == []
    assert httpx.post(slack.response_url("busy"), json={"text": "two"}, timeout=5).status_code == 200
    assert slack.responses["busy"] == [{"text": "two"}] and len(slack.response_attempts["busy"]) == 2


def test_expired_response_url_answers_404(slack: FakeSlack) -> None:
    slack.expire_response_url("old")
    answer = httpx.post(slack.response_url("old"), json={"text": "late"}, timeout=5)
    assert (answer.status_code, answer.text) == (404, "expired_url") and slack.responses["old"] == []


def test_ephemeral_needs_a_member_in_a_known_channel(slack: FakeSlack, client: WebClient) -> None:
    slack.add_channel("C2", "general", members=["U1", "U_RELMON"])
    client.chat_postEphemeral(channel="C2", user="U1", text="for you")
    with pytest.raises(SlackApiError) as error:
        client.chat_postEphemeral(channel="C2", user="U_STRANGER", text="not for you")
    assert error.value.response["error"] == "user_not_in_channel"
    assert [e["text"] for e in slack.ephemerals] == ["for you"]


def test_replies_page_like_slack(slack: FakeSlack, client: WebClient) -> None:
    """`limit` a page, `has_more`, and an opaque `response_metadata.next_cursor` (empty on the last page)."""
    slack.add_channel("C2", "long", members=["U_RELMON"])
    slack.add_message("C2", "200.000001", user="U1", text="root")
    for i in range(2, 251):
        slack.add_message("C2", f"{200 + i}.000001", user="U1", text=f"reply {i}", thread_ts="200.000001")
    texts, cursor, pages = [], None, 0
    while True:
        page = client.conversations_replies(channel="C2", ts="200.000001", limit=100, cursor=cursor)
        pages += 1
        texts += [m["text"] for m in page["messages"]]
        cursor = page["response_metadata"]["next_cursor"]
        assert page["has_more"] is bool(cursor)
        if not cursor:
            break
    assert pages == 3 and texts == ["root"] + [f"reply {i}" for i in range(2, 251)]


def test_history_pages_like_slack(slack: FakeSlack, client: WebClient) -> None:
    slack.add_channel("C2", "long", members=["U_RELMON"])
    slack.add_message("C2", "200.000001", user="U1", text="root")
    slack.add_message("C2", "199.000001", user="U1", text="earlier top-level message")
    first = client.conversations_history(channel="C2", limit=1)
    assert first["has_more"] is True and first["response_metadata"]["next_cursor"]
    second = client.conversations_history(channel="C2", limit=1, cursor=first["response_metadata"]["next_cursor"])
    assert second["messages"] != first["messages"]


def test_channel_info_says_whether_it_is_shared(slack: FakeSlack, client: WebClient) -> None:
    slack.add_channel("C3", "acme", members=["U_RELMON"], is_ext_shared=True)
    assert client.conversations_info(channel="C3")["channel"]["is_ext_shared"] is True
