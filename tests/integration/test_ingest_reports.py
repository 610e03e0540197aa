"""Ingested exchanges in the reports, on the fake Slack Web API (real HTTP) and SQLite and PostgreSQL: the digest of a
week with a bot's dm exchanges has the bot's block with their figures and none of their words (quoted only where the
bot's own rule names the digest's channel as its alert channel), an exchange naming a Slack channel counts in that
channel's block, and the App Home-style report groups them the same way."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from common.reports.figures import load_report
from common.reports.period import period_for
from common.runtime import Runtime
from store.exchange_models import Exchange
from store.judgments import export_rows
from store.models import Judgment, Pair, PairSource
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL, now_utc
from tests.fakes.slack_server import FakeSlack
from workers.digest.delivery import deliver_digest

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures

DM_QUESTION = "Can you refund order 4471 to my personal card?"
DM_ANSWER = "Our office plants are watered on Tuesdays."
PUBLIC_QUESTION = "How do I rotate my API key?"


def add_exchange(
    runtime: Runtime, now: datetime, n: int, *, visibility: str, score: int, channel: str | None = None, **texts
) -> None:
    with runtime.db.session() as session:
        pair = Pair(
            source=PairSource.INGEST,
            channel_id=channel,
            answer_ts=f"1765094400.{n:06d}" if channel else None,
            channel_is_private=visibility != "public",
            question_text=texts.get("question", DM_QUESTION),
            answer_text=texts.get("answer", DM_ANSWER),
            status="judged",
            created_at=now - timedelta(hours=2 + n),
        )
        session.add(pair)
        session.flush()
        session.add(Exchange(client_id=f"ex-{n}", bot="helpdesk", conversation_id=f"D1/{n}", turn=n,
                             visibility=visibility, asked_at=now, answered_at=now, pair_id=pair.id))  # fmt: skip
        session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=score, max_score=4,
                             normalized_score=score / 4, prompt_tokens=100, completion_tokens=10))  # fmt: skip


def seed_week(runtime: Runtime, now: datetime) -> None:
    """Three dm exchanges of bot helpdesk (one scored 0) and one public exchange in #support (C_SUPPORT)."""
    for n, score in enumerate((0, 3, 4)):
        add_exchange(runtime, now, n, visibility="dm", score=score)
    add_exchange(
        runtime,
        now,
        10,
        visibility="public",
        score=4,
        channel="C_SUPPORT",
        question=PUBLIC_QUESTION,
        answer="Settings, then API keys, then Rotate.",
    )


def test_the_digest_has_the_bots_block_and_none_of_its_dm_text(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed_week(runtime, now)
    assert deliver_digest(runtime, now).status == "sent"
    [posted] = slack.posted(DIGEST_CHANNEL)
    blocks = str(posted["blocks"])
    assert "helpdesk (bot conversations)" in blocks and "<#C_SUPPORT>" in blocks
    assert "*helpdesk (bot conversations)* — 3 seen · 3 judged" in blocks and "4 seen · 4 judged" in blocks
    assert "relevancy in helpdesk (bot conversations)" in blocks  # its worst answers: scores, no link, no words
    # "What to fix first" counts the dm's failed question without its words.
    assert "*What to fix first*" in blocks and "(a question from a private channel: not quoted here)" in blocks
    assert DM_QUESTION not in blocks and DM_ANSWER not in blocks
    assert DM_QUESTION not in str(slack.calls_to("files.getUploadURLExternal"))


def test_a_bots_own_rule_quotes_it_in_its_alert_channel_only(
    make_runtime, slack: FakeSlack, tmp_path: Path, redis_url: str
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(f"bots:\n  helpdesk:\n    alert_channel: {DIGEST_CHANNEL}\n    quote_private: true\n")
    runtime = make_runtime(channel_rules_file=rules, redis_url=redis_url)
    now = now_utc()
    seed_week(runtime, now)
    assert deliver_digest(runtime, now).status == "sent"
    assert DM_ANSWER in str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])


def test_the_report_groups_exchanges_by_bot_or_by_their_channel(runtime: Runtime) -> None:
    now = now_utc()
    seed_week(runtime, now)
    report = load_report(runtime, period_for(now, runtime.settings.timezone))
    by_channel = {stats.channel_id: stats for stats in report.channels}
    assert by_channel["bot:helpdesk"].seen == 3 and by_channel["bot:helpdesk"].judges["relevancy"].low == 1
    assert by_channel["C_SUPPORT"].seen == 1
    assert report.overall.seen == 4
    worst = report.overall.worst[0]
    assert (worst.channel_id, worst.score, worst.channel_is_private, worst.answer_ts) == ("bot:helpdesk", 0, True, None)


def test_the_export_names_each_ingested_rows_bot_and_visibility(runtime: Runtime) -> None:
    now = now_utc()
    seed_week(runtime, now)
    with runtime.db.session() as session:
        rows = list(export_rows(session))
    assert {(row["source"], row["channel_id"], row["bot"], row["visibility"]) for row in rows} == {
        ("ingest", None, "helpdesk", "dm"),
        ("ingest", "C_SUPPORT", "helpdesk", "public"),
    }
