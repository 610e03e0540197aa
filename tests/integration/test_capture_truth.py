"""What the customer finally read, through the Bolt app: signed events in Slack's own 2026 shapes (streams in
either order, tables, a bot's file upload, a 250-message thread, root bookkeeping, deleted questions,
tombstones, notices, Slack Connect) → conversation log, pairs and settling."""

from __future__ import annotations

import time

import pytest

from store.models import Judgment, JudgmentStatus, PairStatus
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_events import judged_exchange
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from workers.pairs.settling import settle_and_judge

C = "C_SUPPORT"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_bot("B_SUPPORT", "Support Bot", app_id="A_SUPPORT", user_id="U_SUPPORT")
        fake.add_channel(C, "support", members=["U_ASKER", "U_RELMON"])
        fake.add_channel("C_SHARED", "acme-support", members=["U_ASKER", "U_RELMON"], is_ext_shared=True)
        yield fake


def send(bot: ServedBot, event: dict, **envelope_fields) -> None:
    body = sr.envelope(event)
    body.update(envelope_fields)
    response = sr.post(bot.url, body, SECRET)
    assert response.status_code == 200, response.text


def settle_all(bot: ServedBot) -> dict[str, str]:
    return {p.answer_ts: settle_and_judge(bot.runtime, p.id, p.version) for p in bot.pairs()}


# Streams ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", ["opener first", "completion first"])
def test_a_stream_is_judged_on_its_completion_in_either_order(bot: ServedBot, settles: list, order: str) -> None:
    q = sr.human_message(C, sr.next_ts(), "What changed in v2?")
    opener = ss.stream_opener(C, sr.next_ts(), q["ts"])
    completion = ss.stream_completion(opener, "v2 adds single sign-on.")
    send(bot, q)
    if order == "opener first":
        send(bot, opener)
        [pair] = bot.pairs()
        assert pair.status == PairStatus.SETTLING and settles == []  # the empty opener waits
        assert settle_and_judge(bot.runtime, pair.id, pair.version) == "streaming"  # even if a settle came, it waits
        send(bot, completion)
    else:
        send(bot, completion)
        send(bot, opener)  # the opener, handled after its completion, changes nothing
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING and settles == []  # settled at once by its capture: no quiet time
    [pair] = bot.pairs()
    assert (pair.answer_text, pair.question_text, pair.stream_errored) == (
        "v2 adds single sign-on.",
        "What changed in v2?",
        False,
    )


def test_an_errored_stream_is_judged_on_what_was_shown(bot: ServedBot, settles: list) -> None:
    q = sr.human_message(C, sr.next_ts(), "Export my data")
    opener = ss.stream_opener(C, sr.next_ts(), q["ts"])
    send(bot, q)
    send(bot, opener)
    send(bot, ss.stream_completion(opener, "Starting the export of your", state="errored"))
    [pair] = bot.pairs()
    assert pair.status == PairStatus.PENDING and settles == []  # settled at once: the stream has ended
    assert (pair.answer_text, pair.stream_errored) == ("Starting the export of your", True)


# Every word -------------------------------------------------------------------------------------


def test_a_table_answer_is_read_cell_by_cell(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "How much is Pro?")
    send(bot, q)
    send(bot, ss.table_answer(C, sr.next_ts(), q["ts"]))
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert pair.answer_text == "Plan | Price\nPro | $10"


# Who wrote it -----------------------------------------------------------------------------------


def test_the_bots_file_upload_is_its_answer_by_bots_info(bot: ServedBot, slack: FakeSlack) -> None:
    """RELMON_MONITORED_BOTS names only B_SUPPORT: bots.info gives its user, so its upload (no bot_id) counts."""
    q = sr.human_message(C, sr.next_ts(), "Where is the setup guide?")
    send(bot, q)
    send(bot, ss.bot_file_upload(C, sr.next_ts(), q["ts"]))
    assert slack.calls_to("bots.info") == [{"bot": "B_SUPPORT"}]
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert (pair.question_text, pair.answer_text) == (
        "Where is the setup guide?",
        "Here is the setup guide.\n[file: Setup guide]",
    )
    assert bot.runtime.redis.hget("relmon:bot_users", "B_SUPPORT") == b"U_SUPPORT"


def test_the_bots_file_upload_is_its_answer_by_an_app_id_learnt_from_a_message(make_bot) -> None:
    bot = make_bot(monitored_bots=["A_SUPPORT"])
    q = sr.human_message(C, sr.next_ts(), "first question")
    send(bot, q)
    send(bot, sr.bot_message(C, sr.next_ts(), "first answer", thread_ts=q["ts"]))  # bot_id, app_id and user
    q2 = sr.human_message(C, sr.next_ts(), "and the guide?")
    send(bot, q2)
    upload = ss.bot_file_upload(C, sr.next_ts(), q2["ts"])
    send(bot, upload)
    by_ts = {p.answer_ts: p for p in bot.pairs()}
    assert upload["ts"] in by_ts
    settle_all(bot)
    pair = next(p for p in bot.pairs() if p.answer_ts == upload["ts"])
    assert (pair.status, pair.question_text) == (PairStatus.PENDING, "and the guide?")


@pytest.mark.parametrize("subtype", ss.NOTICE_SUBTYPES)
def test_notices_are_never_a_question(bot: ServedBot, subtype: str) -> None:
    q = sr.human_message(C, sr.next_ts(), "Is the API down?")
    send(bot, q)
    send(bot, ss.notice(C, sr.next_ts(), subtype))  # top level, after the question
    send(bot, sr.bot_message(C, sr.next_ts(), "No, all green."))
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert pair.question_text == "Is the API down?"


def test_a_huddles_thread_through_the_bot_its_notice_nobodys_words(bot: ServedBot) -> None:
    """Slackbot roots a huddle's thread; the asker's notes are broadcast ("also send to channel"), carrying the
    notice as their `root`; the bot answers twice. Neither the root's event nor the broadcast's `root` is logged as
    anyone's words: the questions are the asker's, and the follow-up's earlier turns are the asker's and the bot's
    (no "[customer] A huddle started")."""
    root = ss.huddle_root(C, sr.next_ts())
    send(bot, root)
    notes = sr.thread_broadcast(sr.human_message(C, sr.next_ts(), "Our SSO login loops back to the start"), root)
    send(bot, notes)
    send(bot, sr.bot_message(C, sr.next_ts(), "Check the IdP metadata URL.", thread_ts=root["ts"]))
    follow = sr.human_message(C, sr.next_ts(), "Where is that URL?", thread_ts=root["ts"])
    send(bot, follow)
    send(bot, sr.bot_message(C, sr.next_ts(), "Admin > SSO > Metadata.", thread_ts=root["ts"]))
    assert set(settle_all(bot).values()) == {"pending"}
    first, second = sorted(bot.pairs(), key=lambda p: float(p.answer_ts))
    assert (first.question_ts, first.question_text) == (notes["ts"], "Our SSO login loops back to the start")
    assert (second.question_ts, second.question_text) == (follow["ts"], "Where is that URL?")
    assert first.context_text is None
    assert second.context_text == "[customer] Our SSO login loops back to the start\n[bot] Check the IdP metadata URL."
    assert bot.runtime.redis.get(f"relmon:msg:{C}:{root['ts']}") is None  # the notice was never logged


def test_a_message_without_words_is_never_a_question(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "How do I export?")
    send(bot, q)
    send(bot, sr.human_message(C, sr.next_ts(), "", thread_ts=q["ts"]))
    send(bot, sr.bot_message(C, sr.next_ts(), "Use Export.", thread_ts=q["ts"]))
    settle_all(bot)
    [pair] = bot.pairs()
    assert (pair.status, pair.question_text) == (PairStatus.PENDING, "How do I export?")


# Long threads -----------------------------------------------------------------------------------


def test_the_latest_question_of_a_250_message_thread_from_history(bot: ServedBot, slack: FakeSlack) -> None:
    """relmon joined late: the history fall-back pages through the whole thread to its latest question."""
    base = int(time.time()) - 1000
    root_ts = f"{base}.000001"
    slack.add_message(C, root_ts, user="U_ASKER", text="thread about the migration")
    for i in range(2, 250):
        ts = f"{base + i}.000001"
        if i % 2:
            slack.add_message(C, ts, user="U_ASKER", text=f"question {i}", thread_ts=root_ts)
        else:
            slack.add_message(C, ts, user="U_SUPPORT", bot_id="B_SUPPORT", text=f"answer {i}", thread_ts=root_ts)
    a_ts = f"{base + 250}.000001"
    slack.add_message(C, a_ts, user="U_SUPPORT", bot_id="B_SUPPORT", text="the last answer", thread_ts=root_ts)
    send(bot, sr.bot_message(C, a_ts, "the last answer", thread_ts=root_ts))
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert pair.question_text == "question 249"
    pages = slack.calls_to("conversations.replies")
    assert len(pages) == 3 and pages[1].get("cursor") and pages[2].get("cursor")


def test_a_huddles_thread_read_from_history_gives_slackbot_no_words(bot: ServedBot, slack: FakeSlack) -> None:
    """relmon joined late: conversations.replies gives the huddle's root (Slackbot's notice), the asker's question
    and a Slackbot reminder after it. The question found is the asker's; neither notice is logged."""
    base = int(time.time()) - 600
    root_ts, question_ts = f"{base}.000001", f"{base + 5}.000001"
    slack.add_message(C, root_ts, "USLACKBOT", "A huddle started", root_ts, subtype="huddle_thread", room={"id": "R1"})
    slack.add_message(C, question_ts, "U_ASKER", "Why does SSO loop?", root_ts)
    slack.add_message(C, f"{base + 9}.000001", "USLACKBOT", "Reminder: how do I rotate keys?", root_ts)
    a_ts = f"{base + 20}.000001"
    slack.add_message(C, a_ts, "U_SUPPORT", "Check the metadata URL.", root_ts, bot_id="B_SUPPORT")
    send(bot, sr.bot_message(C, a_ts, "Check the metadata URL.", thread_ts=root_ts))
    assert list(settle_all(bot).values()) == [PairStatus.PENDING]
    [pair] = bot.pairs()
    assert (pair.question_ts, pair.question_text, pair.context_text) == (question_ts, "Why does SSO loop?", None)
    assert slack.calls_to("conversations.replies")
    assert bot.runtime.redis.get(f"relmon:msg:{C}:{root_ts}") is None


# Bookkeeping is not an edit ---------------------------------------------------------------------


def test_root_bookkeeping_costs_nothing(bot: ServedBot, slack: FakeSlack, settles: list) -> None:
    """A top-level bot answer, then people reply under it: Slack re-sends the root each time."""
    q = sr.human_message(C, sr.next_ts(), "Any maintenance tonight?")
    root = sr.bot_message(C, sr.next_ts(), "Yes, at 22:00 UTC.")
    send(bot, q)
    send(bot, root)
    [pair] = bot.pairs()
    assert len(settles) == 1
    reply = sr.human_message(C, sr.next_ts(), "thanks!", thread_ts=root["ts"])
    send(bot, reply)
    first = ss.root_bookkeeping(root, reply["ts"], ["U_ASKER"], sr.next_ts())
    send(bot, first)
    again = ss.root_bookkeeping(dict(root, **first["message"]), sr.next_ts(), ["U_ASKER", "U_SUPPORT"], sr.next_ts())
    agent = dict(again, message=dict(again["message"], agent_session={"id": "as1"}, last_read=reply["ts"]))
    send(bot, agent)
    [after] = bot.pairs()
    assert (after.version, after.status) == (pair.version, PairStatus.SETTLING)
    assert len(settles) == 1
    assert slack.calls_to("conversations.replies") == [] and slack.calls_to("conversations.history") == []


# Deleted questions are forgotten ----------------------------------------------------------------


def test_a_deleted_question_is_blanked_from_its_judged_pair(bot: ServedBot) -> None:
    question = "my card number is 4242 4242 4242 4242, why was it declined?"
    q, _, pair = judged_exchange(bot, question, "Cards are declined when...")
    with bot.runtime.db.session() as session:
        session.add(Judgment(pair_id=pair.id, judge="relevance", status=JudgmentStatus.OK, score=4, max_score=5))
    send(bot, sr.message_deleted(q))
    [pair] = bot.pairs()
    assert (pair.status, pair.question_text, pair.question_ts) == (PairStatus.JUDGED, None, q["ts"])
    with bot.runtime.db.session() as session:
        assert session.query(Judgment).filter_by(pair_id=pair.id).count() == 1
    logged = bot.runtime.redis.get(f"relmon:msg:{C}:{q['ts']}")
    assert b"4242" not in logged


def test_a_pending_pair_whose_question_is_deleted_finds_its_question_again(bot: ServedBot, settles: list) -> None:
    first = sr.human_message(C, sr.next_ts(), "How do I add a user?")
    second = sr.human_message(C, sr.next_ts(), "oops, wrong paste: password hunter2", thread_ts=first["ts"])
    answer = sr.bot_message(C, sr.next_ts(), "Admin > Users > Add.", thread_ts=first["ts"])
    for event in (first, second, answer):
        send(bot, event)
    settle_all(bot)
    [pair] = bot.pairs()
    assert pair.question_ts == second["ts"]
    send(bot, sr.message_deleted(second))
    [pair] = bot.pairs()
    assert (pair.status, pair.question_text) == (PairStatus.SETTLING, None)
    assert settles[-1] == ([pair.id, pair.version], None)
    assert settle_and_judge(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    [pair] = bot.pairs()
    assert (pair.question_ts, pair.question_text) == (first["ts"], "How do I add a user?")


def test_a_tombstoned_root_counts_as_deleted(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "my email is ana@example.com, reset me")
    answer = sr.bot_message(C, sr.next_ts(), "Done.", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    settle_all(bot)
    send(bot, ss.tombstone(dict(q, reply_count=1, reply_users=["U_SUPPORT"]), sr.next_ts()))
    [pair] = bot.pairs()
    assert pair.question_text is None
    assert b"ana@example.com" not in bot.runtime.redis.get(f"relmon:msg:{C}:{q['ts']}")


def test_a_tombstoned_answer_root_is_never_judged(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "Any maintenance tonight?")
    root = sr.bot_message(C, sr.next_ts(), "Yes.")
    send(bot, q)
    send(bot, root)
    send(bot, ss.tombstone(dict(root, reply_count=1), sr.next_ts()))
    [pair] = bot.pairs()
    assert pair.status == PairStatus.DELETED


# Slack Connect ----------------------------------------------------------------------------------


def test_a_shared_channel_is_kept_like_a_private_one(bot: ServedBot, slack: FakeSlack) -> None:
    q = sr.human_message(C, sr.next_ts(), "from the envelope", user_team="T_ACME", source_team="T_ACME")
    send(bot, q, is_ext_shared_channel=True)
    send(bot, sr.bot_message(C, sr.next_ts(), "answer", thread_ts=q["ts"]), is_ext_shared_channel=True)
    q2 = sr.human_message("C_SHARED", sr.next_ts(), "from channel info")
    send(bot, q2)
    body = sr.envelope(sr.bot_message("C_SHARED", sr.next_ts(), "answer", thread_ts=q2["ts"]))
    del body["is_ext_shared_channel"]
    assert sr.post(bot.url, body, SECRET).status_code == 200
    flags = {p.channel_id: (p.channel_is_private, p.channel_is_ext_shared) for p in bot.pairs()}
    assert flags == {C: (True, True), "C_SHARED": (True, True)}


def test_a_plain_public_channel_is_not_shared(bot: ServedBot, slack: FakeSlack) -> None:
    for _ in range(2):
        q = sr.human_message(C, sr.next_ts(), "q")
        send(bot, q)
        send(bot, sr.bot_message(C, sr.next_ts(), "a", thread_ts=q["ts"]))
    pairs = bot.pairs()
    assert [(p.channel_is_private, p.channel_is_ext_shared) for p in pairs] == [(False, False)] * 2
    # The envelope cannot say whether an Enterprise Grid organisation shares it: asked once, then cached.
    assert len(slack.calls_to("conversations.info")) == 1
