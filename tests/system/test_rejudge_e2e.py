"""End to end with real processes (`relmon bot` and `relmon worker`), the fake Slack and the fake LLM: an answer
edited after it was judged is judged again on its final text (a placeholder turned into an off-topic answer
alerts; turned into a good one, the alert is updated in place), and a follow-up is judged with the earlier
turns of its thread."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from store.db import Database
from store.models import Alert, Judgment, Pair, PairStatus
from tests import slack_requests as sr
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_bot, start_worker, wait_for

pytestmark = pytest.mark.slow

SECRET = "test-signing-secret"  # relmon_env's SLACK_SIGNING_SECRET
C = "C_SUPPORT"


def _env(slack: FakeSlack, openai: FakeOpenAI, redis_url: str, db_url: str, tmp_path: Path) -> dict:
    slack.add_user("U_ASKER", "ana", "Ana Diaz")
    slack.add_bot("B_SUPPORT", "Support Bot", app_id="A_SUPPORT", user_id="U_SUPPORT")
    slack.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
    slack.add_channel("C_ALERTS", "alerts", members=["U_RELMON"])
    return relmon_env(
        redis_url=redis_url,
        database_url=db_url,
        slack_api_url=slack.api_url,
        openai_base_url=openai.base_url,
        data_dir=tmp_path / "data",
        RELMON_SETTLE_SECONDS="1",
    )


def _send(base_url: str, *events: dict) -> None:
    for event in events:
        response = sr.post(base_url + "/slack/events", sr.envelope(event), SECRET)
        assert response.status_code == 200, response.text


def _judgments(database: Database, count: int):
    def ready() -> list[Judgment] | None:
        with database.session() as session:
            pair = session.execute(select(Pair)).scalar_one_or_none()
            if pair is None or pair.status != PairStatus.JUDGED:
                return None
            rows = list(session.execute(select(Judgment).order_by(Judgment.pair_version)).scalars())
        return rows if len(rows) == count else None

    return wait_for(ready, timeout=60, what=f"{count} judgments of the judged pair")


def test_a_placeholder_edited_after_the_settle_time_is_judged_again(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    with FakeSlack() as slack, FakeOpenAI() as openai:
        env = _env(slack, openai, redis_url, db_url, tmp_path)
        bot, base_url = start_bot(env, log_dir=tmp_path)
        worker = start_worker(env, log_dir=tmp_path)
        with bot, worker:
            question = sr.human_message(C, sr.next_ts(), "How do I rotate my API key?")
            placeholder = sr.bot_message(C, sr.next_ts(), "Looking into it...", thread_ts=question["ts"])
            _send(base_url, question, placeholder)
            database = Database(db_url)
            try:
                [first] = _judgments(database, 1)
                assert first.score == 4  # the placeholder itself reads as fine: nothing to alert on
                assert slack.posted("C_ALERTS") == []

                # Long after the settle time, the bot edits the placeholder into its real (off-topic) answer.
                _send(base_url, sr.message_changed(placeholder, "Our offtopic office has a nice cafeteria."))
                old, new = _judgments(database, 2)
                assert (old.pair_version, new.pair_version) == (1, 2)
                assert new.score == 0
                [alert] = slack.wait_for("chat.postMessage", timeout=30)
                assert alert["channel"] == "C_ALERTS"
                assert "cafeteria" in str(alert["blocks"])  # the final text is what the alert shows

                # Edited again into a good answer: judged again, and the alert is updated in place.
                _send(base_url, sr.message_changed(placeholder, "Open Settings > API keys and press Rotate."))
                *_, latest = _judgments(database, 3)
                assert latest.score == 4
                [update] = slack.wait_for("chat.update", timeout=30)
                assert "The answer changed after this alert" in str(update["blocks"])
                assert "4 / 4" in str(update["blocks"])
                with database.session() as session:
                    [row] = session.execute(select(Alert).where(Alert.kind == "low_score")).scalars()
                    assert row.message_ts == update["ts"]
                assert len(slack.posted("C_ALERTS")) == 1  # exactly one alert, however often it was redrawn
            finally:
                database.dispose()


def test_a_follow_up_is_judged_with_the_earlier_turns(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with FakeSlack() as slack, FakeOpenAI() as openai:
        env = _env(slack, openai, redis_url, db_url, tmp_path)
        bot, base_url = start_bot(env, log_dir=tmp_path)
        worker = start_worker(env, log_dir=tmp_path)
        with bot, worker:
            root = sr.human_message(C, sr.next_ts(), "How do I export my data?")
            first = sr.bot_message(C, sr.next_ts(), "Use Settings > Export on the web.", thread_ts=root["ts"])
            follow_up = sr.human_message(C, sr.next_ts(), "And on Android?", thread_ts=root["ts"])
            second = sr.bot_message(C, sr.next_ts(), "Tap Menu > Export in the app.", thread_ts=root["ts"])
            _send(base_url, root, first, follow_up, second)
            database = Database(db_url)
            try:

                def two_judged() -> list[Pair] | None:
                    with database.session() as session:
                        rows = list(session.execute(select(Pair).where(Pair.status == PairStatus.JUDGED)).scalars())
                    return rows if len(rows) == 2 else None

                pairs = {p.answer_ts: p for p in wait_for(two_judged, timeout=60, what="two judged pairs")}
                assert pairs[first["ts"]].context_text is None  # the thread's first question has no earlier turns
                assert pairs[second["ts"]].context_text == (
                    "[customer] How do I export my data?\n[bot] Use Settings > Export on the web."
                )
                prompts = [request["messages"][-1]["content"] for request in openai.requests]
                expected = (
                    "Earlier in this conversation:\n[customer] How do I export my data?\n"
                    "[bot] Use Settings > Export on the web.\n\nQuestion: And on Android?"
                )
                assert sum(expected in prompt for prompt in prompts) == 1
                # The system message and the seed's instructions stay first, word for word.
                assert len({request["messages"][0]["content"] for request in openai.requests}) == 1
            finally:
                database.dispose()
