"""The second opinion on a low score, in-process against FakeSlack, the fake LLM, real Redis and
SQLite/PostgreSQL: a confirmed low score alerts once; a disputed one alerts nobody and is counted; a dead LLM on
the second call leaves the first verdict stored and alerts nobody; RELMON_CONFIRM=off alerts on the first."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from judges import TransientLLMError
from store.models import BudgetCharge, Judgment, Pair
from store.usage import budget_day, calls_on
from tests.alert_helpers import ALERTS, add_judgment
from tests.builders import installed_runtime
from workers.alerts import confirmation, delivery, planning
from workers.tasks import slack as tasks

LOW = "offtopic: our office is open 9 to 5."  # the fake grades it 0 at any temperature
WOBBLY = "wobbly: our office is open 9 to 5."  # 0 at temperature 0, 4 when sampled


@pytest.fixture
def make_runtime(settings_for, fake, llm):
    def build(**overrides):
        values = {"confirm": "second_opinion", "openai_base_url": llm.base_url, "judge_model": "fake-judge"}
        settings = settings_for(slack_api_url=fake.api_url, **{**values, **overrides})
        return installed_runtime(settings)

    return build


def judgment(runtime, judgment_id: int) -> Judgment:
    with runtime.db.session() as session:
        row = session.get(Judgment, judgment_id)
        session.expunge(row)
        return row


def charges(runtime) -> list[tuple[int, str]]:
    with runtime.db.session() as session:
        return sorted((row[0], row[1]) for row in session.execute(select(BudgetCharge.pair_id, BudgetCharge.judge)))


def consider_a_confirmed_low_score(runtime) -> int:
    """A low score the second opinion confirms, considered again (a retry or redelivery), then by the task: its
    judgment's id."""
    judgment_id = add_judgment(runtime, score=1, answer=LOW)
    assert delivery.consider(runtime, judgment_id).low == "posted"
    assert delivery.consider(runtime, judgment_id).low == "posted"  # a retry or redelivery
    tasks.consider_alert(judgment_id)
    return judgment_id


def test_a_confirmed_low_score_alerts_once(make_runtime, fake, llm):
    with make_runtime() as runtime:
        consider_a_confirmed_low_score(runtime)
        assert len(fake.posted(ALERTS)) == 1


def test_a_confirmed_low_score_asks_for_one_stored_second_opinion(make_runtime, fake, llm):
    with make_runtime() as runtime:
        judgment_id = consider_a_confirmed_low_score(runtime)
        [request] = llm.requests  # the retries reused the stored second opinion
        assert request["temperature"] == confirmation.SECOND_OPINION_TEMPERATURE
        assert request["seed"] == confirmation.SECOND_OPINION_SEED
        row = judgment(runtime, judgment_id)
        assert (row.score, row.confirmation_status, row.confirmation_score) == (1, "confirmed", 0)
        assert row.confirmation_reasoning and row.confirmation_model == "fake-judge"
        pair_id = row.pair_id
        assert charges(runtime) == [(pair_id, "relevancy:second@1")]  # charged to the daily budget, once


def test_a_disputed_low_score_alerts_nobody(make_runtime, fake, llm):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=WOBBLY)
        assert delivery.consider(runtime, judgment_id).low == "disputed"
        assert delivery.consider(runtime, judgment_id).low == "disputed"
        assert fake.posted(ALERTS) == []
        row = judgment(runtime, judgment_id)
        assert (row.score, row.confirmation_status, row.confirmation_score) == (1, "disputed", 4)
        assert len(llm.requests) == 1


def give_up_on_the_second_opinion(runtime) -> int:
    """A low score whose second call fails (the LLM answers 500 when sampled) until the task's last attempt: its
    judgment's id."""
    judgment_id = add_judgment(runtime, score=1, answer=LOW)
    with pytest.raises(TransientLLMError):  # the task retries with backoff
        delivery.consider(runtime, judgment_id)
    assert judgment(runtime, judgment_id).confirmation_status is None
    assert delivery.consider(runtime, judgment_id, last_attempt=True).low == "unconfirmed"
    assert delivery.consider(runtime, judgment_id).low == "unconfirmed"  # stored: not asked again
    return judgment_id


def test_a_dead_llm_on_the_second_call_keeps_the_first_verdict(make_runtime, fake, llm):
    llm.set_behavior(sampled_status=500)
    with make_runtime() as runtime:
        judgment_id = give_up_on_the_second_opinion(runtime)
        row = judgment(runtime, judgment_id)
        assert (row.status, row.score, row.confirmation_status) == ("ok", 1, "unconfirmed")
        assert "second opinion" in row.confirmation_error
        assert len(llm.requests) == 2


def test_a_dead_llm_on_the_second_call_alerts_nobody(make_runtime, fake, llm):
    llm.set_behavior(sampled_status=500)
    with make_runtime() as runtime:
        judgment_id = give_up_on_the_second_opinion(runtime)
        assert fake.posted(ALERTS) == []
        llm.set_behavior()  # the LLM is back: nothing changes, nobody is alerted late
        tasks.consider_alert(judgment_id)
        assert fake.posted(ALERTS) == [] and len(llm.requests) == 2


def test_the_task_gives_up_after_the_llm_retries(make_runtime, fake, llm):
    llm.set_behavior(sampled_status=503)
    with make_runtime(llm_max_retries=0) as runtime:  # the first attempt is the last
        judgment_id = add_judgment(runtime, score=1, answer=LOW)
        assert tasks.consider_alert(judgment_id).low == "unconfirmed"
        assert fake.posted(ALERTS) == []


def test_confirmation_off_alerts_on_the_first_verdict(make_runtime, fake, llm):
    with make_runtime(confirm="off") as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=WOBBLY)
        assert delivery.consider(runtime, judgment_id).low == "posted"
        assert len(fake.posted(ALERTS)) == 1
        assert llm.requests == []
        assert judgment(runtime, judgment_id).confirmation_status is None


def test_only_low_scores_cost_a_second_call(make_runtime, fake, llm):
    with make_runtime() as runtime:
        for score in (3, 4):
            delivery.consider(runtime, add_judgment(runtime, score=score, answer=LOW))
        assert llm.requests == [] and fake.posted(ALERTS) == []


def test_a_worker_lost_after_the_second_opinion_posts_once_without_asking_again(make_runtime, fake, llm):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=LOW)
        # The first worker stored the second opinion and died before claiming the alert.
        assert confirmation.confirm(runtime, planning.load(runtime, judgment_id), 2) == "confirmed"
        assert delivery.consider(runtime, judgment_id).low == "posted"  # the redelivery
        assert len(fake.posted(ALERTS)) == 1 and len(llm.requests) == 1


def test_the_confirm_model_answers_the_second_opinion(make_runtime, fake, llm):
    with make_runtime(confirm_model="fake-judge-large") as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=LOW)
        delivery.consider(runtime, judgment_id)
        assert [request["model"] for request in llm.requests] == ["fake-judge-large"]
        assert judgment(runtime, judgment_id).confirmation_model == "fake-judge-large"


def test_a_spent_budget_leaves_the_low_score_unconfirmed(make_runtime, fake, llm):
    with make_runtime(daily_budget=0) as runtime:
        judgment_id = add_judgment(runtime, score=1, answer=LOW)
        assert delivery.consider(runtime, judgment_id).low == "unconfirmed"
        assert fake.posted(ALERTS) == [] and llm.requests == []
        assert judgment(runtime, judgment_id).confirmation_error == "daily budget spent"


def rejudge(runtime, judgment_id: int, *, score: float, answer: str) -> int:
    """The answer was edited and judged again: a judgment of the pair's next version, as judge_pair stores it."""
    with runtime.db.session() as session:
        first = session.get(Judgment, judgment_id)
        pair = session.get(Pair, first.pair_id)
        pair.version, pair.answer_text = first.pair_version + 1, answer
        newer = Judgment(
            pair_id=pair.id,
            judge=first.judge,
            pair_version=pair.version,
            status="ok",
            score=score,
            max_score=4,
            normalized_score=score / 4,
            reasoning="Still off topic.",
            model="test-model",
        )
        session.add(newer)
        session.flush()
        return newer.id


def test_each_version_of_an_edited_answer_pays_for_its_own_second_opinion_once(make_runtime, fake, llm):
    """A second low score on a re-judged edit is charged (its own budget row) and asked; retries of either
    judgment's second opinion charge nothing more: one unit per second call."""
    llm.set_behavior(sampled_status=500)  # every first try of a second opinion fails and is retried
    with make_runtime() as runtime:
        first = add_judgment(runtime, score=1, answer=LOW)
        with pytest.raises(TransientLLMError):
            confirmation.confirm(runtime, planning.load(runtime, first), 2)
        llm.set_behavior()
        assert confirmation.confirm(runtime, planning.load(runtime, first), 2) == "confirmed"
        pair_id = judgment(runtime, first).pair_id
        assert charges(runtime) == [(pair_id, "relevancy:second@1")]

        second = rejudge(runtime, first, score=0, answer=LOW + " (edited)")
        llm.set_behavior(sampled_status=500)
        with pytest.raises(TransientLLMError):
            delivery.consider(runtime, second)
        llm.set_behavior()
        assert delivery.consider(runtime, second).low == "posted"
        assert delivery.consider(runtime, second).low == "posted"  # a redelivery: stored, not asked again
        older = planning.load(runtime, first)  # the older one: stored too
        assert confirmation.confirm(runtime, older, 2) == "confirmed"

        assert charges(runtime) == [(pair_id, "relevancy:second@1"), (pair_id, "relevancy:second@2")]
        with runtime.db.session() as session:
            assert calls_on(session, budget_day()) == 2  # two second opinions, two units, retries free
        assert judgment(runtime, second).confirmation_status == "confirmed"
        assert len([r for r in llm.requests if r["temperature"] > 0]) == 4  # two failed tries, two answers
        assert len(fake.posted(ALERTS)) == 1


def test_a_spent_budget_leaves_the_edited_answers_second_low_score_unconfirmed(make_runtime, fake, llm):
    """The re-judged version's second opinion is a new unit: with the day's one unit spent on the first, the
    second is not paid for (so not asked) rather than riding on the first one's charge."""
    with make_runtime(daily_budget=1) as runtime:
        first = add_judgment(runtime, score=1, answer=LOW)
        assert confirmation.confirm(runtime, planning.load(runtime, first), 2) == "confirmed"
        second = rejudge(runtime, first, score=1, answer=LOW + " (edited)")
        assert confirmation.confirm(runtime, planning.load(runtime, second), 2) == "unconfirmed"
        assert judgment(runtime, second).confirmation_error == "daily budget spent"
        assert len(llm.requests) == 1
