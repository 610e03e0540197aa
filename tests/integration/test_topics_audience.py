"""The topics keep the audience rule through the real pieces (the store, the fake LLM over HTTP, the digest through
the fake Slack, App Home through the signed bot): a private channel's words never name, nor are quoted in, a topic
shown in a public channel's digest or in App Home of someone outside it; a topic whose audience widened is named
again; a failing endpoint whose error echoes a question leaves only a fixed message and its kind."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from common.reports.topic_runs import refresh
from store.topic_models import TopicPeriod, TopicRecord, TopicRun
from tests.builders import SECRET
from tests.fakes.openai_server import FakeOpenAI, prompt_text
from tests.fakes.slack_server import FakeSlack
from tests.topics_corpus import FAILING_TOPIC, START, corpus, corpus_questions, store_questions
from topics.audience import NEUTRAL_NAME
from topics.questions import Question
from workers.digest.delivery import deliver_digest

PRIVATE = "G0PRIVATE"
PRIVATE_ALERTS = "CPRIVALERTS"  # the alert channel G0PRIVATE's own rule names, quoting on
DIGEST = "CDIGEST"
MEMBER, OUTSIDER = "U_MEMBER", "U_OUTSIDER"
WORD = "quixotrel"  # planted in the private channel's questions: it must show nowhere its people are not
# App Home, served by the bot, reads the stored runs of the last 7 days by the clock: the weeks are set by it too.
NOW = datetime.now(UTC).replace(microsecond=0)
THIS_WEEK = NOW - timedelta(days=7) + timedelta(hours=2)  # the questions of the digest sent at NOW: ~6 hours of them
LAST_WEEK_DIGEST = NOW - timedelta(days=7) + timedelta(hours=1)
LAST_WEEK = THIS_WEEK - timedelta(days=7)
RULES = f"channels:\n  {PRIVATE}:\n    alert_channel: {PRIVATE_ALERTS}\n    quote_private: true\n"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_channel(PRIVATE, "vip-support", is_private=True, members=[MEMBER])
        fake.add_channel(PRIVATE_ALERTS, "vip-alerts", is_private=True, members=[MEMBER])
        fake.add_channel(DIGEST, "support-digest", members=[MEMBER, OUTSIDER])
        fake.add_channel("C0SUPPORT", "support", members=[MEMBER, OUTSIDER])
        yield fake


@pytest.fixture
def llm():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def make_runtime(settings_for, runtime_for, tmp_path, slack, llm):
    rules = tmp_path / "rules.yml"
    rules.write_text(RULES)

    def build(digest_channel: str = DIGEST):
        return runtime_for(
            settings_for(
                slack_api_url=slack.api_url,
                digest_channel_setting=digest_channel,
                alert_channel="CALERTS",
                channel_rules_file=rules,
                data_dir=tmp_path / "data",
                openai_base_url=llm.base_url,
            )
        )

    return build


def week(at: datetime = THIS_WEEK, *, private_every: int = 2, offset: int = 0) -> list[Question]:
    """The corpus as a week's questions (asked from `at` on, pair ids after `offset`): of the planted failing
    topic, every `private_every`-th question is asked in the private channel, with the planted word (twice, so a
    name made of them would carry it); 1 asks them all there."""
    labels = [row["topic"] for row in corpus()]
    out = []
    for q in corpus_questions():
        ts = f"{float(q.ts or 0) + offset:.6f}"
        moved = replace(q, pair_id=q.pair_id + offset, ts=ts, created_at=q.created_at - START + at)
        if labels[q.pair_id - 1] == FAILING_TOPIC and q.pair_id % private_every == 0:
            moved = replace(moved, channel_id=PRIVATE, text=f"{q.text} ({WORD} account, {WORD})")
        out.append(moved)
    return out


def _naming_prompts(llm: FakeOpenAI) -> list[str]:
    return [prompt_text(body) for body in llm.requests if "You name topics" in prompt_text(body)]


def _published_home(bot, slack: FakeSlack, user: str) -> str:
    from tests.slack_requests import envelope, post

    slack.published.pop(user, None)
    event = {"type": "app_home_opened", "user": user, "channel": "D9", "tab": "home", "event_ts": f"{time.time()}"}
    assert post(bot.url, envelope(event), SECRET).status_code == 200
    deadline = time.monotonic() + 20
    while user not in slack.published and time.monotonic() < deadline:
        time.sleep(0.05)
    return str(slack.published[user]["blocks"])


def test_a_private_channels_words_never_name_nor_quote_a_topic_in_a_public_digest_or_an_outsiders_home(
    make_runtime, slack, llm
):
    runtime = make_runtime()
    store_questions(runtime.db, week(), private_channels=frozenset({PRIVATE}))
    assert deliver_digest(runtime, NOW).status == "sent"
    posted = str(slack.posted(DIGEST)[0]["blocks"]).lower()
    # The planted topic is shown first (its public questions are asked in a public channel), named from those only;
    # its examples, the private questions closest to its centre, are withheld.
    first = posted.split("what to fix first")[1].split("\\n2.")[0]
    assert "refund" in first and "not quoted here" in first
    assert WORD not in posted
    prompts = _naming_prompts(llm)
    assert prompts and not any(WORD in prompt for prompt in prompts)  # the LLM never read the private questions
    with runtime.db.reading() as session:
        names = {t.name: t.name_sources for t in session.scalars(select(TopicRecord))}
    assert all(WORD not in name.lower() for name in names) and all(sources == [] for sources in names.values())

    from tests.bot_harness import BotServer

    refresh(runtime, NOW)  # App Home's daily run
    with BotServer(runtime.settings) as bot:
        home = _published_home(bot, slack, OUTSIDER).lower()
    assert "topics of the last 7 days" in home and "refund" in home and WORD not in home


def test_a_topic_whose_audience_widened_is_named_again(make_runtime, slack, llm):
    # Week 1: the planted topic is asked only in the private channel; its digest goes to that channel's own alert
    # channel, whose people may read it: named from its questions there, and nowhere else.
    runtime = make_runtime(PRIVATE_ALERTS)
    store_questions(runtime.db, week(LAST_WEEK, private_every=1), private_channels=frozenset({PRIVATE}))
    assert deliver_digest(runtime, LAST_WEEK_DIGEST).status == "sent"
    assert WORD in str(slack.posted(PRIVATE_ALERTS)[0]["blocks"]).lower()
    with runtime.db.reading() as session:
        (private_topic,) = [t for t in session.scalars(select(TopicRecord)) if WORD in t.name.lower()]
    assert private_topic.name_sources == [PRIVATE]

    from tests.bot_harness import BotServer

    # App Home quotes no private channel: its member sees the topic, under the neutral name (the daily run keeps
    # the name: none of the topic's questions may be read there, so nothing wider may name it).
    refresh(runtime, LAST_WEEK_DIGEST)
    with BotServer(runtime.settings) as bot:
        home = _published_home(bot, slack, MEMBER)
    assert NEUTRAL_NAME in home and WORD not in home.lower()

    # Week 2: the same topic is asked in a public channel too. Its name is made again from the public questions.
    llm.reset()
    store_questions(runtime.db, week(offset=1000), private_channels=frozenset({PRIVATE}))
    assert deliver_digest(runtime, NOW).status == "sent"
    with runtime.db.reading() as session:
        renamed = session.get(TopicRecord, private_topic.key)
        run = session.scalars(select(TopicRun).order_by(TopicRun.id.desc())).first()
        shown = {p.topic_key: p for p in session.scalars(select(TopicPeriod).where(TopicPeriod.run_id == run.id))}
    assert renamed.name_sources == [] and WORD not in renamed.name.lower() and renamed.named_by == "llm"
    assert private_topic.key in shown and shown[private_topic.key].name == renamed.name
    assert not any(WORD in prompt for prompt in _naming_prompts(llm))


def test_a_failing_endpoint_whose_error_echoes_a_question_shows_only_a_fixed_message(make_runtime, slack, llm):
    runtime = make_runtime()
    store_questions(runtime.db, week(), private_channels=frozenset({PRIVATE}))
    # Every call fails, and its error repeats what it was sent: the questions (the private ones among them).
    llm.set_behavior(always_status=400, echo_input=True)
    assert deliver_digest(runtime, NOW).status == "sent"
    posted = str(slack.posted(DIGEST)[0]["blocks"])
    assert "embeddings endpoint error (HTTP 400 request refused)" in posted
    assert "LLM error (HTTP 400 request refused)" in posted
    assert "invalid input" not in posted.lower() and WORD not in posted.lower()
    with runtime.db.reading() as session:
        notes = [note for run in session.scalars(select(TopicRun)) for note in run.notes]
    assert notes and not any("invalid input" in note.lower() or WORD in note.lower() for note in notes)

    from tests.bot_harness import BotServer

    refresh(runtime, NOW)
    with BotServer(runtime.settings) as bot:
        home = _published_home(bot, slack, OUTSIDER)
    assert "embeddings endpoint error (HTTP 400 request refused)" in home
    assert "invalid input" not in home.lower() and WORD not in home.lower()


def test_the_migration_rewrites_notes_that_quoted_a_providers_error(tmp_path):
    """0015: a run stored before kept the provider's words in its notes; they become the fixed text. Names made
    before it have unknown sources (NULL): shown nowhere in Slack until a run names them again."""
    from alembic import command
    from sqlalchemy import inspect, text

    from store.db import Database, alembic_config, pending_migrations

    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    config = alembic_config(url)
    command.upgrade(config, "0014")
    older = Database(url, pool_size=1)
    leaked = (
        "Grouped with the local embedding (local TF-IDF + SVD): the embeddings endpoint failed (text-embedding-3-small:"
        f" HTTP 400: Invalid input: refund my {WORD} plan)."
    )
    named = f"Some topics are named by their keywords: the LLM failed (the LLM endpoint failed (500): {WORD})."
    try:
        with older.autocommit() as connection:
            connection.execute(
                text(
                    'INSERT INTO topic_runs (run_key, start, "end", questions, left_out, embedding, notes, created_at)'
                    " VALUES ('daily:x', '2026-01-01', '2026-01-08', 40, 2, 'local', :notes, '2026-01-08')"
                ),
                {"notes": json.dumps([leaked, "Only 3 questions in this period.", named])},
            )
            connection.execute(
                text(
                    "INSERT INTO topics (key, name, named_by, anchors, created_at, updated_at)"
                    " VALUES ('k1', 'Old name', 'llm', '[1]', '2026-01-08', '2026-01-08')"
                )
            )
        command.upgrade(config, "head")
        assert pending_migrations(older.engine) == []
        with older.session() as session:
            (notes,) = session.scalars(select(TopicRun.notes)).all()
            assert session.get(TopicRecord, "k1").name_sources is None
        assert notes == [
            "Grouped with the local embedding (local TF-IDF + SVD): embeddings endpoint error (unknown).",
            "Only 3 questions in this period.",
            "Some topics are named by their keywords: LLM error (unknown).",
        ]
        command.downgrade(config, "0014")
        assert "name_sources" not in {c["name"] for c in inspect(older.engine).get_columns("topics")}
    finally:
        older.dispose()


def test_a_test_set_item_takes_a_topics_name_only_if_whoever_reads_its_question_may_read_the_name(database):
    """The golden set copies its questions' topic names (`store.golden.topics_of_pairs`): a name made from one
    private channel's questions goes to that channel's items only; a name of unknown sources to none yet."""
    from store.golden import topics_of_pairs
    from store.models import Pair
    from store.topic_models import PairTopic

    channels = {"C1": False, "G1": True, "G2": True, "G3": True}
    with database.session() as session:
        ids = {}
        for n, (channel, private) in enumerate(channels.items()):
            pair = Pair(channel_id=channel, answer_ts=f"{n}.1", question_text="q", answer_text="a", status="judged",
                        channel_is_private=private)  # fmt: skip
            session.add(pair)
            session.flush()
            ids[channel] = pair.id
        session.add(TopicRecord(key="public", name="Refunds", named_by="llm", name_sources=[], anchors=[]))
        session.add(TopicRecord(key="of-g1", name=f"{WORD} refunds", named_by="llm", name_sources=["G1"], anchors=[]))
        session.add(TopicRecord(key="unknown", name="Old name", named_by="llm", name_sources=None, anchors=[]))
        for channel, key in (("C1", "public"), ("G1", "of-g1"), ("G2", "of-g1"), ("G3", "unknown")):
            session.add(PairTopic(pair_id=ids[channel], topic_key=key))
    with database.session() as session:
        assert topics_of_pairs(session, list(ids.values())) == {ids["C1"]: "Refunds", ids["G1"]: f"{WORD} refunds"}
