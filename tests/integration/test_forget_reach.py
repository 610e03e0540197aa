"""A deletion reaches what relmon sent and posted beyond its own rows (#43): the verdict's comment on the bot's trace
in Langfuse (the fake, read back) is blanked by an upsert of the same score, whose value stays; a weekly digest
already posted that quoted the question is redrawn in place without it. Signed events to a bot served in process
(tests.bot_harness), its forget task run at once, and the tasks that task queues run as they are sent
(tests.forget_reach); real Redis, SQLite and PostgreSQL, the fake Slack over HTTP. Phoenix (a real server):
tests/system/test_traces_phoenix.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from langfuse import Langfuse
from sqlalchemy import select

from capture import forget_notes
from common import task_names
from store.digests import topics_run
from store.models import Digest, Judgment
from store.topic_models import PairTopic
from tests import slack_requests as sr
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.forget_reach import reached  # noqa: F401  (fixture)
from tests.integration.test_capture_truth import send
from tests.integration.test_forgetting import C, judged_with_alerts
from tests.topics_corpus import START, corpus_questions, store_questions
from workers.digest.delivery import deliver_digest
from workers.tasks.forgetting import forget_message_in
from workers.tasks.traces import send_langfuse_scores

QUESTION = "Card 4111 1111 1111 1111 for ZEBRA Holdings was declined, why?"
ANSWER = "Our office is open 9 to 5."
DIGEST = "C_DIGEST"


def judgment_id_of(bot, pair_id: int) -> int:
    """The pair's judgment, its normalised score set as the judging sets it (0 of 4)."""
    with bot.runtime.db.session() as session:
        judgment = session.execute(select(Judgment).where(Judgment.pair_id == pair_id)).scalar_one()
        judgment.normalized_score = 0.0
        return judgment.id


@pytest.fixture
def langfuse_bot(reached, make_bot, langfuse: FakeLangfuse, slack):  # noqa: F811
    bot = make_bot(
        trace_id_from="slack_ts",
        langfuse_host=langfuse.url,
        langfuse_public_key="pk-lf-test",
        langfuse_secret_key="sk-lf-test",
        trace_send_retries=2,
    )
    slack.add_channel("C_ALERTS", "alerts", members=["U_RELMON"])
    return bot


def test_a_deleted_question_blanks_the_verdicts_comment_in_langfuse(langfuse_bot, langfuse, reached) -> None:  # noqa: F811
    bot = langfuse_bot
    q, a, pair_id = judged_with_alerts(bot, QUESTION, ANSWER)
    judgment_id = judgment_id_of(bot, pair_id)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    score_id = f"relmon-{judgment_id}-score"
    sent = langfuse.stored()[score_id]
    assert "4111" in sent["comment"] and sent["value"] == 0.0  # the judge quoted the question

    send(bot, sr.message_deleted(q))

    assert (task_names.BLANK_LANGFUSE_COMMENTS, "sent") in reached
    score = langfuse.stored()[score_id]
    assert not score.get("comment")  # blanked where it was sent
    assert score["value"] == 0.0 and score["traceId"] == Langfuse.create_trace_id(seed=f"{C}:{a['ts']}")
    assert "4111" not in json.dumps(langfuse.stored()) and "ZEBRA" not in json.dumps(langfuse.stored())
    assert langfuse.posts[score_id] == 2  # upserted by the same id, not added


def test_a_deleted_answer_blanks_the_comment_on_the_trace_it_was_sent_to(
    reached,  # noqa: F811
    make_bot,
    langfuse: FakeLangfuse,
    slack,
) -> None:
    """The trace was named in the answer's metadata: once the answer is deleted it can no longer be read there,
    and the comment is blanked on the trace relmon recorded when it sent the verdict."""
    bot = make_bot(langfuse_host=langfuse.url, langfuse_public_key="pk-lf-test", langfuse_secret_key="sk-lf-test")
    slack.add_channel("C_ALERTS", "alerts", members=["U_RELMON"])
    q, a, pair_id = judged_with_alerts(bot, QUESTION, ANSWER)
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    slack.add_message(C, a["ts"], text=ANSWER, thread_ts=q["ts"], bot_id="B_SUPPORT",
                      metadata={"event_type": "answer", "event_payload": {"trace_id": trace_id}})  # fmt: skip
    judgment_id = judgment_id_of(bot, pair_id)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    slack.messages[C].pop(a["ts"])  # deleted in Slack

    send(bot, sr.message_deleted(a))

    score = langfuse.stored()[f"relmon-{judgment_id}-score"]
    assert score["traceId"] == trace_id and not score.get("comment") and score["value"] == 0.0


def test_a_deleted_question_redraws_the_posted_digest_that_quoted_it(reached, make_bot, slack) -> None:  # noqa: F811
    bot = make_bot(digest_channel_setting=DIGEST)
    slack.add_channel("C_ALERTS", "alerts", members=["U_RELMON"])
    slack.add_channel(DIGEST, "digest", members=["U_RELMON"])
    q, _, pair_id = judged_with_alerts(bot, QUESTION, ANSWER)
    judgment_id_of(bot, pair_id)
    outcome = deliver_digest(bot.runtime, datetime.now(UTC))
    assert outcome.status == "sent"
    posted = slack.messages[DIGEST][outcome.message_ts]
    assert "4111" in json.dumps(posted["blocks"])  # the week's worst answer, quoted

    send(bot, sr.message_deleted(q))

    assert (task_names.REDRAW_DIGEST, "redrawn") in reached
    [update] = [call for call in slack.calls_to("chat.update") if call.get("ts") == outcome.message_ts]
    for shown in (json.dumps(update), json.dumps(slack.messages[DIGEST][outcome.message_ts])):
        assert "4111" not in shown and "ZEBRA" not in shown and "declined" not in shown
        assert "Weekly digest" in shown  # the same digest, redrawn
    with bot.runtime.db.session() as session:
        assert session.execute(select(Digest.message_ts)).scalar_one() == outcome.message_ts
    assert not list(bot.runtime.redis.hkeys("relmon:task-notes"))  # every queued task ended


def test_a_digest_made_before_the_pair_is_not_redrawn(reached, make_bot, slack) -> None:  # noqa: F811
    bot = make_bot(digest_channel_setting=DIGEST)
    slack.add_channel("C_ALERTS", "alerts", members=["U_RELMON"])
    slack.add_channel(DIGEST, "digest", members=["U_RELMON"])
    assert deliver_digest(bot.runtime, datetime.now(UTC)).status == "sent"  # an empty week, before the question
    q, _, _ = judged_with_alerts(bot, QUESTION, ANSWER)
    send(bot, sr.message_deleted(q))
    assert not [name for name, _ in reached if name == task_names.REDRAW_DIGEST]


@pytest.fixture
def topics_digest(reached, settings_for, tmp_path, runtime_for):  # noqa: F811
    """A week of questions grouped into topics (tests.topics_corpus, the fake OpenAI naming them), its digest
    posted: (runtime, fake Slack, the questions, the posted digest's ts)."""
    with FakeSlack() as slack, FakeOpenAI() as llm:
        settings = settings_for(
            slack_api_url=slack.api_url,
            digest_channel_setting=DIGEST,
            alert_channel="CALERTS",
            data_dir=tmp_path / "data",
            openai_base_url=llm.base_url,
        )
        runtime = runtime_for(settings)
        questions = corpus_questions()
        store_questions(runtime.db, questions)
        outcome = deliver_digest(runtime, START + timedelta(days=7))
        assert outcome.status == "sent"
        yield runtime, slack, questions, outcome.message_ts


def test_forgotten_topic_examples_and_gap_questions_leave_the_posted_digest(topics_digest, reached) -> None:  # noqa: F811
    runtime, slack, questions, ts = topics_digest
    posted = json.dumps(slack.messages[DIGEST][ts]["blocks"])
    assert "Knowledge gaps" in posted and "e.g." in posted
    quoted = [q for q in questions if q.text[:40] in posted]  # the examples and the gaps' questions shown
    assert len(quoted) >= 3

    for question in quoted:
        forget_message_in(runtime, question.channel_id, question.ts, thread_ts=question.ts)

    assert reached.count((task_names.REDRAW_DIGEST, "redrawn")) == len(quoted)
    redrawn = json.dumps(slack.messages[DIGEST][ts])
    assert [q.text for q in quoted if q.text[:40] in redrawn] == []
    assert "What to fix first" in redrawn and "Redrawn: a message it drew on was deleted" in redrawn
    assert len(slack.uploads) == 1  # the chart carries no message text: not redrawn


def test_a_topic_name_scrubbed_by_an_edit_redraws_the_digest_and_replaces_its_chart(topics_digest, reached) -> None:  # noqa: F811
    """The chart shows the topics' names, made from their questions: an edit that takes a word out of one of them
    (the word is scrubbed from the name, capture.forgetting) redraws the digest and replaces the chart."""
    runtime, slack, questions, ts = topics_digest
    [old_chart] = slack.files
    with runtime.db.session() as session:
        digest = session.execute(select(Digest)).scalar_one()
        found = topics_run(session, digest.period_key)
        shown = found[1][0]  # the top topic: in the chart and the opening
        pair_id = (
            session.execute(select(PairTopic.pair_id).where(PairTopic.topic_key == shown.topic_key)).scalars().first()
        )
    word = shown.name.split()[0]  # "Refund and annual questions": capitalised, so a deletion's scrub takes it too
    question = next(q for q in questions if q.pair_id == pair_id)
    pipe = runtime.redis.pipeline()
    forget_notes.keep(pipe, question.channel_id, question.ts, [word], edited=True)  # as the bot notes an edit
    pipe.execute()

    forget_message_in(runtime, question.channel_id, question.ts, thread_ts=question.ts, edited=True)

    assert reached == [(task_names.REDRAW_DIGEST, "redrawn")]
    opening = slack.messages[DIGEST][ts]["blocks"][2]["text"]["text"]
    assert shown.name not in opening and shown.name.replace(word, "[removed]", 1) in opening
    assert old_chart not in slack.files and len(slack.files) == 1  # the old chart deleted, a new one drawn
    [new_chart] = slack.files.values()
    assert new_chart["thread_ts"] == ts and new_chart["title"].startswith("relmon digest")
    tombstones = [
        f for m in slack.messages[DIGEST].values() for f in m.get("files", []) if f.get("mode") == "tombstone"
    ]
    assert [f["id"] for f in tombstones] == [old_chart]

    # The question deleted later: the digest is redrawn again, its chart (already drawn with these names) is not.
    forget_message_in(runtime, question.channel_id, question.ts, thread_ts=question.ts)
    assert reached.count((task_names.REDRAW_DIGEST, "redrawn")) == 2
    assert list(slack.files) == [new_chart["id"]]
