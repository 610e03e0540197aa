"""The Slack tasks through a real `relmon worker` process taking them from Redis: the rules file's thresholds and
caps, and the private channel's summary. In-process: tests/integration/test_alert_tasks.py."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from store.models import Alert
from tests.alert_helpers import ALERTS, SUPPORT, add_judgment, write_rules
from tests.builders import installed_runtime, make_settings
from tests.processes import clear_of_the_hour_turn, start_worker, wait_for
from tests.running_system import fakes_env

# Through a real worker process ----------------------------------------------------------------------------------

PRIVATE = "G_PRIVATE"


@pytest.mark.slow
def test_the_worker_alerts_by_each_channels_rule_withholding_private_text(db_url, redis_url, fake, tmp_path, producer):
    """A real `relmon worker` takes consider_alert from Redis: the rules file's threshold decides (3 alerts in the
    private channel, not in the default one) and its cap of 1 sends the rest to the hour's summary, which shows
    neither the private channel's text nor the judge's reasoning."""
    fake.add_channel(PRIVATE, "private", is_private=True, members=["U_RELMON"])
    rules = write_rules(tmp_path, {"channels": {PRIVATE: {"threshold": 3, "alert_cap_per_hour": 1}}})
    settings = make_settings(redis_url=redis_url, database_url=db_url, slack_api_url=fake.api_url)
    env = fakes_env(
        fake,
        None,
        redis_url=redis_url,
        database_url=db_url,
        directory=tmp_path,
        RELMON_CHANNEL_RULES=rules,
        RELMON_DEGRADATION_WINDOW_MINUTES=0,
        RELMON_WORKER_CONCURRENCY=1,  # one task at a time, in the order sent
        # Thresholds and caps on the first verdict (no LLM here): tests/system/test_confirmation_processes.py
        # runs the second opinion through a worker.
        RELMON_CONFIRM="off",
    )
    clear_of_the_hour_turn(120)  # the rule's cap of 1 counts per UTC hour
    with installed_runtime(settings) as runtime:
        worker = start_worker(env, log_dir=tmp_path / "logs")
        try:
            secret = {"question": "secret question", "answer": "secret answer", "reasoning": "secret reasoning"}
            ids = [add_judgment(runtime, score=3, channel_id=SUPPORT)]  # 3 is above the default threshold of 2
            ids += [add_judgment(runtime, score=3, channel_id=PRIVATE, private=True, **secret) for _ in range(3)]
            ids += [add_judgment(runtime, score=2, channel_id=SUPPORT)]  # at the default threshold
            for judgment_id in ids:
                producer.send_task("workers.tasks.slack.consider_alert", args=[judgment_id], queue="relmon.slack")

            def settled():  # read what the fake stored (a call is recorded a moment before its message is)
                with fake._lock:
                    posted = sorted(fake.messages.get(ALERTS, {}).values(), key=lambda m: float(m["ts"]))
                summaries = [p for p in posted if "more low score" in p["text"]]
                return posted if summaries and "2 more low scores" in summaries[-1]["text"] else None

            wait_for(settled, timeout=60, what="two alerts and the private channel's summary of 2")
            messages = sorted(fake.messages[ALERTS].values(), key=lambda m: float(m["ts"]))
            texts = [m["text"] for m in messages]
            assert texts == [
                f"Low relevancy score 3 / 4 in <#{PRIVATE}>",  # the rule's threshold of 3
                f"Low relevancy score 2 / 4 in <#{SUPPORT}>",  # the default threshold of 2; the 3 there did not alert
                f"2 more low scores in <#{PRIVATE}> this hour",
            ]
            shown = json.dumps(messages, ensure_ascii=False)
            assert "secret" not in shown  # no question, answer or reasoning of the private channel anywhere
            summary = json.dumps(messages[2]["blocks"], ensure_ascii=False)
            assert "Reasoning withheld: private channel" in summary and summary.count("3 / 4") == 2
            with runtime.db.session() as session:
                low = {a.judgment_id: a.status for a in session.execute(select(Alert)).scalars() if a.judgment_id}
            assert low == {ids[1]: "posted", ids[2]: "held", ids[3]: "held", ids[4]: "posted"}
        finally:
            worker.stop()
