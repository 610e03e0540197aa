"""Who may use /judge, through signed HTTP requests to the served bot (real Redis, SQLite/PostgreSQL and FakeSlack):
channel membership kept current by Slack's events and short caches, and the on-demand limits (per person an hour, a
daily budget of their own) that keep on-demand use from starving monitoring."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import func, select

from common.messages.verdicts import ERRORS
from store.models import DailyUsage
from tests import command_helpers
from tests import slack_requests as sr
from tests.bot_harness import BotServer
from tests.builders import SECRET
from tests.command_helpers import LINK, PRIVATE, C, command, pairs
from tests.processes import wait_for

bot, slack = command_helpers.bot, command_helpers.slack  # the served bot's fixtures, for pytest to find here


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
