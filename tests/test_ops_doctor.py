"""`relmon doctor` against FakeSlack, FakeOpenAI, a real Redis and real databases."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.doctor import required_scopes, run_doctor
from store.db import Database
from store.settings import Settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import RELMON_BOT_ID, RELMON_USER_ID, FakeSlack
from tests.processes import relmon_command, relmon_env
from tests.services import free_port

BOT_TOKEN = "xoxb-4242-1717-GoodBotTokenValue"
OPENAI_KEY = "sk-proj-GoodOpenAIKeyValue9876"
SIGNING_SECRET = "f00dfeedf00dfeedf00dfeedf00dfeed"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.oauth_scopes = required_scopes()
        fake.valid_tokens = {BOT_TOKEN}
        fake.add_channel("C_ALERTS", "relmon-alerts", members=[RELMON_USER_ID])
        fake.add_channel("C_WATCH", "support", members=[RELMON_USER_ID, "U_SUPPORT"])
        yield fake


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(api_key=OPENAI_KEY) as fake:
        yield fake


@pytest.fixture
def healthy(slack: FakeSlack, llm: FakeOpenAI, redis_url: str, db_url: str, tmp_path: Path) -> dict:
    return {
        "slack_bot_token": BOT_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": slack.api_url,
        "openai_api_key": OPENAI_KEY,
        "openai_base_url": llm.base_url,
        "redis_url": redis_url,
        "database_url": db_url,
        "data_dir": tmp_path / "data",
        "monitored_bots": ["B_SUPPORT"],
        "alert_channel": "C_ALERTS",
        "watched_channels": ["C_WATCH"],
    }


def doctor(**values: object) -> tuple[int, str]:
    out = io.StringIO()
    code = run_doctor(Settings(**values), out=out)
    text = out.getvalue()
    for secret in (BOT_TOKEN, OPENAI_KEY, SIGNING_SECRET, "wrong-key-abcdef", "xoxb-9999-0000-RevokedToken"):
        assert secret not in text
    return code, text


def failures(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("FAIL")]


def test_all_ok(healthy: dict) -> None:
    code, text = doctor(**healthy)
    assert code == 0, text
    assert failures(text) == []
    for name in ("settings", "slack auth", "slack scopes", "slack channel C_ALERTS", "slack channel C_WATCH"):
        assert f"ok    {name}:" in text
    assert "ok    redis:" in text and "ok    database:" in text and "ok    llm:" in text
    assert "xoxb-****alue" in text  # masked, recognisable


def test_a_bad_token(healthy: dict) -> None:
    code, text = doctor(**{**healthy, "slack_bot_token": "xoxb-9999-0000-RevokedToken"})
    assert code == 1
    assert failures(text) == ["FAIL  slack auth: Slack refused the token xoxb-****oken (invalid_auth)"]
    assert "OAuth & Permissions" in text


def test_a_missing_scope(healthy: dict, slack: FakeSlack) -> None:
    slack.oauth_scopes = [scope for scope in required_scopes() if scope not in ("files:write", "groups:history")]
    code, text = doctor(**healthy)
    assert code == 1
    assert failures(text) == ["FAIL  slack scopes: the token lacks groups:history, files:write"]
    assert "reinstall the app" in text


def test_not_in_the_alert_channel_nor_in_an_unknown_one(healthy: dict, slack: FakeSlack) -> None:
    slack.channels["C_ALERTS"].members.remove(RELMON_USER_ID)
    code, text = doctor(**{**healthy, "watched_channels": ["C_WATCH", "C_GONE"]})
    assert code == 1
    assert failures(text) == [
        "FAIL  slack channel C_ALERTS: alert channel (RELMON_ALERT_CHANNEL): relmon is not a member of #relmon-alerts",
        "FAIL  slack channel C_GONE: watched channel (RELMON_WATCHED_CHANNELS): relmon cannot see it "
        "(channel_not_found: wrong ID, or private)",
    ]
    assert "/invite @relmon" in text


def test_dead_redis_with_its_password_masked(healthy: dict) -> None:
    code, text = doctor(**{**healthy, "redis_url": f"redis://:s3cretRedisPass@127.0.0.1:{free_port()}/0"})
    assert code == 1
    [line] = failures(text)
    assert line.startswith("FAIL  redis: no answer from redis://:****Pass@127.0.0.1:")
    assert "s3cretRedisPass" not in text


def test_unmigrated_database(healthy: dict, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
    Database(url).dispose()
    code, text = doctor(**{**healthy, "database_url": url})
    assert code == 1
    [line] = failures(text)
    assert "migration(s) not applied" in line and "relmon migrate" in text


def test_llm_401(healthy: dict) -> None:
    code, text = doctor(**{**healthy, "openai_api_key": "sk-wrong-key-abcdef"})
    assert code == 1
    assert failures(text) == [f"FAIL  llm: {healthy['openai_base_url']} rejected the key sk-****cdef (401)"]


def test_unknown_model(healthy: dict, llm: FakeOpenAI) -> None:
    llm.set_behavior(always_status=404)
    code, text = doctor(**healthy)
    assert code == 1 and "does not know the model" in text and "RELMON_JUDGE_MODEL" in text


def test_lists_the_bots_seen_in_the_watched_channels(healthy: dict, slack: FakeSlack) -> None:
    slack.add_message("C_WATCH", "1700000001.000100", "U_SUPPORT", "How do I export my data?", reply_count=2)
    # The support bot answers in the thread (not in conversations.history), under its bot user U_SUPPORTBOT.
    slack.add_message(
        "C_WATCH",
        "1700000002.000100",
        "U_SUPPORTBOT",
        "Settings > Export.",
        thread_ts="1700000001.000100",
        bot_id="B_SUPPORT",
        app_id="A_SUPPORT",
        bot_profile={"id": "B_SUPPORT", "app_id": "A_SUPPORT", "name": "Helpdesk AI"},
    )
    slack.add_message("C_WATCH", "1700000003.000100", None, "Deploy finished", bot_id="B_CI", username="ci-bot")
    slack.add_message("C_WATCH", "1700000004.000100", RELMON_USER_ID, "alert", bot_id=RELMON_BOT_ID)
    code, text = doctor(**{**healthy, "monitored_bots": ["A_SUPPORT"]})
    assert code == 0, text
    assert (
        'ok    slack bot B_SUPPORT: "Helpdesk AI" (app A_SUPPORT, user U_SUPPORTBOT): 1 message(s) in #support; '
        "monitored (in RELMON_MONITORED_BOTS)"
    ) in text
    assert 'ok    slack bot B_CI: "ci-bot" (no app): 1 message(s) in #support; not monitored' in text
    assert RELMON_BOT_ID not in text  # relmon's own messages are not candidates

    code, text = doctor(**{**healthy, "monitored_bots": ["B_GONE"]})
    assert code == 1
    assert failures(text) == [
        "FAIL  slack monitored bots: none of RELMON_MONITORED_BOTS (B_GONE) posted lately in #support"
    ]
    assert "among the bots listed above" in text


def test_socket_mode_app_token(healthy: dict, slack: FakeSlack) -> None:
    app_token = "xapp-1-A111-2222-GoodAppTokenValue"
    slack.valid_tokens = {BOT_TOKEN, app_token}
    slack.socket_mode_url = "ws://127.0.0.1:1/socket"
    code, text = doctor(**{**healthy, "slack_app_token": app_token})
    assert code == 0, text
    assert "ok    slack app token: SLACK_APP_TOKEN xapp-****alue opens Socket Mode connections" in text
    assert app_token not in text

    code, text = doctor(**{**healthy, "slack_app_token": "xapp-1-A111-2222-RevokedAppToken"})
    assert code == 1
    assert failures(text) == [
        "FAIL  slack app token: Slack refused SLACK_APP_TOKEN xapp-****oken for Socket Mode (invalid_auth)"
    ]
    assert "App-Level Token" in text


def test_a_network_error_in_a_channel_check_is_reported_not_raised() -> None:
    from slack_sdk import WebClient
    from slack_sdk.errors import SlackApiError

    from bot.doctor import _check_channel, check_bots_seen

    dead = WebClient(token=BOT_TOKEN, base_url=f"http://127.0.0.1:{free_port()}/api/", timeout=2)
    check = _check_channel(dead, "C_WATCH", "watched channel (RELMON_WATCHED_CHANNELS)", RELMON_USER_ID, SlackApiError)
    assert check.failed and "cannot reach the Slack API" in check.detail
    [history] = check_bots_seen(dead, Settings(), [("C_WATCH", "#support")])
    assert history.failed and history.name == "slack history C_WATCH"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_command_lists_missing_settings_and_exits_non_zero(tmp_path: Path, db_url: str) -> None:
    env = relmon_env(redis_url="", database_url=db_url, data_dir=tmp_path / "data")
    for name in ("SLACK_BOT_TOKEN", "RELMON_ALERT_CHANNEL", "REDIS_URL", "OPENAI_API_KEY"):
        env.pop(name)
    result = subprocess.run(relmon_command("doctor"), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=90)
    assert result.returncode == 1, result.stderr
    assert [line for line in result.stdout.splitlines() if line.startswith("FAIL")] == [
        "FAIL  settings: SLACK_BOT_TOKEN is not set",
        "FAIL  settings: RELMON_ALERT_CHANNEL is not set",
        "FAIL  settings: OPENAI_API_KEY is not set",
    ]
    assert "skip  slack: no SLACK_BOT_TOKEN" in result.stdout
    assert "ok    redis: embedded mode" in result.stdout
    assert "test-signing-secret" not in result.stdout
