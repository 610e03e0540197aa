"""What the customer finally read, as pure rules over Slack's own message shapes: streams, every block type,
who wrote it, notices, root bookkeeping and tombstones."""

from __future__ import annotations

import pytest

from capture.notices import IGNORED_SUBTYPES, is_notice
from capture.pairing import (
    STREAMING,
    Author,
    Identity,
    LoggedMessage,
    Resolution,
    author_of,
    bot_user_of,
    find_question,
    is_bookkeeping,
    is_tombstone,
    logged_message,
    message_of,
    replaces,
    resolve,
    settles_at_once,
    stream_errored,
    unchanged,
)
from capture.text import message_text
from tests import slack_requests as sr
from tests import slack_shapes as ss

C = "C_SUPPORT"
OWN = Identity(user_id="U_RELMON", bot_id="B_RELMON", app_id="A_RELMON")
WINDOW = 600


def logged(event: dict, monitored=("B_SUPPORT",)):
    message = message_of(event)
    return logged_message(message, author_of(message, monitored, OWN))


# Streams ----------------------------------------------------------------------------------------


def a_stream() -> tuple[dict, dict, dict]:
    """A question, the bot's stream opener in its thread, and the stream's completion."""
    q = sr.human_message(C, "100.000001", "What changed in v2?")
    opener = ss.stream_opener(C, "100.000005", q["ts"])
    return q, opener, ss.stream_completion(opener, "v2 adds SSO.")


def test_stream_opener_never_settles() -> None:
    q, opener, _ = a_stream()
    assert logged(opener).streaming == "in_progress" and not settles_at_once(logged(opener).streaming)
    waiting = resolve(opener["ts"], [logged(q), logged(opener)], WINDOW)
    assert waiting.status == STREAMING and waiting.question is None  # not judged as empty


def test_a_streams_completion_settles_at_once() -> None:
    q, opener, completion = a_stream()
    assert logged(completion).streaming == "completed" and settles_at_once(logged(completion).streaming)
    assert float(completion["event_ts"]) < float(opener["ts"])  # Slack's order: the completion looks older
    done = resolve(opener["ts"], [logged(q), logged(completion)], WINDOW)
    assert (done.status, done.question.ts) == ("pending", q["ts"])
    assert message_text(done.parts[0].content) == "v2 adds SSO."


@pytest.mark.parametrize("order", ["opener first", "completion first"])
def test_the_completion_is_kept_whichever_event_is_handled_first(order: str) -> None:
    opener = ss.stream_opener(C, "100.000005", "100.000001")
    completion = ss.stream_completion(opener, "Final words.")
    events = [opener, completion] if order == "opener first" else [completion, opener]
    log: dict[str, object] = {}
    for event in events:
        incoming = logged(event)
        if replaces(log.get(incoming.ts), incoming):
            log[incoming.ts] = incoming
    [kept] = log.values()
    assert kept.streaming == "completed"
    assert message_text(kept.content) == "Final words."


def an_errored_stream() -> tuple[dict, dict, Resolution | None]:
    """A question, the stream's errored completion after a few words, and how the answer resolves."""
    q = sr.human_message(C, "100.000001", "Export my data")
    opener = ss.stream_opener(C, "100.000005", q["ts"])
    errored = ss.stream_completion(opener, "Starting the export of", state="errored")
    return q, errored, resolve(opener["ts"], [logged(q), logged(errored)], WINDOW)


def test_an_errored_stream_settles_on_what_was_shown() -> None:
    _, errored, resolution = an_errored_stream()
    assert settles_at_once(logged(errored).streaming)
    assert resolution.status == "pending"


def test_an_errored_stream_is_marked_as_errored() -> None:
    q, _, resolution = an_errored_stream()
    assert stream_errored(resolution.parts) and not stream_errored([logged(q)])


def test_a_later_part_still_streaming_holds_the_whole_answer() -> None:
    q = sr.human_message(C, "100.000001", "q")
    one = sr.bot_message(C, "100.000002", "part one", thread_ts=q["ts"])
    two = ss.stream_opener(C, "100.000003", q["ts"])
    assert resolve(one["ts"], [logged(q), logged(one), logged(two)], WINDOW).status == STREAMING


# Every word -------------------------------------------------------------------------------------


def test_a_table_answer_reads_every_cell() -> None:
    answer = ss.table_answer(C, "100.000002", "100.000001")
    assert message_text(answer) == "Plan | Price\nPro | $10"


def test_every_word_of_a_data_table_card_or_container_is_read() -> None:
    nested = ss.rich_text("inside the container")[0]
    message = {
        "text": "fallback",
        "blocks": [
            {
                "type": "data_table",
                "caption": "Open tickets",
                "rows": [
                    [{"type": "raw_text", "text": "Ticket"}, {"type": "raw_text", "text": "Age"}],
                    [{"type": "raw_text", "text": "#42"}, {"type": "raw_number", "value": 3, "text": "3"}],
                ],
            },
            {
                "type": "card",
                "title": {"type": "mrkdwn", "text": "*Refunds*"},
                "body": {"type": "mrkdwn", "text": "Within 30 days"},
            },
            {
                "type": "container",
                "title": {"type": "plain_text", "text": "Details"},
                "child_blocks": [nested, {"type": "markdown", "text": "**Bold** markdown"}],
            },
        ],
    }
    assert message_text(message).split("\n") == [
        "Open tickets",
        "Ticket | Age",
        "#42 | 3",
        "*Refunds*",
        "Within 30 days",
        "Details",
        "inside the container",
        "**Bold** markdown",
    ]


def test_an_unread_block_type_brings_the_text_fallback_too() -> None:
    message = {
        "text": "Your order shipped on Monday.",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": "Order update"}},
            {"type": "shipment_tracker_2027", "order": "A1"},
        ],
    }
    assert message_text(message) == "Order update\nYour order shipped on Monday."


def test_never_the_header_alone() -> None:
    message = {
        "text": "Reset it under Settings > Security.",
        "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "Password help"}}, {"type": "divider"}],
    }
    assert message_text(message) == "Password help\nReset it under Settings > Security."
    same = {
        "text": "Password help",
        "blocks": [{"type": "header", "text": {"type": "plain_text", "text": "Password help"}}],
    }
    assert message_text(same) == "Password help"  # a fallback that repeats the header is not said twice


def test_section_blocks_still_win_over_the_fallback() -> None:
    message = {
        "text": "New reply",
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "Full *answer*"}}],
    }
    assert message_text(message) == "Full *answer*"


# Who wrote it -----------------------------------------------------------------------------------


def test_the_bots_upload_is_its_own_once_its_user_is_known() -> None:
    upload = ss.bot_file_upload(C, "100.000002", "100.000001")
    assert author_of(upload, {"B_SUPPORT"}, OWN) == Author.HUMAN  # a user and no bot_id: looks like a person
    assert author_of(upload, {"B_SUPPORT", "U_SUPPORT"}, OWN) == Author.MONITORED_BOT
    assert "[file: Setup guide]" in message_text(upload)


@pytest.mark.parametrize("configured", [{"B_SUPPORT"}, {"A_SUPPORT"}])
def test_the_bot_user_is_learnt_from_a_message_its_bot_id_vouches_for(configured: set[str]) -> None:
    assert bot_user_of(sr.bot_message(C, "1.000001", "hi"), configured) == "U_SUPPORT"
    assert bot_user_of(sr.bot_message(C, "1.000001", "hi", bot_id="B_X", app_id="A_X", user="U_X"), configured) is None
    assert bot_user_of(ss.bot_file_upload(C, "1.000002", "1.000001"), configured) is None  # no bot_id to vouch


@pytest.mark.parametrize("subtype", ss.NOTICE_SUBTYPES)
def test_notices_are_ignored(subtype: str) -> None:
    assert subtype in IGNORED_SUBTYPES
    event = ss.notice(C, "100.000001", subtype)
    assert is_notice(event) and author_of(event, {"B_SUPPORT"}, OWN) == Author.OTHER


def test_slackbot_tombstones_or_unknown_subtypes_are_nobodys_words() -> None:
    """Slackbot's huddle root, Slackbot's own messages, a tombstone and a subtype Slack adds tomorrow are notices
    (even when a bot_add names the support bot's bot_id)."""
    huddle = ss.huddle_root(C, "100.000001")
    notices = [
        huddle,
        ss.slackbot_message(C, "100.000002", "Reminder: how do I file expenses?"),
        message_of(ss.tombstone(dict(sr.human_message(C, "100.000003", "q"), reply_count=1), "100.000009")),
        sr.human_message(C, "100.000004", "Shared a list", subtype="list_record_shared"),
        dict(sr.bot_message(C, "100.000005", "added an integration"), subtype="bot_add"),
    ]
    for event in notices:
        assert is_notice(event), event
        assert author_of(event, {"B_SUPPORT"}, OWN) == Author.OTHER


def test_what_people_or_bots_write_are_words() -> None:
    """A person's message, file, /me and broadcast, and a bot's message, are words."""
    q = sr.human_message(C, "100.000006", "How do I export?")
    words = [
        q,
        sr.file_share(sr.human_message(C, "100.000007", "this error"), "error.png"),
        sr.human_message(C, "100.000008", "waves", subtype="me_message"),
        sr.thread_broadcast(sr.human_message(C, "100.000010", "also this"), q),
        sr.bot_message(C, "100.000011", "Use Export."),
        sr.classic_bot_message(C, "100.000012", "Done"),
    ]
    assert not any(is_notice(event) for event in words)


def a_huddles_thread() -> list[dict]:
    """Slackbot's huddle root, then a customer's note, the bot's answer, a question and its answer in its thread."""
    root = ss.huddle_root(C, "100.000001")
    return [
        root,
        sr.human_message(C, "100.000002", "Notes: we could not log in with SSO", thread_ts=root["ts"]),
        sr.bot_message(C, "100.000003", "Check the IdP metadata URL.", thread_ts=root["ts"]),
        sr.human_message(C, "100.000004", "Where is the metadata URL?", thread_ts=root["ts"]),
        sr.bot_message(C, "100.000005", "Admin > SSO > Metadata.", thread_ts=root["ts"]),
    ]


def as_captured(raw: list[dict]) -> list[list[LoggedMessage]]:
    """The messages as logged from events, and as read back from conversations.replies (capture.history)."""
    from capture.history import read_message

    return [
        [logged(m) for m in raw],  # events (a notice logged by an older bot is another bot's: still no turn)
        [m for m in (read_message(r, ["B_SUPPORT"], OWN) for r in raw) if m],  # history and exports
    ]


def test_a_question_in_a_huddles_thread_is_paired() -> None:
    """The huddle's root (Slackbot's notice) is never the question; its thread's questions are paired like any
    other, also when read back from conversations.replies (capture.history.read_message)."""
    raw = a_huddles_thread()
    _, first, answer1, question, answer2 = raw
    for messages in as_captured(raw):
        assert find_question(logged(answer1), messages, WINDOW).ts == first["ts"]
        assert find_question(logged(answer2), messages, WINDOW).ts == question["ts"]


def test_a_huddles_notice_is_no_earlier_turn() -> None:
    from capture.conversation import earlier_turns
    from capture.history import read_message

    raw = a_huddles_thread()
    root, first, answer1, _, answer2 = raw
    for messages in as_captured(raw):
        asked = find_question(logged(answer2), messages, WINDOW)
        turns = earlier_turns(asked, messages)
        assert [(who, m.ts) for who, m in turns] == [("customer", first["ts"]), ("bot", answer1["ts"])]
    assert read_message(root, ["B_SUPPORT"], OWN) is None


def test_an_answer_after_nothing_but_a_huddles_notice_has_no_question() -> None:
    root = ss.huddle_root(C, "100.000001")
    lone = sr.bot_message(C, "100.000006", "Hi!", thread_ts="100.000001")
    assert find_question(logged(lone), [logged(root), logged(lone)], WINDOW) is None  # not "A huddle started"


def test_a_message_without_words_or_files_is_never_a_question() -> None:
    q = sr.human_message(C, "100.000001", "How do I export?")
    silent = sr.human_message(C, "100.000002", "", thread_ts=q["ts"])
    answer = sr.bot_message(C, "100.000003", "Use Export.", thread_ts=q["ts"])
    messages = [logged(q), logged(silent), logged(answer)]
    assert logged(silent).wordless
    assert find_question(logged(answer), messages, WINDOW).ts == q["ts"]
    screenshot = sr.file_share(sr.human_message(C, "100.000004", "", thread_ts=q["ts"]), "error.png")
    assert not logged(screenshot).wordless  # a screenshot is a question


# Bookkeeping and tombstones ----------------------------------------------------------------------


def test_root_bookkeeping_is_no_edit() -> None:
    root = sr.bot_message(C, "100.000001", "Maintenance tonight at 22:00.")
    first = ss.root_bookkeeping(root, "100.000002", ["U_ASKER"], "100.000003")
    assert is_bookkeeping(first)
    again = ss.root_bookkeeping(dict(root, **first["message"]), "100.000004", ["U_ASKER", "U_SUPPORT"], "100.000005")
    assert is_bookkeeping(again)
    agent = dict(first, message=dict(first["message"], agent_session={"id": "as1"}, last_read="100.000002"))
    assert is_bookkeeping(agent)
    assert not is_bookkeeping(sr.message_changed(root, "Maintenance moved to 23:00."))
    assert unchanged(logged(root), logged(first))


def test_a_tombstone_is_a_deletion() -> None:
    root = sr.human_message(C, "100.000001", "my account number is 1234")
    event = ss.tombstone(dict(root, reply_count=1), "100.000009")
    assert is_tombstone(event) and not is_bookkeeping(event)
    assert not is_tombstone(sr.message_changed(root, "edited"))


def test_the_alert_says_the_stream_errored() -> None:
    from datetime import UTC, datetime

    from common.messages.alerts import LowScoreAlert, low_score_alert

    alert = LowScoreAlert(1, "relevancy", 1.0, 5.0, 2.0, C, datetime(2026, 1, 5, tzinfo=UTC), True, "q", "a")
    said = str(low_score_alert(alert)["blocks"])
    assert "stream ended in an error" not in said
    errored = str(low_score_alert(LowScoreAlert(**{**alert.__dict__, "stream_errored": True}))["blocks"])
    assert "stream ended in an error" in errored
