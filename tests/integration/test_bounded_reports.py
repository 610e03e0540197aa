"""Bounded work per person: App Home, `/judge digest` and `/judge stats` count against
RELMON_REPORTS_PER_PERSON_MINUTE (a short answer past it, another person unaffected); App Home is built on the bot's
report thread from a view cached per viewer class (a new answer, or another class, gets a fresh one);
`/judge stats #name` reads conversations.list once, not once per call."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from bot.listeners.home import publish_home
from bot.stats import channel_stats_message
from common.membership import MembershipCache
from common.messages.verdicts import ERRORS
from common.reports.topic_runs import refresh
from common.reports.view_cache import forget_views
from common.runtime import slack_client_for
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment
from tests.builders import SECRET
from tests.processes import wait_for
from tests.sql_capture import statements_run
from workers.digest.delivery import deliver_preview

C = "C_SUPPORT"
LIMITED = ERRORS["reports_rate_limited"]


def ask(bot, slack, text: str, key: str, user: str = "U_ASKER") -> str:
    body = si.slash_command(text, response_url=slack.response_url(key), user_id=user)
    assert sr.post(bot.url, body, SECRET).status_code == 200
    [answer] = wait_for(lambda: slack.responses[key], timeout=10, what=f"the answer to {text}")
    return str(answer)


def start_early_in_a_minute() -> None:
    """The limit counts per clock minute: the asks start early in one, so that its boundary cannot fall between
    the first ones (which would let a fourth through in the next minute)."""
    second = datetime.now(UTC).second + datetime.now(UTC).microsecond / 1e6
    if second > 40:
        time.sleep(60.5 - second)


def test_report_requests_are_limited_per_person(make_bot, slack) -> None:
    slack.add_user("U_OTHER", "bo", "Bo Lin")
    slack.add_channel(C, "support", members=["U_ASKER", "U_OTHER", "U_RELMON"])
    bot = make_bot(reports_per_person_minute=3)
    add_judgment(bot.runtime, score=2, channel_id=C)
    start_early_in_a_minute()
    answers = [ask(bot, slack, f"stats <#{C}|support>", f"stats{n}") for n in range(4)]
    answers += [ask(bot, slack, "digest", f"digest{n}") for n in range(3)]
    served = [n for n, text in enumerate(answers) if LIMITED not in text]
    assert served[:3] == [0, 1, 2] and len(served) <= 6  # 3 a minute (7 asks span two minutes at most)
    assert LIMITED in answers[3] or LIMITED in answers[4]
    assert LIMITED not in ask(bot, slack, f"stats <#{C}|support>", "other", user="U_OTHER")


def test_stats_by_name_reads_the_channel_list_once(make_bot, slack) -> None:
    bot = make_bot(reports_per_person_minute=100)
    for n in range(4):
        assert ERRORS["stats_refused"] in ask(bot, slack, "stats #no-such-channel", f"unknown{n}")
    assert ERRORS["stats_refused"] not in ask(bot, slack, "stats #support", "known")
    assert len(slack.calls_to("conversations.list")) == 1


@pytest.fixture
def home(make_bot, slack):
    """A private channel's judged answer; (the runtime, a function publishing a person's App Home)."""
    slack.add_channel("G_TEAM", "team", is_private=True, members=["U_IN", "U_RELMON"])
    bot = make_bot()
    add_judgment(bot.runtime, score=1, channel_id="G_TEAM", private=True)
    runtime = bot.runtime
    client, membership = slack_client_for(runtime.settings), MembershipCache(runtime.redis)
    return runtime, lambda user: publish_home(runtime, client, membership, user)


def test_home_views_are_cached_per_viewer_class(home) -> None:
    runtime, publish = home
    member = publish("U_IN")
    outsider = publish("U_OUT")
    assert "G_TEAM" in str(member) and "G_TEAM" not in str(outsider)  # two classes, two views
    assert publish("U_IN") == member  # the cached one
    assert len(runtime.redis.keys("relmon:home:view:*")) == 2


def test_home_views_follow_new_data(home) -> None:
    runtime, publish = home
    outsider = publish("U_OUT")
    add_judgment(runtime, score=4, channel_id=C)
    assert publish("U_OUT") != outsider  # a new answer: built again


def report_reads(runtime, asks) -> list[str]:
    """The database reads `asks()` makes apart from the cache's own (the data's version, the channels listed)."""
    with statements_run(runtime.db.engine) as queries:
        asks()
    cache_own = ("max(pairs.id)", "DISTINCT pairs.channel_id", "DISTINCT exchanges.bot")
    return [q for q in queries if not any(own in q for own in cache_own)]


def test_twenty_asks_build_one_report(make_bot, slack) -> None:
    slack.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
    bot = make_bot(reports_per_person_minute=100)
    runtime = bot.runtime
    add_judgment(runtime, score=2, channel_id=C)
    refresh(runtime, datetime.now(UTC))  # the daily topics run: every preview reads it (none would make it first)
    stats, previews = [], []

    def preview(n: int) -> dict:
        url = slack.response_url(f"preview{n}")
        return deliver_preview(runtime, datetime.now(UTC), user_id="U_ASKER", channel_id=C, response_url=url)

    twenty_stats = report_reads(runtime, lambda: stats.extend(channel_stats_message(runtime, C) for _ in range(20)))
    twenty_previews = report_reads(runtime, lambda: previews.extend(preview(n) for n in range(20)))
    assert all(s == stats[0] for s in stats) and all(p == previews[0] for p in previews)  # all twenty answered, alike
    assert len(slack.responses["preview19"]) == 1
    forget_views(runtime.redis)  # what one build reads, to compare
    one_stats = report_reads(runtime, lambda: channel_stats_message(runtime, C))
    one_preview = report_reads(runtime, lambda: preview(20))
    assert one_stats and one_preview and any("pairs.question_text" in q for q in one_preview)  # built, with quotes
    assert sorted(twenty_stats) == sorted(one_stats)  # twenty asks, one build each
    assert sorted(twenty_previews) == sorted(one_preview)
