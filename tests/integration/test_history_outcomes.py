"""History teaches like live traffic: the same threads, once through the live path (signed events to the bot, the
outcome tasks run in process, the window closed by the sweep's step), then through `relmon import` of an export
holding them and `relmon backfill` of Slack's history holding them, give the same outcome signals, the same teammate
reference, the same golden items and the same resolution. The live path's fixtures: tests/outcome_helpers.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from relmon.backfill.command import run_backfill, run_import
from store.db import Database
from store.golden_models import GoldenItem
from store.models import OutcomeWindow, Pair
from store.outcomes import signal_names
from tests import slack_requests as sr
from tests.backfill_helpers import args, export_zip, load_fake
from tests.bot_harness import ServedBot
from tests.fakes.openai_server import FakeOpenAI
from tests.outcome_helpers import C, run, send, sent, slack
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url
from workers import outcome_watching
from workers.pairs.settling import settle

__all__ = ["sent", "slack"]


@dataclass(frozen=True)
class Held:
    """What relmon holds about one answer after its conversation."""

    signals: frozenset[str]
    reference: str | None
    resolved: bool | None
    golden: bool


def answered(bot: ServedBot, sent: list, question: str, asker: str) -> tuple[dict, dict]:
    """A question (each scenario its own asker: an asker's new question is no news for another's answer) and the
    bot's answer in its thread, settled; the window opens."""
    q = sr.human_message(C, sr.next_ts(), question, user=asker)
    answer = sr.bot_message(C, sr.next_ts(), "Press Rotate in Settings.", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    [pair] = [p for p in bot.pairs() if p.answer_ts == answer["ts"]]
    settle(bot.runtime, pair.id, pair.version)
    run(bot, sent)
    return q, answer


def reask_then_teammate(bot: ServedBot, sent: list) -> list[dict]:
    q, answer = answered(bot, sent, "How do I rotate my API key?", "U_ASKER")
    later = [
        sr.human_message(C, sr.next_ts(), "Where is Settings?", thread_ts=q["ts"]),
        sr.human_message(C, sr.next_ts(), "Top right, under your avatar.", user="U_AGENT", thread_ts=q["ts"]),
    ]
    return [q, answer, *later]


def thanks_and_thumbs_up(bot: ServedBot, sent: list) -> list[dict]:
    q, answer = answered(bot, sent, "How do I export my invoices?", "U_ASK2")
    thanks = sr.human_message(C, sr.next_ts(), "thanks, that worked!", user="U_ASK2", thread_ts=q["ts"])
    send(bot, sr.reaction(answer, "+1", user="U_ASK2"))
    answer = {**answer, "reactions": [{"name": "+1", "users": ["U_ASK2"], "count": 1}]}  # as history shows it
    return [q, answer, thanks]


def escalation_then_teammate(bot: ServedBot, sent: list) -> list[dict]:
    asker = "U_ASK3"
    q, answer = answered(bot, sent, "Why was my card declined?", asker)
    later = [
        sr.human_message(C, sr.next_ts(), "that did not help, can I talk to a human?", user=asker, thread_ts=q["ts"]),
        sr.human_message(C, sr.next_ts(), "Your bank blocked it; call them.", user="U_AGENT", thread_ts=q["ts"]),
    ]
    return [q, answer, *later]


def silence(bot: ServedBot, sent: list) -> list[dict]:
    q, answer = answered(bot, sent, "Can I change my username?", "U_ASK4")
    return [q, answer]


def a_thumbs_down(bot: ServedBot, sent: list) -> list[dict]:
    q, answer = answered(bot, sent, "How do I add a teammate to my plan?", "U_ASK5")
    send(bot, sr.reaction(answer, "-1", user="U_ASK5"))
    return [q, {**answer, "reactions": [{"name": "-1", "users": ["U_ASK5"], "count": 1}]}]


def a_top_level_reask(bot: ServedBot, sent: list) -> list[dict]:
    """The asker asks again at top level, not in the answer's thread: news for their latest answer."""
    q, answer = answered(bot, sent, "How do I enable two-factor login?", "U_ASK6")
    again = sr.human_message(C, sr.next_ts(), "How do I enable two-factor login? It still fails", user="U_ASK6")
    return [q, answer, again]


def a_top_level_answer_then_a_new_question(bot: ServedBot, sent: list) -> list[dict]:
    """A top-level question and answer, then the asker asks about something else at top level."""
    q = sr.human_message(C, sr.next_ts(), "Which regions host my data?", user="U_ASK7")
    answer = sr.bot_message(C, sr.next_ts(), "Data is hosted in the EU and the US.")
    send(bot, q)
    send(bot, answer)
    [pair] = [p for p in bot.pairs() if p.answer_ts == answer["ts"]]
    settle(bot.runtime, pair.id, pair.version)
    run(bot, sent)
    other = sr.human_message(C, sr.next_ts(), "Separately, can invoices show a VAT number?", user="U_ASK7")
    return [q, answer, other]


SCENARIOS: dict[str, Callable[[ServedBot, list], list[dict]]] = {
    "reask_then_teammate": reask_then_teammate,
    "thanks_and_thumbs_up": thanks_and_thumbs_up,
    "escalation_then_teammate": escalation_then_teammate,
    "silence": silence,
    "a_thumbs_down": a_thumbs_down,
    "a_top_level_reask": a_top_level_reask,
    "a_top_level_answer_then_a_new_question": a_top_level_answer_then_a_new_question,
}


def held(database_url: str, answer_ts: str) -> Held:
    db = Database(database_url)
    try:
        with db.session() as session:
            pair = session.scalars(select(Pair).where(Pair.channel_id == C, Pair.answer_ts == answer_ts)).one()
            window = session.scalars(select(OutcomeWindow).where(OutcomeWindow.pair_id == pair.id)).one()
            names = frozenset(signal_names(session, pair.id))
            questions = set(session.scalars(select(GoldenItem.question)))
            resolved = None if window.closed_at is None else "resolved" in names
            return Held(names, pair.reference_text, resolved, pair.question_text in questions)
    finally:
        db.dispose()


@pytest.fixture
def lived(make_bot, sent) -> tuple[ServedBot, dict[str, list[dict]]]:
    """Every scenario lived through the bot and the workers, each window then closed as the sweep closes it."""
    bot = make_bot()
    threads: dict[str, list[dict]] = {}
    for name, scenario in SCENARIOS.items():
        threads[name] = scenario(bot, sent)
        for message in threads[name][2:]:
            send(bot, message)
        run(bot, sent)
    later = datetime.now(UTC) + timedelta(hours=1)
    for pair in bot.pairs():
        outcome_watching.close_window_in(bot.runtime, pair.id, now=later)
    return bot, threads


@pytest.fixture
def fresh_db(db_url: str, tmp_path: Path) -> Iterator[Callable[[str], str]]:
    """`fresh_db(name)`: an empty database of the live one's kind (SQLite or PostgreSQL) for a history run."""
    made: list[str] = []
    admin = postgres_admin_url() if db_url.startswith("postgresql") else None

    def make(name: str) -> str:
        if admin is None:
            return f"sqlite:///{tmp_path / f'{name}.sqlite3'}"
        url, database = create_postgres_database(admin)
        made.append(database)
        return url

    yield make
    for database in made:
        drop_postgres_database(str(admin), database)


def imported(bot: ServedBot, threads: dict[str, list[dict]], url: str, tmp_path: Path, capsys) -> tuple[int, str]:
    """The same threads as an export, imported into the database at `url`; (the exit code, stderr)."""
    path = tmp_path / "export.zip"
    messages = [{k: v for k, v in m.items() if k != "channel"} for thread in threads.values() for m in thread]
    path.write_bytes(export_zip({C: ("support", messages)}))
    with FakeOpenAI() as llm:
        settings = bot.runtime.settings.model_copy(update={"database_url": url, "openai_base_url": llm.base_url})
        capsys.readouterr()
        code = run_import(args(export=str(path)), settings, now=datetime.now(UTC) + timedelta(hours=1))
    return code, capsys.readouterr().err


def backfilled(bot: ServedBot, slack, threads: dict[str, list[dict]], url: str, capsys) -> tuple[int, str]:
    """The same threads read back from Slack's history (`relmon backfill`) into the database at `url`."""
    messages = [m for thread in threads.values() for m in thread]
    replies = {m["thread_ts"] for m in messages if m.get("thread_ts") not in (None, m["ts"])}
    for message in messages:  # a thread's root shows it has replies, as Slack's history does
        has = message["ts"] in replies
        load_fake(slack, C, [{**message, "thread_ts": message["ts"], "reply_count": 1} if has else message])
    since = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    with FakeOpenAI() as llm:
        settings = bot.runtime.settings.model_copy(update={"database_url": url, "openai_base_url": llm.base_url})
        capsys.readouterr()
        code = run_backfill(args(since=since, channel=[C]), settings, now=datetime.now(UTC) + timedelta(hours=1))
    return code, capsys.readouterr().err


def test_history_and_live_traffic_hold_the_same_outcomes(lived, slack, fresh_db, tmp_path, capsys) -> None:
    bot, threads = lived
    url, from_slack = fresh_db("imported"), fresh_db("backfilled")
    code, err = imported(bot, threads, url, tmp_path, capsys)
    assert code == 0, err
    code, err = backfilled(bot, slack, threads, from_slack, capsys)
    assert code == 0, err
    for name, thread in threads.items():
        answer_ts = thread[1]["ts"]
        live = held(bot.settings.resolved_database_url, answer_ts)
        assert held(url, answer_ts) == live, f"import: {name}"
        assert held(from_slack, answer_ts) == live, f"backfill: {name}"
    # What the scenarios are: not an empty agreement.
    assert held(url, threads["reask_then_teammate"][1]["ts"]) == Held(
        frozenset({"reask", "human_takeover"}), "Top right, under your avatar.", False, True
    )
    assert held(url, threads["thanks_and_thumbs_up"][1]["ts"]).signals == {"thanked", "positive_reaction", "resolved"}
    assert held(url, threads["silence"][1]["ts"]) == Held(frozenset({"resolved"}), None, True, False)
    assert held(url, threads["a_thumbs_down"][1]["ts"]).resolved is False
    assert held(url, threads["a_top_level_reask"][1]["ts"]).signals == {"reask"}
    assert held(url, threads["a_top_level_answer_then_a_new_question"][1]["ts"]).signals == {"new_question", "resolved"}
    assert "2 answered by a teammate, 2 question(s) added to the golden set" in err
