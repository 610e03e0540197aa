"""What the sent digest shows, against the fake Slack Web API (real HTTP) and a real database (SQLite and
PostgreSQL): many busy channels within Slack's total of block text, an empty week without a chart, a private
channel's text and figures only where its rules and audience allow."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from common.membership import MembershipCache
from common.runtime import Runtime
from store.models import Digest, Judgment, Pair
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL, assert_png_chart, digest_ts, now_utc, seed
from tests.fakes.slack_server import FakeSlack
from workers.digest.delivery import deliver_digest

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures


def seed_busy_week(runtime: Runtime, now: datetime, channels: int) -> None:
    """`channels` public channels, three judges each, four poorly scored answers apiece with long texts."""
    long_text = "The customer asks how to rotate the signing keys without downtime. " * 40
    with runtime.db.session() as session:
        for c in range(channels):
            for i in range(4):
                pair = Pair(
                    channel_id=f"CBUSY{c:03d}",
                    answer_ts=f"1763100000.{c * 10 + i:06d}",
                    status="judged",
                    question_text=long_text,
                    answer_text=long_text,
                    created_at=now - timedelta(hours=3 + 30 * i),
                )
                session.add(pair)
                session.flush()
                for judge, score, top in (("relevancy", i % 3, 4), ("correctness", i % 2, 2), ("grounded", 1, 5)):
                    session.add(
                        Judgment(
                            pair_id=pair.id,
                            judge=judge,
                            status="ok",
                            score=score,
                            max_score=top,
                            normalized_score=score / top,
                            prompt_tokens=900,
                            completion_tokens=60,
                        )
                    )


def test_a_digest_of_many_busy_channels_is_posted_within_slacks_total(runtime: Runtime, slack: FakeSlack) -> None:
    """Slack refuses blocks holding more than about 12,000 characters of text in all (`msg_blocks_too_long`); the
    digest of 30 busy channels held far more, and every retry was refused the same way."""
    with pytest.raises(SlackApiError) as refused:  # the fake refuses as Slack does
        runtime.slack.chat_postMessage(
            channel=DIGEST_CHANNEL,
            text="x",
            blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3000}}] * 5,
        )
    assert refused.value.response["error"] == "msg_blocks_too_long"
    seed_busy_week(runtime, now_utc(), 30)

    assert deliver_digest(runtime, now_utc()).status == "sent"

    _refused, posted = slack.posted(DIGEST_CHANNEL)
    text = str(posted["blocks"])
    assert slack.max_blocks_text == 12_000 and "Weekly digest" in text and "<#CBUSY000>" in text
    assert "more channels: see `/judge stats #channel` or the App Home" in text
    assert "rotate the signing keys" in text  # the week's worst answers are still quoted
    assert_png_chart(slack, digest_ts(runtime))


def test_an_empty_week_posts_the_digest_without_a_chart(runtime: Runtime, slack: FakeSlack) -> None:
    outcome = deliver_digest(runtime, now_utc())
    assert outcome.status == "sent" and outcome.file_id is None
    (posted,) = slack.posted(DIGEST_CHANNEL)
    assert "No answers were captured" in str(posted["blocks"]) and "thread" not in str(posted["blocks"])
    assert slack.calls_to("files.getUploadURLExternal") == [] and slack.files == {}
    with runtime.db.session() as session:
        assert session.execute(select(Digest.status)).scalar_one() == "sent"


def test_private_text_is_quoted_where_the_rules_allow(make_runtime, slack: FakeSlack, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(f"channels:\n  GPRIV:\n    quote_private: true\n    alert_channel: {DIGEST_CHANNEL}\n")
    runtime = make_runtime(channel_rules_file=rules)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    assert "secret answer" in str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])


@pytest.mark.parametrize(
    "rules_yaml",
    [
        # Quoting on in the channel's own rule, the alert channel only inherited from the defaults.
        f"defaults:\n  alert_channel: {DIGEST_CHANNEL}\nchannels:\n  GPRIV:\n    quote_private: true\n",
        # Quoting and the alert channel both from the defaults.
        f"defaults:\n  quote_private: true\n  alert_channel: {DIGEST_CHANNEL}\n",
    ],
    ids=["own-quote-only", "defaults-quote"],
)
def test_private_text_is_not_quoted_unless_its_own_rule_names_the_alert_channel(
    make_runtime, slack: FakeSlack, tmp_path: Path, rules_yaml: str
) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(rules_yaml)
    runtime = make_runtime(channel_rules_file=rules)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    blocks = str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])
    assert "secret answer" not in blocks and "secret question" not in blocks
    # Nor its figures and link: the digest channel is not its own rule's, and its members are not GPRIV's.
    assert "GPRIV" not in blocks and "<#C2>" in blocks


def test_a_private_channels_figures_show_only_where_its_audience_may_see_them(
    make_runtime, slack: FakeSlack, redis_url: str
) -> None:
    """As App Home shows them to a person: in a digest channel whose every member is one of the private channel's,
    its score and link are there (its text not: its own rule does not quote it there); once someone who is not
    its member joins the digest channel, neither is."""
    slack.add_channel("GPRIV", "private", is_private=True, members=["U_IN", "U_RELMON"])
    slack.add_channel(DIGEST_CHANNEL, "digest", members=["U_IN", "U_RELMON"])
    runtime = make_runtime(redis_url=redis_url)
    seed(runtime, now_utc())
    assert deliver_digest(runtime, now_utc()).status == "sent"
    shown = str(slack.posted(DIGEST_CHANNEL)[0]["blocks"])
    assert "<#GPRIV>" in shown and "secret answer" not in shown

    slack.add_channel(DIGEST_CHANNEL, "digest", members=["U_IN", "U_RELMON", "U_OUT"])
    MembershipCache(runtime.redis).forget(DIGEST_CHANNEL)  # as the member_joined_channel event does
    assert deliver_digest(runtime, now_utc(), force=True).status == "sent"
    assert "GPRIV" not in str(slack.posted(DIGEST_CHANNEL)[1]["blocks"])
