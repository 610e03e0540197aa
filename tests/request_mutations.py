"""Seeded mutations of valid signed Slack requests (events, slash commands, shortcuts, block actions, view
submissions), for the fuzzing tests (tests/integration/test_fuzz*.py)."""

from __future__ import annotations

import copy
import json
import random
import urllib.parse
from collections.abc import Iterator
from urllib.parse import urlencode

from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.builders import SECRET

CHANNEL = "C_SUPPORT"
MUTATION_SEED = 20260314
LINK = "https://example.slack.com/archives/C_SUPPORT/p1700000000000200?thread_ts=1700000000.000100"
ODD_VALUES: list[object] = [
    None, 0, -1, 3.5, True, [], {}, [1, "x"], {"a": {"b": None}}, "", " ", "٣٤٥", "１２３", "²", "x" * 100_000,
    "\u202e\ufeff", "👩‍👩‍👧‍👦", "<!here> <!channel> @everyone", "=HYPERLINK(1)", "../../etc/passwd", "%00", "\\u0000",
]  # fmt: skip


def valid_requests(kind: str) -> list[dict]:
    """Valid payloads of one kind, as Slack sends them: the seeds every mutation starts from."""
    answer = sr.bot_message(CHANNEL, "1700000000.000200", "Reset it under Settings.", thread_ts="1700000000.000100")
    if kind == "events":
        question = sr.human_message(CHANNEL, "1700000000.000100", "How do I reset my password?")
        member = {"type": "member_left_channel", "channel": CHANNEL, "user": "U_ASKER", "channel_type": "C"}
        home = {"type": "app_home_opened", "user": "U_ASKER", "channel": "D1", "tab": "home", "event_ts": "1.2"}
        events = [question, answer, sr.message_changed(answer, "Edited."), sr.message_deleted(answer), member, home]
        return [sr.envelope(event) for event in events]
    if kind == "commands":
        texts = ["help", LINK, f"{LINK} relevancy", "stats", "stats #support", "digest", "", "what?"]
        return [dict(urllib.parse.parse_qsl(si.slash_command(text).decode())) for text in texts]
    if kind == "shortcuts":
        return [si.message_action_payload(dict(answer))]
    if kind == "block_actions":
        return [si.block_actions_payload(action, "1") for action in ("relmon_right", "relmon_wrong", "relmon_open")]
    return [si.view_submission_payload(question="How do I reset it?", answer="Under Settings.")]


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every key or index path inside a JSON value."""
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, inner in items:
        found.append((*prefix, key))
        found.extend(_paths(inner, (*prefix, key)))
    return found


def mutate(rng: random.Random, payload: dict) -> dict:
    """One to three changes: a key dropped, a value of the wrong type, odd or huge text, a list element that is
    not an object, anywhere in the payload."""
    payload = copy.deepcopy(payload)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(payload)
        if not paths:
            break
        *parent_path, key = rng.choice(paths)
        parent = payload
        for step in parent_path:
            parent = parent[step]
        if rng.random() < 0.35 and isinstance(parent, dict):
            del parent[key]
        else:
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
    return payload


def encoded(kind: str, payload: dict) -> tuple[bytes, str]:
    if kind == "events":
        return json.dumps(payload).encode(), "application/json"
    if kind == "commands":
        return urlencode({k: v if isinstance(v, str) else json.dumps(v) for k, v in payload.items()}).encode(), FORM
    return si.payload_body(payload), FORM


def hostile_requests(kind: str, count: int, rng: random.Random) -> Iterator[tuple[str, bytes, str, dict, str | None]]:
    """(what, body, content type, headers, Content-Length) for `count` requests of one kind: mostly signed
    mutations that reach the shape checks and Bolt, some truncated, some forged, some with odd digits."""
    seeds = valid_requests(kind)
    for _ in range(count):
        body, content_type = encoded(kind, mutate(rng, rng.choice(seeds)))
        roll = rng.random()
        length = None
        if roll < 0.08:  # truncated JSON (or form), still correctly signed
            body = body[: rng.randrange(len(body))]
        headers = sr.sign(body, SECRET)
        if 0.08 <= roll < 0.12:
            headers = sr.sign(body, "not-the-secret")
        elif 0.12 <= roll < 0.15:  # non-ASCII digits that int() would take: refused before any work
            headers["X-Slack-Request-Timestamp"] = rng.choice(["١٧٠٠٠٠٠٠٠٠", "１７００００００００", "¹⁷⁰⁰"])
        elif 0.15 <= roll < 0.17:
            length = rng.choice(["٣", "３", "²", "-1", "1e3", " 12"])
        yield f"{kind} #{roll:.3f}", body, content_type, headers, length


FORM = "application/x-www-form-urlencoded"
