"""`relmon doctor` against FakeSlack, FakeOpenAI, a real Redis and real databases."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from relmon.doctor import slack_bots
from relmon.doctor.report import run_doctor
from relmon.doctor.slack_checks import required_scopes
from store.db import Database
from store.settings import Settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.otlp_receiver import FakeOtlpReceiver
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
        # Ports of their own: the defaults (9464, 9465) may be anyone's on a shared machine.
        "worker_metrics_port": free_port(),
        "beat_metrics_port": free_port(),
    }


def doctor(**values: object) -> tuple[int, str]:
    out = io.StringIO()
    code = run_doctor(Settings(_env_file=None, **values), out=out)
    text = out.getvalue()
    for secret in (BOT_TOKEN, OPENAI_KEY, SIGNING_SECRET, "wrong-key-abcdef", "xoxb-9999-0000-RevokedToken"):
        assert secret not in text
    return code, text


def failures(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("FAIL")]


def warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warn")]


def test_all_ok(healthy: dict) -> None:
    code, text = doctor(**healthy)
    assert code == 0, text
    assert failures(text) == []
    for name in ("settings", "slack auth", "slack scopes", "slack channel C_ALERTS", "slack channel C_WATCH"):
        assert f"ok    {name}:" in text
    assert "ok    redis:" in text and "ok    database:" in text and "ok    llm:" in text
    assert "xoxb-****alue" in text  # masked, recognisable


def test_a_tracing_tool_that_refuses_the_key_fails_the_doctor(healthy: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20wrong-token")
    with FakeOtlpReceiver(token="right-token") as otlp:
        code, text = doctor(**healthy, otlp_endpoint=otlp.url)
    assert code == 1 and failures(text) == [f"FAIL  otlp: {otlp.url}/v1/logs refused the key (401)"], text


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


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("postgresql+psycopg://relmon:pw@127.0.0.1:{port}/relmon", "Connection refused"),
        ("postgresql://relmon:pw@127.0.0.1:abc/relmon", "invalid literal for int()"),  # a port that is no number
        ("notaurl", "Could not parse SQLAlchemy URL"),
    ],
)
def test_a_database_that_cannot_be_used_is_a_fail_line_with_its_cause(healthy: dict, url: str, cause: str) -> None:
    code, text = doctor(**{**healthy, "database_url": url.format(port=free_port())})
    assert code == 1
    [line] = failures(text)
    assert line.startswith("FAIL  database: cannot connect to ") and cause in line and "sqlalche.me" not in line


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
    assert code == 0, text  # the support bot may just be quiet: a warning, not a failure
    assert failures(text) == []
    assert warnings(text) == [
        "warn  slack monitored bots: none of RELMON_MONITORED_BOTS (B_GONE) posted in the recent history of "
        "#support (the support bot may just have been quiet)"
    ]
    assert "among the bots listed above" in text
    assert text.rstrip().endswith("all checks passed, 1 warning")


def add_bot_answer(slack: FakeSlack, channel: str, ts: str, bot_id: str = "B_SUPPORT", in_thread: bool = False) -> None:
    """A question in `channel` and the support bot's answer (in its thread, or in the channel)."""
    slack.add_message(channel, ts, "U_SUPPORT", "How do I export my data?", reply_count=1 if in_thread else None)
    answer_ts = ts[:-1] + "9"
    slack.add_message(
        channel,
        answer_ts,
        "U_SUPPORTBOT",
        "Settings > Export.",
        thread_ts=ts if in_thread else None,
        bot_id=bot_id,
        app_id="A_SUPPORT",
        bot_profile={"id": bot_id, "app_id": "A_SUPPORT", "name": "Helpdesk AI"},
    )


def test_with_no_watched_channels_it_reads_the_channels_relmon_is_in(healthy: dict, slack: FakeSlack) -> None:
    # RELMON_WATCHED_CHANNELS empty (every channel relmon is in is watched) and no rules file: the usual first setup.
    slack.add_channel("C_PRIV", "vip-support", is_private=True, members=[RELMON_USER_ID, "U_SUPPORT"])
    slack.add_channel("C_ELSEWHERE", "random", members=["U_SUPPORT"])  # relmon is not in it: not read
    add_bot_answer(slack, "C_WATCH", "1700000001.000100", in_thread=True)
    add_bot_answer(slack, "C_PRIV", "1700000002.000100")
    add_bot_answer(slack, "C_ELSEWHERE", "1700000003.000100", bot_id="B_OTHER")
    code, text = doctor(**{**healthy, "watched_channels": [], "monitored_bots": ["B_SUPPORT"]})
    assert code == 0, text
    assert ('ok    slack bot B_SUPPORT: "Helpdesk AI" (app A_SUPPORT, user U_SUPPORTBOT): 2 message(s) in ') in text
    line = next(line for line in text.splitlines() if line.startswith("ok    slack bot B_SUPPORT"))
    assert "#support" in line and "#vip-support" in line and line.endswith("monitored (in RELMON_MONITORED_BOTS)")
    assert "B_OTHER" not in text
    assert "ok    slack channels read: RELMON_WATCHED_CHANNELS is empty" in text
    [listing] = slack.calls_to("users.conversations")
    assert set(listing["types"].split(",")) == {"public_channel", "private_channel"}
    read = [call["channel"] for call in slack.calls_to("conversations.history")]
    assert sorted(read) == ["C_ALERTS", "C_PRIV", "C_WATCH"]  # each once, the alert channel too


@pytest.fixture
def many_channels(slack: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Thirty channels relmon is in, five answered threads each, listed eight a page."""
    monkeypatch.setattr(slack_bots, "MEMBER_PAGE", 8)
    for n in range(30):
        slack.add_channel(f"C_MANY{n:02d}", f"team-{n:02d}", members=[RELMON_USER_ID])
        for t in range(5):  # five threads each: reading them all would be 180 calls
            add_bot_answer(slack, f"C_MANY{n:02d}", f"17000{n:02d}{t}.000100", in_thread=True)


@pytest.mark.usefixtures("many_channels")
def test_with_no_watched_channels_the_listing_is_paged_until_the_cap(healthy: dict, slack: FakeSlack) -> None:
    code, text = doctor(**{**healthy, "watched_channels": []})
    assert code == 0, text
    pages = slack.calls_to("users.conversations")
    assert len(pages) == 3 and pages[1].get("cursor") == "8"  # 24 channels listed: enough for the cap of 20


@pytest.mark.usefixtures("many_channels")
def test_with_no_watched_channels_the_reading_is_capped(healthy: dict, slack: FakeSlack) -> None:
    code, text = doctor(**{**healthy, "watched_channels": []})
    assert code == 0, text
    read = [call["channel"] for call in slack.calls_to("conversations.history")]
    assert len(read) == slack_bots.CHANNELS_READ == len(set(read))
    total = len(read) + len(slack.calls_to("conversations.replies"))
    assert total <= slack_bots.READ_CALLS
    assert "the first 20" in text and "ok    slack bot B_SUPPORT:" in text


def test_a_watched_alert_channel_is_read_for_bots(healthy: dict, slack: FakeSlack) -> None:
    add_bot_answer(slack, "C_ALERTS", "1700000001.000100")
    code, text = doctor(**{**healthy, "watched_channels": ["C_ALERTS", "C_WATCH"]})
    assert code == 0, text
    assert "1 message(s) in #relmon-alerts; monitored" in text
    read = [call["channel"] for call in slack.calls_to("conversations.history")]
    assert sorted(read) == ["C_ALERTS", "C_WATCH"]


def test_a_short_rate_limit_on_the_history_is_waited_out(healthy: dict, slack: FakeSlack) -> None:
    add_bot_answer(slack, "C_WATCH", "1700000001.000100", in_thread=True)
    slack.rate_limit("conversations.history", times=1, retry_after=1)
    slack.rate_limit("conversations.replies", times=1, retry_after=1)
    code, text = doctor(**healthy)
    assert code == 0, text
    assert failures(text) == [] and warnings(text) == []
    assert "ok    slack bot B_SUPPORT:" in text
    assert len(slack.calls_to("conversations.history")) == 2 and len(slack.calls_to("conversations.replies")) == 2


def test_a_long_rate_limit_on_the_history_is_reported_without_scope_advice(healthy: dict, slack: FakeSlack) -> None:
    import time

    slack.add_channel("C_WATCH2", "support-2", members=[RELMON_USER_ID])
    add_bot_answer(slack, "C_WATCH", "1700000001.000100")
    add_bot_answer(slack, "C_WATCH2", "1700000002.000100", in_thread=True)
    # A commercially distributed app may be held to 1 history call a minute: the first read goes through.
    slack.rate_limit("conversations.replies", times=50, retry_after=60)
    started = time.monotonic()
    code, text = doctor(**{**healthy, "watched_channels": ["C_WATCH", "C_WATCH2"], "monitored_bots": ["B_GONE"]})
    assert time.monotonic() - started < 15
    assert code == 0, text
    assert failures(text) == []
    assert warnings(text) == [
        "warn  slack bots seen: Slack rate-limited the history read (conversations.replies, Retry-After 60 s); "
        "the bots above may not be all: run doctor again in a minute"
    ]
    assert "ok    slack bot B_SUPPORT:" in text  # what was read before is still listed
    assert "groups:history" not in text and "channels:history" not in text
    assert len(slack.calls_to("conversations.replies")) == 1  # no hammering
    # (and no "none of RELMON_MONITORED_BOTS posted" warning: B_GONE may be in the threads not read)

    slack.rate_limit("conversations.history", times=50, retry_after=60)
    code, text = doctor(**healthy)
    assert code == 0, text
    assert warnings(text) == [
        "warn  slack bots seen: Slack rate-limited the history read (conversations.history, Retry-After 60 s); "
        "run doctor again in a minute"
    ]
    assert "history" not in "".join(failures(text)) and "channels:history" not in text


def test_a_missing_history_scope_gets_scope_advice(
    healthy: dict, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = {"ok": False, "error": "missing_scope", "needed": "channels:history", "provided": "chat:write"}
    monkeypatch.setattr(slack, "_api_conversations_history", lambda params: answer)
    code, text = doctor(**healthy)
    assert code == 1
    assert failures(text) == [
        "FAIL  slack history C_WATCH: cannot read the history of #support (missing_scope: channels:history)"
    ]
    assert "grant channels:history" in text and "reinstall" in text

    monkeypatch.setattr(slack, "_api_conversations_history", lambda params: {"ok": False, "error": "not_in_channel"})
    code, text = doctor(**healthy)
    assert code == 1
    assert failures(text) == ["FAIL  slack history C_WATCH: cannot read the history of #support (not_in_channel)"]
    assert "channels:history" not in text and "/invite @relmon" in text


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

    from relmon.doctor.slack_bots import check_bots_seen
    from relmon.doctor.slack_checks import _check_channel

    dead = WebClient(token=BOT_TOKEN, base_url=f"http://127.0.0.1:{free_port()}/api/", timeout=2)
    check = _check_channel(dead, "C_WATCH", "watched channel (RELMON_WATCHED_CHANNELS)", RELMON_USER_ID, SlackApiError)
    assert check.failed and "cannot reach the Slack API" in check.detail
    [history] = check_bots_seen(dead, Settings(_env_file=None), [("C_WATCH", "#support")])
    assert history.failed and history.name == "slack history C_WATCH"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_command_fails_naming_each_missing_setting(tmp_path: Path, db_url: str) -> None:
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


def test_a_keyless_local_llm_endpoint_is_checked_without_a_key(healthy: dict, llm: FakeOpenAI) -> None:
    llm.set_behavior(api_key=None)  # an Ollama- or vLLM-like endpoint: no key asked
    code, text = doctor(**{**healthy, "openai_api_key": ""})
    assert code == 0, text
    assert f"ok    llm: {healthy['openai_base_url']} answered" in text and "none (a keyless endpoint)" in text
    # Without a base URL there is nothing to call: the check is skipped, and the settings check says what to set.
    code, text = doctor(**{**healthy, "openai_api_key": "", "openai_base_url": ""})
    assert "skip  llm: no OPENAI_API_KEY" in text and code == 1


def test_a_worker_that_cannot_serve_its_metrics_port_fails_the_doctor(healthy: dict, redis_url: str) -> None:
    """The worker only logs a port another program holds; what it records in Redis makes the doctor say it."""
    import redis

    from common.metrics_ports import PortReport, write

    code, text = doctor(**healthy)
    assert code == 0 and f"on this host, port {healthy['worker_metrics_port']} is free for it" in text, text
    taken = PortReport("worker", "worker-7", 42, 9464, serving=False, problem="port 9464 in use by another program")
    write(redis.Redis.from_url(redis_url), taken)
    code, text = doctor(**healthy)
    assert code == 1, text
    assert failures(text) == [
        "FAIL  worker metrics port: worker-7 (pid 42): port 9464 in use by another program: the worker works on, "
        "but its metrics are not served"
    ]
    assert "fix: set RELMON_WORKER_METRICS_PORT to a free port (or 0 to turn the worker's metrics off)" in text


EMBED_KEY = "sk-embed-EmbeddingsKeyValue42"


def test_the_embeddings_the_topics_will_use(healthy: dict, llm: FakeOpenAI) -> None:
    """The judge's endpoint by default; one of their own, called with its key; local when the one set is down, and
    local always with RELMON_EMBEDDING_MODEL=local."""
    code, text = doctor(**healthy)
    assert code == 0, text
    line = next(line for line in text.splitlines() if line.startswith("ok    embeddings:"))
    assert line == (
        f"ok    embeddings: topics embed with text-embedding-3-small at {healthy['openai_base_url']} "
        "(the judge's endpoint, key sk-****9876 from OPENAI_API_KEY): 1536 values a question"
    )
    assert len(llm.embedding_requests) == 1 and llm.embedding_requests[0]["input"] == [
        "relmon doctor: can this endpoint embed a question?"
    ]

    with FakeOpenAI(api_key=EMBED_KEY) as embedder:
        llm.reset()
        code, text = doctor(**healthy, embedding_base_url=embedder.base_url, embedding_api_key=EMBED_KEY)
        assert code == 0, text
        assert (
            f"ok    embeddings: topics embed with text-embedding-3-small at {embedder.base_url} "
            "(RELMON_EMBEDDING_BASE_URL, key sk-****ue42 from RELMON_EMBEDDING_API_KEY)"
        ) in text
        assert llm.embedding_requests == [] and embedder.embedding_authorizations == [f"Bearer {EMBED_KEY}"]
        assert EMBED_KEY not in text

    dead = f"http://127.0.0.1:{free_port()}/v1"
    code, text = doctor(**healthy, embedding_base_url=dead, embedding_api_key=EMBED_KEY)
    assert code == 1 and failures(text) == [
        f"FAIL  embeddings: {dead} (RELMON_EMBEDDING_BASE_URL) gave no embeddings with text-embedding-3-small "
        "(connection error): topics will be grouped by local keyword vectors (local TF-IDF + SVD)"
    ]
    assert "fix: check the network and RELMON_EMBEDDING_BASE_URL" in text

    code, text = doctor(**healthy, embedding_model="local")
    assert "ok    embeddings: RELMON_EMBEDDING_MODEL=local: topics will be grouped by local keyword vectors" in text


def test_a_chat_only_judge_endpoint_warns_that_topics_group_locally(healthy: dict, llm: FakeOpenAI) -> None:
    llm.set_behavior(api_key=OPENAI_KEY, embeddings=False)  # llama.cpp-like: chat completions only
    code, text = doctor(**healthy)
    assert code == 0 and failures(text) == []
    assert [line for line in warnings(text) if "embeddings" in line] == [
        f"warn  embeddings: {healthy['openai_base_url']} (the judge's endpoint) gave no embeddings with "
        "text-embedding-3-small (HTTP 404 not found): topics will be grouped by local keyword vectors "
        "(local TF-IDF + SVD)"
    ]
    assert "RELMON_EMBEDDING_BASE_URL to an embeddings endpoint" in text and "RELMON_EMBEDDING_MODEL=local" in text
