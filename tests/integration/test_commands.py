"""/judge, the "Judge this answer" shortcut, the modal and the feedback buttons, through signed HTTP requests
to the served bot (real Redis, SQLite/PostgreSQL and FakeSlack). Judging itself is the worker's job: here we
check what the bot stores and enqueues; tests/system/test_commands_e2e.py runs a real worker."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
from pathlib import Path

import pytest
import redis
import yaml
from sqlalchemy import func, select

from bot.listeners.commands import Route, named_judge, route
from bot.permalinks import MessageLink, parse_message_link
from bot.stats import channel_reference
from common import replies
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK
from common.messages.verdicts import ERRORS
from judges.names import JUDGE_NAMES
from store import confirmations
from store.confirmations import SecondOpinion
from store.feedback import record_vote, votes_for
from store.models import DailyUsage, Pair
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment
from tests.bot_harness import BotServer, ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from workers.alerts import delivery

C = "C_SUPPORT"
OTHER = "C_OTHER"  # U_ASKER is not a member
PRIVATE = "G_PRIVATE"  # U_ASKER is a member, U_STRANGER is not
QUESTION_TS = "1712345600.000100"
ANSWER_TS = "1712345678.123456"
LINK = f"https://example.slack.com/archives/{C}/p1712345678123456?thread_ts={QUESTION_TS}&cid={C}"


# Pure parts ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (LINK, MessageLink(C, ANSWER_TS, QUESTION_TS)),
        (f"<{LINK}>", MessageLink(C, ANSWER_TS, QUESTION_TS)),
        (f"<{LINK}|a label>", MessageLink(C, ANSWER_TS, QUESTION_TS)),
        ("https://acme.slack.com/archives/C0123ABCD/p1712345678123456", MessageLink("C0123ABCD", ANSWER_TS)),
        ("see https://acme.enterprise.slack.com/archives/G01/p1712345678123456 ok", MessageLink("G01", ANSWER_TS)),
        ("https://acme.slack.com/archives/C0123ABCD", None),
        ("https://acme.slack.com/archives/C0123ABCD/p123", None),
        ("https://evil.example.com/archives/C0123ABCD/p1712345678123456", None),
        ("no link here", None),
    ],
)  # fmt: skip
def test_message_links(text, expected):
    assert parse_message_link(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", Route("modal")),
        ("   ", Route("modal")),
        ("help", Route("help")),
        ("HELP", Route("help")),
        ("stats", Route("stats", "")),
        ("stats <#C123|support>", Route("stats", "<#C123|support>")),
        ("digest", Route("digest", "")),
        (LINK, Route("link", LINK)),
        ("https://acme.slack.com/archives/C1", Route("bad_link")),
        ("https://example.com/x", Route("bad_link")),
        ("what is this", Route("unknown")),
    ],
)
def test_route(text, expected):
    assert route(text) == expected


def test_named_judge():
    assert named_judge(f"{LINK} relevancy") == "relevancy"
    assert named_judge(f"<{LINK}> Correctness") == "correctness"
    assert named_judge(LINK) is None


def test_channel_reference():
    assert channel_reference("<#C123ABC|support>") == ("C123ABC", None)
    assert channel_reference("<#C123ABC>") == ("C123ABC", None)
    assert channel_reference("C123ABCD") == ("C123ABCD", None)
    assert channel_reference("#Support") == (None, "support")
    assert channel_reference("") == (None, None)


# The served bot ---------------------------------------------------------------------------------------------


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel(OTHER, "finance", members=["U_BOSS", "U_RELMON"])
        fake.add_channel(PRIVATE, "secret", is_private=True, members=["U_ASKER", "U_RELMON"])
        fake.add_channel("C_ALERTS", "alerts", members=["U_ASKER", "U_RELMON"])
        fake.add_message(C, QUESTION_TS, "U_ASKER", "How do I reset my password?")
        fake.add_message(C, ANSWER_TS, "U_SUPPORT", "offtopic: our office is open 9 to 5", QUESTION_TS,
                         bot_id="B_SUPPORT")  # fmt: skip
        fake.add_message(OTHER, "1712345000.000001", "U_BOSS", "What is the Q3 budget?")
        fake.add_message(OTHER, "1712345001.000002", "U_SUPPORT", "The Q3 budget is 4 million.", bot_id="B_SUPPORT")
        fake.add_message(PRIVATE, "1712345100.000001", "U_ASKER", "When are the layoffs?")
        fake.add_message(PRIVATE, "1712345101.000002", "U_SUPPORT", "The layoffs are in May.", bot_id="B_SUPPORT")
        yield fake


@pytest.fixture
def bot(settings_for, slack):
    settings = settings_for(slack_api_url=slack.api_url)
    server = BotServer(settings)
    yield server.__enter__()
    server.__exit__()


def queued(redis_url: str, queue: str) -> list[dict]:
    """Task messages waiting in a Celery queue (no worker here): their task names and arguments."""
    client = redis.Redis.from_url(redis_url)
    messages = []
    for raw in client.lrange(queue, 0, -1):
        envelope = json.loads(raw)
        messages.append({"task": envelope["headers"]["task"], "args": envelope["headers"].get("argsrepr")})
    return messages


def command(bot: ServedBot, text: str, slack: FakeSlack, key: str = "cmd", **kwargs):
    started = time.monotonic()
    response = sr.post(bot.url, sr.slash_command(text, response_url=slack.response_url(key), **kwargs), SECRET)
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert elapsed < 3.0  # Slack's deadline for the acknowledgement
    return response


def pairs(bot: ServedBot) -> list[Pair]:
    with bot.runtime.db.session() as session:
        return list(session.execute(select(Pair).where(Pair.source != "capture").order_by(Pair.id)).scalars())


def test_help_is_answered_in_the_ack(bot, slack):
    response = command(bot, "help", slack)
    body = response.json()
    assert body["response_type"] == "ephemeral"
    assert "/judge stats" in body["blocks"][0]["text"]["text"]


def test_unknown_text_says_what_to_do(bot, slack):
    assert "try `/judge help`" in command(bot, "banana", slack).json()["text"]
    assert "Copy link" in command(bot, "https://example.com/nope", slack).json()["text"]


def linked_pair(bot: ServedBot, slack: FakeSlack) -> Pair:
    """`/judge <link>` to the captured answer in C: the on-demand pair it stores."""
    response = command(bot, LINK, slack, key="link")
    assert "Judging that answer" in response.json()["text"]
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    return pair


def test_link_creates_an_on_demand_pair(bot, slack):
    pair = linked_pair(bot, slack)
    assert pair.source == "command" and pair.status == "pending"
    assert pair.channel_id == C and pair.answer_ts is None and pair.channel_is_private is False
    assert pair.question_text == "How do I reset my password?"
    assert pair.answer_text == "offtopic: our office is open 9 to 5"
    assert pair.question_ts == QUESTION_TS and pair.thread_ts == QUESTION_TS
    assert pair.requested_by == "U_ASKER" and pair.response_url == slack.response_url("link")


def test_link_queues_judging_of_its_pair(bot, slack, redis_url):
    pair = linked_pair(bot, slack)
    jobs = wait_for(lambda: queued(redis_url, QUEUE_JUDGE), timeout=5, what="judge_pair queued")
    assert jobs == [{"task": "workers.tasks.judging.judge_pair", "args": f"[{pair.id}]"}]
    assert slack.responses["link"] == []  # nothing more until the verdict


def test_link_with_a_judge_name(bot, slack):
    assert "run `/judge` alone" in command(bot, f"{LINK} grounded", slack).json()["text"]
    command(bot, f"{LINK} relevancy", slack)
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    assert pair.judges == ["relevancy"]


def test_a_stored_pair_supplies_the_question(bot, slack):
    """The captured pair is used as stored (no history call) when relmon already paired the answer."""
    with bot.runtime.db.session() as session:
        session.add(Pair(source="capture", channel_id=C, answer_ts=ANSWER_TS, question_text="Stored question?",
                         answer_text="Stored answer.", status="judged"))  # fmt: skip
    command(bot, LINK, slack)
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    assert (pair.question_text, pair.answer_text) == ("Stored question?", "Stored answer.")
    assert slack.calls_to("conversations.replies") == [] and slack.calls_to("conversations.history") == []


def non_members_refusal(bot: ServedBot, slack: FakeSlack) -> dict:
    """`/judge` with a link to an answer in a channel the person is not in: the refusal they get."""
    link = f"https://example.slack.com/archives/{OTHER}/p1712345001000002"
    command(bot, link, slack, key="refused")
    [refusal] = wait_for(lambda: slack.responses["refused"], timeout=10, what="the refusal")
    return refusal


def test_non_member_is_refused_without_seeing_the_channel(bot, slack):
    refusal = non_members_refusal(bot, slack)
    assert refusal["text"] == ERRORS["not_member"] and "join the channel" in refusal["text"]
    assert "budget" not in json.dumps(refusal) and "finance" not in json.dumps(refusal)
    assert refusal["response_type"] == "ephemeral"


def test_a_non_member_is_refused_before_the_channel_is_read_or_a_pair_stored(bot, slack):
    non_members_refusal(bot, slack)
    # The refusal is the lazy listener's last act (bot.on_demand.judge_message): nothing is stored after it.
    assert pairs(bot) == []
    # access was checked before anything of the channel was read
    assert slack.calls_to("conversations.history") == [] and slack.calls_to("conversations.replies") == []


def test_non_member_asking_about_a_private_channel_learns_nothing(bot, slack):
    link = f"https://example.slack.com/archives/{PRIVATE}/p1712345101000002"
    command(bot, link, slack, key="private", user_id="U_STRANGER")
    [refusal] = wait_for(lambda: slack.responses["private"], timeout=10, what="the refusal")
    assert refusal["text"] == ERRORS["not_member"] and refusal["response_type"] == "ephemeral"
    shown = json.dumps(refusal)
    assert "layoffs" not in shown and "secret" not in shown and PRIVATE not in shown
    # The refusal is the lazy listener's last act (bot.on_demand.judge_message): nothing is stored after it.
    assert pairs(bot) == []
    assert slack.calls_to("conversations.history") == [] and slack.calls_to("conversations.replies") == []
    # a member of the private channel is served
    command(bot, link, slack, key="member")
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="the member's pair")
    assert pair.channel_is_private is True and pair.answer_text == "The layoffs are in May."


def test_channel_relmon_cannot_see_is_refused(bot, slack):
    command(bot, "https://example.slack.com/archives/C_GONE/p1712345001000002", slack, key="gone")
    [refusal] = wait_for(lambda: slack.responses["gone"], timeout=10, what="the refusal")
    # The non-member's sentence, as /judge stats answers: nobody learns whether relmon is in a private channel.
    assert refusal["text"] == ERRORS["not_member"]


def test_answer_without_a_question_says_what_to_do(bot, slack):
    slack.add_message(C, "1712349999.000001", "U_SUPPORT", "Hello from the bot", bot_id="B_SUPPORT")
    command(bot, f"https://example.slack.com/archives/{C}/p1712349999000001", slack, key="noq")
    [answer] = wait_for(lambda: slack.responses["noq"], timeout=10, what="the answer")
    assert "run `/judge` alone and paste both" in answer["text"]


def test_an_answer_not_captured_is_read_through_captures_rate_limited_history(bot, slack):
    """The on-demand look-up shares capture's history fallback: after a 429 that outlasts slack_sdk's retries,
    no history call until Slack's Retry-After has passed; the person is told in one sentence meanwhile."""
    slack.rate_limit("conversations.replies", times=10, retry_after=30)
    bot.runtime.slack.retry_handlers.clear()  # fail fast on the 429 in this test
    command(bot, LINK, slack, key="limited")
    [refusal] = wait_for(lambda: slack.responses["limited"], timeout=10, what="the refusal")
    assert refusal["text"] == ERRORS["not_found"]
    assert len(slack.calls_to("conversations.replies")) == 1
    blocked = bot.runtime.redis.get("relmon:history:blocked_until")
    assert blocked is not None and float(blocked) > time.time()
    command(bot, LINK, slack, key="again")
    [again] = wait_for(lambda: slack.responses["again"], timeout=10, what="the second refusal")
    assert again["text"] == ERRORS["not_found"] and len(slack.calls_to("conversations.replies")) == 1
    assert pairs(bot) == []


def test_shortcut_judges_the_message_it_is_used_on(bot, slack):
    message = {"type": "message", "ts": ANSWER_TS, "thread_ts": QUESTION_TS,
               "text": "offtopic: our office is open 9 to 5", "bot_id": "B_SUPPORT", "user": "U_SUPPORT"}  # fmt: skip
    started = time.monotonic()
    response = sr.post(bot.url, sr.message_action(message, channel_id=C, response_url=slack.response_url("sc")), SECRET)
    assert response.status_code == 200 and time.monotonic() - started < 3.0
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    assert pair.source == "shortcut" and pair.question_text == "How do I reset my password?"
    assert pair.response_url == slack.response_url("sc")
    # the shortcut's ack shows nothing, so a private note says it was taken
    [note] = wait_for(lambda: slack.responses["sc"], timeout=10, what="the Judging… note")
    assert note["text"].startswith("Judging that answer…") and note["response_type"] == "ephemeral"


def test_shortcut_in_a_channel_the_person_left_is_refused(bot, slack):
    message = {
        "type": "message",
        "ts": "1712345001.000002",
        "text": "The Q3 budget is 4 million.",
        "bot_id": "B_SUPPORT",
    }
    sr.post(bot.url, sr.message_action(message, channel_id=OTHER, response_url=slack.response_url("sc2")), SECRET)
    [refusal] = wait_for(lambda: slack.responses["sc2"], timeout=10, what="the refusal")
    assert "member" in refusal["text"] and "budget" not in refusal["text"]
    assert pairs(bot) == []


def opened_modal(bot, slack) -> tuple[dict, dict]:
    """`/judge` alone: (the views.open call, the modal it opened)."""
    command(bot, "", slack, key="modal")
    [opened] = wait_for(lambda: slack.calls_to("views.open"), timeout=10, what="views.open")
    return opened, opened["view"] if isinstance(opened["view"], dict) else json.loads(opened["view"])


def test_judge_alone_opens_the_modal(bot, slack):
    opened, view = opened_modal(bot, slack)
    assert view["callback_id"] == "judge_modal" and opened["trigger_id"]
    metadata = json.loads(view["private_metadata"])
    assert metadata == {"response_url": slack.response_url("modal"), "channel_id": C}


def test_an_incomplete_modal_stays_open_with_errors(bot, slack):
    _, view = opened_modal(bot, slack)
    response = sr.post(bot.url, view_submission(view, question="Q?", answer="", judge="correctness"), SECRET)
    errors = response.json()["errors"]
    assert set(errors) == {"answer", "reference"}
    # The bot's lazy listeners start in the order their requests came: a later one's answer is the sign that the
    # submission's own lazy half (which must store nothing) has run.
    command(bot, "stats", slack, key="later")
    wait_for(lambda: slack.responses["later"], timeout=10, what="the answer to a later /judge stats")
    assert pairs(bot) == []


def test_the_modals_submission_queues_a_pair(bot, slack):
    _, view = opened_modal(bot, slack)
    response = sr.post(
        bot.url, view_submission(view, question="Q?", answer="A.", reference="Ref.", judge="correctness"), SECRET
    )
    assert response.status_code == 200 and response.text in ("", "{}")
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="the modal's pair")
    assert (pair.question_text, pair.answer_text, pair.reference_text, pair.judges) == (
        "Q?",
        "A.",
        "Ref.",
        ["correctness"],
    )
    assert pair.channel_id is None and pair.response_url == slack.response_url("modal") and pair.status == "pending"
    [note] = wait_for(lambda: slack.responses["modal"], timeout=10, what="the Judging… note")
    assert note["text"].startswith("Judging the answer you pasted…") and note["response_type"] == "ephemeral"


def test_stats_for_a_channel(bot, slack):
    for score in (0, 2, 4, 4):
        add_judgment(bot.runtime, score=score, channel_id=C)
    add_judgment(bot.runtime, score=None, status="error", channel_id=C)
    command(bot, f"stats <#{C}|support>", slack, key="stats")
    [answer] = wait_for(lambda: slack.responses["stats"], timeout=10, what="stats")
    text = answer["blocks"][-1]["text"]["text"]
    assert "4 answers judged" in text and "mean 2.50 / 4" in text and "50% at or below 2" in text
    assert "1 could not be judged" in text


def stats_with_votes_and_second_opinions(bot: ServedBot, slack: FakeSlack) -> str:
    """/judge stats of C, signed, once people voted on its alerts and second opinions disputed low scores, there
    and in another channel: the text of the stats."""
    voted = [add_judgment(bot.runtime, score=1, channel_id=C) for _ in range(5)]
    tie = add_judgment(bot.runtime, score=2, channel_id=C)
    elsewhere = add_judgment(bot.runtime, score=0, channel_id=OTHER)
    disputed = [
        (add_judgment(bot.runtime, score=0, channel_id=channel), second) for channel, second in ((C, 4), (C, 3))
    ]
    disputed += [(add_judgment(bot.runtime, score=0, channel_id=OTHER), 4)]
    with bot.runtime.db.session() as session:
        for index, judgment_id in enumerate(voted):  # 4 agreed with, 1 not; a tie says nothing
            record_vote(session, judgment_id, "U_ASKER", "right" if index < 4 else "wrong")
        record_vote(session, tie, "U_ASKER", "right")
        record_vote(session, tie, "U_BOSS", "wrong")
        record_vote(session, elsewhere, "U_BOSS", "wrong")
        for judgment_id, second in disputed:
            confirmations.record(session, judgment_id, SecondOpinion("disputed", second))
    command(bot, f"stats <#{C}|support>", slack, key="trust")
    [answer] = wait_for(lambda: slack.responses["trust"], timeout=10, what="stats")
    return answer["blocks"][-1]["text"]["text"]


def test_stats_show_alert_precision(bot, slack):
    """The channel's alert precision from people's votes (counts and the 90% interval); another channel's votes
    are not counted."""
    text = stats_with_votes_and_second_opinions(bot, slack)
    assert "8 answers judged" in text
    assert "4 of 5 voted alerts agreed with (80%, 90% interval" in text


def test_stats_show_the_low_scores_a_second_opinion_disputed(bot, slack):
    """Another channel's disputes are not counted."""
    text = stats_with_votes_and_second_opinions(bot, slack)
    assert "2 low scores disputed by a second opinion" in text


def test_stats_of_a_channel_the_person_is_not_in_is_refused(bot, slack):
    add_judgment(bot.runtime, score=1, channel_id=OTHER)
    command(bot, f"stats <#{OTHER}|finance>", slack, key="stats2")
    [answer] = wait_for(lambda: slack.responses["stats2"], timeout=10, what="the refusal")
    assert answer["text"] == ERRORS["stats_refused"] and "answers judged" not in json.dumps(answer)


def test_stats_where_relmon_is_not_says_what_to_do(bot, slack):
    command(bot, "stats", slack, key="dm", channel_id="D_DIRECT")  # a DM: relmon can't see it
    [answer] = wait_for(lambda: slack.responses["dm"], timeout=10, what="the answer")
    assert answer["text"] == ERRORS["stats_not_here"] and "can't find that message" not in answer["text"]


def test_stats_refusals_do_not_tell_whether_a_private_channel_exists(bot, slack):
    add_judgment(bot.runtime, score=1, channel_id=PRIVATE, private=True)
    answers = {}
    for key, name in (("named-private", "#secret"), ("named-nothing", "#no-such-channel"), ("id-private", PRIVATE)):
        command(bot, f"stats {name}", slack, key=key, user_id="U_STRANGER")
        [answers[key]] = wait_for(lambda key=key: slack.responses[key], timeout=10, what=key)
    assert {a["text"] for a in answers.values()} == {ERRORS["stats_refused"]}
    assert "answers judged" not in json.dumps(answers)


def test_a_refusal_on_a_rate_limited_response_url_is_an_ephemeral_at_once(bot, slack):
    """The bot's listeners share Bolt's few threads: a Retry-After of 30 s is not waited out there (a /judge
    opening its modal behind it would miss the 3 s trigger_id), the refusal comes as an ephemeral instead."""
    slack.rate_limit_response_url("busy", times=1, retry_after=30)
    started = time.monotonic()
    command(bot, f"stats <#{OTHER}|finance>", slack, key="busy")
    [ephemeral] = wait_for(lambda: slack.ephemerals, timeout=10, what="the ephemeral refusal")
    assert time.monotonic() - started < 3.0
    assert (ephemeral["channel"], ephemeral["user"], ephemeral["text"]) == (C, "U_ASKER", ERRORS["stats_refused"])
    assert len(slack.response_attempts["busy"]) == 1 and slack.responses["busy"] == []


def test_a_reply_the_response_url_took_without_answering_is_not_repeated(bot, slack, monkeypatch, caplog):
    monkeypatch.setattr(replies, "RESPONSE_URL_TIMEOUT_SECONDS", 0.5)
    slack.slow_response_url("late", 1.5)
    command(bot, f"stats <#{OTHER}|finance>", slack, key="late")
    [answer] = wait_for(lambda: slack.responses["late"], timeout=10, what="the refusal")
    # The answer times out (the bot settles it as unknown, its last step), then arrives.
    wait_for(
        lambda: any(r.getMessage() == "reply outcome unknown, not sent again" for r in caplog.records),
        timeout=10,
        what="the bot giving up on the answer",
    )
    wait_for(lambda: slack.response_answers["late"] == 1, timeout=10, what="the late answer sent")
    assert answer["text"] == ERRORS["stats_refused"] and len(slack.responses["late"]) == 1
    assert slack.ephemerals == [] and len(slack.response_attempts["late"]) == 1


def test_an_expired_response_url_falls_back_to_an_ephemeral_message(bot, slack):
    add_judgment(bot.runtime, score=4, channel_id=C)
    slack.expire_response_url("gone")
    command(bot, "stats", slack, key="gone")
    [ephemeral] = wait_for(lambda: slack.ephemerals, timeout=10, what="the ephemeral stats")
    assert (ephemeral["channel"], ephemeral["user"]) == (C, "U_ASKER") and "1 answers judged" in json.dumps(ephemeral)
    assert slack.responses["gone"] == [] and slack.posted() == []


def test_a_vote_on_a_deleted_judgment_says_what_to_do(bot, slack):
    body = sr.block_actions("feedback_wrong", "987654", channel_id="C_ALERTS", response_url=slack.response_url("v"))
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [answer] = wait_for(lambda: slack.responses["v"], timeout=10, what="the answer")
    assert answer["text"] == ERRORS["vote_gone"]


def test_the_manifest_usage_hint_matches_what_the_link_accepts(bot, slack):
    manifest = yaml.safe_load((Path(__file__).parents[2] / "bot" / "manifest.yml").read_text())
    [judge_command] = manifest["features"]["slash_commands"]
    advertised = re.findall(r"\[([a-z|]+)\]", judge_command["usage_hint"])
    named = [name for group in advertised for name in group.split("|") if name in JUDGE_NAMES]
    assert named, judge_command["usage_hint"]
    for name in named:
        assert command(bot, f"{LINK} {name}", slack, key=name).json()["text"].startswith("Judging"), name


def test_digest_is_routed_to_the_digest_preview_task(bot, slack, redis_url):
    command(bot, "digest", slack, key="digest")
    jobs = wait_for(lambda: queued(redis_url, QUEUE_SLACK) or queued(redis_url, QUEUE_JUDGE), timeout=5, what="task")
    assert jobs[0]["task"] == "workers.tasks.digest.send_digest_preview"
    # The response_url (a credential) is nowhere in the task's message, its repr or its arguments: an ID is.
    client = redis.Redis.from_url(redis_url)
    [raw] = client.lrange(QUEUE_SLACK, 0, -1) or client.lrange(QUEUE_JUDGE, 0, -1)
    url = slack.response_url("digest")
    assert url.encode() not in raw and b"/response/digest" not in raw
    envelope = json.loads(raw)
    [_args, kwargs, _embed] = json.loads(base64.b64decode(envelope["body"]))
    assert replies.response_url_of(client, kwargs["response_url_id"]) == url


def view_submission(view: dict, *, question: str, answer: str, judge: str, reference: str | None = None) -> bytes:
    def text(value):
        return {"value": {"type": "plain_text_input", "value": value or None}}

    payload = {
        "type": "view_submission",
        "team": {"id": "T_TEST", "domain": "example"},
        "user": {"id": "U_ASKER", "username": "ana", "team_id": "T_TEST"},
        "api_app_id": "A_RELMON",
        "token": "verification-token-unused",
        "trigger_id": "1.2.3",
        "view": {
            **view,
            "id": "V123",
            "state": {
                "values": {
                    "question": text(question),
                    "answer": text(answer),
                    "reference": text(reference),
                    "judge": {"value": {"type": "static_select", "selected_option": {"value": judge}}},
                }
            },
        },
        "response_urls": [],
    }
    return urllib.parse.urlencode({"payload": json.dumps(payload)}).encode()


def feedback_clicked(bot: ServedBot, slack: FakeSlack) -> int:
    """An alert posted, then clicked: U_ASKER's "right", U_TWO's "wrong", U_ASKER's change to "wrong". Returns the
    judgment alerted on."""
    runtime = bot.runtime
    judgment_id = add_judgment(runtime, score=0)
    delivery.consider(runtime, judgment_id)  # the alert, as the worker posts it
    [alert_ts] = slack.messages["C_ALERTS"].keys()
    for user, action in (("U_ASKER", "feedback_right"), ("U_TWO", "feedback_wrong"), ("U_ASKER", "feedback_wrong")):
        started = time.monotonic()
        body = sr.block_actions(action, str(judgment_id), user_id=user, channel_id="C_ALERTS", message_ts=alert_ts)
        response = sr.post(bot.url, body, SECRET)
        assert response.status_code == 200 and time.monotonic() - started < 3.0
        vote = action.removeprefix("feedback_")

        def recorded(user=user, vote=vote):  # the click's work runs after the answer: let it land before the next
            with runtime.db.session() as session:
                return (user, vote) in set(votes_for(session, judgment_id))

        wait_for(recorded, timeout=10, what=f"{user}'s {vote} vote")
    return judgment_id


def test_feedback_buttons_record_each_persons_latest_vote(bot, slack):
    judgment_id = feedback_clicked(bot, slack)

    def votes():
        with bot.runtime.db.session() as session:
            found = sorted(votes_for(session, judgment_id))
        return found if found == [("U_ASKER", "wrong"), ("U_TWO", "wrong")] else None

    wait_for(votes, timeout=10, what="both votes, U_ASKER's changed")


def test_feedback_buttons_queue_a_refresh_of_the_alert(bot, slack, redis_url):
    feedback_clicked(bot, slack)
    jobs = wait_for(lambda: len(queued(redis_url, QUEUE_SLACK)) >= 3 and queued(redis_url, QUEUE_SLACK), timeout=5)
    assert {job["task"] for job in jobs} == {"workers.tasks.slack.refresh_alert_votes"}


def test_the_alerts_link_button_is_acknowledged(bot):
    """Slack sends an action for a link button too."""
    assert sr.post(bot.url, sr.block_actions("open_message", "", channel_id="C_ALERTS"), SECRET).status_code == 200


# Membership is current ------------------------------------------------------------------------------------------


def member_event(kind: str, channel: str, user: str) -> dict:
    return sr.envelope({"type": kind, "channel": channel, "user": user, "channel_type": "C", "event_ts": sr.next_ts()})


def test_a_member_removed_from_the_channel_is_refused_at_once(bot, slack):
    """Judged, removed (member_left_channel), judged again: the second gets the refusal, not a judgment, well
    inside the public channel's one-minute cache; rejoining (member_joined_channel) serves them again."""
    command(bot, LINK, slack, key="first")
    wait_for(lambda: pairs(bot), timeout=10, what="the first pair")
    slack.channels[C].members.remove("U_ASKER")
    assert sr.post(bot.url, member_event("member_left_channel", C, "U_ASKER"), SECRET).status_code == 200
    command(bot, LINK, slack, key="second")
    [refusal] = wait_for(lambda: slack.responses["second"], timeout=10, what="the refusal")
    assert refusal["text"] == ERRORS["not_member"]
    # The refusal is the lazy listener's last act (bot.on_demand.judge_message): nothing is stored after it.
    assert len(pairs(bot)) == 1
    slack.channels[C].members.append("U_ASKER")
    assert sr.post(bot.url, member_event("member_joined_channel", C, "U_ASKER"), SECRET).status_code == 200
    command(bot, LINK, slack, key="third")
    wait_for(lambda: len(pairs(bot)) == 2, timeout=10, what="the rejoined member's pair")


def test_a_membership_event_reaches_every_process_cache_through_redis(bot, slack):
    """Two caches (two gunicorn workers, or a worker): an event handled by one drops the other's copy too."""
    from common.membership import MembershipCache

    here, there = MembershipCache(bot.runtime.redis), MembershipCache(bot.runtime.redis)
    client = bot.runtime.slack
    assert here.is_member(client, C, "U_ASKER") and there.is_member(client, C, "U_ASKER")
    slack.channels[C].members.remove("U_ASKER")
    assert there.is_member(client, C, "U_ASKER")  # a minute's cache for a public channel
    here.forget(C)
    assert there.is_member(client, C, "U_ASKER") is False


def test_without_events_a_private_channels_members_are_only_seconds_old(bot, slack):
    from common.membership import PRIVATE_MEMBERS_TTL_SECONDS, MembershipCache

    assert PRIVATE_MEMBERS_TTL_SECONDS <= 5
    cache = MembershipCache(bot.runtime.redis, private_ttl_seconds=0.2)
    client = bot.runtime.slack
    assert cache.is_member(client, PRIVATE, "U_ASKER") and cache.is_member(client, C, "U_ASKER")
    slack.channels[PRIVATE].members.remove("U_ASKER")
    slack.channels[C].members.remove("U_ASKER")
    time.sleep(0.3)  # the behaviour under test: the private channel's 0.2 s copy lapses
    assert cache.is_member(client, PRIVATE, "U_ASKER") is False
    assert cache.is_member(client, C, "U_ASKER") is True  # public: the minute's cache still holds


# On-demand use cannot starve monitoring --------------------------------------------------------------------------


@pytest.fixture
def limited_bot(settings_for, slack):
    """A bot allowing two on-demand requests a person an hour, three a day in all; U_ASKER has used their two."""
    settings = settings_for(slack_api_url=slack.api_url,
        on_demand_per_person_hour=2, on_demand_budget=3,
    )  # fmt: skip
    with BotServer(settings) as served:
        for number in range(2):
            command(served, LINK, slack, key=f"ok{number}")
            wait_for(lambda n=number: len(pairs(served)) == n + 1, timeout=10, what="an on-demand pair")
        yield served


def test_on_demand_requests_have_a_per_person_hourly_limit(limited_bot, slack):
    served = limited_bot
    command(served, LINK, slack, key="third")
    [refusal] = wait_for(lambda: slack.responses["third"], timeout=10, what="the rate limit")
    assert refusal["text"] == ERRORS["rate_limited"] and len(pairs(served)) == 2


def test_on_demand_requests_have_a_daily_budget_of_their_own(limited_bot, slack):
    served = limited_bot
    # Another person still may, until the day's on-demand budget (3) is spent.
    slack.channels[C].members.append("U_OTHER")
    assert sr.post(served.url, member_event("member_joined_channel", C, "U_OTHER"), SECRET).status_code == 200
    command(served, LINK, slack, key="other", user_id="U_OTHER")
    wait_for(lambda: len(pairs(served)) == 3, timeout=10, what="the other person's pair")
    command(served, LINK, slack, key="spent", user_id="U_OTHER")
    [spent] = wait_for(lambda: slack.responses["spent"], timeout=10, what="the budget refusal")
    assert spent["text"] == ERRORS["on_demand_budget"] and len(pairs(served)) == 3
    # The monitoring budget was not touched: nothing was charged in SQL by the bot.
    with served.runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(DailyUsage)).scalar_one() == 0
