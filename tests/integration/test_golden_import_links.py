"""`relmon golden import` of questions relmon already holds, through the `relmon` command on a real database
(SQLite and PostgreSQL) with stored pairs and the fake Slack: the imported item is linked to the pairs that asked
it (its sources, bot answer, channel, permalink), a private channel's pairs only to that channel's own item, and
what a deleted message linked leaves the set with it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from store import golden
from store.db import Database
from store.golden_models import GoldenItem, GoldenSource
from store.models import Pair
from tests import relmon_cli
from tests.fakes.slack_server import FakeSlack
from tests.services import free_port

cli = relmon_cli.cli
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def store_pair(database: Database, channel: str, ts: str, question: str, answer: str, *, private: bool = False,
               hours: int = 0) -> int:  # fmt: skip
    with database.session() as session:
        pair = Pair(channel_id=channel, channel_is_private=private, question_ts=ts, answer_ts=ts + "1",
                    question_text=question, answer_text=answer, status="judged",
                    created_at=T0 + timedelta(hours=hours))  # fmt: skip
        session.add(pair)
        session.flush()
        return pair.id


@pytest.fixture
def asked(database: Database) -> dict[str, int]:
    """The question asked three times in public channels (in other words' case and punctuation), once in a private
    one, and another question."""
    return {
        "old": store_pair(database, "C1", "100.0", "how do I reset my password", "Click Forgot.", hours=0),
        "new": store_pair(database, "C2", "300.0", "How do I RESET my password??", "Use Settings.", hours=2),
        "mid": store_pair(database, "C1", "200.0", "How do I reset my password?", "Click Forgot.", hours=1),
        "private": store_pair(database, "G1", "250.0", "how do i reset my password", "Ask IT.", private=True),
        "other": store_pair(database, "C1", "400.0", "Which plans have SSO?", "Enterprise."),
    }


def import_file(cli, tmp_path: Path, db_url: str, records: list[dict], **env: str) -> relmon_cli.Outcome:
    path = tmp_path / "team-set.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    outcome = cli("golden", "import", str(path), base_url=None, DATABASE_URL=db_url, **env)
    assert outcome.returncode == 0, outcome.stderr
    assert "Traceback" not in outcome.stderr
    return outcome


def items_and_sources(database: Database) -> tuple[dict[str, GoldenItem], dict[int, list[GoldenSource]]]:
    with database.session() as session:
        found = {f"{item.channel_is_private}:{item.question}": item for item in golden.active_items(session)}
        sources: dict[int, list[GoldenSource]] = {}
        for source in session.execute(select(GoldenSource).order_by(GoldenSource.id)).scalars():
            sources.setdefault(source.item_id, []).append(source)
        session.expunge_all()
    return found, sources


TEAM_SET = [{"input": {"question": "How do I reset my password"}, "expected": "Settings > Security > Reset."}]


def test_an_imported_question_relmon_holds_is_linked_to_its_pairs(cli, database, db_url, tmp_path, asked) -> None:
    with FakeSlack() as slack:
        slack_env = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_API_URL": slack.api_url}
        outcome = import_file(cli, tmp_path, db_url, TEAM_SET, **slack_env)
        assert "1 new item(s), 0 updated, 4 asked question(s) linked, from 1 record(s)" in outcome.stderr
        assert len(slack.calls_to("chat.getPermalink")) == 4
        found, sources = items_and_sources(database)
        # Imported again: nothing linked twice, and the stored permalinks are not asked of Slack again.
        again = import_file(cli, tmp_path, db_url, TEAM_SET, **slack_env)
        assert "0 new item(s), 1 updated, from 1 record(s)" in again.stderr
        assert len(slack.calls_to("chat.getPermalink")) == 4
    item = found[f"False:{TEAM_SET[0]['input']['question']}"]
    assert (item.channel_id, item.channel_is_private, item.origin) == ("C2", False, "import")  # the newest asking
    assert item.bot_answer == "Use Settings." and item.expected == "Settings > Security > Reset."
    assert item.permalink == "https://example.slack.com/archives/C2/p3000"
    assert item.times == 3
    linked = [(s.channel_id, s.question_ts, s.answer_ts, s.pair_id, s.channel_is_private) for s in sources[item.id]]
    assert linked == [("C1", "100.0", "100.01", asked["old"], False), ("C1", "200.0", "200.01", asked["mid"], False),
                      ("C2", "300.0", "300.01", asked["new"], False)]  # fmt: skip
    # The private channel's asking is its channel's own item, not the imported one that every export holds.
    private = found["True:how do i reset my password"]
    assert (private.channel_id, private.bot_answer, private.expected) == ("G1", "Ask IT.", item.expected)
    assert [(s.pair_id, s.permalink) for s in sources[private.id]] == [
        (asked["private"], "https://example.slack.com/archives/G1/p2500")
    ]
    assert {i.question for i in found.values()} == {TEAM_SET[0]["input"]["question"], "how do i reset my password"}


def test_an_export_for_everyone_holds_the_link_but_not_the_private_channels(cli, database, db_url, tmp_path,
                                                                           asked) -> None:  # fmt: skip
    import_file(cli, tmp_path, db_url, TEAM_SET)  # no Slack token: linked without permalinks
    out = tmp_path / "out.jsonl"
    exported = cli("golden", "export", "--format", "jsonl", "-o", str(out), base_url=None, DATABASE_URL=db_url)
    assert exported.returncode == 0, exported.stderr
    [row] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert (row["channel"], row["private"], row["bot_answer"], row["times"]) == ("C2", False, "Use Settings.", 3)
    assert row["permalink"] is None and "Ask IT." not in out.read_text(encoding="utf-8")


def test_a_stored_permalink_is_used_and_an_unreachable_slack_is_asked_once(cli, database, db_url, tmp_path,
                                                                          asked) -> None:  # fmt: skip
    from store.golden_rules import ORIGIN_TAKEOVER, occurrence_of_pair

    with database.session() as session:  # the newest asking was collected before, with its link
        pair = golden.pair_fields(session, asked["new"])
        golden.add_occurrence(session, occurrence_of_pair(pair, origin=ORIGIN_TAKEOVER, permalink="https://stored/p3"))
    down = f"http://127.0.0.1:{free_port()}/api/"  # nothing listens there
    outcome = import_file(cli, tmp_path, db_url, TEAM_SET, SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=down)
    assert "no permalinks: Slack did not answer" in outcome.stderr
    found, sources = items_and_sources(database)
    item = found["False:How do I RESET my password??"]  # collected before: the expected answer, two more askings
    assert item.permalink == "https://stored/p3" and item.expected == "Settings > Security > Reset."
    assert [s.permalink for s in sources[item.id]] == ["https://stored/p3", None, None]
    assert item.times == 3


def test_a_deleted_message_takes_away_what_it_linked(cli, database, db_url, tmp_path, asked) -> None:
    with FakeSlack() as slack:
        import_file(cli, tmp_path, db_url, TEAM_SET, SLACK_BOT_TOKEN="xoxb-test", SLACK_API_URL=slack.api_url)
    with database.session() as session:
        golden.forget_sources_quoting(session, "C2", "300.0")  # the newest asking's question was deleted
    found, _ = items_and_sources(database)
    item = found[f"False:{TEAM_SET[0]['input']['question']}"]
    assert (item.channel_id, item.bot_answer, item.times) == ("C1", "Click Forgot.", 2)
    assert item.permalink == "https://example.slack.com/archives/C1/p2000"
    with database.session() as session:
        golden.forget_sources_quoting(session, "C1", "100.0")
        golden.forget_sources_quoting(session, "C1", "200.01")  # an answer deleted
        golden.forget_sources_quoting(session, "G1", "250.0")
    found, sources = items_and_sources(database)
    [item] = found.values()  # the file's item stays, with the file's texts only; the private channel's item went
    assert (item.question, item.expected, item.times) == (TEAM_SET[0]["input"]["question"], TEAM_SET[0]["expected"], 1)
    assert (item.channel_id, item.bot_answer, item.permalink) == (None, None, None)
    assert sources == {}


def test_a_removed_item_is_not_linked_again(cli, database, db_url, tmp_path, asked) -> None:
    import_file(cli, tmp_path, db_url, TEAM_SET)
    found, _ = items_and_sources(database)
    with database.session() as session:
        assert golden.remove_item(session, found[f"False:{TEAM_SET[0]['input']['question']}"].id, "cli")
    outcome = import_file(cli, tmp_path, db_url, TEAM_SET)
    assert "0 new item(s), 0 updated, from 1 record(s)" in outcome.stderr
    found, sources = items_and_sources(database)
    assert list(found) == ["True:how do i reset my password"] and len(sources) == 1
