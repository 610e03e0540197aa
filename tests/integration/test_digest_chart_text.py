"""The digest's chart carries no message text: every string matplotlib draws on it is a title, an axis label, a
day, a figure, the judge's name or a topic's name; no question, answer or reasoning of the week it draws, though
they are stored (so a forgetting never has to redraw it for them: workers.digest.redraw). Two weeks of judged
answers in SQLite and PostgreSQL (tests.digest_helpers), the report the digest draws, the figure it renders."""

from __future__ import annotations

import re

import matplotlib
from matplotlib.text import Text
from sqlalchemy import select

from common.reports.figures import load_report
from common.reports.period import period_for
from common.reports.topics import TopicBar
from store.models import Judgment, Pair
from tests import digest_helpers
from tests.digest_helpers import now_utc, seed
from workers.digest.chart import STYLE, chart_figure

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures
TOPICS = [TopicBar("Refund and annual questions", 5, 2), TopicBar("Sso and saml questions", 3, None)]
# What the chart may say besides figures, days and topic names.
VOCABULARY = set(
    [
        "daily",
        "mean",
        "relevancy",
        "and",
        "answers",
        "per",
        "day",
        "answers",
        "score",
        "scores",
        "this",
        "week",
        "scored",
        "failed",
        "questions",
        "by",
        "topic",
        "week",
        "before",
        "alert",
        "threshold",
        "channels",
        "resolved",
        "resolution",
        "rate",
        "no",
        "yet",
        "data",  # "no data the week before"
        "days",  # the day axis: "UTC days · Mon 16 from 09:00 · Mon 23 until 09:00"
        "from",
        "until",
        "utc",
    ]
)


def drawn_texts(figure) -> list[str]:
    return [text.get_text() for text in figure.findobj(Text) if text.get_text().strip()]


def test_the_chart_draws_no_message_text(runtime) -> None:
    now = now_utc()
    seed(runtime, now)
    with runtime.db.session() as session:
        pairs = session.execute(select(Pair.question_text, Pair.answer_text)).all()
        stored = {text for row in pairs for text in row if text}
        session.execute(select(Judgment)).scalars().first().reasoning = "The judge read question 3 in C1 closely."
    report = load_report(runtime, period_for(now))
    with matplotlib.rc_context(STYLE):
        texts = drawn_texts(chart_figure(report, TOPICS))
    assert stored and len(texts) > 20
    drawn = "\n".join(texts)
    assert not [text for text in stored if text in drawn]
    assert "question 3" not in drawn and "answer" not in drawn.replace("answers", "")
    names = {bar.name for bar in TOPICS}
    assert names <= set(texts)  # the topics' names are drawn (and redrawn when a forgetting scrubs one)
    words = {word.lower() for text in texts if text not in names for word in re.findall(r"[A-Za-z]+", text)}
    days = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
    assert words - VOCABULARY - days <= {"relmon", "mean", "of", "on"}, words - VOCABULARY - days
