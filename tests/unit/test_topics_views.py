"""What a place shows of the topics: private channels' topics hidden where their people are not, examples only
where they may be quoted, gaps likewise; the rendering of "What to fix first" and of the topics' cost."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from common.messages.topics import cost_text, fix_first_blocks, home_blocks, topics_text
from common.reports.topics import chart_bars, spend_summary, view_of
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


def test_everything_public_is_shown_with_examples_and_gaps():
    report = _report(corpus_questions())
    view = view_of(report, audience_sees=lambda _c: False, may_quote=lambda _q: True)
    assert len(view.topics) == len(report.topics) and view.hidden == 0
    assert view.topics[0].example and view.gaps and view.gaps[0].answer
    text = str(fix_first_blocks(view))
    assert "What to fix first" in text and "1. *Topic 0*" in text and "3. *" in text and "4. *" not in text
    assert "Knowledge gaps" in text and "left out (outliers)" in text
    assert [bar.failed for bar in chart_bars(view)] == [line.figures.failed for line in view.topics[:8]]
    assert topics_text(view).startswith("== What to fix first ==")
    assert "Topics of the last 7 days" in str(home_blocks(view))


def test_a_private_channels_topics_show_only_to_its_audience_and_quote_only_where_allowed():
    questions = [replace(q, private=True) for q in corpus_questions(channel="G1")]
    report = _report(questions)
    hidden = view_of(report, audience_sees=lambda _c: False, may_quote=lambda _q: False)
    assert hidden.topics == () and hidden.hidden == len(report.topics) and hidden.gaps == ()
    text = str(fix_first_blocks(hidden))
    assert "Topic 0" not in text and "of private channels not shown here" in text
    members = view_of(report, audience_sees=lambda c: c == "G1", may_quote=lambda _q: False)
    assert len(members.topics) == len(report.topics)
    assert members.topics[0].example is None and members.topics[0].example_withheld
    assert "not quoted here" in str(fix_first_blocks(members)) and members.gaps == ()


def test_the_topics_cost_prices_embeddings_and_naming_apart():
    spend = [Spend("embedding", 2, 1_000_000, 0, 0), Spend("naming", 9, 1_000_000, 500_000, 0)]
    summary = spend_summary(spend, embedding_price=0.02, input_price=0.4, output_price=1.6)
    assert summary.usd == 0.02 + 0.4 + 0.8
    assert summary.calls.startswith("2 embedding calls (1,000,000 tokens), 9 naming calls")
    view = view_of(_report(corpus_questions()), audience_sees=bool, may_quote=bool, cost=summary)
    assert cost_text(view) == f"topics: {summary.calls} ≈ $1.22"
    assert spend_summary([], embedding_price=0.02, input_price=0.4, output_price=1.6) is None
