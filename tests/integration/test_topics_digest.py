"""The weekly digest opens with "What to fix first" (the top topics with figures and an example each, the top
gaps), its cost line counts the topics' calls, its chart gains the topics panel; a topic made only of a private
channel's questions is neither named nor counted there; App Home shows the stored topics of the last 7 days."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import timedelta

from PIL import Image

from bot.listeners.home import publish_home
from common.membership import MembershipCache
from common.messages.blocks import escape, one_line
from common.reports.topic_runs import refresh
from relmon.digest_cli import _dry_run
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL
from tests.topics_corpus import FAILING_TOPIC, START, corpus, corpus_questions, store_questions
from workers.digest.delivery import deliver_digest

digest_services = digest_helpers.digest_services  # the fixture
DIGEST = DIGEST_CHANNEL
NOW = START + timedelta(days=7)


def _text(blocks) -> str:
    return "\n".join(str(block) for block in blocks)


def test_the_digest_opens_with_what_to_fix_first(digest_services, capsys):
    runtime, slack, _llm = digest_services
    store_questions(runtime.db, corpus_questions())
    assert deliver_digest(runtime, NOW).status == "sent"
    blocks = slack.posted(DIGEST)[0]["blocks"]
    opening = blocks[2]["text"]["text"]
    assert opening.startswith("*What to fix first*") and "1. *" in opening and "3. *" in opening
    assert "4. *" not in opening and ">_e.g._" in opening and "failed of" in opening
    text = _text(blocks)
    assert "Knowledge gaps" in text and "refunded pro rata" in text
    assert "left out (outliers)" in text and "grouped with text-embedding-3-small" in text
    assert "topics: 2 embedding calls" in text and "naming call" in text
    upload = next(iter(slack.uploads.values()))
    width, height = Image.open(io.BytesIO(upload)).size
    assert width == 750 and height > 900  # the topics panel below the others
    capsys.readouterr()
    assert _dry_run(runtime, NOW) == 0  # the dry run prints the stored topics, and makes none
    assert "== What to fix first ==" in capsys.readouterr().out


def test_a_private_channels_topics_are_not_named_where_its_people_are_not(digest_services):
    runtime, slack, _llm = digest_services
    labels = [row["topic"] for row in corpus()]
    private_topics = {FAILING_TOPIC, "sso_login"}  # asked only in a private channel the digest's people are not in
    questions = [
        replace(q, channel_id="G0PRIVATE") if labels[q.pair_id - 1] in private_topics else q for q in corpus_questions()
    ]
    store_questions(runtime.db, questions, private_channels=frozenset({"G0PRIVATE"}))
    assert deliver_digest(runtime, NOW).status == "sent"
    blocks = slack.posted(DIGEST)[0]["blocks"]
    opening = blocks[2]["text"]["text"]
    assert opening.startswith("*What to fix first*") and "1. *" in opening
    text = _text(blocks)
    assert "of private channels not shown here" in text
    assert "refund" not in opening.lower() and "refunded pro rata" not in text


def test_app_home_shows_the_latest_stored_topics(digest_services):
    runtime, _slack, _llm = digest_services
    store_questions(runtime.db, corpus_questions())
    membership = MembershipCache(runtime.redis)
    before = publish_home(runtime, runtime.slack, membership, "U1", now=NOW)
    assert "No topics yet" in _text(before["blocks"])
    refresh(runtime, NOW)
    view = publish_home(runtime, runtime.slack, membership, "U1", now=NOW)
    text = _text(view["blocks"])
    assert "Topics of the last 7 days" in text and "1. *" in text and "failed of" in text


def test_a_week_of_too_few_questions_opens_with_its_failed_ones(digest_services):
    """Never an empty "What to fix first": too few to group says so, and lists the failed questions."""
    runtime, slack, llm = digest_services
    questions = corpus_questions()[:12]
    store_questions(runtime.db, questions)
    assert deliver_digest(runtime, NOW).status == "sent"
    opening = slack.posted(DIGEST)[0]["blocks"][2]["text"]["text"]
    failed = [q for q in questions if q.failed]
    assert failed and opening.startswith(
        "*What to fix first*\n12 questions in this period: too few to group into topics (needs 30); "
        f"the {len(failed)} failed one{'s are' if len(failed) != 1 else ' is'} listed below."
    )
    for question in failed:
        assert f"• _{escape(one_line(question.text, 160))}_ (low score, re-asked, taken over)" in opening
    assert all(escape(one_line(q.text, 160)) not in opening for q in questions if not q.failed)
    assert llm.requests == [] and llm.embedding_requests == []  # too few: nothing embedded or named
