"""Hostile input at the bot's HTTP endpoint: hypothesis sends well over 1,000 malformed, oversized and odd
requests — most of them correctly signed, so they get past the signature check and reach the validation layer,
Bolt and the capture listener — to the bot's WSGI app served over real HTTP (real Redis, PostgreSQL when a server
answers, else SQLite). The bot must never answer 5xx for them (only a dead broker or database may, on purpose,
so that Slack retries), never crash, and /healthz must stay 200. Seeded mutations of valid signed requests
(tests/request_mutations.py) go straight into the WSGI app; the same mutations over Socket Mode are in
test_fuzz_socket_mode.py.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Iterator
from urllib.parse import urlencode

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from store.db import Database
from tests import slack_requests as sr
from tests.bot_harness import BotServer, ServedBot
from tests.builders import SECRET, make_settings
from tests.fakes.slack_server import FakeSlack
from tests.request_mutations import CHANNEL, MUTATION_SEED, hostile_requests
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url

FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    derandomize=True,  # the same examples on every run: CI failures reproduce
)
MEGABYTE = 1024 * 1024
STATUSES: Counter[int] = Counter()  # what the fuzzed requests got: many must reach Bolt, not only the 400s


@pytest.fixture(scope="module")
def served(redis_server, tmp_path_factory) -> Iterator[tuple[ServedBot, httpx.Client]]:
    """One bot for the whole module (start-up is the slow part), on PostgreSQL when a server answers."""
    admin = postgres_admin_url()
    if admin is not None:
        url, name = create_postgres_database(admin)
    else:
        url, name = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'relmon.sqlite3'}", None
    database = Database(url)
    database.migrate()
    database.dispose()
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        settings_ = make_settings(redis_url=redis_server.url, database_url=url, slack_api_url=slack.api_url)
        with BotServer(settings_) as bot, httpx.Client(timeout=30) as client:
            yield bot, client
    if name is not None:
        drop_postgres_database(admin, name)


def post_signed(served, body: bytes, content_type: str) -> httpx.Response:
    bot, client = served
    headers = {"Content-Type": content_type, **sr.sign(body, SECRET)}
    return client.post(bot.url, content=body, headers=headers)


def assert_not_5xx(response: httpx.Response, body: bytes) -> None:
    STATUSES[response.status_code] += 1
    assert response.status_code < 500, f"{response.status_code} {response.text[:300]} for {body[:300]!r}"


# Strategies ----------------------------------------------------------------------------------------------------

odd_text = st.one_of(
    # Any code point UTF-8 can carry but NUL (hypothesis favours it; the sampled texts below hold some).
    st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\x00"), max_size=200),
    st.text(alphabet=st.characters(max_codepoint=0x7F, exclude_characters="\x00"), max_size=200),
    st.sampled_from(
        [
            "\u202eright-to-left override",
            "\ufeffBOM",
            "e\u0301" * 50,  # combining accents
            "👩‍👩‍👧‍👦" * 30,
            "\ud7ff\ue000\uffff",
            "<@U1|x><#C1|><!subteam^S1|@t><mailto:a@b|a@b><https://x|y>" * 5,
            "&lt;&gt;&amp;" * 20,
            "x" * 40_000,
        ]
    ),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), odd_text)
json_value = st.recursive(
    json_leaf,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(odd_text, children, max_size=4),
    max_leaves=20,
)


def mostly(valid: st.SearchStrategy, wrong: st.SearchStrategy = json_value) -> st.SearchStrategy:
    """Nineteen times in twenty a value of the type Slack sends (odd content), else anything: most requests then pass
    validation and reach Bolt and the capture listener, and some probe the validation itself."""
    # Hypothesis favours small integers: the rare branch is the largest.
    return st.integers(0, 19).flatmap(lambda n: wrong if n == 19 else valid)


slack_ts = mostly(st.one_of(st.just("1700000000.000100"), st.from_regex(r"\A[0-9]{1,12}\.[0-9]{1,8}\Z")), odd_text)
odd_dicts = st.dictionaries(odd_text, json_value, max_size=4)
block = st.fixed_dictionaries(
    {"type": st.sampled_from(["rich_text", "section", "context", "header", "divider", "image", "x"])},
    optional={"elements": json_value, "text": json_value, "fields": json_value, "block_id": odd_text},
)
attachment = st.fixed_dictionaries(
    {}, optional={"text": json_value, "fallback": json_value, "fields": json_value, "blocks": st.lists(block)}
)
MESSAGE_FIELDS = {
    "channel": mostly(st.one_of(st.just(CHANNEL), odd_text)),
    "user": mostly(st.one_of(st.just("U_ASKER"), st.just("U_SUPPORT"), odd_text)),
    "bot_id": mostly(st.one_of(st.just("B_SUPPORT"), odd_text)),
    "text": mostly(odd_text),
    "ts": slack_ts,
    "thread_ts": slack_ts,
    "subtype": mostly(
        st.sampled_from(
            ["message_changed", "message_deleted", "thread_broadcast", "bot_message", "file_share", "channel_join"]
        )
        | odd_text
    ),
    "blocks": mostly(st.lists(block, max_size=3)),
    "attachments": mostly(st.lists(attachment, max_size=2)),
    "files": mostly(st.lists(odd_dicts, max_size=2)),
    "bot_profile": mostly(st.just({"id": "B_SUPPORT", "app_id": "A_SUPPORT"}) | odd_dicts),
    "deleted_ts": slack_ts,
    "streaming_state": mostly(st.sampled_from(["in_progress", "completed", "errored"]) | odd_text),
    "channel_type": mostly(st.sampled_from(["channel", "group", "im"]) | odd_text),
}


@st.composite
def inner_messages(draw) -> dict:
    names = draw(st.lists(st.sampled_from(sorted(MESSAGE_FIELDS)), unique=True, max_size=8))
    return {name: draw(MESSAGE_FIELDS[name]) for name in names}


@st.composite
def message_events(draw) -> dict:
    """Message events of every kind with any field missing, mistyped or odd."""
    event: dict = {"type": "message", "channel": CHANNEL}
    for name, strategy in MESSAGE_FIELDS.items():
        if draw(st.booleans()):
            event[name] = draw(strategy)
    for name in ("message", "previous_message", "root"):
        if draw(st.integers(0, 3)) == 0:
            event[name] = draw(mostly(inner_messages()))
    return event


@st.composite
def envelopes(draw) -> dict:
    envelope = sr.envelope(draw(message_events()))
    for name in ("event_id", "team_id", "api_app_id", "authorizations", "type", "event_time"):
        if draw(st.integers(0, 19)) == 19:
            if draw(st.booleans()):
                envelope.pop(name, None)
            else:
                envelope[name] = draw(json_value)
    return envelope


def nested(depth: int, opener: str = "[", closer: str = "]") -> str:
    return opener * depth + closer * depth


raw_json_bodies = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    st.sampled_from(
        [
            b"",
            b"{",
            b"null",
            b"[]",
            b"{}",
            b'{"type": null}',
            b'{"type": "event_callback"}',
            b'{"type": "event_callback", "event": []}',
            b'{"type": "url_verification"}',
            b'{"type": "url_verification", "challenge": {"a": 1}}',
            b'{"type": "block_actions"}',
            b'{"type": "view_submission", "view": 5}',
            b'{"type": "event_callback", "event": {"type": "message", "text": "\\u0000\\ud800"}}',
            nested(100_000).encode(),
            ('{"type": "event_callback", "event": ' + nested(50_000, '{"a":', "}") + "}").encode(),
            b"\xff\xfe\x00\x00",
            b'{"type": "event_callback", "event": {"type": "message"}}' + b" " * (MEGABYTE - 60),
        ]
    ),
)


@st.composite
def form_bodies(draw) -> bytes:
    kind = draw(st.integers(0, 4))
    if kind == 0:  # payload= that is not JSON, or JSON of the wrong shape
        return urlencode({"payload": draw(st.one_of(odd_text, json_value.map(json.dumps)))}).encode()
    if kind == 1:  # interactive payloads with odd fields
        payload = {
            "type": draw(st.sampled_from(["message_action", "block_actions", "shortcut", "view_submission", "x"])),
            **draw(
                st.dictionaries(st.sampled_from(["message", "channel", "user", "actions", "view", "team"]), json_value)
            ),
        }
        return urlencode({"payload": json.dumps(payload)}).encode()
    if kind == 2:  # slash commands with odd text and missing fields
        fields = {"command": draw(st.one_of(st.just("/judge"), odd_text)), "text": draw(odd_text)}
        fields.update(draw(st.dictionaries(st.sampled_from(["user_id", "channel_id", "response_url"]), odd_text)))
        return urlencode(fields).encode()
    if kind == 3:  # broken percent-encoding and separators
        return draw(st.sampled_from([b"payload=%", b"payload=%7B%22type", b"&&&==", b"payload", b"=", b"%zz"]))
    return draw(st.binary(max_size=300))


# Tests ----------------------------------------------------------------------------------------------------------


@FUZZ
@given(envelope=envelopes())
def test_signed_odd_events_never_get_a_5xx(served, envelope: dict) -> None:
    body = json.dumps(envelope).encode()
    assert_not_5xx(post_signed(served, body, "application/json"), body)


@FUZZ
@given(body=raw_json_bodies)
def test_signed_broken_json_never_gets_a_5xx(served, body: bytes) -> None:
    assert_not_5xx(post_signed(served, body, "application/json"), body)


@FUZZ
@given(body=form_bodies())
def test_signed_broken_forms_never_get_a_5xx(served, body: bytes) -> None:
    assert_not_5xx(post_signed(served, body, "application/x-www-form-urlencoded"), body)


@settings(FUZZ, max_examples=150)
@given(
    body=st.one_of(raw_json_bodies, form_bodies()),
    headers=st.dictionaries(
        st.sampled_from(["X-Slack-Signature", "X-Slack-Request-Timestamp", "Content-Type", "X-Slack-Retry-Num"]),
        st.from_regex(r"\A[!-~]{1,80}\Z"),  # printable, as an HTTP client can send it
    ),
)
def test_unsigned_or_badly_signed_requests_are_refused(served, body: bytes, headers: dict) -> None:
    bot, client = served
    response = client.post(bot.url, content=body, headers=headers)
    STATUSES[response.status_code] += 1
    assert response.status_code in (400, 401, 411, 413, 415), response.status_code


ODD_CONTENT = [
    {"blocks": [{"type": "rich_text", "elements": 5}]},
    {"blocks": [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [{"type": "user"}]}]}]},
    {"blocks": [{"type": "rich_text", "elements": [{"type": "rich_text_list", "elements": "x"}]}]},
    {"blocks": [{"type": "section", "text": 5, "fields": "x"}]},
    {"blocks": [{"type": "section", "text": {"text": ["a"]}, "fields": [3]}]},
    {"blocks": [{"type": "context", "elements": [{"type": "mrkdwn", "text": None}]}]},
    {"attachments": [{"text": 5, "fallback": ["x"], "fields": [{"title": 1, "value": {}}]}]},
    {"files": [{"name": 5, "title": ["x"]}]},
    {"text": "<@>< @U1|><#|><!date^x^y><mailto:><|>" * 10},
    {"text": "NUL \x00 in the text"},  # JSON allows it; no database text column takes it
    {"text": "a lone surrogate \ud800"},
    {"blocks": [{"type": "rich_text", "elements": [{"type": "rich_text_section", "elements": [{"text": "\x00"}]}]}]},
]


@pytest.mark.parametrize("content", ODD_CONTENT)
def test_odd_message_content_is_captured_or_refused(served, content: dict) -> None:
    """Blocks, attachments and files with inner parts of the wrong type, in a monitored bot's answer."""
    question_ts = sr.next_ts()
    question = sr.human_message(CHANNEL, question_ts, "How do I reset my password?")
    assert post_signed(served, json.dumps(sr.envelope(question)).encode(), "application/json").status_code == 200
    event = sr.bot_message(CHANNEL, sr.next_ts(), "", thread_ts=question_ts)
    event.update(content)
    body = json.dumps(sr.envelope(event)).encode()
    assert_not_5xx(post_signed(served, body, "application/json"), body)


def test_a_megabyte_text_in_a_signed_event(served) -> None:
    """The largest body the bot accepts, as one message text (Slack caps text at 40,000 characters)."""
    text = "é" * ((MEGABYTE - 2_000) // 2)
    event = sr.bot_message(CHANNEL, sr.next_ts(), text, thread_ts="1700000000.000001")
    body = json.dumps(sr.envelope(event), ensure_ascii=False).encode()
    assert len(body) <= MEGABYTE
    assert_not_5xx(post_signed(served, body, "application/json"), body)
    too_big = body + b" " * (MEGABYTE - len(body) + 1)
    assert post_signed(served, too_big, "application/json").status_code == 413


# Seeded mutations of valid signed requests, in-process ---------------------------------------------------------

MUTATED_PER_KIND = 450  # five kinds: 2,250 requests
MUTATED_KINDS = ("events", "commands", "shortcuts", "block_actions", "view_submissions")


@pytest.mark.parametrize("kind", MUTATED_KINDS)
def test_seeded_mutations_of_valid_requests_never_get_a_5xx_or_hang(served, kind: str) -> None:
    """Mutations of valid signed events, slash commands, shortcuts, block actions and view submissions, straight
    into the WSGI app: every answer is a 2xx, 4xx or Bolt's 404, in well under Slack's 3 seconds."""
    send_mutations(served, kind)


def send_mutations(served, kind: str) -> None:
    bot, _client = served
    rng = random.Random(f"{MUTATION_SEED}-{kind}")
    slowest = 0.0
    for what, body, content_type, headers, length in hostile_requests(kind, MUTATED_PER_KIND, rng):
        started = time.monotonic()
        status, answer = sr.call_wsgi(bot.wsgi, body, content_type, headers, length)
        slowest = max(slowest, time.monotonic() - started)
        STATUSES[status] += 1
        assert status < 500, f"{what}: {status} {answer[:300]!r} for {body[:300]!r}"
        if length is not None:
            assert status in (400, 401, 411), (what, status)
        if headers.get("X-Slack-Request-Timestamp", "").isascii() is False:
            assert status == 401, (what, status)
    assert slowest < 3.0, slowest


def test_the_bot_is_healthy_after_the_fuzzing(served) -> None:
    """Runs last in this module: the server thread is alive and /healthz answers 200; the fuzzing reached Bolt
    and the listeners (many signed requests were accepted), not only the validation layer. Run alone, it sends
    the seeded mutations first."""
    bot, client = served
    if sum(STATUSES.values()) < len(MUTATED_KINDS) * MUTATED_PER_KIND:
        for kind in MUTATED_KINDS:
            send_mutations(served, kind)
    reached_bolt = STATUSES[200] + STATUSES[404]  # 404: Bolt's answer to a request no listener handles
    assert sum(STATUSES.values()) >= len(MUTATED_KINDS) * MUTATED_PER_KIND and reached_bolt >= 200, STATUSES
    started = time.monotonic()
    response = client.get(f"{bot.base_url}/healthz")
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 5
    body = json.dumps(sr.envelope(sr.human_message(CHANNEL, sr.next_ts(), "still there?"))).encode()
    assert post_signed(served, body, "application/json").status_code == 200
    # Still capturing: a valid question and answer make a pair. The asker is one the fuzzing never names: a fuzzed
    # message naming U_ASKER beside the bot's IDs rightly taught the bot that U_ASKER is its user.
    question_ts, answer_ts = sr.next_ts(), sr.next_ts()
    for event in (
        sr.human_message(CHANNEL, question_ts, "Where is the invoice?", user="U_AFTER_FUZZ"),
        sr.bot_message(CHANNEL, answer_ts, "Under Billing.", thread_ts=question_ts),
    ):
        assert post_signed(served, json.dumps(sr.envelope(event)).encode(), "application/json").status_code == 200
    captured = [(p.answer_ts, p.status, p.answer_text) for p in bot.pairs()]
    assert any(ts == answer_ts for ts, _status, _text in captured), captured[-3:]
