"""Fuzzing `POST /v1/exchanges` over real HTTP to the bot's WSGI app served in this process (tests.bot_harness):
random JSON values, random bytes, and valid exchanges with one field mutated (wrong types, giant strings, NULs,
deep nesting, huge numbers). Never a 5xx; a 4xx carries a JSON error, naming the mutated field when it is what was
refused; a refused body stores nothing (pairs, exchanges) and notes no task. Derandomized, so CI sees the same
examples every run."""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from common import task_notes
from store.exchange_models import Exchange
from store.models import Pair
from tests.bot_harness import BotServer
from tests.fakes.slack_server import FakeSlack

pytestmark = pytest.mark.slow

TOKEN = "ingest-token-fuzz"
FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def valid(id: str = "fz-1") -> dict:
    return {
        "id": id,
        "bot": "helpdesk",
        "conversation_id": "conv-1",
        "turn": 1,
        "question": "How do I reset my password?",
        "answer": "Open Settings > Security > Reset.",
        "earlier_turns": [{"role": "user", "text": "Hello"}],
        "documents": [{"text": "Passwords are reset under Security.", "source": "kb/security.md"}],
        "bot_version": "1.4.0",
        "asked_at": "2026-12-07T08:00:00Z",
        "answered_at": "2026-12-07T08:00:02Z",
        "visibility": "dm",
        "asker": "U0ASKER",
        "slack": {"channel": "C0SUPPORT", "ts": "1765094400.000100"},
        "trace": {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"},
    }


FIELDS = sorted(valid())
NESTED = ("earlier_turns", "documents", "slack", "trace")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=50),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=20), children, max_size=5),
    max_leaves=30,
)


class Nested:
    """A list nested `depth` deep, written into the body's bytes as they are sent (too deep for json.dumps, and for
    hypothesis to print)."""

    PLACE = "__nested__"

    def __init__(self, depth: int) -> None:
        self.depth = depth

    def __repr__(self) -> str:
        return f"Nested({self.depth})"

    def json(self) -> bytes:
        return b"[" * self.depth + b'"x"' + b"]" * self.depth


# What a mutated field becomes: wrong types, giant strings, NULs, deep nesting, huge numbers, invalid strings.
mutations = st.one_of(
    json_values,
    st.sampled_from(["", " ", "\x00", "a\x00b", "x" * 50_000, "\ud800", "9" * 5_000, "0" * 32, "é" * 300]),
    st.integers(min_value=-(10**30), max_value=10**30) | st.sampled_from([10**400, -(10**400), 2**63, -1, 1e308]),
    st.integers(min_value=1, max_value=3_000).map(Nested),
    st.text(st.characters(codec="utf-8"), max_size=300),
)


def body_bytes(value: object, nested: Nested | None = None) -> bytes:
    # Python writes huge ints as digits; a lone surrogate as its \\ud800 escape (valid JSON, no valid string).
    data = json.dumps(value).encode()
    return data.replace(json.dumps(Nested.PLACE).encode(), nested.json()) if nested else data


class Refusals:
    """The bot under fuzz: what it stores and notes, and posting a body."""

    def __init__(self, bot: BotServer) -> None:
        self.bot = bot

    def state(self) -> tuple[int, int, int]:
        with self.bot.runtime.db.session() as session:
            pairs = session.scalar(select(func.count()).select_from(Pair))
            exchanges = session.scalar(select(func.count()).select_from(Exchange))
        return pairs, exchanges, self.bot.runtime.redis.hlen(task_notes.KEY)

    def post(self, data: bytes) -> tuple[httpx.Response, bool]:
        """The response, and whether a refusal left everything as it was."""
        before = self.state()
        response = httpx.post(
            self.bot.base_url + "/v1/exchanges",
            content=data,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
            timeout=30,
        )
        assert response.status_code < 500, (response.status_code, response.text[:500], data[:300])
        if response.status_code >= 400:
            assert response.json()["error"], response.text[:300]
            return response, self.state() == before
        return response, True


@pytest.fixture
def fuzzed(settings_for: Callable) -> Refusals:
    with FakeSlack() as slack:
        slack.add_channel("C0SUPPORT", "support", members=["U_RELMON"])
        config = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, ingest_per_minute=1_000_000)
        with BotServer(config) as bot:
            yield Refusals(bot)


def test_random_json_values_are_refused_cleanly(fuzzed: Refusals) -> None:
    @FUZZ
    @given(json_values)
    def check(value: object) -> None:
        response, untouched = fuzzed.post(body_bytes(value))
        assert response.status_code == 400, response.text[:300]  # never a valid exchange
        assert ": " in response.json()["error"]  # `<field>: what is wrong` (`body: ...` when not an object)
        assert untouched

    check()


def test_random_bytes_are_refused_cleanly(fuzzed: Refusals) -> None:
    @FUZZ
    @given(st.binary(max_size=2_000) | st.text(max_size=500).map(str.encode))
    def check(data: bytes) -> None:
        response, untouched = fuzzed.post(data)
        assert response.status_code in (400, 413), response.text[:300]
        assert untouched

    check()


def test_an_exchange_with_one_field_mutated_is_refused_naming_it_or_taken(fuzzed: Refusals) -> None:
    @FUZZ
    @given(st.sampled_from(FIELDS + [f"{name}.inner" for name in NESTED]), mutations, st.booleans())
    def check(field: str, value: object, in_batch: bool) -> None:
        body = valid(f"fz-{zlib.crc32(repr((field, value)).encode())}")  # stable across runs (no hash seed)
        nested = value if isinstance(value, Nested) else None
        value = Nested.PLACE if nested else value
        name, _, inner = field.partition(".")
        if inner:  # inside a nested field: its first item's (or its own) first key
            target = body[name][0] if isinstance(body[name], list) else body[name]
            target[sorted(target)[0]] = value
        else:
            body[name] = value
        response, untouched = fuzzed.post(body_bytes({"exchanges": [body]} if in_batch else body, nested))
        if response.status_code == 202:
            return  # the mutation was still a valid exchange (a string in bounds, say): taken
        assert untouched, response.text[:300]
        if response.status_code == 400:
            named = " ".join([response.json()["error"], *response.json().get("problems", [])])
            said = (f"exchanges[0].{name}" if in_batch else name) if name != "body" else "body"
            times = name in ("asked_at", "answered_at") and "answered_at is before asked_at" in named
            assert said in named or times or "valid JSON" in named, (field, named)
        else:
            assert response.status_code == 413, response.text[:300]  # a giant field in a body over the limit

    check()
