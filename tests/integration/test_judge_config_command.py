"""`/judge config` through signed Slack requests to the served bot (real Redis, SQLite/PostgreSQL, FakeSlack over
HTTP, the fake LLM): an admin turns quoting on for a bot and its next dm exchange's alert quotes it, then off and the
next one does not; a person who is no admin is refused privately, naming whom to ask, and nothing changes; a judge
set for a channel runs on its next answer; a channel's rule is shown to its members with each value's source; bad
input gets the usage line in the acknowledgement itself."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from common.runtime import Runtime
from store.exchange_models import Exchange
from store.models import Judgment, PairStatus
from store.rule_overrides import override_of
from tests import alert_helpers, pipeline_helpers
from tests import slack_interactions as si
from tests import slack_requests as sr
from tests.alert_helpers import write_rules
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_ingest_alerts import ANSWER, QUESTION, REASONING, ingested_judgment
from tests.integration.test_ingest_api import TOKEN, exchange, post
from tests.pipeline_helpers import add_pairs
from tests.processes import wait_for
from workers.alerts import delivery

one_hour = alert_helpers.one_hour  # autouse: the alert caps count per UTC hour
fake_openai = pipeline_helpers.fake_openai

SUPPORT, ALERTS, BOT_ALERTS = "C_SUPPORT", "C_ALERTS", "C_BOT_ALERTS"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "judges.d"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_user("U_ADMIN", "admin", "Ada Admin", is_admin=True)
        fake.add_user("U_MEMBER", "member", "Mo Member")
        fake.add_user("U_STRANGER", "stranger", "Sam Stranger")
        fake.add_user("U_LEAD", "lead", "Lee Lead")
        fake.add_channel("C_NOT_IN", "elsewhere", members=["U_ADMIN"])
        fake.add_usergroup("S_SUPPORT_TEAM", ["U_MEMBER"], handle="support-team")
        fake.add_channel(SUPPORT, "support", members=["U_ADMIN", "U_MEMBER", "U_RELMON"])
        fake.add_channel(ALERTS, "alerts", members=["U_ADMIN", "U_RELMON"])
        fake.add_channel(BOT_ALERTS, "bot-alerts", is_private=True, members=["U_ADMIN", "U_RELMON"])
        yield fake


@pytest.fixture
def bot(make_bot, fake_openai, tmp_path: Path) -> ServedBot:
    rules = write_rules(tmp_path, {"bots": {"helpdesk": {"viewers": ["U_ADMIN"]}}})
    return make_bot(
        channel_rules_file=rules,
        alert_channel=ALERTS,
        degradation_window_minutes=0,
        judges_dir=EXAMPLES,
        openai_base_url=fake_openai.base_url,
        openai_api_key="sk-test",
        llm_max_retries=0,
        confirm="off",
        admins=["U_LISTED"],
        ingest_tokens=TOKEN,
    )


def config(bot: ServedBot, slack: FakeSlack, text: str, user: str, key: str, channel: str = SUPPORT) -> dict:
    """`/judge config <text>` as `user` typed it in `channel`: the acknowledgement's body (empty when the answer
    follows on the response_url under `key`)."""
    body = si.slash_command(f"config {text}".strip(), user_id=user, channel_id=channel,
                            response_url=slack.response_url(key))  # fmt: skip
    started = time.monotonic()
    response = sr.post(bot.url, body, SECRET)
    assert response.status_code == 200, response.text
    assert time.monotonic() - started < 3.0  # acknowledged within Slack's deadline; the rest follows
    return response.json() if response.text else {}


def reply(slack: FakeSlack, key: str) -> str:
    [answer] = wait_for(lambda: slack.responses[key], timeout=10, what=f"the reply {key}")
    assert answer.get("response_type", "ephemeral") == "ephemeral"
    return json.dumps(answer, ensure_ascii=False)


def alert_quotes(bot: ServedBot, slack: FakeSlack, client_id: str) -> bool:
    """Whether the alert of a new low-scored dm exchange of helpdesk, posted in its alert channel, quotes it."""
    judgment_id = ingested_judgment(bot.runtime, "dm", client_id=client_id)
    assert delivery.consider(bot.runtime, judgment_id).low == "posted"
    text = json.dumps(slack.posted(BOT_ALERTS)[-1])
    quoted = [words for words in (QUESTION, ANSWER, REASONING) if words in text]
    assert quoted in ([], [QUESTION, ANSWER, REASONING])
    return bool(quoted)


def test_an_admin_turns_quoting_on_for_a_bot_and_its_next_dm_alert_quotes(bot: ServedBot, slack: FakeSlack) -> None:
    other_process = Runtime(bot.settings)  # a worker elsewhere: reads the change on its next refresh
    other_process.rule_source.refresh_seconds = 0
    try:
        assert other_process.rules.bot("helpdesk").quote_private is None  # type: ignore[union-attr]

        # Not an admin: refused privately, naming whom to ask; nothing stored.
        config(bot, slack, "bot:helpdesk alert #bot-alerts quote on", "U_MEMBER", "refused")
        refused = reply(slack, "refused")
        assert "Only admins can change" in refused and "<@U_LISTED>" in refused
        with bot.runtime.db.session() as session:
            assert override_of(session, "bot:helpdesk") == {}

        config(bot, slack, "bot:helpdesk alert #bot-alerts quote on", "U_ADMIN", "on")
        changed = reply(slack, "on")
        assert "Rule changed for bot helpdesk" in changed and "there: on _(Slack)_" in changed
        assert "Viewers (“Show the exchange”): <@U_ADMIN> _(file)_" in changed
        assert alert_quotes(bot, slack, "first")
        assert other_process.rules.bot("helpdesk").quote_private is True  # type: ignore[union-attr]

        config(bot, slack, "bot:helpdesk quote off", "U_ADMIN", "off")
        assert "there: off _(Slack)_" in reply(slack, "off")
        assert not alert_quotes(bot, slack, "second")

        config(bot, slack, "bot:helpdesk reset", "U_ADMIN", "reset")
        reset = reply(slack, "reset")  # back to the file's rule: RELMON_ALERT_CHANNEL, no quoting
        assert f"Alert channel: <#{ALERTS}> _(default)_" in reset and "there: off _(default)_" in reset
        with bot.runtime.db.session() as session:
            assert override_of(session, "bot:helpdesk") == {}
        assert other_process.rules.bot("helpdesk").alert_channel is None  # type: ignore[union-attr]
    finally:
        other_process.db.dispose()


def test_a_judge_set_for_a_channel_runs_on_its_next_answer(bot: ServedBot, slack: FakeSlack) -> None:
    ack = config(bot, slack, "#support judges relevancy,refund,tone", "U_ADMIN", "unknown")
    assert ack == {}  # the names are checked against the judges after the ack
    unknown = reply(slack, "unknown")
    assert "No judge called refund, tone: the judges are relevancy, correctness, grounded" in unknown
    assert "refund_policy" in unknown

    config(bot, slack, f"<#{SUPPORT}|support> judges relevancy,refund_policy", "U_ADMIN", "judges")
    shown = reply(slack, "judges")
    assert "Judges: relevancy, refund_policy _(Slack)_" in shown
    assert "relevancy ≤ 2 _(default)_ · refund_policy ≤ 0 _(its judge file)_" in shown

    question, promise = "I was charged twice, can I get my money back?", "I'll refund the second charge right away."
    [pair_id] = add_pairs(bot.runtime.db, 1, channel=SUPPORT, question=question, answer=promise)
    assert judged(bot, pair_id) == {"relevancy": 4, "refund_policy": 0}


def judged(bot: ServedBot, pair_id: int) -> dict[str, float | None]:
    from workers.tasks.judging import judge_pair

    assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
    with bot.runtime.db.session() as session:
        return {row.judge: row.score for row in session.scalars(select(Judgment).where(Judgment.pair_id == pair_id))}


def test_a_judge_set_for_a_bot_runs_on_its_next_exchange(bot: ServedBot, slack: FakeSlack) -> None:
    """An exchange sent to the ingest API in no Slack channel is judged under its bot's rule."""
    config(bot, slack, "bot:helpdesk judges refund_policy", "U_ADMIN", "judges")
    assert "Judges: refund_policy _(Slack)_" in reply(slack, "judges")
    sent = exchange("refund-1", question="I was charged twice, can I get my money back?",
                    answer="I'll refund the second charge right away.")  # fmt: skip
    assert post(bot.base_url, sent).status_code == 202

    def pair_id() -> int | None:
        with bot.runtime.db.session() as session:
            return session.scalar(select(Exchange.pair_id).where(Exchange.client_id == "refund-1"))

    assert judged(bot, wait_for(pair_id, timeout=10, what="the exchange's pair")) == {"refund_policy": 0}


def test_viewers_named_by_mention_or_by_plain_handle(bot: ServedBot, slack: FakeSlack) -> None:
    """Slack sends mentions escaped (<@U…>, <!subteam^S…>); a handle typed plainly is looked up in Slack."""
    config(bot, slack, "bot:helpdesk viewers <@U_LEAD|lead> <!subteam^S_SUPPORT_TEAM|@support-team>", "U_ADMIN", "ids")
    assert "Viewers (“Show the exchange”): <@U_LEAD>, <!subteam^S_SUPPORT_TEAM> _(Slack)_" in reply(slack, "ids")
    config(bot, slack, "bot:helpdesk viewers none", "U_ADMIN", "none")
    assert "Viewers (“Show the exchange”): nobody _(Slack)_" in reply(slack, "none")
    config(bot, slack, "bot:helpdesk viewers @lead @support-team", "U_ADMIN", "handles")
    assert "<@U_LEAD>, <!subteam^S_SUPPORT_TEAM> _(Slack)_" in reply(slack, "handles")
    assert bot.runtime.rules.bot("helpdesk").viewers == ["U_LEAD", "S_SUPPORT_TEAM"]  # type: ignore[union-attr]
    config(bot, slack, "bot:helpdesk viewers @lead @nobody", "U_ADMIN", "unknown")
    assert "relmon can't find @nobody" in reply(slack, "unknown")
    with bot.runtime.db.session() as session:
        assert override_of(session, "bot:helpdesk") == {"viewers": ["U_LEAD", "S_SUPPORT_TEAM"]}


def test_a_member_sees_the_channel_s_rule_and_a_stranger_does_not(bot: ServedBot, slack: FakeSlack) -> None:
    config(bot, slack, "", "U_MEMBER", "member")
    shown = reply(slack, "member")
    assert "Rule in force for <#C_SUPPORT>" in shown
    assert f"Alert channel: <#{ALERTS}> _(default)_" in shown and "Judges: relevancy _(default)_" in shown
    config(bot, slack, "#support", "U_STRANGER", "stranger", channel="D_STRANGER")
    assert "Only admins" in reply(slack, "stranger")
    config(bot, slack, "#no-such-channel", "U_STRANGER", "no-such", channel="D_STRANGER")
    assert reply(slack, "no-such") == reply(slack, "stranger")  # nobody learns which channels exist
    config(bot, slack, "#no-such-channel quote on", "U_ADMIN", "admin-no-such")
    assert "relmon can't find #no-such-channel" in reply(slack, "admin-no-such")
    config(bot, slack, "", "U_MEMBER", "dm", channel="D_MEMBER")
    assert "Run `/judge config` in a channel" in reply(slack, "dm")


def test_an_alert_channel_relmon_is_not_in_is_refused(bot: ServedBot, slack: FakeSlack) -> None:
    for key, where in (("public", "<#C_NOT_IN|elsewhere>"), ("unknown", "G_NOWHERE1")):
        config(bot, slack, f"alert {where}", "U_ADMIN", key)
        assert "relmon isn't in <#" in reply(slack, key) and "/invite @relmon" in reply(slack, key)
    with bot.runtime.db.session() as session:
        assert override_of(session, SUPPORT) == {}


@pytest.mark.parametrize(
    "text", ["quote maybe", "#support viewers @lead", "threshold relevancy lots", "bogus", "reset everything"]
)
def test_bad_input_gets_the_usage_line_in_the_ack(bot: ServedBot, slack: FakeSlack, text: str) -> None:
    answer = config(bot, slack, text, "U_ADMIN", "bad")
    assert answer["response_type"] == "ephemeral" and "Usage: `/judge config" in answer["text"]
    with bot.runtime.db.session() as session:
        assert override_of(session, SUPPORT) == {}
