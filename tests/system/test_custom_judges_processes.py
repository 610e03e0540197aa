"""A team's own judge through a real `relmon worker` process: a captured answer (a pending pair, enqueued by name as
the settle task would) judged by the judges RELMON_JUDGES names, the team's among them, against the fake LLM over
HTTP; its failing verdict alerted in Slack with the judge's name and reason; a broken judge file said in the
worker's log at start-up and left out, never a reason not to start. In-process: tests/integration/
test_custom_judges_worker.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from common.celery_app import QUEUE_JUDGE
from store.db import Database
from store.models import Judgment
from tests import pipeline_helpers
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.pipeline_helpers import add_pairs
from tests.processes import relmon_env, start_worker, wait_for

pytestmark = pytest.mark.slow

fake_openai = pipeline_helpers.fake_openai
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
ALERTS = "C_ALERTS"


@pytest.fixture
def fake_slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_channel("C_SUPPORT", "support", members=["U_RELMON"])
        fake.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        yield fake


def test_the_worker_judges_with_a_team_judge_and_alerts_with_its_name(
    database: Database, redis_url: str, db_url: str, fake_openai: FakeOpenAI, fake_slack: FakeSlack, tmp_path, producer
) -> None:
    judges_dir = tmp_path / "judges.d"
    shutil.copytree(EXAMPLES, judges_dir)
    (judges_dir / "tone.toml").write_text('name = "tone"\nscale = "1..5"\nfails_at = 2\nprompt = "{answer} {tone}"\n')
    env = relmon_env(
        redis_url=redis_url,
        database_url=db_url,
        slack_api_url=fake_slack.api_url,
        openai_base_url=fake_openai.base_url,
        data_dir=tmp_path / "data",
        RELMON_ALERT_CHANNEL=ALERTS,
        RELMON_JUDGES_DIR=judges_dir,
        RELMON_JUDGES="relevancy,refund_policy,tone",
        RELMON_DEGRADATION_WINDOW_MINUTES=0,
        RELMON_CONFIRM="off",
        RELMON_WORKER_CONCURRENCY=2,
    )
    answer = "Sorry about that! I'll refund the second charge right away."
    pair_id = add_pairs(database, 1, question="I was charged twice, can I get my money back?", answer=answer)[0]
    worker = start_worker(env, log_dir=tmp_path / "logs")
    try:
        logged = [json.loads(line) for line in worker.log().splitlines() if '"relmon.judges"' in line]
        left_out = next(line for line in logged if line["event"].startswith("custom judge left out"))
        assert left_out["event"] == "custom judge left out: tone.toml:4"
        assert left_out["problem"].startswith("unknown placeholder {tone}")
        producer.send_task("workers.tasks.judging.judge_pair", args=[pair_id], queue=QUEUE_JUDGE)
        [post] = wait_for(lambda: fake_slack.posted(ALERTS), timeout=60, what="the refund_policy alert")
        assert post["text"] == "Refund policy failed in <#C_SUPPORT>"
        shown = json.dumps(post)
        assert "The answer promises a refund." in shown and "Refund policy: failed" in shown
    finally:
        worker.stop()
    with database.session() as session:
        rows = {
            j.judge: (j.status, j.score) for j in session.scalars(select(Judgment).where(Judgment.pair_id == pair_id))
        }
    assert rows == {"relevancy": ("ok", 4), "refund_policy": ("ok", 0)}  # tone: a broken file, left out
