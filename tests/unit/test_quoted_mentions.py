"""Quoted text never notifies: mentions and broadcasts in alerts, summaries and verdicts are escaped so Slack
resolves none of them."""

from __future__ import annotations

import re

from common.messages import blocks as bk
from common.messages.alerts import low_score_alert
from common.messages.summaries import SummaryItem, summary_message
from common.messages.verdicts import VerdictItem, verdict_message
from tests.message_checks import AT, PERMALINK, alert, all_text

PINGS = "Hey <!here> and <!channel>, <!everyone>, <!subteam^S123> <!subteam^S123|@team> @here @channel @Everyone"


def assert_notifies_nobody(rendered: str) -> None:
    """No raw `<!…>` special and no bare broadcast word: Slack resolves neither once escaped like this."""
    assert "<!" not in rendered.replace("<!date^", "")  # relmon's own dates are the only specials
    assert not re.search(r"(?<![\w@])@(here|channel|everyone)\b", rendered, re.IGNORECASE), rendered
    assert f"@{bk.ZERO_WIDTH_SPACE}here" in rendered


ESCAPED = PINGS + " a & b <@U123> mail@here.com @heresy"


def test_escape_neutralises_broadcasts():
    escaped = bk.escape(ESCAPED)
    assert_notifies_nobody(escaped)
    assert "&lt;!here&gt;" in escaped and "&lt;!subteam^S123|@team&gt;" in escaped
    assert "mail@here.com" in escaped and "@heresy" in escaped  # not broadcast words: left as written


def test_escape_keeps_mrkdwn_escaping():
    assert "a &amp; b &lt;@U123&gt;" in bk.escape(ESCAPED)


def test_alerts_quote_mentions_without_pinging():
    pings = alert(question=PINGS, answer=PINGS, reasoning=PINGS)
    assert_notifies_nobody(all_text(low_score_alert(pings)))


def test_summaries_quote_mentions_without_pinging():
    item = SummaryItem(
        judgment_id=1, judge="relevancy", score=1.0, max_score=4.0, channel_id="C1", answered_at=AT,
        permalink=PERMALINK, reasoning=PINGS,
    )  # fmt: skip
    assert_notifies_nobody(all_text(summary_message(AT, [item], caps={"C1": 5})))


def test_verdicts_quote_mentions_without_pinging():
    verdict = verdict_message(
        [VerdictItem("relevancy", "ok", 1.0, 4.0, PINGS)], question=PINGS, answer=PINGS, channel_id="C1"
    )
    assert_notifies_nobody(all_text(verdict))
