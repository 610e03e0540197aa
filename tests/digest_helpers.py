"""The runtime of the digest tests on the fake Slack Web API (real HTTP) and a real database (SQLite and
PostgreSQL), two weeks of judged answers to report on, and the check of the digest's chart: shared by
tests/integration/test_digest_send.py and the test_digest_*.py modules beside it. Its empty fake Slack (`slack`)
is also bound by tests/integration/test_outcome_reports.py and test_fake_slack.py."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import select

from common.runtime import Runtime
from store.models import Digest, Feedback, Judgment, Pair
from tests.builders import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

DIGEST_CHANNEL = "CDIGEST"


@pytest.fixture
def make_runtime(db_url: str, slack: FakeSlack, tmp_path: Path, runtime_for) -> Callable[..., Runtime]:
    """`make_runtime(**settings)`: the process runtime on the fake Slack, with these settings on top."""
    values = {
        "database_url": db_url,
        "slack_api_url": slack.api_url,
        "digest_channel_setting": DIGEST_CHANNEL,
        "alert_channel": "CALERTS",
        "data_dir": tmp_path / "data",
    }
    return lambda **extra: runtime_for(make_settings(**{**values, **extra}))


@pytest.fixture
def digest_services(settings_for, tmp_path: Path, runtime_for):
    """(runtime, fake Slack, fake LLM) of their own: the digest goes to DIGEST_CHANNEL, alerts to CALERTS, topics
    are embedded and named by the fake LLM."""
    with FakeSlack() as slack, FakeOpenAI() as llm:
        settings = settings_for(
            slack_api_url=slack.api_url,
            digest_channel_setting=DIGEST_CHANNEL,
            alert_channel="CALERTS",
            data_dir=tmp_path / "data",
            openai_base_url=llm.base_url,
        )
        yield runtime_for(settings), slack, llm


@pytest.fixture
def runtime(make_runtime, redis_url: str) -> Runtime:
    return make_runtime(redis_url=redis_url)  # the preview's membership cache is kept in Redis


def seed(runtime: Runtime, now: datetime, *, private_text: bool = False) -> None:
    """Two channels over two weeks: scores, an error, a vote, a skipped answer, one private channel."""
    scores = {"C1": [4, 4, 3, 1, 0, 4, 2], "C2": [3, 4, 4, 2]}
    with runtime.db.session() as session:
        n = 0
        for week, offset in (("this", timedelta(0)), ("last", timedelta(days=7))):
            for channel, values in scores.items():
                for i, score in enumerate(values):
                    n += 1
                    pair = Pair(
                        channel_id=channel,
                        answer_ts=f"1763000000.{n:06d}",
                        status="judged",
                        question_text=f"question {n} in {channel}",
                        answer_text=f"answer {n} in {channel}",
                        created_at=now - offset - timedelta(hours=5 + 20 * i),
                    )
                    session.add(pair)
                    session.flush()
                    judged = score if week == "this" else min(4, score + 1)
                    judgment = Judgment(
                        pair_id=pair.id,
                        score=judged,
                        max_score=4,
                        normalized_score=judged / 4,
                        judge="relevancy",
                        status="ok",
                        prompt_tokens=400,
                        completion_tokens=40,
                    )
                    session.add(judgment)
                    session.flush()
                    if judged == 0:
                        session.add(Feedback(judgment_id=judgment.id, user_id="U1", vote="right"))
        errored = Pair(
            channel_id="C2", answer_ts="1763000001.000001", status="judged", created_at=now - timedelta(hours=3)
        )
        skipped = Pair(
            channel_id="C2",
            answer_ts="1763000001.000002",
            status="skipped_sampling",
            created_at=now - timedelta(hours=2),
        )
        private = Pair(
            channel_id="GPRIV",
            answer_ts="1763000001.000003",
            created_at=now - timedelta(hours=1),
            channel_is_private=True,
            question_text="secret question",
            answer_text="secret answer",
            status="judged",
        )
        session.add_all([errored, skipped, private])
        session.flush()
        session.add(Judgment(pair_id=errored.id, judge="relevancy", status="error", error="500 from the LLM"))
        session.add(
            Judgment(pair_id=private.id, judge="relevancy", status="ok", score=0, max_score=4, normalized_score=0.0)
        )


def now_utc() -> datetime:
    return datetime.now(UTC)


def digest_ts(runtime: Runtime) -> str:
    with runtime.db.session() as session:
        return session.execute(select(Digest.message_ts).order_by(Digest.id)).scalars().first()


def assert_png_chart(slack: FakeSlack, thread_ts: str) -> None:
    """One chart, shared into the digest's thread, a real PNG of a size that reads in Slack's preview."""
    (shared,) = slack.files.values()
    assert shared["channels"] == [DIGEST_CHANNEL] and shared["thread_ts"] == thread_ts
    replies = [m for m in slack.messages[DIGEST_CHANNEL].values() if m.get("thread_ts") == thread_ts]
    assert [f["id"] for m in replies for f in m.get("files", [])] == [shared["id"]]
    data = slack.uploads[shared["id"]]
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert 10_000 <= len(data) <= 1_000_000
    with Image.open(io.BytesIO(data)) as image:
        width, height = image.size
    # Nearly square, stacked panels: Slack's ~360 px preview keeps the text legible.
    assert 600 <= width <= 1200 and 500 <= height <= 1100 and 0.8 <= width / height <= 1.4


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """The fake Slack, empty: a test adds what it needs."""
    with FakeSlack() as fake:
        yield fake
