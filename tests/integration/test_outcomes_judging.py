"""A teammate's reply as the reference: the correctness judge judges the bot's answer against it, once."""

from __future__ import annotations

import json

from sqlalchemy import select

from store import outcomes as store
from store.db import Database
from store.models import Judgment, Pair, PairStatus
from tests.builders import installed_runtime
from tests.fakes.openai_server import FakeOpenAI
from tests.pipeline_helpers import add_pairs


def test_the_correctness_judge_judges_against_the_teammates_reply(settings_for, database: Database) -> None:
    from workers.tasks.judging import judge_pair

    with (
        FakeOpenAI(latency_ms=5) as fake,
        installed_runtime(settings_for(openai_base_url=fake.base_url, openai_api_key="sk-test")) as runtime,
    ):
        [pair_id] = add_pairs(database, 1, question="How do I rotate a key?", answer="Press Rotate.")
        assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
        with database.session() as session:
            assert store.set_teammate_reference(
                session, pair_id, "Settings > Keys > Rotate.", ["relevancy", "correctness"]
            )
        with database.session() as session:
            assert not store.set_teammate_reference(session, pair_id, "another reply", ["relevancy", "correctness"])
        assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
        assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED  # a duplicate: nothing more
        assert runtime is not None
    assert "Settings > Keys > Rotate." in json.dumps(fake.requests[-1])
    with database.session() as session:
        judges = session.execute(select(Judgment.judge).where(Judgment.pair_id == pair_id)).scalars().all()
        assert sorted(judges) == ["correctness", "relevancy"]
        assert session.get(Pair, pair_id).reference_text == "Settings > Keys > Rotate."
