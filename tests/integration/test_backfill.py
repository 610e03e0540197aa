"""relmon backfill and relmon import against the fake Slack and the fake LLM: resumable, idempotent, within the
rate limits, never re-judging a live pair, never alerting; the Batch API and its fallbacks; the dry run."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select

from common.messages.readable import Readable
from relmon.backfill.command import run_backfill, run_import
from store.db import Database
from store.models import Alert, BackfillCheckpoint, Judgment, Pair
from store.pairs import upsert_captured
from store.settings import Settings
from tests.backfill_helpers import BOT, args, export_zip, history_messages, load_fake
from tests.builders import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack

C = "C_SUPPORT"
NOW = datetime(2026, 6, 10, tzinfo=UTC)
PAIRS = 40


@pytest.fixture
def fakes():
    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_channel(C, "support", members=["U_RELMON"])
        load_fake(slack, C, history_messages(C, PAIRS))
        yield slack, llm


def backfill_settings(slack, llm, tmp_path, **extra) -> Settings:
    values = dict(
        slack_api_url=slack.api_url, openai_base_url=llm.base_url, monitored_bots=[BOT], watched_channels=[C],
        database_url=f"sqlite:///{tmp_path / 'relmon.sqlite3'}", data_dir=tmp_path,
        backfill_calls_per_minute=6000, batch_poll_seconds=0.01,
    )  # fmt: skip
    return make_settings(**{**values, **extra})


def count(settings: Settings, *what) -> int:
    db = Database(settings.resolved_database_url)
    try:
        with db.session() as session:
            return session.scalar(select(func.count()).select_from(*what))
    finally:
        db.dispose()


def backfilled(fakes, tmp_path) -> Settings:
    """The settings of one backfill of the fake channel, run to its end."""
    slack, llm = fakes
    settings = backfill_settings(slack, llm, tmp_path)
    assert run_backfill(args(), settings, now=NOW) == 0
    return settings


def test_backfill_judges_every_pair_once(fakes, tmp_path):
    _, llm = fakes
    settings = backfilled(fakes, tmp_path)
    assert len(llm.requests) == PAIRS and count(settings, Judgment) == PAIRS
    assert run_backfill(args(), settings, now=NOW) == 0  # run twice: nothing judged twice
    assert len(llm.requests) == PAIRS and count(settings, Pair) == PAIRS


def test_backfill_never_alerts(fakes, tmp_path):
    slack, _ = fakes
    settings = backfilled(fakes, tmp_path)
    assert count(settings, Alert) == 0 and not slack.posted("C_ALERTS")


def test_backfill_prints_the_digest_of_its_period(fakes, tmp_path, capsys):
    backfilled(fakes, tmp_path)
    out = capsys.readouterr().out  # the digest's figures for the period, titled as what they are
    assert out.startswith("History report: 2026-05-01 – 2026-06-10, read from Slack's history") and "Weekly" not in out


def test_interrupted_mid_channel_resumes_from_its_checkpoint(fakes, tmp_path):
    slack, llm = fakes
    settings = backfill_settings(slack, llm, tmp_path)
    from relmon.backfill import slack_history

    calls = {"n": 0}
    original = slack_history.HistoryReader.thread

    def crash(self, channel, ts):
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return original(self, channel, ts)

    slack_history.HistoryReader.thread = crash
    try:
        assert run_backfill(args(), settings, now=NOW) == 130
    finally:
        slack_history.HistoryReader.thread = original
    first = len(llm.requests)
    assert 0 < count(settings, Pair) < PAIRS
    assert run_backfill(args(), settings, now=NOW) == 0
    assert count(settings, Judgment) == PAIRS and len(llm.requests) == PAIRS
    assert first < PAIRS
    db = Database(settings.resolved_database_url)
    with db.session() as session:
        assert session.get(BackfillCheckpoint, C).done
    db.dispose()


def test_a_pair_captured_live_is_not_judged_again(fakes, tmp_path):
    slack, llm = fakes
    settings = backfill_settings(slack, llm, tmp_path)
    db = Database(settings.resolved_database_url)
    db.migrate()
    answer = history_messages(C, PAIRS)[1]
    with db.session() as session:
        upsert_captured(session, channel_id=C, answer_ts=answer["ts"], answer_text=answer["text"])
    db.dispose()
    assert run_backfill(args(), settings, now=NOW) == 0
    assert len(llm.requests) == PAIRS - 1


def test_slack_429_is_honoured(fakes, tmp_path):
    slack, llm = fakes
    slack.rate_limit("conversations.history", times=2, retry_after=1)
    settings = backfill_settings(slack, llm, tmp_path)
    assert run_backfill(args(), settings, now=NOW) == 0
    assert len(slack.calls_to("conversations.history")) >= 1 and count(settings, Judgment) == PAIRS


def dry_run(fakes, tmp_path) -> Settings:
    """The settings of a dry run of the backfill of the fake channel."""
    slack, llm = fakes
    settings = backfill_settings(slack, llm, tmp_path)
    assert run_backfill(args(dry_run=True), settings, now=NOW) == 0
    return settings


def test_dry_run_judges_nothing(fakes, tmp_path):
    _, llm = fakes
    settings = dry_run(fakes, tmp_path)
    assert not llm.requests and count(settings, Pair) == 0


def test_dry_run_prints_the_cost(fakes, tmp_path, capsys):
    dry_run(fakes, tmp_path)
    out = capsys.readouterr().out
    assert f"would judge {PAIRS} pair(s)" in out and "$" in out


@pytest.mark.parametrize(
    ("outcomes", "available", "online"), [([], True, 0), (["expired", "failed"], True, PAIRS // 2), ([], False, PAIRS)]
)
def test_batch(fakes, tmp_path, outcomes, available, online):
    slack, llm = fakes
    llm.batches.outcomes[:] = outcomes
    llm.batches.available = available
    settings = backfill_settings(slack, llm, tmp_path)
    assert run_backfill(args(batch=True), settings, now=NOW) == 0
    assert count(settings, Judgment) == PAIRS
    assert len(llm.requests) == online  # online calls
    assert len(llm.batches.requests) == PAIRS - online
    db = Database(settings.resolved_database_url)
    with db.session() as session:
        assert session.scalar(select(func.count()).where(Judgment.batch.is_(True))) == PAIRS - online
    db.dispose()


def test_import_of_an_export_lists_unmapped_channels(tmp_path, capsys):
    with FakeSlack() as slack, FakeOpenAI() as llm:
        path = tmp_path / "export.zip"
        path.write_bytes(
            export_zip({C: ("support", history_messages(C, 10)), "C_RANDOM": ("random", history_messages("x", 3))})
        )
        settings = backfill_settings(slack, llm, tmp_path)
        assert run_import(args(export=str(path)), settings, now=NOW) == 0
        assert len(llm.requests) == 10 and not slack.calls_to("conversations.history")
        assert "#random (C_RANDOM)" in capsys.readouterr().err
        db = Database(settings.resolved_database_url)
        with db.session() as session:
            assert set(session.scalars(select(Pair.source))) == {"import"}
        db.dispose()


def test_post_sends_the_report_with_its_chart_to_the_digest_channel_once_per_period(fakes, tmp_path, capsys, redis_url):
    """`--post` goes through the digest's own delivery: one message and one chart in its thread; the same
    period (same --since, same day) again is not posted twice, a later day's period is."""
    slack, llm = fakes
    slack.add_channel("C_DIGEST", "digest", members=["U_RELMON"])
    settings = backfill_settings(slack, llm, tmp_path, digest_channel_setting="C_DIGEST", redis_url=redis_url)
    assert run_backfill(args(post=True), settings, now=NOW) == 0
    said = capsys.readouterr().err
    assert "report posted to #digest (" in said  # by name, at the team's local time of the post
    (posted,) = slack.posted("C_DIGEST")
    assert posted["text"].startswith("History report: 2026-05-01 – 2026-06-10, read from Slack's history")
    (chart,) = slack.files.values()
    assert chart["channels"] == ["C_DIGEST"] and f"({Readable('UTC').time(chart['thread_ts'])})" in said
    assert slack.uploads[chart["id"]][:8] == b"\x89PNG\r\n\x1a\n"
    assert len(slack.calls_to("files.completeUploadExternal")) == 1
    assert not slack.posted("C_ALERTS")

    assert run_backfill(args(post=True), settings, now=NOW) == 0
    assert "report not posted again (already_sent)" in capsys.readouterr().err
    assert len(slack.posted("C_DIGEST")) == 1 and len(slack.files) == 1

    later = datetime(2026, 6, 11, tzinfo=UTC)
    assert run_backfill(args(post=True), settings, now=later) == 0
    assert len(slack.posted("C_DIGEST")) == 2 and len(slack.files) == 2


# Unknown privacy is private ---------------------------------------------------------------------------------


def answers_off_topic(slack, channel: str) -> None:
    """The channel's history with every answer off topic: each is among the report's worst, to be quoted or not."""
    messages = history_messages(channel, 6)
    for message in messages:
        if message.get("bot_id"):
            message["text"] = f"{message['text']} (offtopic, secret-{channel})"
    load_fake(slack, channel, messages)


def privacy_of(settings: Settings) -> dict[str, set[tuple[bool, bool]]]:
    db = Database(settings.resolved_database_url)
    try:
        with db.session() as session:
            rows = session.execute(select(Pair.channel_id, Pair.channel_is_private, Pair.channel_is_ext_shared))
            found: dict[str, set[tuple[bool, bool]]] = {}
            for channel, private, shared in rows:
                found.setdefault(channel, set()).add((private, shared))
            return found
    finally:
        db.dispose()


UNDESCRIBED = ["C_PUBLIC", "C_CONNECT", "C_GRID", "C_UNLISTED"]  # C_UNLISTED: conversations.info does not know it


@pytest.fixture
def undescribed(tmp_path, capsys, redis_url) -> tuple[Settings, str]:
    """A backfill, its report posted to the digest channel, of a public channel and of three that Slack cannot
    describe (conversations.info refused: a missing scope, an unknown channel) or that are shared with another
    organisation (Slack Connect, or across an Enterprise Grid), every answer off topic: (its settings, the report
    as printed and as posted)."""
    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_channel("C_PUBLIC", "public", members=["U_RELMON"])
        slack.add_channel("C_CONNECT", "connect", members=["U_RELMON"], is_ext_shared=True)
        slack.add_channel("C_GRID", "grid", members=["U_RELMON"], is_org_shared=True)
        slack.add_channel("C_DIGEST", "digest", members=["U_RELMON"])
        for channel in UNDESCRIBED:
            answers_off_topic(slack, channel)
        settings = backfill_settings(
            slack, llm, tmp_path, watched_channels=UNDESCRIBED, digest_channel_setting="C_DIGEST", redis_url=redis_url
        )
        assert run_backfill(args(post=True), settings, now=NOW) == 0
        printed = capsys.readouterr().out
        (posted,) = slack.posted("C_DIGEST")
    return settings, printed + json.dumps(posted)


def test_backfill_stores_what_slack_cannot_describe_or_shares_as_private(undescribed):
    settings, _ = undescribed
    public, private, shared = {(False, False)}, {(True, False)}, {(True, True)}  # (private, shared), as stored
    assert privacy_of(settings) == {"C_PUBLIC": public, "C_CONNECT": shared, "C_GRID": shared, "C_UNLISTED": private}


def test_backfill_never_quotes_what_slack_cannot_describe_or_shares(undescribed):
    """Neither in the printed report nor in the one posted to the digest channel; a public channel beside them is
    quoted."""
    _, shown = undescribed
    assert "secret-C_PUBLIC" in shown  # the report does quote where it may
    assert not [c for c in UNDESCRIBED[1:] if f"secret-{c}" in shown]


def test_backfill_stores_a_channel_as_private_when_conversations_info_is_refused(tmp_path):
    with FakeSlack() as slack, FakeOpenAI() as llm:
        slack.add_channel(C, "support", members=["U_RELMON"])
        load_fake(slack, C, history_messages(C, 4))
        slack.refuse("conversations.info", "missing_scope")
        settings = backfill_settings(slack, llm, tmp_path)
        assert run_backfill(args(), settings, now=NOW) == 0
        assert privacy_of(settings) == {C: {(True, False)}}


def test_import_takes_each_channels_privacy_flags_from_the_export(tmp_path):
    """groups.json (private channels), mpims.json (group DMs) and an entry's sharing flags decide; not a
    hard-coded "public, not shared"."""
    with FakeSlack() as slack, FakeOpenAI() as llm:
        names = {"C_OPEN": "open", "G_TEAM": "team", "G_MPDM": "mpdm-ana--bob-1", "C_EXT": "ext"}
        channels = {cid: (name, history_messages(cid, 2)) for cid, name in names.items()}
        path = tmp_path / "export.zip"
        path.write_bytes(
            export_zip(
                channels,
                listed_in={"G_TEAM": "groups.json", "G_MPDM": "mpims.json"},
                entries={"C_EXT": {"is_ext_shared": True, "is_shared": True}},
            )
        )
        settings = backfill_settings(slack, llm, tmp_path, watched_channels=list(channels))
        assert run_import(args(export=str(path)), settings, now=NOW) == 0
        assert privacy_of(settings) == {
            "C_OPEN": {(False, False)},
            "G_TEAM": {(True, False)},
            "G_MPDM": {(True, False)},
            "C_EXT": {(True, True)},
        }


def test_an_exports_notices_are_nobodys_words(tmp_path):
    """A workspace export holding a huddle's thread (Slackbot's notice as its root, and as the `root` of the asker's
    broadcast) and Slackbot's reminder before a top-level bot message: the huddle's question is paired, with the
    asker's words; the reminder is no one's question, so the bot's message there makes no pair."""
    base = datetime(2026, 6, 1, 12, tzinfo=UTC).timestamp()
    huddle = {"type": "message", "subtype": "huddle_thread", "user": "USLACKBOT", "text": "A huddle started",
              "ts": f"{base:.6f}", "thread_ts": f"{base:.6f}", "reply_count": 2, "room": {"id": "R1"}}  # fmt: skip
    notes = {"type": "message", "subtype": "thread_broadcast", "user": "U_ASKER", "ts": f"{base + 60:.6f}",
             "thread_ts": huddle["ts"], "text": "Our SSO login loops", "root": dict(huddle)}  # fmt: skip
    bot = {"user": "U_SUPPORT", "bot_id": BOT, "bot_profile": {"id": BOT, "app_id": "A_SUPPORT"}}
    answer = {"type": "message", "ts": f"{base + 90:.6f}", "thread_ts": huddle["ts"], "text": "Check the URL.", **bot}
    reminder = {"type": "message", "user": "USLACKBOT", "ts": f"{base + 900:.6f}", "text": "Reminder: how do I x?"}
    lone = {"type": "message", "ts": f"{base + 930:.6f}", "text": "Good morning!", **bot}
    with FakeSlack() as slack, FakeOpenAI() as llm:
        path = tmp_path / "export.zip"
        path.write_bytes(export_zip({C: ("support", [huddle, notes, answer, reminder, lone])}))
        settings = backfill_settings(slack, llm, tmp_path)
        assert run_import(args(export=str(path)), settings, now=NOW) == 0
        db = Database(settings.resolved_database_url)
        with db.session() as session:
            found = [(p.answer_ts, p.question_text, p.context_text) for p in session.scalars(select(Pair))]
        db.dispose()
    assert found == [(answer["ts"], "Our SSO login loops", None)]
    assert "A huddle started" not in json.dumps(llm.requests) and "Reminder" not in json.dumps(llm.requests)
