"""How an ingested exchange alerts (the Slack tasks run in-process against FakeSlack over real HTTP, real Redis
and SQLite/PostgreSQL): a low score posts to the default alert channel naming the exchange's bot, a `public` one
quoted, a `dm` or `private` one never (its alert and its line in the hour's summary) unless its bot's rule allows it
there; a bot's exchanges in no channel make their bot's rolling mean, whose degradation alert its rule routes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from common.runtime import Runtime
from store.exchange_models import Exchange
from store.models import Judgment, Pair, PairSource
from tests import alert_helpers
from tests.alert_helpers import ALERTS, alerts, write_rules
from workers.alerts import delivery, summaries

one_hour = alert_helpers.one_hour  # autouse: the caps these tests fill count per UTC hour

QUESTION = "Where is my parcel 8812?"
ANSWER = "Tulips bloom in spring."
REASONING = "The answer is about flowers, not the parcel."
PRIVATE = "C_PRIVATE_SUPPORT"


def ingested_judgment(
    runtime: Runtime,
    visibility: str,
    *,
    score: float = 0.0,
    client_id: str = "ex",
    channel_id: str | None = None,
    bot: str = "helpdesk",
) -> int:
    """A judged exchange from the ingest API (no Slack channel unless given) and its relevancy judgment."""
    now = datetime.now(UTC)
    with runtime.db.session() as session:
        pair = Pair(
            source=PairSource.INGEST,
            channel_id=channel_id,
            answer_ts=f"1765094400.{client_id}" if channel_id else None,
            channel_is_private=visibility != "public",
            question_text=QUESTION,
            answer_text=ANSWER,
            status="judged",
        )
        session.add(pair)
        session.flush()
        session.add(
            Exchange(
                client_id=client_id,
                bot=bot,
                conversation_id="c",
                turn=1,
                visibility=visibility,
                asked_at=now,
                answered_at=now,
                pair_id=pair.id,
            )
        )
        judgment = Judgment(
            pair_id=pair.id,
            judge="relevancy",
            status="ok",
            score=score,
            max_score=4,
            normalized_score=score / 4,
            reasoning=REASONING,
            model="test-model",
        )
        session.add(judgment)
        session.flush()
        return judgment.id


def test_a_low_scored_exchange_alerts_quoted_only_when_public(make_runtime, fake) -> None:
    with make_runtime(degradation_window_minutes=0) as runtime:
        for visibility in ("dm", "private", "public"):
            judgment_id = ingested_judgment(runtime, visibility, client_id=visibility)
            assert delivery.consider(runtime, judgment_id).low == "posted"
        posts = fake.posted(ALERTS)
        assert len(posts) == 3
        for post, visibility in zip(posts, ("dm", "private", "public"), strict=True):
            text = json.dumps(post)
            assert f"bot helpdesk ({visibility})" in text and "Low relevancy score 0 / 4" in post["text"]
            quoted = [words for words in (QUESTION, ANSWER, REASONING) if words in text]
            assert quoted == ([QUESTION, ANSWER, REASONING] if visibility == "public" else []), visibility
        # Every alert row is tied to no Slack channel of its own.
        assert {row.source_channel_id for row in alerts(runtime)} == {None}


def test_a_good_score_and_a_history_pair_do_not_alert(make_runtime, fake) -> None:
    with make_runtime(degradation_window_minutes=0) as runtime:
        assert delivery.consider(runtime, ingested_judgment(runtime, "dm", score=4)).low == "above_threshold"
        imported = ingested_judgment(runtime, "dm", client_id="2")
        with runtime.db.session() as session:  # a pair read from history with no channel: no policy, no alert
            session.query(Pair).filter(Pair.id == session.get(Judgment, imported).pair_id).update(
                {Pair.source: PairSource.IMPORT}
            )
        assert delivery.consider(runtime, imported).low == "no_channel"
        assert fake.posted(ALERTS) == []


def test_a_dm_is_never_quoted_even_where_a_private_channel_s_rule_would_quote(make_runtime, fake, tmp_path) -> None:
    """Exchanges naming a private channel whose own rule lets the alert channel quote it: a dm's words still stay
    out of its alert and of its line in the hour's summary; a public one's are quoted."""
    rules = write_rules(tmp_path, {"channels": {PRIVATE: {"alert_channel": ALERTS, "quote_private": True}}})
    with make_runtime(degradation_window_minutes=0, alert_channel_cap_per_hour=1, channel_rules_file=rules) as runtime:
        ids = [
            ingested_judgment(runtime, visibility, client_id=str(n), channel_id=PRIVATE)
            for n, visibility in enumerate(("dm", "public", "dm", "private"))
        ]
        for judgment_id in ids:
            delivery.consider(runtime, judgment_id)
        assert [row.status for row in alerts(runtime)] == ["posted", "held", "held", "held"]
        alert = json.dumps(fake.posted(ALERTS)[0])
        assert REASONING not in alert and QUESTION not in alert and "Low relevancy score" in alert
        assert summaries.flush_summaries(runtime) == 1
        summary = json.dumps(fake.posted(ALERTS)[-1])
        assert "3 more low scores this hour" in summary
        assert summary.count(REASONING) == 1  # the public one's line; the dm's and the private one's withheld


def test_the_hours_summary_quotes_a_dm_where_its_bots_rule_lets_its_alert_quote_it(make_runtime, fake, tmp_path):
    """The bot's own rule sends its alerts here and allows quoting: a dm's held line quotes its reasoning as its
    alert does (common.privacy); the same exchanges sent where the rule does not reach stay unquoted."""
    rules = write_rules(tmp_path, {"bots": {"helpdesk": {"alert_channel": ALERTS, "quote_private": True}}})
    with make_runtime(degradation_window_minutes=0, alert_channel_cap_per_hour=1, channel_rules_file=rules) as runtime:
        ids = [ingested_judgment(runtime, "dm", client_id=str(n)) for n in range(3)]
        for judgment_id in ids:
            delivery.consider(runtime, judgment_id)
        assert [row.status for row in alerts(runtime)] == ["posted", "held", "held"]
        assert REASONING in json.dumps(fake.posted(ALERTS)[0])  # the alert quotes it: the bot's rule allows it here
        assert summaries.flush_summaries(runtime) == 1
        summary = json.dumps(fake.posted(ALERTS)[-1])
        assert "2 more low scores this hour" in summary
        assert summary.count(REASONING) == 2  # each held dm's line, as its alert would


BOT_ALERTS = "C_BOT_ALERTS"
WIDGET = "customer-portal-web-widget-assistant"  # its key longer than a Slack channel id


def test_a_bots_exchanges_in_no_channel_make_its_own_degradation_alert_routed_by_its_rule(
    make_runtime, fake, tmp_path
) -> None:
    """Per bot: helpdesk's falling mean alerts in the channel its rule names, never quoting a dm; another bot's
    answers are not in its mean (widget's own rule-less mean alerts in the default channel)."""
    fake.add_channel(BOT_ALERTS, "bot-alerts", members=["U_RELMON"])
    rules = write_rules(
        tmp_path, {"bots": {"helpdesk": {"alert_channel": BOT_ALERTS, "degradation_window": 4, "degradation_floor": 2}}}
    )
    settings = {"degradation_window": 6, "degradation_floor": 2.5, "threshold": 0, "degradation_window_minutes": 0}
    with make_runtime(channel_rules_file=rules, **settings) as runtime:
        for n in range(3):
            delivery.consider(runtime, ingested_judgment(runtime, "dm", score=1, client_id=f"h{n}"))
        for n in range(5):  # widget's: below helpdesk's floor, but not helpdesk's answers
            delivery.consider(runtime, ingested_judgment(runtime, "dm", score=1, client_id=f"w{n}", bot=WIDGET))
        assert fake.posted(BOT_ALERTS) == [] and fake.posted(ALERTS) == []  # 3 of 4, and 5 of 6 answers
        considered = delivery.consider(runtime, ingested_judgment(runtime, "dm", score=1, client_id="h3"))
        assert considered.degradation == "below_floor", considered
        [post] = fake.posted(BOT_ALERTS)
        text = json.dumps(post)
        assert "getting worse" in post["text"] and "helpdesk (bot conversations)" in text and "1.00" in text
        for words in (QUESTION, ANSWER, REASONING):
            assert words not in text  # a dm's words: never in a degradation alert
        delivery.consider(runtime, ingested_judgment(runtime, "dm", score=1, client_id="w5", bot=WIDGET))
        [widget] = fake.posted(ALERTS)  # no rule of its own: the defaults' window (6) and alert channel
        assert f"{WIDGET} (bot conversations)" in json.dumps(widget) and "getting worse" in widget["text"]
        degraded = {row.source_channel_id for row in alerts(runtime) if row.kind == "degradation"}
        assert degraded == {"bot:helpdesk", f"bot:{WIDGET}"}
