"""A week too small to group still shows its failed questions grouped by the words they share."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from topics.questions import LOW_SCORE, Question
from topics.small_groups import failed_groups, keywords

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _q(pair_id: int, text: str) -> Question:
    return Question(pair_id, "C1", f"{pair_id}.0", text, NOW, failures=(LOW_SCORE,))


def test_failed_questions_sharing_a_word_are_grouped_largest_first_and_the_rest_stand_alone():
    questions = [
        _q(1, "SSO login fails with Okta"),
        _q(2, "How do I get a refund?"),
        _q(3, "Our SSO stopped working this morning"),
        _q(4, "Refunds for the annual plan"),
        _q(5, "sso sign-in loop"),
        _q(6, "Is there a podcast?"),
    ]
    groups = failed_groups(questions)
    assert [(g.keyword, [q.pair_id for q in g.questions]) for g in groups] == [
        ("sso", [1, 3, 5]),
        ("refund", [2, 4]),
        (None, [6]),
    ]


def test_no_failed_question_gives_no_group_and_stop_words_never_group():
    assert failed_groups([]) == ()
    groups = failed_groups([_q(1, "How do I do this please?"), _q(2, "What is this, please help")])
    assert [g.keyword for g in groups] == [None, None]
    assert keywords("Hi team, the invoices are missing") == frozenset({"invoice", "missing"})


def test_a_quiet_week_shows_its_failed_questions_under_the_keyword_they_share():
    from datetime import timedelta

    from common.messages.topics import fix_first_blocks, topics_text
    from common.reports.topics import view_of
    from topics.build import TopicsReport, too_few_report

    questions = [
        _q(1, "SSO login fails with Okta"),
        _q(2, "How do I get a refund?"),
        _q(3, "Our SSO stopped working this morning"),
        replace(_q(4, "Export to CSV"), failures=()),
        _q(5, "sso sign-in loop"),
    ]
    empty = TopicsReport(NOW - timedelta(days=7), NOW, NOW, len(questions), 0, (), "none")
    report = too_few_report(empty, questions, 30)
    assert [q.pair_id for q in report.failed_questions] == [1, 3, 5, 2]
    view = view_of(report, audience_sees=lambda _c: True, may_quote=lambda _q: True)
    terminal = topics_text(view)
    assert "sso (3 failed):\n- SSO login fails with Okta" in terminal
    assert "*sso (3 failed)*" in str(fix_first_blocks(view))
    # Where one of them may not be quoted, their shared word is not said either.
    hidden = view_of(report, audience_sees=lambda _c: True, may_quote=lambda q: q.pair_id != 3)
    assert "sso (3 failed)" not in topics_text(hidden) and [line.group for line in hidden.too_few.failed] == [None] * 4
