"""A judge you can check (#47), end to end on a real database and the fake Slack Web API (real HTTP): a week of
judged answers with votes on their alerts and conversations a teammate stepped into; the digest shows the judge's
kappa with the team, its confusion matrix, the failure rate corrected by the team's labels and links to the latest
disagreements (never their words); a week whose agreement fell raises one alert in the alert channel, once."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import insert

from common.reports.kappa import cohen_kappa, ppi_failure_rate
from common.runtime import Runtime
from store.models import Feedback, Judgment, OutcomeSignal, OutcomeWindow, Pair
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL, now_utc
from tests.fakes.slack_server import FakeSlack
from workers.agreement_alert import check_agreement
from workers.digest.delivery import deliver_digest

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures

# (judge's score, votes "right", votes "wrong", outcome signals, how many): the default relevancy threshold is 2.
STEADY = [
    (1, 1, 0, (), 12),  # alerts people agreed with: fail · fail
    (1, 0, 2, (), 3),  # alerts people said were wrong: fail · pass
    (4, 0, 0, ("reask", "human_takeover"), 3),  # passed, but asked again and a teammate stepped in: pass · fail
    (4, 0, 0, ("resolved",), 20),  # pass · pass
    (3, 0, 0, None, 22),  # judged, no label (no window)
]
DRIFTED = [
    (1, 1, 0, (), 6),
    (1, 0, 1, (), 9),
    (4, 0, 0, ("reask", "escalation"), 10),
    (4, 0, 0, ("resolved",), 10),
    (3, 0, 0, None, 25),
]


def seed_week(runtime: Runtime, end: datetime, plan, *, first_id: int) -> None:
    pair_id = first_id
    with runtime.db.session() as session:
        for score, right, wrong, signals, count in plan:
            for _ in range(count):
                pair_id += 1
                at = end - timedelta(hours=2 + pair_id % 100)
                session.execute(
                    insert(Pair),
                    [
                        {
                            "id": pair_id,
                            "channel_id": "C1",
                            "answer_ts": f"1764000000.{pair_id:06d}",
                            "status": "judged",
                            "question_text": f"the question {pair_id}",
                            "answer_text": f"the answer {pair_id}",
                            "created_at": at,
                        }
                    ],
                )
                judgment = Judgment(
                    pair_id=pair_id,
                    judge="relevancy",
                    status="ok",
                    score=score,
                    max_score=4,
                    normalized_score=score / 4,
                )
                session.add(judgment)
                session.flush()
                session.add_all(Feedback(judgment_id=judgment.id, user_id=f"UR{i}", vote="right") for i in range(right))
                session.add_all(Feedback(judgment_id=judgment.id, user_id=f"UW{i}", vote="wrong") for i in range(wrong))
                if signals is not None:
                    ts = f"1764000000.{pair_id:06d}"
                    session.add(
                        OutcomeWindow(
                            pair_id=pair_id, channel_id="C1", answer_ts=ts, thread_key=ts, closes_at=at, closed_at=at
                        )
                    )
                    session.add_all(OutcomeSignal(pair_id=pair_id, name=name) for name in signals)


def test_the_digest_shows_kappa_the_matrix_and_the_corrected_rate(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed_week(runtime, now, STEADY, first_id=0)
    assert deliver_digest(runtime, now).status == "sent"

    (posted,) = slack.posted(DIGEST_CHANNEL)
    text = str(posted["blocks"])
    table = ((12, 3), (3, 20))
    kappa = cohen_kappa(table)
    assert f"relevancy vs the team: kappa {kappa.value:.2f} ({kappa.interval.low:.2f}–{kappa.interval.high:.2f}" in text
    assert "n=38: 15 votes, 23 outcomes)" in text
    assert "judge × team: fail·fail 12, fail·pass 3, pass·fail 3, pass·pass 20" in text
    rate = ppi_failure_rate(60, 15, table).rate
    corrected = f"{rate.value * 100:.0f}% ({rate.low * 100:.0f}–{rate.high * 100:.0f}%)"
    assert f"the judge says 25% failed (n=60); corrected by 38 team labels: {corrected}" in text
    # The latest disagreements are links to the answers (the fake's permalinks), never their words.
    sections = [block["text"]["text"] for block in posted["blocks"] if block["type"] == "section" and "text" in block]
    (line,) = [line for section in sections for line in section.split("\n") if "latest disagreements" in line]
    assert line.startswith("relevancy, latest disagreements: <https://") and "team fail (outcome)>" in line
    assert "answer" not in line.replace("answers", "") and "question" not in line
    assert "relevancy vs the team kappa" in text  # the channel's own line


def test_a_fall_in_agreement_raises_one_alert(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed_week(runtime, now - timedelta(days=7), STEADY, first_id=0)
    seed_week(runtime, now, DRIFTED, first_id=1000)

    found = check_agreement(runtime, now)
    assert [key.rsplit(":", 2)[1:] for key in found] == [["relevancy", "all"]]  # C1 is every channel: said once
    posts = slack.posted("CALERTS")
    assert len(posts) == 1
    alert = posts[0]["text"]
    assert "The relevancy judge agrees less with the team" in alert
    assert f"kappa {cohen_kappa(((12, 3), (3, 20))).value:.2f} last week (n=38)" in alert
    assert "judge × team: fail·fail 6, fail·pass 9, pass·fail 10, pass·pass 10" in alert
    assert "the answer" not in alert and "question" not in alert  # links and scores, no words

    # A retry, or the check run again the same week: nothing more.
    assert check_agreement(runtime, now + timedelta(minutes=5)) == found
    assert len(slack.posted("CALERTS")) == 1


def test_a_steady_judge_raises_nothing(runtime: Runtime, slack: FakeSlack) -> None:
    now = now_utc()
    seed_week(runtime, now - timedelta(days=7), STEADY, first_id=0)
    seed_week(runtime, now, STEADY, first_id=1000)
    assert check_agreement(runtime, now) == []
    assert slack.posted("CALERTS") == []


def test_the_weekly_digest_queues_the_check(runtime: Runtime, slack: FakeSlack, monkeypatch) -> None:
    """The scheduled digest, once sent, queues the agreement check (a forced one does not); the check's task runs."""
    from common import celery_app, task_names
    from workers.tasks.digest import check_agreement as check_task
    from workers.tasks.digest import send_digest

    sent: list[str] = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda name, *args, **kwargs: sent.append(name))
    seed_week(runtime, now_utc(), STEADY, first_id=0)
    assert send_digest.apply().get() == "sent"
    assert sent == [task_names.CHECK_AGREEMENT]
    assert send_digest.apply(kwargs={"force": True}).get() == "sent"
    assert sent == [task_names.CHECK_AGREEMENT]
    assert check_task.apply().get() == []  # one week of labels: nothing to compare with
