"""Sending the digest against the fake Slack Web API (real HTTP) and a real database (SQLite and PostgreSQL):
exactly once per ISO week, --force sends another, a crashed, killed or timed-out run is completed without a second
post or upload, the chart is a real PNG; `relmon digest` (--dry-run only prints it, a second run says it was sent).
What the digest shows: test_digest_content.py; the `/judge digest` preview: test_digest_preview.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from sqlalchemy import func, select, update

from common.reports.period import period_for
from common.runtime import Runtime
from store.models import Digest, Judgment, Pair
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL, assert_png_chart, digest_ts, now_utc, seed
from tests.fakes.slack_server import FakeSlack
from workers.digest import delivery
from workers.digest.delivery import CLAIM_LEASE, deliver_digest
from workers.tasks import digest as digest_tasks
from workers.tasks.digest import send_digest

ROOT = Path(__file__).resolve().parents[2]

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures


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


def test_the_chart_goes_up_with_alt_text_and_local_days(make_runtime, redis_url: str, slack: FakeSlack) -> None:
    """The digest of a team in Los Angeles, sent Monday 09:00 PST: the chart's upload carries alt text (Slack's
    `alt_txt`, kept on the file) naming the team's calendar days, with a question asked at 02:00 UTC on Saturday
    counted on Friday; the week before had no data, and the digest says so instead of a change."""
    runtime = make_runtime(redis_url=redis_url, timezone="America/Los_Angeles")
    now = datetime(2026, 12, 7, 17, 0, tzinfo=UTC)
    answers = [  # (when, score)
        (datetime(2026, 12, 5, 2, 0, tzinfo=UTC), 1),  # Friday 18:00 PST
        (datetime(2026, 12, 5, 3, 0, tzinfo=UTC), 3),  # Friday 19:00 PST
        (datetime(2026, 12, 5, 6, 30, tzinfo=UTC), 0),  # Friday 22:30 PST
        (datetime(2026, 12, 2, 20, 0, tzinfo=UTC), 4),  # Wednesday noon
    ]
    with runtime.db.session() as session:
        for n, (at, score) in enumerate(answers):
            pair = Pair(channel_id="C1", answer_ts=f"1764900000.{n:06d}", status="judged", created_at=at)
            session.add(pair)
            session.flush()
            session.add(
                Judgment(
                    pair_id=pair.id, judge="relevancy", status="ok", score=score, max_score=4,
                    normalized_score=score / 4, prompt_tokens=400, completion_tokens=40,
                )
            )  # fmt: skip
    assert deliver_digest(runtime, now).status == "sent"

    (asked,) = slack.calls_to("files.getUploadURLExternal")
    (shared,) = slack.files.values()
    assert (
        shared["alt_txt"]
        == asked["alt_txt"]
        == (
            "Chart: answers per day (bars) and the daily mean relevancy (line), Mon 30 Nov – Mon 7 Dec "
            "(America/Los_Angeles; Mon 30 from 09:00, Mon 7 until 09:00). "
            "Most answers on Fri 4 Dec (3 of 4); lowest daily mean relevancy 1.3 / 4 on Fri 4 Dec, "
            "the alert threshold dashed at ≤ 2. "
            "Relevancy scores this week (4 scored): 0: 1, 1: 1, 2: 0, 3: 1, 4: 1; 2 at or below the alert threshold."
        )
    )
    assert_png_chart(slack, digest_ts(runtime))
    (posted,) = slack.posted(DIGEST_CHANNEL)
    assert "no data the week before" in str(posted["blocks"]) and "(+" not in str(posted["blocks"])


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
    tz = runtime.settings.timezone
    if period_for(now, tz).key != period_for(now + timedelta(hours=2), tz).key:
        now -= timedelta(hours=3)  # the redelivery must fall in the same ISO week
    seed(runtime, now)

    def killed(*args, **kwargs):
        raise WorkerKilled

    with monkeypatch.context() as patch:
        patch.setattr(delivery.digest_rows, "mark_digest_posted", killed)
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


def dry_run(runtime: Runtime, slack: FakeSlack, db_url: str) -> subprocess.CompletedProcess[str]:
    """`relmon digest --dry-run`, a real process on the test's database and fake Slack."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_API_URL": slack.api_url,
        "RELMON_DIGEST_CHANNEL": DIGEST_CHANNEL,
        "RELMON_DATA_DIR": str(runtime.settings.data_dir),
    }
    command = [sys.executable, "-m", "relmon.cli", "digest", "--dry-run"]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_relmon_digest_dry_run_only_prints_the_digest(runtime: Runtime, slack: FakeSlack, db_url: str) -> None:
    seed(runtime, now_utc())
    done = dry_run(runtime, slack, db_url)
    assert done.returncode == 0, done.stderr
    assert "Weekly digest" in done.stdout and "#C1" in done.stdout and "scores 0:" in done.stdout
    assert "LLM usage:" in done.stdout.split("== #C1 ==")[1]  # per channel, not only overall
    assert "secret answer" not in done.stdout
    assert slack.calls == []
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(Digest)).scalar_one() == 0


def test_relmon_digest_dry_run_shows_control_characters_instead_of_sending_them(
    runtime: Runtime, slack: FakeSlack, db_url: str
) -> None:
    from store.models import Pair

    seed(runtime, now_utc())
    hostile = "Bill\x1b[2J\x1b[31m red\x07 \x9b6n"
    with runtime.db.session() as session:  # every question of C1, so the worst answers quote one
        session.execute(update(Pair).where(Pair.channel_id == "C1").values(question_text=hostile + " refund?"))
    done = dry_run(runtime, slack, db_url)
    assert done.returncode == 0, done.stderr
    assert "Bill␛[2J␛[31m red␇" in done.stdout
    assert not any(char in done.stdout for char in ("\x1b", "\x07", "\x9b"))


def test_relmon_digest_sends_then_says_already_sent(runtime: Runtime, slack: FakeSlack, capsys) -> None:
    from argparse import Namespace

    from relmon.digest_cli import run_digest

    seed(runtime, now_utc())
    assert run_digest(Namespace(dry_run=False, force=False), runtime.settings) == 0
    assert run_digest(Namespace(dry_run=False, force=False), runtime.settings) == 0
    assert "already sent" in capsys.readouterr().out
    assert len(slack.posted(DIGEST_CHANNEL)) == 1
