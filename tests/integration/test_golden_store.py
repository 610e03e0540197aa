"""The golden set in SQL (SQLite and PostgreSQL): duplicates counted once per asked question, edits kept, removals
final, deleted messages leave the set, private items only for their members, imports."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from store import golden, golden_import
from store.db import Database
from store.golden_models import GoldenItem, GoldenSource
from store.golden_rules import ORIGIN_TAKEOVER, ORIGIN_VOTE, Occurrence


def asked(ts: str, question: str = "How do I rotate my API key?", channel: str = "C1", **changes) -> Occurrence:
    values = dict(
        channel_id=channel,
        question_ts=ts,
        answer_ts=ts + "1",
        reference_ts=ts + "2",
        question=question,
        context="[customer] hi",
        bot_answer="Press Rotate.",
        expected="Settings > Keys > Rotate.",
        permalink=f"https://x.slack.com/archives/{channel}/p{ts.replace('.', '')}",
        private=False,
        origin=ORIGIN_TAKEOVER,
        pair_id=int(float(ts)),
    )
    return Occurrence(**(values | changes))


def items(database: Database, allowed=None) -> list[GoldenItem]:
    with database.session() as session:
        found = golden.active_items(session, allowed)
        session.expunge_all()
        return found


def add(database: Database, occurrence: Occurrence) -> tuple[int, bool]:
    with database.session() as session:
        return golden.add_occurrence(session, occurrence)


def test_the_same_question_asked_twice_is_one_item_counted_twice(database: Database) -> None:
    first_id, added = add(database, asked("100.0"))
    assert added
    assert add(database, asked("100.0")) == (first_id, False)  # a retried task
    assert add(database, replace(asked("100.0"), origin=ORIGIN_VOTE)) == (first_id, False)  # a vote on it too
    assert add(database, asked("200.0", question="how do i rotate my api key"))[0] == first_id
    [item] = items(database)
    assert item.times == 2 and item.question == "How do I rotate my API key?"
    assert item.expected == "Settings > Keys > Rotate." and item.bot_answer == "Press Rotate."
    assert item.origin == ORIGIN_TAKEOVER and item.context == "[customer] hi"


def test_an_edited_expected_answer_is_kept(database: Database) -> None:
    item_id, _ = add(database, asked("100.0", expected=None))
    with database.session() as session:
        assert golden.set_expected(session, item_id, "Use the Keys page.", "U_SAM")
    add(database, asked("200.0"))  # a later teammate reply does not overwrite the person's words
    [item] = items(database)
    assert item.expected == "Use the Keys page." and item.edited_by == "U_SAM" and item.times == 2


def test_a_removed_item_stays_out(database: Database) -> None:
    item_id, _ = add(database, asked("100.0"))
    with database.session() as session:
        assert golden.remove_item(session, item_id, "U_SAM")
        assert not golden.remove_item(session, item_id, "U_SAM")
    assert add(database, asked("300.0")) == (item_id, False)
    assert items(database) == []
    with database.session() as session:
        removed = session.get(GoldenItem, item_id)
        assert removed.question == "" and removed.expected is None and removed.removed_by == "U_SAM"
        assert golden.size(session) == 0


def test_a_deleted_message_takes_away_what_it_was_the_source_of(database: Database) -> None:
    add(database, asked("100.0", bot_answer="first"))
    add(database, asked("200.0", question="How do I rotate my API key", bot_answer="second", expected="Newer."))
    with database.session() as session:
        assert golden.forget_sources_quoting(session, "C1", "100.0") == 1  # the first question deleted
    [item] = items(database)
    assert item.times == 1 and item.bot_answer == "second" and item.expected == "Newer."
    with database.session() as session:
        assert golden.forget_sources_quoting(session, "C2", "200.02") == 0  # another channel's message of that ts
        assert golden.forget_sources_quoting(session, "C1", "200.02") == 1  # the teammate's reply deleted
        assert session.query(GoldenSource).count() == 0
    assert items(database) == []


def test_private_items_are_only_for_their_channels_members(database: Database) -> None:
    add(database, asked("100.0"))
    add(database, asked("200.0", question="Where is the VPN guide?", channel="G1", private=True))
    assert len(items(database, None)) == 2
    assert [i.channel_id for i in items(database, set())] == ["C1"]
    assert len(items(database, {"G1"})) == 2


def test_imports_merge_into_the_set(database: Database) -> None:
    add(database, asked("100.0"))
    rows = [
        {"question": "how do I rotate my api key?", "expected": "Imported.", "external_id": "x1"},
        {"question": "What plans have SSO?", "expected": "Business.", "external_id": "x2", "context": None},
        {"question": "  ", "expected": "nothing"},
    ]
    with database.session() as session:
        assert golden_import.import_items(session, rows) == (1, 1, 0)
    found = {i.question: i for i in items(database)}
    assert found["How do I rotate my API key?"].expected == "Imported."
    assert found["What plans have SSO?"].external_id == "x2" and found["What plans have SSO?"].times == 1


def test_an_item_gets_its_questions_topic_once_the_topics_run_named_it(database: Database) -> None:
    from store.models import Pair
    from store.topic_models import PairTopic, TopicRecord

    with database.session() as session:
        pair = Pair(channel_id="C1", answer_ts="100.01", question_ts="100.0", question_text="How do I rotate my key?",
                    answer_text="Press Rotate.", status="judged")  # fmt: skip
        session.add(pair)
        session.flush()
        pair_id = pair.id
        assert golden.pair_fields(session, pair_id)["topic"] is None
    add(database, asked("100.0", pair_id=pair_id, question="How do I rotate my key?"))
    with database.session() as session:
        session.add(TopicRecord(key="t-keys", name="API keys", named_by="llm", name_sources=[], anchors=[]))
        session.add(PairTopic(pair_id=pair_id, topic_key="t-keys"))
    with database.session() as session:
        assert golden.pair_fields(session, pair_id)["topic"] == "API keys"
        assert golden.fill_topics(session) == 1
        assert golden.fill_topics(session) == 0
    [item] = items(database)
    assert item.topic == "API keys"


def a_set_of_two(database: Database) -> datetime:
    """Two items added just now; returns a week ago."""
    add(database, asked("100.0"))
    add(database, asked("200.0", question="Which plans have SSO?"))
    return datetime.now(UTC) - timedelta(days=7)


def test_the_digests_figures_read_the_sets_growth(database: Database) -> None:
    from common.reports.golden import golden_figures

    week_ago = a_set_of_two(database)
    with database.session() as session:
        figures = golden_figures(session, week_ago)
        assert (figures.size, figures.grown, figures.last_run) == (2, 2, None)
        assert golden_figures(session, datetime.now(UTC) + timedelta(seconds=1)).grown == 0


def test_the_digests_figures_read_the_last_finished_run(database: Database) -> None:
    from common.reports.golden import golden_figures
    from store import regress_runs

    week_ago = a_set_of_two(database)
    with database.session() as session:
        run_id = regress_runs.start(session, "sha", "v2.jsonl", 2)
        regress_runs.start(session, "other", "v3.jsonl", 2)  # unfinished: not reported
        regress_runs.finish_run(session, run_id, passed=1, pass_rate=0.5, report={"items": []})
    with database.session() as session:
        when, rate, items_judged = golden_figures(session, week_ago).last_run
    assert rate == 0.5 and items_judged == 2 and when.tzinfo is not None
