"""What a place shows of the topics: private channels' topics hidden where their people are not, examples only
where they may be quoted, gaps likewise; the rendering of "What to fix first" and of the topics' cost."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from common.messages.topics import cost_text, fix_first_blocks, home_blocks, topics_text
from common.reports.topics import SpendSummary, chart_bars, spend_summary, view_of
from store.topics import Spend
from tests.topics_corpus import START, corpus_questions
from topics.build import build_topics, named
from topics.local_embeddings import local_vectors

END = START + timedelta(days=7)


def _report(questions):
    report = build_topics(
        questions, local_vectors([q.text for q in questions]), start=START, end=END, now=END, embedding="local"
    )
    topics = tuple(named(t, f"k{i}", f"Topic {i}") for i, t in enumerate(report.topics))
    return replace(report, topics=topics)


@pytest.fixture(scope="module")
def public_report():
    return _report(corpus_questions())


@pytest.fixture(scope="module")
def public_view(public_report):
    """A place whose people see no private channel's topics, where everything may be quoted."""
    return view_of(public_report, audience_sees=lambda _c: False, may_quote=lambda _q: True)


def test_every_public_topic_is_shown(public_report, public_view):
    assert len(public_view.topics) == len(public_report.topics) and public_view.hidden == 0


def test_a_public_topic_shows_an_example(public_view):
    assert public_view.topics[0].example


def test_public_gaps_are_shown_with_their_answers(public_view):
    assert public_view.gaps and public_view.gaps[0].answer


def test_what_to_fix_first_lists_the_top_three_topics(public_view):
    text = str(fix_first_blocks(public_view))
    assert "What to fix first" in text and "1. *Topic 0*" in text and "3. *" in text and "4. *" not in text


def test_what_to_fix_first_shows_the_knowledge_gaps(public_view):
    assert "Knowledge gaps" in str(fix_first_blocks(public_view))


def test_what_to_fix_first_counts_the_outliers_left_out(public_view):
    assert "left out (outliers)" in str(fix_first_blocks(public_view))


def test_the_chart_has_a_bar_per_topic_up_to_eight(public_view):
    assert [bar.failed for bar in chart_bars(public_view)] == [line.figures.failed for line in public_view.topics[:8]]


def test_the_text_form_opens_with_what_to_fix_first(public_view):
    assert topics_text(public_view).startswith("== What to fix first ==")


def test_the_home_tab_shows_the_last_7_days_topics(public_view):
    assert "Topics of the last 7 days" in str(home_blocks(public_view))


@pytest.fixture(scope="module")
def private_report():
    """Every question from the private channel G1."""
    return _report([replace(q, private=True) for q in corpus_questions(channel="G1")])


@pytest.fixture(scope="module")
def hidden_view(private_report):
    return view_of(private_report, audience_sees=lambda _c: False, may_quote=lambda _q: False)


@pytest.fixture(scope="module")
def members_view(private_report):
    """G1's own people, where G1 may not be quoted."""
    return view_of(private_report, audience_sees=lambda c: c == "G1", may_quote=lambda _q: False)


def test_a_private_channels_topics_are_hidden_outside_its_audience(private_report, hidden_view):
    assert hidden_view.topics == () and hidden_view.hidden == len(private_report.topics) and hidden_view.gaps == ()


def test_what_to_fix_first_counts_hidden_topics_without_naming_them(hidden_view):
    text = str(fix_first_blocks(hidden_view))
    assert "Topic 0" not in text and "of private channels not shown here" in text


def test_a_private_channels_topics_show_to_its_audience(private_report, members_view):
    assert len(members_view.topics) == len(private_report.topics)


def test_a_private_channels_examples_are_withheld_where_it_may_not_be_quoted(members_view):
    assert members_view.topics[0].example is None and members_view.topics[0].example_withheld
    assert "not quoted here" in str(fix_first_blocks(members_view))


def test_a_private_channels_gaps_are_withheld_where_it_may_not_be_quoted(members_view):
    assert members_view.gaps == ()


SPEND = [Spend("embedding", 2, 1_000_000, 0, 0), Spend("naming", 9, 1_000_000, 500_000, 0)]


def _priced(spend: list[Spend]) -> SpendSummary | None:
    return spend_summary(spend, embedding_price=0.02, input_price=0.4, output_price=1.6)


def test_the_topics_cost_prices_embeddings_apart_from_naming():
    assert _priced(SPEND).usd == 0.02 + 0.4 + 0.8


def test_the_topics_cost_counts_the_calls_of_each_kind():
    assert _priced(SPEND).calls.startswith("2 embedding calls (1,000,000 tokens), 9 naming calls")


def test_the_cost_line_gives_the_calls_with_the_price(public_report):
    summary = _priced(SPEND)
    view = view_of(public_report, audience_sees=bool, may_quote=bool, cost=summary)
    assert cost_text(view) == f"topics: {summary.calls} ≈ $1.22"


def test_no_spend_has_no_cost():
    assert _priced([]) is None


def _quiet_report():
    """12 questions, too few to group: 4 failed, one of those in the private channel G1."""
    from topics.questions import LOW_SCORE, REASK

    questions = [
        replace(q, failures=(LOW_SCORE, REASK) if i % 3 == 0 else ()) for i, q in enumerate(corpus_questions()[:12])
    ]
    questions[9] = replace(questions[9], channel_id="G1", private=True)
    return build_topics(questions, local_vectors([q.text for q in questions]), start=START, end=END, now=END,
                        embedding="local"), questions  # fmt: skip


def test_too_few_to_group_lists_the_failed_questions_instead_of_topics():
    report, questions = _quiet_report()
    view = view_of(report, audience_sees=lambda _c: True, may_quote=lambda _q: True)
    assert view.topics == () and view.too_few is not None
    assert (view.too_few.questions, view.too_few.needed) == (12, 30)
    # Every failed one, in the order of the keyword groups they fall in (topics.small_groups).
    assert sorted(line.text for line in view.too_few.failed) == sorted(q.text for q in questions if q.failed)
    assert view.notes == ()  # the too-few note is said once, by the list's own opening
    text = str(fix_first_blocks(view))
    assert "12 questions in this period: too few to group into topics (needs 30); the 4 failed ones are listed" in text
    assert f"• _{questions[0].text}_ (low score, re-asked)" in text
    terminal = topics_text(view)
    assert terminal.count("  failed: low score, re-asked") == 4 and questions[3].text in terminal


def test_too_few_to_group_hides_a_private_channels_failed_question_outside_its_audience():
    report, questions = _quiet_report()
    view = view_of(report, audience_sees=lambda _c: False, may_quote=lambda q: not q.private)
    assert len(view.too_few.failed) == 3 and view.too_few.hidden == 1
    text = str(fix_first_blocks(view))
    assert questions[9].text not in text
    assert "the 3 failed ones are listed below (1 failed one of private channels not shown here)" in text


def test_too_few_to_group_withholds_a_private_question_where_it_may_not_be_quoted():
    report, questions = _quiet_report()
    view = view_of(report, audience_sees=lambda c: c == "G1", may_quote=lambda q: not q.private)
    assert [line.text for line in view.too_few.failed].count(None) == 1
    text = str(fix_first_blocks(view))
    assert questions[9].text not in text and "a question from a private channel: not quoted here" in text


def test_too_few_to_group_without_a_failure_says_so():
    questions = [replace(q, failures=()) for q in corpus_questions()[:5]]
    report = build_topics(questions, local_vectors([q.text for q in questions]), start=START, end=END, now=END,
                          embedding="local")  # fmt: skip
    view = view_of(report, audience_sees=bool, may_quote=bool)
    expected = "5 questions in this period: too few to group into topics (needs 30); none of them failed."
    assert expected in str(fix_first_blocks(view)) and expected in str(home_blocks(view))


def test_a_long_list_of_failed_questions_is_cut_in_a_message_not_in_the_terminal():
    from topics.questions import LOW_SCORE

    questions = [replace(q, failures=(LOW_SCORE,)) for q in corpus_questions()[:25]]
    report = build_topics(questions, local_vectors([q.text for q in questions]), start=START, end=END, now=END,
                          embedding="local")  # fmt: skip
    view = view_of(report, audience_sees=bool, may_quote=bool)
    text = str(fix_first_blocks(view))
    assert text.count("• _") == 10 and "…and 15 more: `relmon topics` lists them all" in text
    assert topics_text(view).count("  failed: low score") == 25
