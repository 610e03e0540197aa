"""/judge, the "Judge this answer" shortcut and the modal, through signed HTTP requests to the served bot (real
Redis, SQLite/PostgreSQL and FakeSlack): help, a link to an answer, who may have it judged, the modal's submission and
`/judge digest`. Judging itself is the worker's job: here we check what the bot stores and enqueues;
tests/system/test_commands_e2e.py runs a real worker. Stats, feedback buttons and membership are in the
test_command_*.py modules beside this one."""

from __future__ import annotations

import base64
import json
import re
import time
import urllib.parse
from pathlib import Path

import redis
import yaml

from common import replies
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK
from common.messages.verdicts import ERRORS
from judges.names import JUDGE_NAMES
from store.models import Pair
from tests import command_helpers
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.command_helpers import ANSWER_TS, LINK, OTHER, PRIVATE, QUESTION_TS, C, command, pairs, queued
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for

bot, slack = command_helpers.bot, command_helpers.slack  # the served bot's fixtures, for pytest to find here


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


def test_link_with_a_team_judge_s_name(make_bot, slack):
    """A team's judge (RELMON_JUDGES_DIR) is named as a seed judge is, or after --judge."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
    bot = make_bot(judges_dir=examples)
    assert "Judging that answer" in command(bot, f"{LINK} --judge refund_policy", slack).json()["text"]
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    assert pair.judges == ["refund_policy"]


def test_link_with_judge_equals_a_team_judge(make_bot, slack):
    examples = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
    bot = make_bot(judges_dir=examples)
    assert "Judging that answer" in command(bot, f"{LINK} --judge=customer_language", slack).json()["text"]
    [pair] = wait_for(lambda: pairs(bot), timeout=10, what="an on-demand pair")
    assert pair.judges == ["customer_language"]


def test_an_unknown_judge_is_refused_with_the_known_ones(make_bot, slack):
    """Refused in the ack, naming the judges in force (seed and the team's); nothing stored or queued."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "judges.d"
    bot = make_bot(judges_dir=examples)
    body = command(bot, f"{LINK} --judge refund", slack).json()
    assert body["response_type"] == "ephemeral"
    assert body["text"].startswith("relmon has no judge “refund”: use `--judge` with one of ")
    for name in (*JUDGE_NAMES, "refund_policy", "customer_language", "status_page"):
        assert name in body["text"], name
    assert "`--judge` needs a judge's name" in command(bot, f"{LINK} --judge", slack).json()["text"]
    assert "run `/judge` alone" in command(bot, f"{LINK} --judge=grounded", slack).json()["text"]
    time.sleep(0.5)  # the lazy listener runs after the ack: it must store nothing either
    assert pairs(bot) == []
    assert slack.responses.get("cmd", []) == []


def test_help_shows_the_judge_flag(bot, slack):
    assert "--judge NAME" in command(bot, "help", slack).json()["blocks"][0]["text"]["text"]


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
    response = sr.post(bot.url, si.message_action(message, channel_id=C, response_url=slack.response_url("sc")), SECRET)
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
    sr.post(bot.url, si.message_action(message, channel_id=OTHER, response_url=slack.response_url("sc2")), SECRET)
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
