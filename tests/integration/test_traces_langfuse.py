"""Verdicts and outcome signals on the bot's traces, to Langfuse: the official SDK's API client against a fake that
answers as Langfuse's public API does (Langfuse itself needs ClickHouse): scores, upserts, outages retried or given
up, a refused key.
The tasks run eagerly (Celery's own retry path, without the countdowns); judgments are real rows in SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from langfuse import Langfuse

from common.runtime import Runtime
from tests.alert_helpers import add_judgment
from tests.fakes.langfuse_server import FakeLangfuse
from tests.services import free_port
from tests.trace_helpers import CHANNEL, TS, Watched, judged, sends, signalled, watched
from workers.tasks.traces import send_langfuse_outcome, send_langfuse_scores

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"


@pytest.fixture
def confirmed(langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]) -> int:
    """A verdict whose second opinion confirmed it, on a runtime sending to the fake Langfuse."""
    return judged(runtime_on(langfuse.url), confirmation="confirmed")


def test_a_verdict_becomes_a_numeric_score_on_the_trace_langfuse_derives(
    langfuse: FakeLangfuse, confirmed: int
) -> None:
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    trace_id = Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")  # the bot's own derivation
    score = langfuse.stored()[f"relmon-{confirmed}-score"]
    assert score["traceId"] == trace_id and score["name"] == "relmon.relevancy"
    assert score["value"] == 0.25 and score["dataType"] == "NUMERIC" and "passwords" in score["comment"]


def test_a_team_judges_verdict_is_a_score_under_its_own_name(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    """A pass/fail judge of judges.d (examples/judges.d/refund_policy.toml): BOOLEAN, 0 for a failed answer."""
    runtime = runtime_on(langfuse.url, judges_dir=EXAMPLES)
    judgment_id = add_judgment(runtime, score=0, judge="refund_policy", max_score=1, channel_id=CHANNEL, answer_ts=TS,
                               reasoning="The answer promises a refund.")  # fmt: skip
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    score = langfuse.stored()[f"relmon-{judgment_id}-score"]
    assert score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")
    assert score["name"] == "relmon.refund_policy" and score["dataType"] == "BOOLEAN" and score["value"] == 0
    assert score["comment"] == "The answer promises a refund."


def test_a_second_opinion_becomes_a_categorical_score(langfuse: FakeLangfuse, confirmed: int) -> None:
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    second = langfuse.stored()[f"relmon-{confirmed}-second-opinion"]
    assert second["value"] == "confirmed" and second["dataType"] == "CATEGORICAL"


def test_a_resent_verdict_upserts_its_scores(langfuse: FakeLangfuse, confirmed: int) -> None:
    before = sends("sent")
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"
    assert send_langfuse_scores.apply(args=[confirmed]).get() == "sent"  # a redelivery
    assert len(langfuse.stored()) == 2  # upserted by id, not added twice
    assert sends("sent") - before == 2


def test_an_outcome_signal_becomes_a_boolean_score_on_the_answers_trace(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    """A signal goes by its own send (per pair and signal, whichever judge judged): a redelivery upserts the same
    score; a signal not recorded sends nothing."""
    runtime = runtime_on(langfuse.url)
    pair_id = signalled(runtime, judged(runtime))
    assert send_langfuse_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
    assert send_langfuse_outcome.apply(args=[pair_id, "reask"]).get() == "sent"  # a redelivery
    assert send_langfuse_outcome.apply(args=[pair_id, "resolved"]).get() == "skipped"  # not recorded
    scores = langfuse.stored()
    assert list(scores) == [f"relmon-pair-{pair_id}-reask"] and langfuse.requests == 2
    score = scores[f"relmon-pair-{pair_id}-reask"]
    assert score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{TS}")
    assert score["name"] == "relmon.outcome.reask" and score["value"] == 1 and score["dataType"] == "BOOLEAN"


def test_an_outage_is_retried_until_the_scores_are_sent(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    judgment_id = judged(runtime_on(langfuse.url))
    langfuse.fail_next(2, 503)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"  # third try
    assert langfuse.requests == 3 and len(langfuse.stored()) == 1


def test_an_outage_on_the_last_retry_allowed_is_given_up(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    judgment_id = judged(runtime_on(langfuse.url))
    failed = sends("failed")
    langfuse.fail_next(1, 503)
    # The last retry allowed (RELMON_TRACE_SEND_RETRIES=3) fails: given up, counted, nothing sent again.
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert langfuse.requests == 1
    assert sends("failed") - failed == 1


@pytest.fixture
def refused(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], caplog: pytest.LogCaptureFixture
) -> tuple[int, int, Watched]:
    """A verdict's send, then a signal's, with a key Langfuse refuses: the judgment, the pair, what was watched."""
    runtime = runtime_on(langfuse.url, langfuse_secret_key="sk-lf-wrong")
    judgment_id = judged(runtime)
    pair_id = signalled(runtime, judgment_id)
    calls = [(send_langfuse_scores, [judgment_id]), (send_langfuse_outcome, [pair_id, "reask"])]
    message = "langfuse refused the scores"
    watch = watched(
        caplog, calls, tool="langfuse", outcome="rejected", message=message, requests=lambda: langfuse.requests
    )
    return judgment_id, pair_id, watch


def test_a_refused_key_is_not_retried(langfuse: FakeLangfuse, refused: tuple[int, int, Watched]) -> None:
    assert refused[2].returned == [("rejected", 1), ("rejected", 2)]  # one request each, refused: never resent
    assert not langfuse.stored()


def test_a_refused_key_is_counted(refused: tuple[int, int, Watched]) -> None:
    assert refused[2].counted == 2


def test_a_refused_key_is_said_with_its_status(refused: tuple[int, int, Watched]) -> None:
    judgment_id, pair_id, watch = refused
    said = watch.said
    assert [r.status for r in said] == [401, 401]
    assert said[0].judgment_id == judgment_id and (said[1].pair_id, said[1].signal) == (pair_id, "reask")


def test_a_dead_host_is_given_up_after_the_retries_allowed(runtime_on: Callable[..., Runtime]) -> None:
    runtime = runtime_on(f"http://127.0.0.1:{free_port()}")
    judgment_id = judged(runtime)
    failed = sends("failed")
    assert send_langfuse_scores.apply(args=[judgment_id], retries=3).get() == "failed"
    assert sends("failed") - failed == 1
