"""Who may read GET /metrics (`common.metrics_door`): the rule as plain functions. The small server the
worker, beat and Socket Mode serve it from: tests/integration/test_metrics.py; through the real bot:
tests/system/test_metrics_door.py."""

from __future__ import annotations

import json
import threading

import pytest

from common import metrics_door as door
from common.metrics_cache import StateBusy

TOKEN = "a-long-random-token-0123456789"


def scrape_ok() -> tuple[bytes, str]:
    return b"relmon_up 1\n", "text/plain; version=0.0.4"


def answer(authorization: str | None, *, token: str | None = TOKEN, own_port: bool = False, **kwargs) -> door.Answer:
    options = {"method": "GET", "scrape": scrape_ok, "slots": door.scrape_slots(), **kwargs}
    method = options.pop("method")
    return door.metrics_answer(method, authorization, token=token, own_port=own_port, **options)


@pytest.mark.parametrize(
    "authorization",
    [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER   {TOKEN}  ", f" Bearer {TOKEN}"],
)
def test_the_token_opens_the_door_whatever_the_schemes_case(authorization: str) -> None:
    assert door.bearer_matches(TOKEN, authorization)
    assert answer(authorization).status == 200


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        TOKEN,  # no scheme
        f"Basic {TOKEN}",
        f"Bearer {TOKEN[:-1]}",  # a prefix
        f"Bearer {TOKEN}x",  # longer
        f"Bearer {TOKEN.upper()}",
        "Bearer \x00\xff\u0100",  # not even Latin-1: refused, not a crash
        "Bearer " + "A" * 100_000,
    ],
)
def test_a_wrong_or_missing_token_is_a_short_401(authorization: str | None) -> None:
    refused = answer(authorization)
    assert refused.status == 401
    assert dict(refused.headers)["WWW-Authenticate"].startswith("Bearer")
    body = json.loads(refused.body)
    assert "Authorization: Bearer" in body["error"] and len(refused.body) < 200
    assert TOKEN not in refused.body.decode()


def test_a_non_ascii_token_is_compared_as_the_bytes_sent() -> None:
    token = "jeton-été-✓"
    sent_as_latin1 = token.encode().decode("latin-1")  # how WSGI and http.server hand a header value over
    assert door.bearer_matches(token, f"Bearer {sent_as_latin1}")
    assert not door.bearer_matches(token, f"Bearer {token}")  # not what arrives over HTTP for those bytes


def test_without_a_token_only_a_port_of_its_own_serves_metrics() -> None:
    closed = answer(None, token=None, own_port=False)
    assert closed.status == 404
    hint = json.loads(closed.body)["hint"]
    assert "RELMON_METRICS_TOKEN" in hint and "RELMON_METRICS_PORT" in hint
    assert answer(f"Bearer {TOKEN}", token=None, own_port=False).status == 404  # no token configured: none opens
    assert answer(None, token=None, own_port=True).status == 200
    # With a token, a port of its own asks for it too.
    assert answer(None, own_port=True).status == 401
    assert answer(f"Bearer {TOKEN}", own_port=True).status == 200


def test_a_metrics_port_listens_everywhere_only_behind_the_token() -> None:
    assert door.bind_host(None) == "127.0.0.1"
    assert door.bind_host(TOKEN) == "0.0.0.0"


def test_the_door_checks_before_anything_else_and_never_answers_500() -> None:
    assert answer(None, method="POST").status == 401  # the token first
    post = answer(f"Bearer {TOKEN}", method="POST")
    assert post.status == 405 and dict(post.headers)["Allow"] == "GET"

    def busy() -> tuple[bytes, str]:
        raise StateBusy

    def broken() -> tuple[bytes, str]:
        raise RuntimeError("a corrupt counter file")

    for scrape in (busy, broken):
        failed = answer(f"Bearer {TOKEN}", scrape=scrape)
        assert failed.status == 503 and "Retry-After" in dict(failed.headers)
        assert "corrupt" not in failed.body.decode()


def test_at_most_two_scrapes_at_once_in_a_process() -> None:
    """A third scrape while two are being served is told to retry at once, not queued on a thread."""
    slots = door.scrape_slots()
    entered = threading.Barrier(door.MAX_CONCURRENT_SCRAPES + 1)
    release = threading.Event()

    def slow() -> tuple[bytes, str]:
        entered.wait(timeout=5)
        release.wait(timeout=5)
        return scrape_ok()

    results: list[int] = []
    threads = [
        threading.Thread(target=lambda: results.append(answer(f"Bearer {TOKEN}", scrape=slow, slots=slots).status))
        for _ in range(door.MAX_CONCURRENT_SCRAPES)
    ]
    for thread in threads:
        thread.start()
    entered.wait(timeout=5)  # both are inside their scrape
    third = answer(f"Bearer {TOKEN}", slots=slots)
    release.set()
    for thread in threads:
        thread.join(timeout=5)
    assert third.status == 503 and dict(third.headers)["Retry-After"] == "1"
    assert results == [200, 200]
    assert answer(f"Bearer {TOKEN}", slots=slots).status == 200  # the slots came back
