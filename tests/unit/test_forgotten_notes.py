"""Which deletion an alert's redraw names when several in one thread note it (store.forgetting.telling_note)."""

from store.forgetting import telling_note


def test_a_question_deleted_is_not_hidden_by_a_later_reply_deleted_in_its_thread() -> None:
    assert telling_note("question", "message") == "question"
    assert telling_note("answer", "edit") == "answer"
    assert telling_note("message", "question") == "question"
    assert telling_note(None, "message") == "message"
    assert telling_note("edit", "message") == "message"
    assert telling_note("question", "exchange") == "exchange"
