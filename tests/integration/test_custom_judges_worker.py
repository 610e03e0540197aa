"""A team's own judge on the worker's path: a captured answer judged by `judge_pair` (run in this process on the
worker's runtime) with RELMON_JUDGES and the channel rules naming the judge, against real Redis, SQLite and
PostgreSQL, the fake LLM over HTTP and FakeSlack; its low verdict alerted with the judge's name and reason, a second
opinion asked of the same judge; an edited prompt judged with from the next answer on, under a new prompt version,
while the verdicts made before keep theirs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from store.models import Judgment, PairStatus
from tests import alert_helpers, pipeline_helpers
from tests.alert_helpers import ALERTS, write_rules
from tests.pipeline_helpers import add_pairs
from workers.alerts import delivery

pytestmark = pytest.mark.slow

one_hour = alert_helpers.one_hour  # autouse: the alert caps count per UTC hour
fake_openai = pipeline_helpers.fake_openai
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
QUESTION = "I was charged twice this month, can I get my money back?"
PROMISE = "Sorry about that! I'll refund the second charge right away."


def judgments(runtime, pair_id: int) -> dict[str, Judgment]:
    with runtime.db.session() as session:
        rows = session.scalars(select(Judgment).where(Judgment.pair_id == pair_id)).all()
        session.expunge_all()
    return {row.judge: row for row in rows}


def test_a_captured_answer_is_judged_by_a_team_judge_and_alerted_with_its_name(make_runtime, fake, fake_openai) -> None:
    from workers.tasks.judging import judge_pair

    settings = {
        "openai_base_url": fake_openai.base_url,
        "openai_api_key": "sk-test",
        "llm_max_retries": 0,
        "judges_dir": EXAMPLES,
        "default_judges": ["relevancy", "refund_policy", "no_such_judge"],  # a name that is no judge: left out
        "degradation_window_minutes": 0,
        "confirm": "second_opinion",
    }
    with make_runtime(**settings) as runtime:
        pair_id = add_pairs(runtime.db, 1, question=QUESTION, answer=PROMISE)[0]
        assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
        found = judgments(runtime, pair_id)
        assert set(found) == {"relevancy", "refund_policy"}
        refund = found["refund_policy"]
        assert (refund.status, refund.score, refund.max_score) == ("ok", 0, 1)
        assert refund.reasoning == "The answer promises a refund."
        assert refund.prompt_version == runtime.judges.get("refund_policy").prompt_version
        assert found["relevancy"].score == 4
        assert delivery.consider(runtime, found["relevancy"].id).low == "above_threshold"
        assert delivery.consider(runtime, refund.id, last_attempt=True).low == "posted"
        (post,) = fake.posted(ALERTS)
        assert post["text"].startswith("Refund policy failed in ")
        shown = json.dumps(post)
        assert "Refund policy: failed" in shown and "The answer promises a refund." in shown and PROMISE in shown
    second = [body for body in fake_openai.requests if body.get("temperature")]
    assert len(second) == 1 and "never promise, grant or confirm a refund" in second[0]["messages"][-1]["content"]


def test_a_channel_rule_names_the_judge_and_an_edit_makes_a_new_prompt_version(
    make_runtime, fake, fake_openai, tmp_path: Path
) -> None:
    from workers.tasks.judging import judge_pair

    judges_dir = tmp_path / "judges.d"
    shutil.copytree(EXAMPLES, judges_dir)
    rules = write_rules(tmp_path, {"channels": {"C_SUPPORT": {"judges": ["status_page"]}}})
    settings = {
        "openai_base_url": fake_openai.base_url,
        "openai_api_key": "sk-test",
        "llm_max_retries": 0,
        "judges_dir": judges_dir,
        "channel_rules_file": rules,
        "degradation_window_minutes": 0,
    }
    question, answer = "The dashboard is down for everyone, what is going on?", "Try clearing your browser cache."
    with make_runtime(**settings) as runtime:
        first = add_pairs(runtime.db, 1, question=question, answer=answer)[0]
        assert judge_pair.apply(args=[first]).get() == PairStatus.JUDGED
        before = judgments(runtime, first)
        assert list(before) == ["status_page"] and before["status_page"].score == 0
        old_version = before["status_page"].prompt_version

        path = judges_dir / "status_page.toml"
        path.write_text(path.read_text().replace("https://status.example.com.", "https://status.example.com (always)."))
        second = add_pairs(runtime.db, 1, question=question, answer=answer, start=1)[0]
        assert judge_pair.apply(args=[second]).get() == PairStatus.JUDGED
        after = judgments(runtime, second)["status_page"]
        assert after.prompt_version != old_version
        assert after.prompt_version == runtime.judges.get("status_page").prompt_version
        assert not after.cached  # a new prompt is a new cache key: asked afresh
        assert judgments(runtime, first)["status_page"].prompt_version == old_version  # kept as made
