"""/judge stats through signed HTTP requests to the served bot (real Redis, SQLite/PostgreSQL and FakeSlack): a
channel's figures, alert precision and disputed low scores, who is refused; and how an answer reaches the person when
the command's response_url is rate limited, slow or expired."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from sqlalchemy import update

from common import replies
from common.messages.verdicts import ERRORS
from common.reports.intervals import bootstrap_mean
from store import confirmations
from store.confirmations import SecondOpinion
from store.feedback import record_vote
from store.models import Judgment, Pair, as_utc
from tests import command_helpers
from tests.alert_helpers import add_judgment
from tests.bot_harness import ServedBot
from tests.command_helpers import OTHER, PRIVATE, C, command
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_ingest_alerts import ANSWER as INGESTED_ANSWER
from tests.integration.test_ingest_alerts import QUESTION as INGESTED_QUESTION
from tests.integration.test_ingest_alerts import ingested_judgment
from tests.processes import wait_for

bot, slack = command_helpers.bot, command_helpers.slack  # the served bot's fixtures, for pytest to find here


def test_stats_for_a_channel(bot, slack):
    """The mean with its bootstrap interval (from the scores' counts the store read) and the low share with its
    Wilson interval, each with its n."""
    for score in (0, 2, 4, 4) * 3:
        add_judgment(bot.runtime, score=score, channel_id=C)
    add_judgment(bot.runtime, score=None, status="error", channel_id=C)
    command(bot, f"stats <#{C}|support>", slack, key="stats")
    [answer] = wait_for(lambda: slack.responses["stats"], timeout=10, what="stats")
    text = answer["blocks"][-1]["text"]["text"]
    found = bootstrap_mean({0: 3, 2: 3, 4: 6}).interval
    assert f"12 answers judged · mean 2.50 / 4 ({found.low:.2f}–{found.high:.2f}, n=12)" in text
    assert "50% at or below 2 (25–75%, n=12)" in text and "1 could not be judged" in text


def test_stats_of_too_few_answers_say_so(bot, slack):
    for score in (0, 2, 4, 4):
        add_judgment(bot.runtime, score=score, channel_id=C)
    command(bot, f"stats <#{C}|support>", slack, key="stats")
    [answer] = wait_for(lambda: slack.responses["stats"], timeout=10, what="stats")
    text = answer["blocks"][-1]["text"]["text"]
    assert "4 answers judged · mean too few (n=4) · at or below 2: too few (n=4)" in text


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
    """The channel's alert precision from people's votes (its counts; too few votes for a rate); another channel's
    votes are not counted."""
    text = stats_with_votes_and_second_opinions(bot, slack)
    assert "8 answers judged" in text
    assert "4 of 5 voted alerts agreed with (too few for a rate)" in text


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
    assert (ephemeral["channel"], ephemeral["user"]) == (C, "U_ASKER") and "1 answer judged" in json.dumps(ephemeral)
    assert slack.responses["gone"] == [] and slack.posted() == []


def test_stats_of_a_bots_exchanges_show_their_figures_and_count_them_in_their_channel(bot, slack):
    """`/judge stats bot:helpdesk`: the bot's exchanges sent to the ingest API in no channel (figures only); one
    naming a Slack channel counts in that channel's stats."""
    for n, score in enumerate((0, 4, 4)):
        ingested_judgment(bot.runtime, "dm", score=score, client_id=f"dm{n}")
    ingested_judgment(bot.runtime, "public", score=2, client_id="pub", channel_id=C)
    command(bot, "stats bot:helpdesk", slack, key="bot")  # the asker is in no channel of the bot: figures still
    [answer] = wait_for(lambda: slack.responses["bot"], timeout=10, what="stats")
    text = json.dumps(answer)
    assert "helpdesk (bot conversations)" in text and "3 answers judged" in text and "mean too few (n=3)" in text
    assert INGESTED_QUESTION not in text and INGESTED_ANSWER not in text
    command(bot, f"stats <#{C}|support>", slack, key="channel")
    [answer] = wait_for(lambda: slack.responses["channel"], timeout=10, what="stats")
    assert "1 answer judged · mean too few (n=1)" in answer["blocks"][-1]["text"]["text"]


def test_stats_show_a_team_judge_s_pass_rate_and_its_prompt_change(make_bot, slack):
    """A team judge (judges.d, pass/fail) reads as in the digest: its pass rate with interval and n, not the seed
    judges' mean and low share; its prompt changed within the 7 days, so the rate is said to mix two versions. A team
    judge that gave no verdict in the channel is not listed."""
    bot = make_bot(judges_dir=Path(__file__).resolve().parents[2] / "examples" / "judges.d")
    earlier = datetime.now(UTC) - timedelta(days=3)
    old = [add_judgment(bot.runtime, score=1, judge="refund_policy", max_score=1, created_at=earlier) for _ in range(4)]
    new = [add_judgment(bot.runtime, score=s, judge="refund_policy", max_score=1) for s in (1,) * 5 + (0,) * 3]
    add_judgment(bot.runtime, score=None, status="null", judge="refund_policy", max_score=1)
    for score in (0, 2, 4, 4) * 3:
        add_judgment(bot.runtime, score=score, channel_id=C)
    with bot.runtime.db.session() as session:
        for ids, version in ((old, "1f0a9c2e" * 8), (new, "7b3d41aa" * 8)):
            session.execute(update(Judgment).where(Judgment.id.in_(ids)).values(prompt_version=version))
        old_pairs = [session.get(Judgment, judgment_id).pair_id for judgment_id in old]
        session.execute(update(Pair).where(Pair.id.in_(old_pairs)).values(created_at=earlier))
        started = as_utc(session.get(Pair, session.get(Judgment, new[0]).pair_id).created_at)
    command(bot, f"stats <#{C}|support>", slack, key="team")
    [answer] = wait_for(lambda: slack.responses["team"], timeout=10, what="stats")
    lines = answer["blocks"][-1]["text"]["text"].splitlines()
    [team] = [line for line in lines if line.startswith("*refund_policy*")]
    assert team == "*refund_policy*: 75% passed (47–91%, n=12) · 1 not judged"  # 9 of 12 passed
    since = started.astimezone(ZoneInfo(bot.runtime.settings.timezone))
    note = f"Judge changed: refund_policy v2 since {since:%a %H:%M} (v1 before: the 7 days' rate mixes them)"
    assert lines[lines.index(team) + 1] == note
    assert any(line.startswith("*Relevancy*: 12 answers judged · mean 2.50 / 4") for line in lines)
    assert not [line for line in lines if "status_page" in line or "customer_language" in line]
