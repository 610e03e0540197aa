"""Reading the conversation right, through real processes: signed events to the bot, real `relmon worker`s on
the fake Slack and LLM (tests.running_system). A huddle's thread (Slackbot's notice as its root, and as the root
a broadcast carries), two customers in one thread, and "That did not help, how do I get SSO working?".
The rules themselves: tests/unit/test_outcome_rules.py, tests/unit/test_teammate_rule.py."""

from __future__ import annotations

import pytest

from store.models import PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.broker import wait_until_idle
from tests.builders import SECRET
from tests.processes import wait_for
from tests.running_system import ALERTS, CHANNEL
from tests.system.test_outcomes_processes import answered_in_thread, missed_alerts, signal_rows

pytestmark = pytest.mark.slow


def test_a_huddles_thread_is_judged_without_the_notice(make_system) -> None:
    """Slackbot roots the huddle's thread; the asker's notes are sent "also to channel" (their `root` is the
    notice); the bot answers, the asker follows up, the bot answers again. Both answers are judged; the follow-up's
    earlier turns are the notes and the first answer, and no prompt the judge read holds "A huddle started"."""
    system = make_system(workers=1)
    root = ss.huddle_root(CHANNEL, sr.next_ts())
    system.send(root)
    notes = sr.thread_broadcast(sr.human_message(CHANNEL, sr.next_ts(), "Our SSO login loops back to the start"), root)
    system.send(notes)
    first = answered_in_thread(system, notes, "Check the Okta metadata URL in Admin > SSO.")
    follow = sr.human_message(CHANNEL, sr.next_ts(), "Where do I find the metadata URL?", thread_ts=root["ts"])
    system.send(follow)
    second = answered_in_thread(system, follow, "In Okta: Applications > your app > Sign On.")
    by_id = {p.id: p for p in system.pairs()}
    assert (by_id[first.id].question_text, by_id[first.id].context_text) == (notes["text"], None)
    assert by_id[second.id].question_text == follow["text"]
    assert by_id[second.id].context_text == (
        "[customer] Our SSO login loops back to the start\n[bot] Check the Okta metadata URL in Admin > SSO."
    )
    assert all(p.status == PairStatus.JUDGED for p in by_id.values())
    prompts = str(system.llm.requests)
    assert "Our SSO login loops back" in prompts and "A huddle started" not in prompts
    # The follow-up is the asker's, on the same problem: a re-ask of the first answer.
    wait_for(lambda: (first.id, "reask") in signal_rows(system.database), timeout=20, what="the re-ask recorded")


def test_two_customers_in_one_thread(make_system, redis_url: str) -> None:
    """Bo asks his own question in Ana's thread: it is no teammate's reply to Ana (no takeover, no reference), and
    it is paired when the bot answers it. The teammate's reply (staff: a member of the alert channel) is."""
    system = make_system(workers=1)
    question = sr.human_message(CHANNEL, sr.next_ts(), "How do I set up SSO with Okta?")
    system.send(question)
    first = answered_in_thread(system, question, "Go to Admin > Security > SSO and upload the Okta metadata.")
    bos = sr.human_message(
        CHANNEL, sr.next_ts(), "Same here, how do I do this with Azure AD?", user="U_BO", thread_ts=question["ts"]
    )
    system.send(bos)
    second = answered_in_thread(system, bos, "For Azure AD, use the Enterprise app.")
    teammate = sr.human_message(
        CHANNEL, sr.next_ts(), "Upload the XML, not the URL: that fixes both.", user="U_AGENT", thread_ts=question["ts"]
    )
    system.send(teammate)

    wait_for(
        lambda: (
            {(first.id, "human_takeover"), (second.id, "human_takeover")} <= set(signal_rows(system.database))
            and all(p.reference_text for p in system.pairs())
            and all(p.status == PairStatus.JUDGED for p in system.pairs())
        ),
        timeout=40,
        what="the teammate's reply recorded on both answers, the correctness judge run",
    )
    wait_until_idle(redis_url)  # every follow-up ran (not only taken): a signal for Bo's answer would be there now
    rows = signal_rows(system.database)
    assert set(rows) == {(first.id, "human_takeover"), (second.id, "human_takeover")}, rows  # Bo's: nothing
    by_id = {p.id: p for p in system.pairs()}
    assert by_id[second.id].question_text == bos["text"] and by_id[second.id].question_user == "U_BO"
    assert {p.reference_text for p in by_id.values()} == {teammate["text"]}
    assert missed_alerts(system.slack) == (0, 0)  # a takeover alone is no failure: nothing was followed up


def test_that_did_not_help_how_do_i_get_sso_working_counts_as_both_outcomes(make_system, redis_url) -> None:
    """A well-scored answer; the asker says it did not help and asks again in one message (Slack delivers it
    twice); a teammate steps in. Both signals are recorded once, and one missed-failure alert is posted, once."""
    system = make_system(workers=1)
    question = sr.human_message(CHANNEL, sr.next_ts(), "How do I set up SSO with Okta?")
    system.send(question)
    pair = answered_in_thread(system, question, "Go to Admin > Security > SSO and upload the Okta metadata.")
    again = sr.human_message(
        CHANNEL, sr.next_ts(), "That did not help, how do I get SSO working?", thread_ts=question["ts"]
    )
    body = sr.envelope(again, event_id="EvSSO_AGAIN")
    for _ in range(2):  # Slack's retry of a delivery that worked
        assert sr.post(system.bot.url, body, SECRET).status_code == 200
    fixed = "I've enabled SSO on your workspace, try now."
    system.send(sr.human_message(CHANNEL, sr.next_ts(), fixed, user="U_AGENT", thread_ts=question["ts"]))
    expected = {(pair.id, "escalation"): 1, (pair.id, "reask"): 1, (pair.id, "human_takeover"): 1}
    wait_for(lambda: signal_rows(system.database) == expected, timeout=40, what="the three signals, once each")
    # The escalation and re-ask alone say it failed: the alert may come before the teammate's reply is read.
    wait_for(lambda: missed_alerts(system.slack) == (1, 1), timeout=40, what="one missed-failure alert")
    wait_until_idle(redis_url)  # every follow-up ran (not only taken): a second signal or alert would be there now
    assert signal_rows(system.database) == expected
    assert missed_alerts(system.slack) == (1, 1)
    [alert] = system.slack.posted(ALERTS)
    assert alert["text"].startswith("Missed failure in")
