"""End to end with real processes (`relmon bot` and `relmon worker`): a natively streamed answer whose
completion is handled before its empty opener, and the bot's file upload (no bot_id), each become a judged
pair on the text the customer finally read."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select

from store.db import Database
from store.models import Judgment, Pair, PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_bot, start_worker, wait_for

pytestmark = pytest.mark.slow

SECRET = "test-signing-secret"  # relmon_env's SLACK_SIGNING_SECRET
C = "C_SUPPORT"


def test_answers_of_2026_shapes_are_judged_on_what_was_read(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with FakeSlack() as slack, FakeOpenAI() as openai:
        slack.add_user("U_ASKER", "ana", "Ana Diaz")
        slack.add_bot("B_SUPPORT", "Support Bot", app_id="A_SUPPORT", user_id="U_SUPPORT")
        slack.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        env = relmon_env(
            redis_url=redis_url,
            database_url=db_url,
            slack_api_url=slack.api_url,
            openai_base_url=openai.base_url,
            data_dir=tmp_path / "data",
            RELMON_SETTLE_SECONDS="1",
        )
        bot, base_url = start_bot(env, log_dir=tmp_path)
        worker = start_worker(env, log_dir=tmp_path)
        with bot, worker:
            q1 = sr.human_message(C, sr.next_ts(), "What changed in v2?")
            opener = ss.stream_opener(C, sr.next_ts(), q1["ts"])
            completion = ss.stream_completion(opener, "v2 adds single sign-on.")
            q2 = sr.human_message(C, sr.next_ts(), "Where is the setup guide?")
            upload = ss.bot_file_upload(C, sr.next_ts(), q2["ts"])
            database = Database(db_url)

            def stored_answer() -> str | None:
                with database.session() as session:
                    return session.execute(select(Pair.answer_text).where(Pair.answer_ts == opener["ts"])).scalar()

            try:
                for event in (q1, completion, opener, q2, upload):  # the completion first, as Slack may order them
                    response = sr.post(base_url + "/slack/events", sr.envelope(event), SECRET)
                    assert response.status_code == 200, response.text
                    if event is completion:  # handled before the opener is sent: the worker's threads race otherwise
                        wait_for(stored_answer, timeout=30, what="the completion's capture")

                def judged_pairs() -> list[Pair] | None:
                    with database.session() as session:
                        pairs = list(session.execute(select(Pair).where(Pair.status == PairStatus.JUDGED)).scalars())
                    return pairs if len(pairs) == 2 else None

                pairs = {p.answer_ts: p for p in wait_for(judged_pairs, timeout=60, what="two judged pairs")}
                stream, file = pairs[opener["ts"]], pairs[upload["ts"]]
                assert (stream.question_text, stream.answer_text, stream.version) == (
                    "What changed in v2?",
                    "v2 adds single sign-on.",
                    1,  # the opener, handled after its completion, changed nothing
                )
                assert (file.question_text, file.answer_text) == (
                    "Where is the setup guide?",
                    "Here is the setup guide.\n[file: Setup guide]",
                )
                with database.session() as session:
                    assert session.query(Judgment).count() == 2
            finally:
                database.dispose()
