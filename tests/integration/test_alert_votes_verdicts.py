"""Privacy, votes and verdicts, with the Slack tasks run in-process against FakeSlack (real HTTP), real Redis and
SQLite/PostgreSQL: a private channel's text withheld or quoted by its rule, vote tallies redrawing the posted
alert (by the channel it lives in, coalesced), and private verdicts to the asker."""

from __future__ import annotations

import json
import time

from store import alerts as alert_store
from store.feedback import record_vote
from store.models import Judgment, Pair
from tests import alert_helpers
from tests.alert_helpers import ALERTS, SUPPORT, add_judgment, alerts, on_demand_pair, write_rules
from workers.alerts import delivery, redraws, verdicts

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py): the caps these tests fill count per UTC hour


def test_private_channel_alert_withholds_text(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, question="secret question", answer="secret answer")
        delivery.consider(runtime, judgment_id)
        [post] = fake.posted(ALERTS)
        text = json.dumps(post["blocks"]) + post["text"]
        assert "secret" not in text and "opening hours" not in text
        assert "withheld" in text and "0 / 4" in text and "open_message" in text


def test_private_channel_is_quoted_where_its_rule_allows(make_runtime, fake, tmp_path):
    rules = write_rules(
        tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_PRIVATE_ALERTS", "quote_private": True}}}
    )
    with make_runtime(channel_rules_file=rules) as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, channel_id="G_PRIVATE", question="secret question")
        delivery.consider(runtime, judgment_id)
        assert fake.posted(ALERTS) == []
        [post] = fake.posted("C_PRIVATE_ALERTS")
        assert "secret question" in json.dumps(post["blocks"])


def test_votes_update_the_posted_alert(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        with runtime.db.session() as session:
            record_vote(session, judgment_id, "U1", "right")
            record_vote(session, judgment_id, "U2", "wrong")
            record_vote(session, judgment_id, "U1", "wrong")  # changed
        assert delivery.refresh_votes(runtime, row.id) == "updated"
        [update] = fake.calls_to("chat.update")
        assert update["channel"] == ALERTS and update["ts"] == row.message_ts
        assert "Feedback: 0 say the judge was right · 2 say it was wrong" in json.dumps(
            update["blocks"], ensure_ascii=False
        )
        # the message in Slack now shows it
        assert "2 say it was wrong" in json.dumps(fake.messages[ALERTS][row.message_ts]["blocks"], ensure_ascii=False)


def test_verdict_goes_privately_to_the_response_url_once(make_runtime, fake):
    with make_runtime() as runtime:
        pair_id = on_demand_pair(runtime, fake.response_url("verdict"))
        add_judgment_for_pair(runtime, pair_id, score=0)
        assert verdicts.deliver(runtime, pair_id) == "response_url"
        assert verdicts.deliver(runtime, pair_id) == "posted"
        [response] = fake.responses["verdict"]
        assert response["response_type"] == "ephemeral"
        assert response["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
        assert fake.posted() == []  # nothing in any channel


def test_verdict_falls_back_to_a_direct_message(make_runtime, fake):
    fake.add_channel(SUPPORT, "support", members=["U_RELMON"])  # U_ASKER left: no ephemeral, a DM is the last resort
    with make_runtime() as runtime:
        with runtime.db.session() as session:
            pair = Pair(source="shortcut", channel_id=SUPPORT, question_text="q", answer_text="a", status="judged",
                        requested_by="U_ASKER", response_url=None)  # fmt: skip
            session.add(pair)
            session.flush()
            pair_id = pair.id
        add_judgment_for_pair(runtime, pair_id, score=3)
        assert verdicts.deliver(runtime, pair_id) == "direct_message"
        [post] = fake.posted("U_ASKER")
        assert "Relevancy 3 / 4" in post["text"]
        with runtime.db.session() as session:  # where it is, for retention to redraw or delete it
            row = alert_store.by_key(session, f"verdict:{pair_id}")
            assert row.message_ts and row.details["dm_channel"]
            assert row.message_ts in fake.messages[row.details["dm_channel"]]


def add_judgment_for_pair(runtime, pair_id: int, score: float) -> None:
    from store.models import Judgment

    with runtime.db.session() as session:
        session.add(Judgment(pair_id=pair_id, judge="relevancy", status="ok", score=score, max_score=4, reasoning="r"))


def test_a_redrawn_alert_quotes_by_the_channel_it_lives_in_not_todays_rule(make_runtime, fake, tmp_path):
    """A private channel's alert posted where its rule sent it (withheld there: no quoting); then the rule
    changes to quote it in another alert channel. A vote redraws the old alert in the channel it lives in: still
    withheld (before, a redraw asked today's rule, which quotes private text wherever the channel's alerts go)."""
    rules = write_rules(tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_A"}}})
    with make_runtime(channel_rules_file=rules) as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, channel_id="G_PRIVATE", question="secret question")
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        assert row.alert_channel_id == "C_A" and "secret question" not in json.dumps(fake.posted("C_A")[0]["blocks"])
    write_rules(tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_B", "quote_private": True}}})
    with make_runtime(channel_rules_file=rules) as runtime:
        with runtime.db.session() as session:
            record_vote(session, judgment_id, "U1", "right")
        assert delivery.refresh_votes(runtime, row.id) == "updated"
        [update] = fake.calls_to("chat.update")
        assert update["channel"] == "C_A" and "1 says the judge was right" in json.dumps(update["blocks"])
        assert "secret question" not in json.dumps(update["blocks"])


def test_redraws_of_one_alert_are_coalesced(make_runtime, fake):
    """Twenty asks to redraw one alert within the window (votes changing meanwhile): one chat.update at once, one
    trailing redraw scheduled for the window's end, the rest cost nothing; the trailing one shows the final tally."""
    with make_runtime(alert_redraw_seconds=10.0) as runtime:
        judgment_id = add_judgment(runtime, score=0)
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        outcomes = []
        for n in range(20):
            with runtime.db.session() as session:
                record_vote(session, judgment_id, f"U{n}", "wrong")
            outcomes.append(delivery.refresh_votes(runtime, row.id))
        assert outcomes == ["updated", "deferred"] + ["coalesced"] * 18
        assert len(fake.calls_to("chat.update")) == 1
        assert delivery.refresh_votes(runtime, row.id, trailing=True) == "deferred"  # early: waits for the window
        # The behaviour under test: the window's end (its gate's expiry) lets the scheduled redraw through.
        time.sleep(runtime.redis.pttl(redraws.gate_key(row.id)) / 1000 + 0.05)
        assert delivery.refresh_votes(runtime, row.id, trailing=True) == "updated"  # the one scheduled
        assert len(fake.calls_to("chat.update")) == 2
        assert "20 say it was wrong" in json.dumps(fake.calls_to("chat.update")[-1]["blocks"], ensure_ascii=False)


def test_a_redraw_waits_for_the_scrub_of_its_pairs_deleted_answer(make_runtime, fake):
    """A redraw another message's deletion set off runs while this pair's own deletion is still to be scrubbed
    (its note kept, the rows not yet changed): it sends nothing, since the scrub redraws the alert once it has
    committed. Once the note is dropped, a redraw goes out again."""
    from capture import forget_notes

    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0, answer="Call us at AMARK123.")
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        with runtime.db.session() as session:
            pair = session.get(Pair, session.get(Judgment, judgment_id).pair_id)
            channel, answer_ts = pair.channel_id, pair.answer_ts
        pipe = runtime.redis.pipeline()
        forget_notes.keep(pipe, channel, answer_ts, ["Call us at AMARK123."])
        pipe.execute()
        assert delivery.refresh_votes(runtime, row.id) == "scrub_pending"
        assert fake.calls_to("chat.update") == []
        forget_notes.drop(runtime.redis, channel, answer_ts, 1)
        runtime.redis.delete(redraws.gate_key(row.id))  # past the redraw window
        assert delivery.refresh_votes(runtime, row.id) == "updated"
        assert len(fake.calls_to("chat.update")) == 1
