"""End to end: signed requests to the served bot, a real `relmon worker` process, FakeOpenAI and FakeSlack.

- a captured low score → exactly one alert with the expected blocks; a repeated consider_alert → still one;
- the feedback buttons → votes stored and the alert updated with the tally;
- over the hourly cap → one summary message for the rest;
- /judge with a link → the verdict arrives privately on the response_url, after a 429's Retry-After, or as an
  ephemeral message where /judge was typed when the response_url has expired;
- the "Judge this answer" shortcut and the /judge modal → a "Judging…" note, then the verdict;
- /judge stats → the figures of what the worker judged.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from common.celery_app import QUEUE_SLACK
from store.db import Database
from store.models import Pair, PairStatus
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.bot_harness import BotServer
from tests.builders import SECRET, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import clear_of_the_hour_turn, wait_for
from tests.running_system import relmon_processes

pytestmark = pytest.mark.slow

C = "C_SUPPORT"
ALERTS = "C_ALERTS"
QUESTION_TS = "1712345600.000100"
ANSWER_TS = "1712345678.123456"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel(ALERTS, "alerts", members=["U_ASKER", "U_TWO", "U_RELMON"])
        fake.add_message(C, QUESTION_TS, "U_ASKER", "How do I reset my password?")
        fake.add_message(C, ANSWER_TS, "U_SUPPORT", "offtopic: our office is open 9 to 5", QUESTION_TS,
                         bot_id="B_SUPPORT")  # fmt: skip
        yield fake


@pytest.fixture
def openai():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def worker(redis_url, db_url, slack, openai, tmp_path: Path):
    Database(db_url).migrate()
    with relmon_processes(
        redis_url=redis_url,
        database_url=db_url,
        directory=tmp_path,
        start=("worker",),
        slack=slack,
        llm=openai,
        log_dir=tmp_path / "logs",
        RELMON_ALERT_CHANNEL=ALERTS,
        RELMON_ALERT_CAP_PER_HOUR=2,
        RELMON_DEGRADATION_WINDOW_MINUTES=0,  # five bad answers in an hour would also post a degradation alert
        RELMON_WORKER_CONCURRENCY=4,
    ) as system:
        yield system.worker


@pytest.fixture
def bot(redis_url, db_url, slack):
    server = BotServer(
        make_settings(redis_url=redis_url, database_url=db_url, slack_api_url=slack.api_url, alert_cap_per_hour=2)
    )
    yield server.__enter__()
    server.__exit__()


def captured_pairs(bot, answers: list[str], first: int = 0) -> list[int]:
    """Pairs as capture leaves them after settling: pending, ready for judge_pair."""
    now = datetime.now(UTC)
    ids = []
    with bot.runtime.db.session() as session:
        for index, answer in enumerate(answers):
            pair = Pair(
                source="capture",
                channel_id=C,
                answer_ts=f"1712340000.{first + index:06d}",
                thread_ts=QUESTION_TS,
                question_text="How do I reset my password?",
                answer_text=answer,
                status=PairStatus.PENDING,
                created_at=now,
                updated_at=now,
            )
            session.add(pair)
            session.flush()
            ids.append(pair.id)
    return ids


def messages_in(slack: FakeSlack, channel: str) -> list[dict]:
    return sorted(slack.messages[channel].values(), key=lambda m: float(m["ts"]))


def done(redis_url: str, queue: str, task_id: str) -> bool:
    """True once a task's message is neither waiting in its queue nor held unacknowledged: with late acks,
    the worker acknowledges it only after the task has run."""
    client = redis.Redis.from_url(redis_url)
    held = [*client.lrange(queue, 0, -1), *client.hvals("unacked")]
    return not any(task_id.encode() in raw for raw in held)


def test_low_scores_are_alerted_under_the_cap_with_feedback_on_each_alert(bot, slack, worker, producer, redis_url):
    clear_of_the_hour_turn(120)  # the hourly cap of 2 counts per UTC hour
    ids = captured_pairs(bot, ["offtopic: our office is open 9 to 5", "Open Settings, then Reset."])
    for pair_id in ids:
        producer.send_task("workers.tasks.judging.judge_pair", args=[pair_id])

    [alert] = wait_for(lambda: messages_in(slack, ALERTS), timeout=30, what="the alert")
    blocks = alert["blocks"]
    assert blocks[0]["text"]["text"] == "Low relevancy score: 0 / 4"
    text = json.dumps(blocks)
    assert "How do I reset my password?" in text and "offtopic: our office is open 9 to 5" in text
    buttons = next(b for b in blocks if b["type"] == "actions")["elements"]
    assert [b["text"]["text"] for b in buttons] == [
        "Open the message",
        "Judge was right",
        "Judge was wrong",
        "Add to test set",
    ]
    assert buttons[0]["url"] == f"https://example.slack.com/archives/{C}/p1712340000000000"
    judgment_id = int(buttons[1]["value"])

    # a repeat of consider_alert (a retry, a redelivery) posts nothing more, once it has run
    repeat = producer.send_task("workers.tasks.slack.consider_alert", args=[judgment_id], queue=QUEUE_SLACK)
    wait_for(lambda: done(redis_url, QUEUE_SLACK, repeat.id), timeout=20, what="the repeated consider_alert to finish")
    assert len(messages_in(slack, ALERTS)) == 1

    # feedback: two people vote; the alert shows the tally
    for user, action in (("U_ASKER", "feedback_wrong"), ("U_TWO", "feedback_right")):
        body = si.block_actions(action, str(judgment_id), user_id=user, channel_id=ALERTS, message_ts=alert["ts"])
        assert sr.post(bot.url, body, SECRET).status_code == 200

    def tallied():
        shown = json.dumps(slack.messages[ALERTS][alert["ts"]]["blocks"], ensure_ascii=False)
        return "1 says the judge was right · 1 says it was wrong" in shown

    wait_for(tallied, timeout=20, what="the tally on the alert")

    # over the cap (2 an hour, one used): one more alert, then the rest gather into one summary message
    more = captured_pairs(bot, [f"offtopic answer number {i}" for i in range(1, 5)], first=10)
    for pair_id in more:
        producer.send_task("workers.tasks.judging.judge_pair", args=[pair_id])

    def summary_shows_three():
        posted = messages_in(slack, ALERTS)
        summaries = [m for m in posted if "more low score" in m["text"]]
        alerts = [m for m in posted if m["text"].startswith("Low relevancy score")]
        return len(summaries) == 1 and "3 more low scores" in summaries[0]["text"] and len(alerts) >= 2 and posted

    posted = wait_for(summary_shows_three, timeout=40, what="the second alert and one summary of 3 held low scores")
    assert len([m for m in posted if m["text"].startswith("Low relevancy score")]) == 2
    assert len(posted) == 3  # two alerts and one summary: never a flood


def test_judge_link_sends_the_verdict_privately(bot, slack, worker):
    link = f"https://example.slack.com/archives/{C}/p1712345678123456?thread_ts={QUESTION_TS}&cid={C}"
    response = sr.post(bot.url, si.slash_command(link, response_url=slack.response_url("verdict")), SECRET)
    assert response.status_code == 200 and "Judging" in response.json()["text"]
    [verdict] = wait_for(lambda: slack.responses["verdict"], timeout=30, what="the verdict on the response_url")
    assert verdict["response_type"] == "ephemeral"
    assert verdict["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
    assert "How do I reset my password?" in json.dumps(verdict["blocks"])
    assert messages_in(slack, ALERTS) == [] and messages_in(slack, C) != []  # no alert for an on-demand check
    assert len(slack.messages[C]) == 2  # nothing posted in the channel either


def test_the_verdict_waits_out_a_rate_limited_response_url(bot, slack, worker):
    slack.rate_limit_response_url("busy", times=1, retry_after=2)
    link = f"https://example.slack.com/archives/{C}/p1712345678123456?thread_ts={QUESTION_TS}&cid={C}"
    assert sr.post(bot.url, si.slash_command(link, response_url=slack.response_url("busy")), SECRET).status_code == 200
    [verdict] = wait_for(lambda: slack.responses["busy"], timeout=40, what="the verdict after the Retry-After")
    assert verdict["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
    refused, taken = slack.response_attempts["busy"]
    assert taken - refused >= 2.0  # the worker waited as Slack asked
    assert slack.ephemerals == [] and slack.posted() == []  # no fallback needed


def test_an_expired_response_url_sends_the_verdict_ephemerally_where_judge_was_typed(bot, slack, worker):
    slack.expire_response_url("late")
    link = f"https://example.slack.com/archives/{C}/p1712345678123456?thread_ts={QUESTION_TS}&cid={C}"
    body = si.slash_command(link, channel_id=ALERTS, response_url=slack.response_url("late"))  # typed in #alerts
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [ephemeral] = wait_for(lambda: slack.ephemerals, timeout=40, what="the verdict as an ephemeral message")
    assert (ephemeral["channel"], ephemeral["user"]) == (ALERTS, "U_ASKER")
    assert "Verdict: Relevancy 0 / 4" in json.dumps(ephemeral["blocks"])
    assert slack.responses["late"] == [] and slack.posted() == []  # not a DM, nothing in a channel


def test_shortcut_notes_then_sends_the_verdict(bot, slack, worker):
    message = {"type": "message", "ts": ANSWER_TS, "thread_ts": QUESTION_TS, "user": "U_SUPPORT",
               "text": "offtopic: our office is open 9 to 5", "bot_id": "B_SUPPORT"}  # fmt: skip
    body = si.message_action(message, channel_id=C, response_url=slack.response_url("sc"))
    assert sr.post(bot.url, body, SECRET).status_code == 200
    note, verdict = wait_for(lambda: len(slack.responses["sc"]) >= 2 and slack.responses["sc"], timeout=40)
    assert note["text"].startswith("Judging that answer…") and note["response_type"] == "ephemeral"
    assert verdict["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
    assert "How do I reset my password?" in json.dumps(verdict["blocks"]) and verdict["response_type"] == "ephemeral"
    assert messages_in(slack, ALERTS) == [] and len(slack.messages[C]) == 2


def test_modal_sends_the_verdict_of_the_pasted_answer(bot, slack, worker):
    from tests.integration.test_commands import view_submission

    assert sr.post(bot.url, si.slash_command("", response_url=slack.response_url("modal")), SECRET).status_code == 200
    [opened] = wait_for(lambda: slack.calls_to("views.open"), timeout=10, what="views.open")
    view = opened["view"] if isinstance(opened["view"], dict) else json.loads(opened["view"])
    body = view_submission(
        view, question="Can I pay by card?", answer="Yes, every major card works.", judge="relevancy"
    )
    assert sr.post(bot.url, body, SECRET).status_code == 200
    note, verdict = wait_for(lambda: len(slack.responses["modal"]) >= 2 and slack.responses["modal"], timeout=40)
    assert note["text"].startswith("Judging the answer you pasted…")
    assert verdict["blocks"][0]["text"]["text"] == "Verdict: Relevancy 4 / 4"
    assert "Yes, every major card works." in json.dumps(verdict["blocks"]) and verdict["response_type"] == "ephemeral"
    assert messages_in(slack, ALERTS) == []


def test_stats_show_what_the_worker_judged(bot, slack, worker, producer):
    for pair_id in captured_pairs(bot, ["offtopic: our office is open 9 to 5", "Open Settings, then Reset."]):
        producer.send_task("workers.tasks.judging.judge_pair", args=[pair_id])
    wait_for(lambda: messages_in(slack, ALERTS), timeout=30, what="the low score's alert")

    def counted():
        slack.responses.pop("stats", None)
        sr.post(bot.url, si.slash_command("stats", response_url=slack.response_url("stats")), SECRET)
        answer = wait_for(lambda: slack.responses["stats"], timeout=10, what="the stats")[0]
        return "2 answers judged" in json.dumps(answer) and answer

    answer = wait_for(counted, timeout=30, what="stats counting both judged answers")
    text = answer["blocks"][-1]["text"]["text"]
    # Two scores: too few for a mean or a share (docs/statistics.md), each says so with its n.
    assert "*Relevancy*: 2 answers judged · mean too few (n=2) · at or below " in text
    assert text.count("too few (n=2)") == 2
    assert answer["response_type"] == "ephemeral"
