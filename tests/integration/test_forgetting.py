"""The one deletion path in process, on SQLite and PostgreSQL: signed events to the bot, whose forget task runs at
once (tests.bot_harness.InlineWorker). A judged answer's deletion and an edit of its question after judging reach
the stored pair, its judgments, the topics' embedding and the alerts' rows; the notes that carried the words are
gone. A deleted question or teammate reply leaves the `relmon regress` runs that judged its golden item. Through
real processes, with every copy searched: tests/system/test_forgetting_processes.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from store import alerts as alert_store
from store import regress_runs
from store.golden_models import GoldenItem, GoldenSource, RegressCheck, RegressRun
from store.models import Alert, Judgment, Pair, PairStatus
from store.topic_models import PairTopic, QuestionEmbedding, TopicRecord
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.integration.test_capture_truth import send, settle_all
from workers.alerts.policy import summary_key

C = "C_SUPPORT"
ALERTS = "C_ALERTS"


def judged_with_alerts(bot: ServedBot, question: str, answer: str) -> tuple[dict, dict, int]:
    """A question and its answer, settled, then judged (a judge quoting both), its low score held for the hour's
    summary (posted), and its question embedded for topics: (question event, answer event, pair id)."""
    q = sr.human_message(C, sr.next_ts(), question)
    a = sr.bot_message(C, sr.next_ts(), answer, thread_ts=q["ts"])
    send(bot, q)
    send(bot, a)
    settle_all(bot)
    now = datetime.now(UTC)
    with bot.runtime.db.session() as session:
        pair = session.execute(select(Pair).where(Pair.answer_ts == a["ts"])).scalar_one()
        pair.status = PairStatus.JUDGED
        quoted = f"The customer wrote '{question}'; the bot said '{answer}'."
        judgment = Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=0, max_score=4, reasoning=quoted,
                            raw_output=f'{{"reasoning": "{quoted}"}}', confirmation_reasoning=quoted)  # fmt: skip
        session.add(judgment)
        session.flush()
        session.add(Alert(dedupe_key=f"low:{judgment.id}", kind=alert_store.KIND_LOW, judgment_id=judgment.id,
                          alert_channel_id=ALERTS, status=alert_store.STATUS_HELD, created_at=now))  # fmt: skip
        session.add(Alert(dedupe_key=summary_key(ALERTS, now), kind=alert_store.KIND_SUMMARY, alert_channel_id=ALERTS,
                          status=alert_store.STATUS_POSTED, message_ts="1.5", details={"count": 1}))  # fmt: skip
        session.add(QuestionEmbedding(pair_id=pair.id, model="m", text_sha="s", vector=b"\x00\x01"))
        # The same answer judged on demand (the shortcut), its verdict sent as a direct message.
        shortcut = Pair(source="shortcut", channel_id=C, thread_ts=q["ts"], question_ts=q["ts"], question_text=question,
                        answer_text=answer, status=PairStatus.JUDGED, requested_by="U_ASKER")  # fmt: skip
        session.add(shortcut)
        session.flush()
        session.add(
            Judgment(pair_id=shortcut.id, judge="relevancy", status="ok", score=0, max_score=4, reasoning=quoted)
        )
        dm = {"dm_channel": "D_ASKER"}
        session.add(Alert(dedupe_key=f"verdict:{shortcut.id}", kind=alert_store.KIND_VERDICT, alert_channel_id="U",
                          status=alert_store.STATUS_POSTED, message_ts="1.6", details=dm))  # fmt: skip
        return q, a, pair.id


def judgment_of(session, pair_id: int) -> Judgment:
    return session.execute(select(Judgment).where(Judgment.pair_id == pair_id)).scalar_one()


@pytest.fixture
def judged(make_bot, slack) -> tuple[ServedBot, dict, dict, int]:
    """A bot with a judged pair whose summary and verdict messages Slack has: (bot, question event, answer event,
    pair id); the question quotes a card number."""
    bot = make_bot()
    slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
    slack.add_message(ALERTS, "1.5", text="summary", bot_id="B_RELMON")
    slack.add_message("D_ASKER", "1.6", text="verdict", bot_id="B_RELMON")
    return bot, *judged_with_alerts(bot, "Card 4111 1111 1111 1111 was declined, why?", "Call ZEBRA7 support.")


def test_an_edit_after_judging_reaches_every_stored_copy(judged, slack) -> None:
    bot, q, _, pair_id = judged
    send(bot, sr.message_changed(q, "My card was declined, why?"))  # the number edited out after judging
    with bot.runtime.db.session() as session:
        pair, judgment = session.get(Pair, pair_id), judgment_of(session, pair_id)
        assert pair.question_text == "[removed] [removed] [removed] [removed] [removed] was declined, why?"
        for text in (judgment.reasoning, judgment.raw_output, judgment.confirmation_reasoning):
            assert "4111" not in text and "1111" not in text and "declined" in text  # scrubbed, not blanked
        assert session.get(QuestionEmbedding, pair_id) is None  # made from the words: embedded again later
        low = session.execute(select(Alert).where(Alert.kind == alert_store.KIND_LOW)).scalar_one()
        assert low.details["forgotten"] == "edit"
        summary = session.execute(select(Alert).where(Alert.kind == alert_store.KIND_SUMMARY)).scalar_one()
        assert summary.details["count"] == 1  # redrawn at once with the scrubbed line
    [redrawn] = [call for call in slack.calls_to("chat.update") if call["ts"] == "1.5"]
    assert "4111" not in json.dumps(redrawn) and "declined" in json.dumps(redrawn)
    [verdict] = [call for call in slack.calls_to("chat.update") if call["ts"] == "1.6"]
    assert "4111" not in json.dumps(verdict) and "edited out of this conversation" in json.dumps(verdict)


def test_a_judged_answers_deletion_reaches_every_stored_copy(judged) -> None:
    bot, q, a, pair_id = judged
    send(bot, sr.message_changed(q, "My card was declined, why?"))  # an edit first: its notes must go too
    send(bot, sr.message_deleted(a))  # an answer already judged
    with bot.runtime.db.session() as session:
        pair, judgment = session.get(Pair, pair_id), judgment_of(session, pair_id)
        assert (pair.status, pair.answer_text) == (PairStatus.JUDGED, None)
        assert (judgment.reasoning, judgment.raw_output, judgment.confirmation_reasoning) == (None, None, None)
        assert judgment.score == 0  # the score stays
        low = session.execute(select(Alert).where(Alert.kind == alert_store.KIND_LOW)).scalar_one()
        assert low.details["forgotten"] == "answer"
    assert list(bot.runtime.redis.scan_iter("relmon:forget*")) == []  # the words' notes are gone


@pytest.fixture
def copied_earlier_turn(make_bot) -> tuple[ServedBot, dict, int]:
    """A question's earlier turn copied into a golden item's context (and its source's), and a word of it in the
    name of the topic it fell in: (bot, the earlier turn's event, golden item id)."""
    bot = make_bot()
    first = sr.human_message(C, sr.next_ts(), "My order QX4471 never came")
    send(bot, first)
    send(bot, sr.bot_message(C, sr.next_ts(), "It ships tomorrow.", thread_ts=first["ts"]))
    later = sr.human_message(C, sr.next_ts(), "And the refund?", thread_ts=first["ts"])
    send(bot, later)
    send(bot, sr.bot_message(C, sr.next_ts(), "Refunds take 5 days.", thread_ts=first["ts"]))
    settle_all(bot)
    with bot.runtime.db.session() as session:
        first_pair, later_pair = session.execute(select(Pair).where(Pair.channel_id == C).order_by(Pair.id)).scalars()
        assert "QX4471" in (later_pair.context_text or "")  # the earlier turn, as captured
        context = later_pair.context_text
        item = GoldenItem(dedupe_key="k", question="And the refund?", context=context, origin="alert", channel_id=C,
                          topic="QX4471 orders")  # fmt: skip
        session.add(item)
        session.flush()
        key = f"{C}:{later['ts']}"
        session.add(GoldenSource(item_id=item.id, message_key=key, channel_id=C, question_ts=later["ts"],
                                 pair_id=later_pair.id, question="And the refund?", context=context,
                                 origin="alert"))  # fmt: skip
        session.add(TopicRecord(key="t1", name="Order QX4471 missing", named_by="llm", anchors=[first_pair.id]))
        session.add(PairTopic(pair_id=first_pair.id, topic_key="t1"))
        return bot, first, item.id


def test_a_deleted_earlier_turn_leaves_the_golden_set(copied_earlier_turn) -> None:
    bot, first, item_id = copied_earlier_turn
    send(bot, sr.message_deleted(first))
    with bot.runtime.db.session() as session:
        item, source = session.get(GoldenItem, item_id), session.execute(select(GoldenSource)).scalar_one()
        for text in (item.context, item.topic, source.context):
            assert "QX4471" not in text and "[deleted]" in text
        assert item.question == "And the refund?"


def test_a_deleted_earlier_turn_leaves_the_topic_names(copied_earlier_turn) -> None:
    bot, first, _ = copied_earlier_turn
    send(bot, sr.message_deleted(first))
    with bot.runtime.db.session() as session:
        topic = session.get(TopicRecord, "t1")
        assert "QX4471" not in topic.name and "[deleted]" in topic.name
        assert topic.name == "Order [deleted] missing"


def regress_run_of(session, items: dict[int, str]) -> int:
    """A finished `relmon regress` run of golden items (id -> question), stored as the command stores it: four
    checks per item whose judges quote the question (as judges do), and the report quoting it."""
    run = RegressRun(input_sha="s" * 64, source_name="v2.jsonl", items=len(items), report=None)
    session.add(run)
    session.flush()
    for item_id, question in items.items():
        for check in ("relevancy", "correctness", "grounded", "grounded_swapped"):
            verdict = {"judge": check, "status": "ok", "score": 1, "reasoning": f"The customer asked '{question}'",
                       "raw_output": json.dumps({"reasoning": question}), "error": None}  # fmt: skip
            session.add(RegressCheck(run_id=run.id, item_key=str(item_id), check_name=check, charged=True,
                                     verdict=verdict))  # fmt: skip
    lines = [{"id": str(i), "question": q, "outcome": "fail", "notes": []} for i, q in items.items()]
    run.report, run.finished_at = {"run_id": run.id, "items": lines}, datetime.now(UTC)
    return run.id


@pytest.fixture
def regressed(judged, slack) -> tuple[ServedBot, dict, dict, int]:
    """The judged pair's question in the golden set with a teammate's reply as its expected answer, beside an
    unrelated item, both judged by a `relmon regress` run: (bot, question event, reply event, run id)."""
    bot, q, _a, pair_id = judged
    reply = sr.human_message(C, sr.next_ts(), "Use the card ending KESTREL55 instead.", user="U_TEAM",
                             thread_ts=q["ts"])  # fmt: skip
    send(bot, reply)
    with bot.runtime.db.session() as session:
        question = session.get(Pair, pair_id).question_text
        item = GoldenItem(dedupe_key="k1", question=question, expected=reply["text"], origin="takeover", channel_id=C)
        other = GoldenItem(dedupe_key="k2", question="How do I export CSV?", expected="Settings.", origin="import")
        session.add_all([item, other])
        session.flush()
        session.add(GoldenSource(item_id=item.id, message_key=f"{C}:{q['ts']}", channel_id=C, question_ts=q["ts"],
                                 reference_ts=reply["ts"], pair_id=pair_id, question=question,
                                 expected=reply["text"], origin="takeover"))  # fmt: skip
        run_id = regress_run_of(session, {item.id: f"{question} / {reply['text']}", other.id: other.question})
    return bot, q, reply, run_id


def regress_texts(session) -> str:
    rows = session.execute(select(RegressCheck.verdict)).scalars().all()
    return json.dumps([*rows, *session.execute(select(RegressRun.report)).scalars()])


@pytest.mark.parametrize("deleted", ["question", "teammate reply"])
def test_a_deleted_question_or_reply_leaves_the_regress_runs(regressed, deleted) -> None:
    bot, q, reply, run_id = regressed
    with bot.runtime.db.session() as session:
        assert "4111" in regress_texts(session) and "KESTREL55" in regress_texts(session)  # planted
    send(bot, sr.message_deleted(q if deleted == "question" else reply))
    with bot.runtime.db.session() as session:
        texts = regress_texts(session)
        assert "4111" not in texts and "KESTREL55" not in texts
        assert "How do I export CSV?" in texts  # the unrelated item's rows are untouched
        checks = session.execute(select(RegressCheck).order_by(RegressCheck.id)).scalars().all()
        blanked = [c.verdict for c in checks if c.verdict.get("forgotten")]
        assert len(blanked) == 4 and all(v["reasoning"] is None and v["score"] == 1 for v in blanked)  # scores stay
        report = session.get(RegressRun, run_id).report
        assert report["items"][0]["question"] == "[deleted]" and report["items"][0]["outcome"] == "fail"
        # A run that reuses these verdicts judges the blanked ones again (store.regress_runs.stored_checks).
        stored = regress_runs.stored_checks(session, run_id)
        assert sum(verdict is None for _charged, verdict in stored.values()) == 4


def test_a_regress_run_that_judged_a_deleted_item_meanwhile_keeps_none_of_its_words(regressed) -> None:
    """A run still judging when the question is deleted: the verdict that comes after the scrub, and the report the
    run keeps at its end, quote the item as it was when the run read it; the run keeps neither."""
    bot, q, _reply, _run = regressed
    with bot.runtime.db.session() as session:
        item_id = session.scalar(select(GoldenSource.item_id).where(GoldenSource.question_ts == q["ts"]))
        question = session.get(GoldenItem, item_id).question
        running = regress_runs.start(session, "r" * 64, "v3.jsonl", 1)
        for check in ("relevancy", "correctness"):
            session.add(RegressCheck(run_id=running, item_key=str(item_id), check_name=check, charged=True))
    send(bot, sr.message_deleted(q))  # the item leaves the set (its one source quoted the question)
    with bot.runtime.db.session() as session:
        late = {"status": "ok", "score": 0, "reasoning": f"It asks '{question}'", "raw_output": question}
        regress_runs.store_verdict(session, running, str(item_id), "relevancy", late)
        line = {"id": str(item_id), "question": question, "outcome": "fail"}
        regress_runs.finish_run(session, running, passed=0, pass_rate=0.0, report={"items": [line]})
    with bot.runtime.db.session() as session:
        run = session.get(RegressRun, running)
        verdicts = session.scalars(select(RegressCheck.verdict).where(RegressCheck.run_id == running)).all()
        assert "4111" not in json.dumps([run.report, *verdicts])
        assert run.report["items"][0] == {"id": str(item_id), "question": "[deleted]", "outcome": "fail"}
        assert [v["score"] for v in verdicts if v] == [0]  # the score stays
