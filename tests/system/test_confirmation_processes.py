"""The second opinion end to end: signed events to the bot over HTTP → Redis → a real `relmon worker` → the fake
LLM and the fake Slack → the database. A low score the second opinion confirms alerts exactly once, also when its
task is redelivered (the worker killed after the second opinion was stored) or retried (the LLM failing the second
call once); a disputed low score alerts nobody and `/judge stats` counts it. In-process:
tests/integration/test_confirmation.py."""

from __future__ import annotations

import json

import pytest

from judges.context import HEADING, QUESTION_LABEL
from store.models import ConfirmationStatus
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.builders import SECRET
from tests.fakes.openai_server import is_sampled, prompt_text
from tests.processes import wait_for
from tests.running_system import CHANNEL

pytestmark = pytest.mark.slow

QUESTION = "How do I reset my password?"
LOW = "Our offtopic cafeteria menu is pasta."  # the fake LLM grades it 0, sampled or not
WOBBLY = "Our wobbly cafeteria menu is pasta."  # 0 at temperature 0, 4 when sampled: a disputed low score


def second_calls(system) -> list[dict]:
    return [request for request in system.llm.requests if float(request.get("temperature") or 0) > 0]


def stats_answer(system) -> str:
    """`/judge stats` in the support channel, signed, through the bot; the text of its figures."""
    system.slack.responses.pop("stats", None)
    body = si.slash_command("stats", response_url=system.slack.response_url("stats"))
    assert sr.post(system.bot.url, body, SECRET).status_code == 200
    answer = wait_for(lambda: system.slack.responses["stats"], timeout=20, what="the stats")[0]
    return json.dumps(answer["blocks"], ensure_ascii=False)


def test_a_confirmed_low_score_alerts_once_though_the_worker_dies_after_the_second_opinion(make_system) -> None:
    """The worker stores the second opinion and is killed (SIGKILL) before it claims the alert (Slack holds its
    permalink look-up); the redelivered task reads the stored opinion, asks the LLM nothing more and posts the
    alert once. Then a disputed low score: no alert, counted as disputed in the database and in `/judge stats`."""
    system = make_system(workers=1, concurrency=2)
    system.slack.slow_method("chat.getPermalink", 60, times=1)  # the step after the second opinion, before any claim
    system.send_pair(QUESTION, LOW, offtopic=True)

    def opinion_stored():
        stored = [j for j in system.judgments() if j.confirmation_status is not None]
        return stored if stored and system.slack.calls_to("chat.getPermalink") else None

    [judgment] = wait_for(opinion_stored, timeout=60, what="the second opinion stored, the alert not yet claimed")
    assert judgment.confirmation_status == ConfirmationStatus.CONFIRMED and system.alert_rows() == []
    victim = system.workers[0]
    victim.kill()
    system.workers.remove(victim)
    system.start_workers(1)  # the task comes back after the visibility timeout

    system.wait_until_finished()
    assert system.check_exactly_once()["alerts"] == 1
    assert len(second_calls(system)) == 1  # the redelivery read the stored second opinion
    assert set(system.posted_low_alerts()) == {judgment.id}

    system.send_pair(QUESTION, WOBBLY, offtopic=True)
    system.wait_until_finished()
    assert system.check_exactly_once()["alerts"] == 1  # still only the confirmed one
    [disputed] = [j for j in system.judgments() if j.id != judgment.id]
    assert (disputed.score, disputed.confirmation_status, disputed.confirmation_score) == (
        0,
        ConfirmationStatus.DISPUTED,
        4,
    )
    assert len(second_calls(system)) == 2
    shown = stats_answer(system)
    assert "2 answers judged" in shown and "1 low score disputed by a second opinion" in shown


def test_a_second_opinion_the_llm_fails_once_is_retried_to_one_alert(make_system) -> None:
    """The fake LLM answers the first second-opinion call with a 500: the alert task retries with backoff, the
    retry's second opinion confirms the low score, and the alert is posted exactly once."""
    system = make_system(workers=1, concurrency=2)
    system.llm.set_behavior(sampled_fault_first=1)
    system.send_pair(QUESTION, LOW, offtopic=True)
    system.wait_until_finished()
    assert system.check_exactly_once(extra_llm_calls=1)["alerts"] == 1  # the failed call is the one extra
    [judgment] = system.judgments()
    assert (judgment.score, judgment.confirmation_status, judgment.confirmation_score) == (
        0,
        ConfirmationStatus.CONFIRMED,
        0,
    )
    assert len(second_calls(system)) == 2 and system.llm.statuses[500] == 1
    assert set(system.posted_low_alerts().values()) == {1}


def earlier_turns(request: dict) -> str | None:
    """The earlier turns a judge request carries before its question (judges.context.with_context), if any."""
    prompt = prompt_text(request)
    start = prompt.find(HEADING)
    if start == -1:
        return None
    return prompt[start + len(HEADING) : prompt.find(QUESTION_LABEL, start)].strip()


def test_a_follow_ups_second_opinion_reads_the_earlier_turns_its_first_verdict_read(make_system) -> None:
    """A low score on a follow-up in a thread: the confirming request carries the same earlier turns as the first
    verdict's request (one JudgeInput for both), not the bare follow-up question."""
    system = make_system(workers=1, concurrency=2)
    root_ts, first_ts, follow_up_ts, second_ts = (sr.next_ts() for _ in range(4))
    for event in (
        sr.human_message(CHANNEL, root_ts, "How do I export my data?"),
        sr.bot_message(CHANNEL, first_ts, "Use Settings > Export on the web.", thread_ts=root_ts),
        sr.human_message(CHANNEL, follow_up_ts, "And on Android?", thread_ts=root_ts),
        sr.bot_message(CHANNEL, second_ts, LOW, thread_ts=root_ts),
    ):
        system.send(event)
    system.answers.update({first_ts: False, second_ts: True})
    system.wait_until_finished()
    assert system.check_exactly_once()["alerts"] == 1

    about_the_follow_up = [request for request in system.llm.requests if LOW in prompt_text(request)]
    [first] = [request for request in about_the_follow_up if not is_sampled(request)]
    [second] = second_calls(system)
    assert earlier_turns(first) == "[customer] How do I export my data?\n[bot] Use Settings > Export on the web."
    assert earlier_turns(second) == earlier_turns(first)
