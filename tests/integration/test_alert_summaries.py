"""The alert caps and the hour's summary, with the Slack tasks run in-process against FakeSlack (real HTTP), real
Redis and SQLite/PostgreSQL: the hourly cap gathers the rest into one summary, the cap holds under a burst, the
alert channel's cap across source channels, summaries per alert channel, and the migration to per-alert-channel
summary keys."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from sqlalchemy import select

from store import alerts as alert_store
from store.models import Alert
from tests import alert_helpers
from tests.alert_helpers import ALERTS, SOURCES, SUPPORT, add_judgment, alerts, write_rules
from tests.bursts import burst
from workers.alerts import delivery, summaries
from workers.alerts.policy import hour_label, hour_start

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py): the caps these tests fill count per UTC hour


def test_hourly_cap_gathers_the_rest_into_one_summary(make_runtime, fake):
    # the time window off: five bad answers in an hour would also (rightly) post a degradation alert
    with make_runtime(alert_cap_per_hour=2, degradation_window_minutes=0) as runtime:
        ids = [add_judgment(runtime, score=0, reasoning=f"reason {i}") for i in range(5)]
        for judgment_id in ids:
            delivery.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 2
        statuses = [row.status for row in alerts(runtime)]
        assert statuses == ["posted", "posted", "held", "held", "held"]

        assert summaries.flush_summaries(runtime) == 1
        summaries.flush_summaries(runtime)  # nothing new: no second post, no update
        posts = fake.posted(ALERTS)
        assert len(posts) == 3 and fake.calls_to("chat.update") == []
        summary = json.dumps(posts[2]["blocks"])
        assert "3 more low scores this hour" in summary and "reason 4" in summary and "cap of 2" in summary

        more = add_judgment(runtime, score=1, reasoning="reason 5")
        delivery.consider(runtime, more)
        summaries.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == 3  # still one summary message…
        [update] = fake.calls_to("chat.update")  # …updated in place
        assert "4 more low scores this hour" in json.dumps(update["blocks"])
        summary_rows = [row for row in alerts(runtime) if row.kind == "summary"]
        assert len(summary_rows) == 1 and summary_rows[0].dedupe_key.startswith(f"summary:{ALERTS}:")


def test_cap_holds_under_a_concurrent_burst(make_runtime, fake):
    """Eight workers handle eight low scores at once: the cap of three still holds exactly."""
    with make_runtime(alert_cap_per_hour=3, degradation_window_minutes=0) as runtime:  # no degradation alert here
        ids = [add_judgment(runtime, score=0) for _ in range(8)]
        burst(lambda judgment_id: delivery.consider(runtime, judgment_id), ids, together=True)
        assert len(fake.posted(ALERTS)) == 3
        assert sorted(row.status for row in alerts(runtime)) == ["held"] * 5 + ["posted"] * 3


def test_the_alert_channel_cap_holds_a_burst_across_source_channels(make_runtime, fake, tmp_path):
    """Six source channels, one low score each, one shared alert channel with a cap of 3 an hour: each source
    channel is far under its own cap, yet the alert channel receives 3 alerts and the rest go to summaries."""
    for channel in SOURCES:
        fake.add_channel(channel, channel.lower(), members=["U_RELMON"])
    rules = write_rules(tmp_path, {"channels": {"C_ELSEWHERE": {"alert_channel": "C_OTHER_ALERTS"}}})
    with make_runtime(alert_cap_per_hour=10, alert_channel_cap_per_hour=3, channel_rules_file=rules) as runtime:
        ids = [add_judgment(runtime, score=0, channel_id=channel) for channel in SOURCES]
        burst(lambda judgment_id: delivery.consider(runtime, judgment_id), ids, together=True)
        assert len(fake.posted(ALERTS)) == 3
        rows = alerts(runtime)
        assert sorted(a.status for a in rows) == ["held"] * 3 + ["posted"] * 3
        assert {a.details["reason"] for a in rows if a.status == "held"} == {"alert_channel_cap"}

        # One summary for the alert channel's hour, whatever the source channels: a burst across channels must
        # not become one summary message per channel.
        assert summaries.flush_summaries(runtime) == 1
        [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
        assert summary["text"] == "3 more low scores from 3 channels this hour"
        blocks = json.dumps(summary["blocks"], ensure_ascii=False)
        assert "this channel's 3 from all channels" in blocks
        held_sources = sorted(a.source_channel_id for a in rows if a.status == "held")
        assert all(f"<#{channel}> (1 held, cap 10)" in blocks for channel in held_sources)
        assert all(f"• <#{channel}> · *0 / 4*" in blocks for channel in held_sources)  # each line says where
        # the cap is the alert channel's: a channel whose rule sends its alerts elsewhere still alerts
        delivery.consider(runtime, add_judgment(runtime, score=0, channel_id="C_ELSEWHERE"))
        assert len(fake.posted("C_OTHER_ALERTS")) == 1 and len(fake.posted(ALERTS)) == 4


def test_an_archived_alert_channel_does_not_hold_back_other_alert_channels_summaries(make_runtime, fake, tmp_path):
    """Summaries go out per alert channel: one that Slack refuses for good (archived) is marked failed, once, and
    the other alert channels' summaries are posted all the same, in the same flush."""
    fake.add_channel("C_OTHER", "other", members=["U_RELMON"])
    fake.archive_channel("C_AAA_GONE")  # sorts first: its summary is flushed before C_ALERTS's
    rules = write_rules(tmp_path, {"channels": {"C_OTHER": {"alert_channel": "C_AAA_GONE"}}})
    with make_runtime(alert_cap_per_hour=1, degradation_window_minutes=0, channel_rules_file=rules) as runtime:
        for channel in ("C_OTHER", SUPPORT):
            for _ in range(3):
                delivery.consider(runtime, add_judgment(runtime, score=0, channel_id=channel))
        assert summaries.flush_summaries(runtime) == 2
        [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
        assert summary["text"] == f"2 more low scores in <#{SUPPORT}> this hour"
        states = {a.alert_channel_id: a.status for a in alerts(runtime) if a.kind == "summary"}
        assert states == {"C_AAA_GONE": "failed", ALERTS: "posted"}
        refused = len(fake.calls_to("chat.postMessage"))
        summaries.flush_summaries(runtime)  # a failed summary is not tried again
        assert len(fake.calls_to("chat.postMessage")) == refused


def test_the_migration_gives_old_per_source_summaries_the_per_alert_channel_key(db_url, make_runtime, fake):
    """Summaries posted under summary:<source>:<hour> (one per source channel) before migration 0005: the newest
    posted one of each alert channel-hour takes summary:<alert channel>:<hour>, so the hour's summary updates
    that message instead of posting a second that repeats its scores. A key already taken is left alone."""
    from alembic import command

    from store.db import Database, alembic_config

    hour = hour_start(datetime.now(UTC))
    label = hour_label(hour)
    config = alembic_config(db_url)
    command.downgrade(config, "0004")
    database = Database(db_url)
    try:
        old = fake._api_chat_postMessage({"channel": ALERTS, "text": f"2 more low scores in <#{SUPPORT}> this hour"})
        with database.session() as session:
            for dedupe_key, source, alert_channel, ts in [
                (f"summary:C_OTHER:{label}", "C_OTHER", ALERTS, "1.000001"),  # older: stays as it is
                (f"summary:{SUPPORT}:{label}", SUPPORT, ALERTS, old["ts"]),
                (f"summary:{SUPPORT}:2020010100", SUPPORT, "C_ELSEWHERE", "1.000002"),
                ("summary:C_ELSEWHERE:2020010100", None, "C_ELSEWHERE", "1.000003"),  # the new key exists already
            ]:
                row, _ = alert_store.claim_alert(
                    session,
                    dedupe_key=dedupe_key,
                    kind="summary",
                    source_channel_id=source,
                    alert_channel_id=alert_channel,
                    details={"hour": hour.isoformat(), "count": 2},
                )
                alert_store.mark_alert_posted(session, row.id, ts)
    finally:
        database.dispose()
    command.upgrade(config, "head")
    with make_runtime(alert_cap_per_hour=1, degradation_window_minutes=0) as runtime:
        with runtime.db.session() as session:
            keys = {(a.dedupe_key, a.source_channel_id, a.message_ts) for a in session.execute(select(Alert)).scalars()}
        assert keys == {
            (f"summary:C_OTHER:{label}", "C_OTHER", "1.000001"),
            (f"summary:{ALERTS}:{label}", None, old["ts"]),
            (f"summary:{SUPPORT}:2020010100", SUPPORT, "1.000002"),
            ("summary:C_ELSEWHERE:2020010100", None, "1.000003"),
        }
        for i in range(4):
            delivery.consider(runtime, add_judgment(runtime, score=0, reasoning=f"reason {i}"))
        posts = len(fake.posted(ALERTS))
        summaries.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == posts  # no second summary
        [update] = fake.calls_to("chat.update")
        assert update["ts"] == old["ts"] and "3 more low scores this hour" in json.dumps(update["blocks"])
