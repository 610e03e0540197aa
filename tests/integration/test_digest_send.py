"""Sending the digest against the fake Slack Web API (real HTTP) and a real database (SQLite and PostgreSQL):
exactly once per ISO week, --force sends another, a crashed run is completed, the chart is a real PNG."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from PIL import Image
from slack_sdk.errors import SlackApiError
from sqlalchemy import func, select, update

from common.membership import MembershipCache
from common.replies import keep_response_url
from common.reports.period import period_for
from common.runtime import Runtime
from store.models import Digest, Feedback, Judgment, Pair
from tests.builders import make_settings
from tests.fakes.slack_server import FakeSlack
from workers.digest import delivery
from workers.digest.delivery import CLAIM_LEASE, deliver_digest
from workers.tasks import digest as digest_tasks
from workers.tasks.digest import send_digest, send_digest_preview

DIGEST_CHANNEL = "CDIGEST"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        yield fake


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
                        judge="relevancy",
                        status="ok",
                        score=judged,
                        max_score=4,
                        normalized_score=judged / 4,
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
            channel_is_private=True,
            answer_ts="1763000001.000003",
            status="judged",
            question_text="secret question",
            answer_text="secret answer",
            created_at=now - timedelta(hours=1),
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


def test_digest_is_posted_once_per_week_with_its_chart(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed(runtime, now)
    assert send_digest.apply().get() == "sent"

    (posted,) = slack.posted(DIGEST_CHANNEL)
    text = str(posted["blocks"])
    assert "Weekly digest" in text and "<#C1>" in text and "<#C2>" in text
    assert "view answer" in text  # permalinks of the worst answers
    assert "secret answer" not in text  # a private channel's text is never quoted here
    assert "answer 5 in C1" in text  # a public worst answer (score 0) is quoted
    assert "1 (1 answers unjudged)" in text or "Judge errors*\n1" in text
    assert "is in this message's thread" in text  # the digest says where its chart is
    assert_png_chart(slack, digest_ts(runtime))
    with runtime.db.session() as session:
        row = session.execute(select(Digest)).scalar_one()
        assert row.status == "sent" and row.message_ts == posted.get("ts", row.message_ts)

    # Beat firing twice, or a retry: nothing more is posted or uploaded.
    assert send_digest.apply().get() == "already_sent"
    assert deliver_digest(runtime, now_utc()).status == "already_sent"
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
    assert len(slack.files) == 1

    # --force sends another, under a key of its own.
    forced = deliver_digest(runtime, now_utc(), force=True)
    assert forced.status == "sent" and "+force-" in forced.period_key
    assert len(slack.posted(DIGEST_CHANNEL)) == 2
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(Digest)).scalar_one() == 2


def claimed_by_another_run(runtime: Runtime) -> datetime:
    """A week to report on, whose digest another run has claimed just now; returns now."""
    now = now_utc()
    seed(runtime, now)
    key = deliver_digest.__globals__["period_for"](now, "UTC").key
    with runtime.db.session() as session:
        session.add(Digest(period_key=key, channel_id=DIGEST_CHANNEL, status="claimed", created_at=now))
    return now


def test_a_live_run_is_left_alone(runtime: Runtime, slack: FakeSlack) -> None:
    now = claimed_by_another_run(runtime)
    # Another run holds a fresh claim: this one posts nothing.
    assert deliver_digest(runtime, now).status == "in_progress"
    assert slack.posted(DIGEST_CHANNEL) == []


def test_a_crashed_run_is_completed(runtime: Runtime, slack: FakeSlack) -> None:
    now = claimed_by_another_run(runtime)
    # That run died after posting the message: a retry after the lease uploads the chart, no second message.
    slack.add_message(DIGEST_CHANNEL, "1763000000.999999", "URELMON", "Weekly digest")
    with runtime.db.session() as session:
        session.execute(
            update(Digest).values(created_at=now - CLAIM_LEASE - timedelta(minutes=1), message_ts="1763000000.999999")
        )
    outcome = deliver_digest(runtime, now)
    assert outcome.status == "sent" and outcome.message_ts == "1763000000.999999"
    assert slack.posted(DIGEST_CHANNEL) == []
    assert_png_chart(slack, "1763000000.999999")


def test_a_run_that_died_after_uploading_the_chart_does_not_upload_it_twice(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed(runtime, now)
    first = deliver_digest(runtime, now)
    # The chart went up, then the worker died before recording the digest as sent.
    with runtime.db.session() as session:
        session.execute(update(Digest).values(status="claimed", created_at=now - CLAIM_LEASE - timedelta(minutes=1)))
    second = deliver_digest(runtime, now)
    assert second.status == "sent" and second.message_ts == first.message_ts
    assert second.file_id == first.file_id  # found in the thread, not uploaded again
    assert len(slack.posted(DIGEST_CHANNEL)) == 1 and len(slack.calls_to("files.getUploadURLExternal")) == 1
    assert_png_chart(slack, first.message_ts)


def test_a_failed_chart_upload_is_retried_into_the_same_thread_once(runtime: Runtime, slack: FakeSlack) -> None:
    seed(runtime, now_utc())
    slack.rate_limit("files.completeUploadExternal", times=100, retry_after=0)
    with pytest.raises(SlackApiError):
        deliver_digest(runtime, now_utc())
    slack.rate_limit("files.completeUploadExternal", times=0)
    assert deliver_digest(runtime, now_utc()).status == "sent"
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
    assert_png_chart(slack, digest_ts(runtime))


def test_a_network_error_is_retried_until_the_digest_goes_out_once(
    make_runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slack unreachable for the first attempt (beyond the client's own connection retries): the task retries."""
    import socket

    from workers.tasks import digest as digest_tasks

    with socket.socket() as probe:  # a port nobody listens on, until the fake Slack starts there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runtime = make_runtime(slack_api_url=f"http://127.0.0.1:{port}/api/")
    attempts: list[BaseException | None] = []
    started: list[FakeSlack] = []
    deliver = digest_tasks.deliver_digest

    def slack_comes_back_after_the_first_attempt(*args, **kwargs):
        try:
            outcome = deliver(*args, **kwargs)
        except BaseException as error:
            attempts.append(error)
            raise
        finally:
            if not started:
                started.append(FakeSlack(port=port).start())
        attempts.append(None)
        return outcome

    monkeypatch.setattr(digest_tasks, "deliver_digest", slack_comes_back_after_the_first_attempt)
    try:
        seed(runtime, now_utc())
        assert send_digest.apply().get() == "sent"
        first, second = attempts
        assert isinstance(first, OSError) and not isinstance(first, SlackApiError)  # connection refused
        assert second is None
        (slack,) = started
        assert len(slack.posted(DIGEST_CHANNEL)) == 1
        assert_png_chart(slack, digest_ts(runtime))
        with runtime.db.session() as session:
            assert session.execute(select(Digest.status)).scalars().all() == ["sent"]
    finally:
        for fake in started:
            fake.stop()


def seed_busy_week(runtime: Runtime, now: datetime, channels: int) -> None:
    """`channels` public channels, three judges each, four poorly scored answers apiece with long texts."""
    long_text = "The customer asks how to rotate the signing keys without downtime. " * 40
    with runtime.db.session() as session:
        for c in range(channels):
            for i in range(4):
                pair = Pair(
                    channel_id=f"CBUSY{c:03d}",
                    answer_ts=f"1763100000.{c * 10 + i:06d}",
                    status="judged",
                    question_text=long_text,
                    answer_text=long_text,
                    created_at=now - timedelta(hours=3 + 30 * i),
                )
                session.add(pair)
                session.flush()
                for judge, score, top in (("relevancy", i % 3, 4), ("correctness", i % 2, 2), ("grounded", 1, 5)):
                    session.add(
                        Judgment(
                            pair_id=pair.id,
                            judge=judge,
                            status="ok",
                            score=score,
                            max_score=top,
                            normalized_score=score / top,
                            prompt_tokens=900,
                            completion_tokens=60,
                        )
                    )


def test_a_digest_of_many_busy_channels_is_posted_within_slacks_total(runtime: Runtime, slack: FakeSlack) -> None:
    """Slack refuses blocks holding more than about 12,000 characters of text in all (`msg_blocks_too_long`); the
    digest of 30 busy channels held far more, and every retry was refused the same way."""
    with pytest.raises(SlackApiError) as refused:  # the fake refuses as Slack does
        runtime.slack.chat_postMessage(
            channel=DIGEST_CHANNEL,
            text="x",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}] * 5,
        )
    assert refused.value.response["error"] == "msg_blocks_too_long"
    seed_busy_week(runtime, now_utc(), 30)

    assert deliver_digest(runtime, now_utc()).status == "sent"

    _refused, posted = slack.posted(DIGEST_CHANNEL)
    text = str(posted["blocks"])
    assert slack.max_blocks_text == 12_000 and "Weekly digest" in text and "<#CBUSY000>" in text
    assert "more channels: see `/judge stats #channel` or the App Home" in text
    assert "rotate the signing keys" in text  # the week's worst answers are still quoted
    assert_png_chart(slack, digest_ts(runtime))


def test_an_empty_week_posts_the_digest_without_a_chart(runtime: Runtime, slack: FakeSlack) -> None:
    outcome = deliver_digest(runtime, now_utc())
    assert outcome.status == "sent" and outcome.file_id is None
    (posted,) = slack.posted(DIGEST_CHANNEL)
    assert "No answers were captured" in str(posted["blocks"]) and "thread" not in str(posted["blocks"])
    assert slack.calls_to("files.getUploadURLExternal") == [] and slack.files == {}
    with runtime.db.session() as session:
        assert session.execute(select(Digest.status)).scalar_one() == "sent"


def test_a_run_that_died_before_recording_its_message_does_not_post_it_twice(
    runtime: Runtime, slack: FakeSlack
) -> None:
    now = now_utc()
    seed(runtime, now)
    first = deliver_digest(runtime, now)
    # Forget the recorded ts and make the claim look abandoned, as if the worker died after chat.postMessage.
    with runtime.db.session() as session:
        session.execute(
            update(Digest).values(
                status="claimed", message_ts=None, created_at=now - CLAIM_LEASE - timedelta(minutes=1)
            )
        )
    second = deliver_digest(runtime, now)
    assert second.status == "sent" and second.message_ts == first.message_ts
    assert len(slack.posted(DIGEST_CHANNEL)) == 1  # found by its metadata in the channel's history


class WorkerKilled(BaseException):
    """The worker process dies: no `except Exception` runs, the claim stays `claimed`."""


def test_a_scheduled_digest_that_runs_late_into_the_next_week_is_still_its_own_weeks(
    make_runtime, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduled for Sunday 23:00 UTC: beat's run posts week N's digest; the same task coming back at 01:00 on
    Monday (a redelivery after the visibility timeout), already in ISO week N+1, finds week N's digest sent
    instead of sending week N+1's a week early (which would leave next Sunday's run with nothing to send)."""
    runtime = make_runtime(digest_day="sun", digest_hour=23)
    clock: list[datetime] = []

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):  # the task's own clock
            return clock[-1]

    today = now_utc().replace(hour=23, minute=0, second=0, microsecond=0)
    sunday = today - timedelta(days=(today.weekday() - 6) % 7 or 7)  # the last Sunday before today
    seed(runtime, sunday)
    monkeypatch.setattr(digest_tasks, "datetime", Clock)
    monkeypatch.setattr(delivery, "datetime", Clock)
    clock.append(sunday)
    assert send_digest.apply(kwargs={"scheduled": True}).get() == "sent"
    clock.append(sunday + timedelta(hours=2))
    assert period_for(clock[-1], "UTC").key != period_for(sunday, "UTC").key  # the run is in the next week
    assert send_digest.apply(kwargs={"scheduled": True}).get() == "already_sent"
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
    with runtime.db.session() as session:
        assert session.execute(select(Digest.period_key)).scalars().all() == [period_for(sunday, "UTC").key]


@pytest.mark.parametrize("receipt", ["kept", "lost"])
def test_a_run_killed_after_its_post_before_its_record_is_not_posted_again_when_redelivered(
    make_runtime, redis_url: str, slack: FakeSlack, monkeypatch: pytest.MonkeyPatch, receipt: str
) -> None:
    """The worker died after chat.postMessage, before the database recorded the message: the task comes back
    after the visibility timeout (2 h), long after the claim's 15-minute lease. Its Redis receipt (left the
    moment Slack took the post) stops a second digest, and so does, were Redis to lose it, the marked message
    in the channel, looked for as far back as the period's key allows."""
    runtime = make_runtime(redis_url=redis_url)
    now = now_utc()
    tz = runtime.settings.digest_timezone
    if period_for(now, tz).key != period_for(now + timedelta(hours=2), tz).key:
        now -= timedelta(hours=3)  # the redelivery must fall in the same ISO week
    seed(runtime, now)

    def killed(*args, **kwargs):
        raise WorkerKilled

    with monkeypatch.context() as patch:
        patch.setattr(delivery.digest_rows, "mark_posted", killed)
        with pytest.raises(WorkerKilled):
            deliver_digest(runtime, now)
    [first_ts] = slack.messages[DIGEST_CHANNEL]
    with runtime.db.session() as session:
        assert session.execute(select(Digest.status, Digest.message_ts)).one() == ("claimed", None)
    if receipt == "lost":
        runtime.redis.delete(f"relmon:posted:digest:{period_for(now, tz).key}")

    again = deliver_digest(runtime, now + timedelta(hours=2))  # the redelivery
    assert again.status == "sent" and again.message_ts == first_ts
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
    assert_png_chart(slack, first_ts)
    assert len(slack.calls_to("conversations.history")) == (1 if receipt == "lost" else 0)


def test_a_digest_post_slack_took_after_the_timeout_is_not_posted_again(runtime: Runtime, slack: FakeSlack) -> None:
    """Slack carries out the post but answers after the client gave up: the run releases its claim, and the
    retry, taking it over, finds the marked message instead of posting a second digest."""
    now = now_utc()
    seed(runtime, now)
    runtime.slack.timeout = 1
    slack.slow_method("chat.postMessage", 2.5)
    with pytest.raises(TimeoutError):
        deliver_digest(runtime, now)
    assert slack.calls_to("conversations.history") == []  # a fresh claim reads no history
    [first_ts] = slack.messages[DIGEST_CHANNEL]
    again = deliver_digest(runtime, now_utc())
    assert again.status == "sent" and again.message_ts == first_ts
    assert len(slack.posted(DIGEST_CHANNEL)) == 1


def test_a_slack_error_releases_the_claim_for_the_retry(runtime: Runtime, slack: FakeSlack) -> None:
    seed(runtime, now_utc())
    slack.rate_limit("chat.postMessage", times=100, retry_after=0)  # more 429s than the client retries
    with pytest.raises(SlackApiError):
        deliver_digest(runtime, now_utc())
    with runtime.db.session() as session:
        assert session.execute(select(Digest.status)).scalar_one() == "failed"
    slack.rate_limit("chat.postMessage", times=0)
    assert deliver_digest(runtime, now_utc()).status == "sent"


def test_private_text_is_quoted_where_the_rules_allow(make_runtime, slack: FakeSlack, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(f"channels:\n  GPRIV:\n    quote_private: true\n    alert_channel: {DIGEST_CHANNEL}\n")
    runtime = make_runtime(channel_rules_file=rules)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    assert "secret answer" in str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])


@pytest.mark.parametrize(
    "rules_yaml",
    [
        # Quoting on in the channel's own rule, the alert channel only inherited from the defaults.
        f"defaults:\n  alert_channel: {DIGEST_CHANNEL}\nchannels:\n  GPRIV:\n    quote_private: true\n",
        # Quoting and the alert channel both from the defaults.
        f"defaults:\n  quote_private: true\n  alert_channel: {DIGEST_CHANNEL}\n",
    ],
    ids=["own-quote-only", "defaults-quote"],
)
def test_private_text_is_not_quoted_unless_its_own_rule_names_the_alert_channel(
    make_runtime, slack: FakeSlack, tmp_path: Path, rules_yaml: str
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml)
    runtime = make_runtime(channel_rules_file=rules)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    blocks = str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])
    assert "secret answer" not in blocks and "secret question" not in blocks
    # Nor its figures and link: the digest channel is not its own rule's, and its members are not GPRIV's.
    assert "GPRIV" not in blocks and "<#C2>" in blocks


def test_a_private_channels_figures_show_only_where_its_audience_may_see_them(
    make_runtime, slack: FakeSlack, redis_url: str
) -> None:
    """As App Home shows them to a person: in a digest channel whose every member is one of the private channel's,
    its score and link are there (its text not: its own rule does not quote it there); once someone who is not
    its member joins the digest channel, neither is."""
    slack.add_channel("GPRIV", "private", is_private=True, members=["U_IN", "U_RELMON"])
    slack.add_channel(DIGEST_CHANNEL, "digest", members=["U_IN", "U_RELMON"])
    runtime = make_runtime(redis_url=redis_url)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    shown = str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])
    assert "<#GPRIV>" in shown and "secret answer" not in shown

    slack.add_channel(DIGEST_CHANNEL, "digest", members=["U_IN", "U_RELMON", "U_OUT"])
    MembershipCache(runtime.redis).forget(DIGEST_CHANNEL)  # as the member_joined_channel event does
    assert deliver_digest(runtime, now_utc(), force=True).status == "sent"
    assert "GPRIV" not in str(slack.posted(DIGEST_CHANNEL)[1]["blocks"])


def previewed(runtime: Runtime, slack: FakeSlack) -> dict:
    """The week's digest previewed for U1 in C1 by the command's response URL, then (none) by chat.postEphemeral;
    returns what the response URL received."""
    seed(runtime, now_utc())
    send_digest_preview.apply(args=("U1", "C1", keep_response_url(runtime.redis, slack.response_url("preview")))).get()
    send_digest_preview.apply(args=("U1", "C1", None)).get()
    (body,) = slack.responses["preview"]
    return body


def test_preview_is_private(runtime: Runtime, slack: FakeSlack) -> None:
    body = previewed(runtime, slack)
    assert body["response_type"] == "ephemeral" and "Weekly digest" in str(body["blocks"])
    assert "secret answer" not in str(body["blocks"])
    (ephemeral,) = slack.calls_to("chat.postEphemeral")
    assert ephemeral["user"] == "U1" and ephemeral["channel"] == "C1"
    assert slack.posted() == []


def test_preview_claims_nothing(runtime: Runtime, slack: FakeSlack) -> None:
    body = previewed(runtime, slack)
    assert slack.calls_to("files.completeUploadExternal") == []
    assert "thread" not in str(body["blocks"])  # the preview has no chart thread
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(Digest)).scalar_one() == 0


@pytest.fixture
def preview(runtime: Runtime, slack: FakeSlack) -> Callable[[str], str]:
    """`preview(user)`: the blocks of the week's digest previewed for `user` in a DM, as JSON. U_OUT is in C1;
    U_IN in C1, C2 and the private GPRIV."""
    seed(runtime, now_utc())
    slack.add_channel("C1", "one", members=["U_OUT", "U_IN"])
    slack.add_channel("C2", "two", members=["U_IN"])
    slack.add_channel("GPRIV", "private", is_private=True, members=["U_IN"])

    def blocks_for(user: str) -> str:
        send_digest_preview.apply(args=(user, "CDM", keep_response_url(runtime.redis, slack.response_url(user)))).get()
        (body,) = slack.responses[user]
        return json.dumps(body["blocks"])

    return blocks_for


def test_preview_shows_a_person_only_the_figures_app_home_would(preview: Callable[[str], str]) -> None:
    """The App Home rule for figures and links: a private channel's to its members only."""
    outsider = preview("U_OUT")
    assert "<#C1>" in outsider and "<#C2>" in outsider and "GPRIV" not in outsider
    assert "<#GPRIV>" in preview("U_IN")


def test_preview_quotes_to_a_person_only_the_text_of_their_channels(preview: Callable[[str], str]) -> None:
    """A channel's text only to its members, where the quoting rule allows it: never to anyone, in any
    conversation."""
    outsider = preview("U_OUT")
    assert "in C1" in outsider and "in C2" not in outsider  # quotes of C1 only: U_OUT is not in C2
    member = preview("U_IN")
    assert "in C2" in member
    assert "secret" not in member  # a member, but its rule does not let relmon quote the private channel


def test_relmon_digest_dry_run_only_prints_the_digest(runtime: Runtime, slack: FakeSlack, db_url: str) -> None:
    seed(runtime, now_utc())
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_API_URL": slack.api_url,
        "RELMON_DIGEST_CHANNEL": DIGEST_CHANNEL,
        "RELMON_DATA_DIR": str(runtime.settings.data_dir),
    }
    done = subprocess.run(
        [sys.executable, "-m", "relmon.cli", "digest", "--dry-run"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Weekly digest" in done.stdout and "#C1" in done.stdout and "scores 0:" in done.stdout
    assert "LLM usage:" in done.stdout.split("== #C1 ==")[1]  # per channel, not only overall
    assert "secret answer" not in done.stdout
    assert slack.calls == []
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(Digest)).scalar_one() == 0


def test_relmon_digest_sends_then_says_already_sent(runtime: Runtime, slack: FakeSlack, capsys) -> None:
    from argparse import Namespace

    from relmon.digest_cli import run_digest

    seed(runtime, now_utc())
    assert run_digest(Namespace(dry_run=False, force=False), runtime.settings) == 0
    assert run_digest(Namespace(dry_run=False, force=False), runtime.settings) == 0
    assert "already sent" in capsys.readouterr().out
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
