"""The canary against the fake LLM, FakeSlack, real Redis and SQLite/PostgreSQL: each run is stored with the
model the API answered with; a kappa drop or another model under the configured name posts "the judge moved"
once per run; the digest's report shows the canary."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from common.messages.trust import trust_lines
from common.reports.figures import load_report
from common.reports.period import period_for
from judges.labels import SUPPORT_CANARY
from store.models import CanaryRun
from tests.alert_helpers import ALERTS
from tests.fakes.openai_server import prompt_text
from workers import canary
from workers.tasks import canary as canary_task

LABELS = [json.loads(line) for line in SUPPORT_CANARY.read_text(encoding="utf-8").splitlines() if line.strip()]


def scoring(flip: bool):
    """Replies that score each canary answer as its human did (or the other way round when `flip`)."""

    def reply(body: dict) -> str | None:
        prompt = prompt_text(body)
        for item in LABELS:
            if item["answer"] in prompt:
                score = 4 - item["human_score"] if flip else item["human_score"]
                return json.dumps({"score": score, "reasoning": "graded as labelled"})
        return None

    return reply


@pytest.fixture
def runtime(settings_for, fake, llm, runtime_for):
    settings = settings_for(
        slack_api_url=fake.api_url,
        openai_base_url=llm.base_url,
        judge_model="fake-judge",
    )
    return runtime_for(settings)


def runs(runtime) -> list[CanaryRun]:
    with runtime.db.session() as session:
        found = list(session.execute(select(CanaryRun).order_by(CanaryRun.id)).scalars())
        for run in found:
            session.expunge(run)
        return found


def test_the_shipped_canary_has_forty_labelled_support_answers():
    assert len(LABELS) >= 40
    assert {item["human_score"] for item in LABELS} >= {0, 1, 2, 4}


def test_a_run_is_stored_with_the_model_that_answered(runtime, llm, fake):
    llm.set_reply(scoring(flip=False))
    llm.set_behavior(served_model="fake-judge-2026-01-01")
    run_id = canary.run(runtime)
    [run] = runs(runtime)
    assert run.id == run_id and run.examples == len(LABELS) and run.scored == len(LABELS)
    assert (run.model, run.configured_model) == ("fake-judge-2026-01-01", "fake-judge")
    assert run.kappa == pytest.approx(1.0) and run.exact_agreement == pytest.approx(1.0)
    assert run.prompt_version and run.moved is None
    assert canary.announce(runtime, run_id) == "steady" and fake.posted(ALERTS) == []
    assert len(llm.requests) == len(LABELS)


def test_a_kappa_drop_posts_the_judge_moved_once(runtime, llm, fake):
    llm.set_reply(scoring(flip=False))
    canary.run(runtime)
    llm.set_reply(scoring(flip=True))
    run_id = canary.run(runtime)
    latest = runs(runtime)[-1]
    assert latest.kappa < 0 and "kappa fell from 1.00" in latest.moved
    assert canary_task.run_canary(run_id=run_id) == "posted"
    assert canary_task.run_canary(run_id=run_id) == "posted"  # a retry finds its receipt
    [post] = fake.posted(ALERTS)
    assert "The judge moved" in post["text"]


def test_another_model_under_the_configured_name_is_a_move(runtime, llm, fake):
    llm.set_reply(scoring(flip=False))
    llm.set_behavior(served_model="fake-judge-v1")
    canary.run(runtime)
    llm.set_behavior(served_model="fake-judge-v2")
    run_id = canary.run(runtime)
    assert "now answered by `fake-judge-v2`" in runs(runtime)[-1].moved
    canary.announce(runtime, run_id)
    assert len(fake.posted(ALERTS)) == 1


def test_the_digest_shows_the_canary(runtime, llm):
    llm.set_reply(scoring(flip=False))
    canary.run(runtime)
    llm.set_reply(scoring(flip=True))
    canary.run(runtime)
    report = load_report(runtime, period_for(datetime.now(UTC) + timedelta(days=1), "UTC"))
    figures = report.trust.canary
    assert figures is not None and figures.kappa_change < -1.5 and figures.latest.moved


def test_a_degradation_alert_says_whether_the_judge_or_the_bot_moved(runtime, llm):
    from workers.alerts.views import canary_note

    now = datetime.now(UTC)
    with runtime.db.session() as session:
        assert canary_note(session, now) is None  # no canary run: nothing to say
    llm.set_reply(scoring(flip=False))
    canary.run(runtime)
    with runtime.db.session() as session:
        assert "the bot moved" in canary_note(session, datetime.now(UTC))
    llm.set_reply(scoring(flip=True))
    canary.run(runtime)
    with runtime.db.session() as session:
        assert "The judge moved this week" in canary_note(session, datetime.now(UTC))


# A team's judges with labels (judges.d) -------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
TONE = """name = "tone"
scale = "1..5"
fails_at = 2
labels = "tone.jsonl"
prompt = '''Is the answer polite? {answer}'''
"""


@pytest.fixture
def team_runtime(settings_for, fake, llm, runtime_for, tmp_path):
    """The three example judges with their labelled files, and `tone`, whose labelled file is not there."""
    judges = tmp_path / "judges.d"
    shutil.copytree(EXAMPLES, judges)
    (judges / "tone.toml").write_text(TONE)
    settings = settings_for(slack_api_url=fake.api_url, openai_base_url=llm.base_url, judge_model="fake-judge",
                            judges_dir=judges)  # fmt: skip
    return runtime_for(settings)


def test_a_team_judge_with_labels_is_re_judged_by_the_canary_and_reported_beside_the_seed(team_runtime, llm, caplog):
    assert canary_task.run_canary() == "steady"
    stored = runs(team_runtime)
    assert [run.judge for run in stored] == ["relevancy", "customer_language", "refund_policy", "status_page"]
    refund = stored[2]
    labelled = (EXAMPLES / "refund_policy.jsonl").read_text(encoding="utf-8").splitlines()
    assert refund.examples == refund.scored == len([line for line in labelled if line.strip()])
    assert refund.exact_agreement == pytest.approx(1.0)  # the fake judges the refund rule as honestly as people did
    assert refund.prompt_version and refund.model and refund.moved is None
    assert any("labels cannot be read" in record.getMessage() for record in caplog.records)  # tone: left out

    report = load_report(team_runtime, period_for(datetime.now(UTC) + timedelta(days=1), "UTC"))
    assert set(report.trust.team_canaries) == {"customer_language", "refund_policy", "status_page"}
    assert report.trust.canary is not None and report.trust.canary.latest.judge == "relevancy"
    lines = trust_lines(report.trust, [])
    assert lines[0].startswith("Canary (relevancy,")
    assert any(line.startswith("Canary (refund_policy, model `") and "exact agreement 100%" in line for line in lines)


def test_a_team_judge_s_canary_is_compared_with_its_own_last_run(team_runtime, llm, fake):
    canary_task.run_canary()

    def refunds_always_fail(body: dict) -> str | None:  # the team judge now fails every answer
        prompt = str(body["messages"][-1]["content"])  # the team's prompt: its instructions before the texts
        return json.dumps({"score": 0, "reasoning": "no"}) if "refund" in prompt.split("<<<BEGIN", 1)[0] else None

    llm.set_reply(refunds_always_fail)
    canary_task.run_canary()
    latest = {run.judge: run for run in runs(team_runtime)}
    assert latest["refund_policy"].moved and "kappa fell from 1.00" in latest["refund_policy"].moved
    assert latest["relevancy"].moved is None and latest["status_page"].moved is None
    [post] = fake.posted(ALERTS)
    assert "The judge moved" in post["text"] and "refund_policy" in post["text"]
