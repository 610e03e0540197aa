"""The topics' audience rule (topics.audience): a name is made only from questions every viewer of where it is shown
may read, shown neutral where its source channels may not be read, made again when its audience widens; and the
fixed texts a failed endpoint leaves (topics.failures): a kind, never the provider's words."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import openai
import pytest

from judges.client import LLMRequestError
from judges.verdict import TransientLLMError
from topics.audience import (
    NEUTRAL_NAME,
    NamingChoice,
    Place,
    keeps_name,
    may_read,
    name_readable,
    naming_choice,
    shown_name,
)
from topics.embeddings import EmbeddingsUnavailable
from topics.failures import (
    embedding_fallback_note,
    embeddings_error,
    error_kind,
    llm_error,
    naming_fallback_note,
    not_built_note,
)
from topics.questions import Question

AT = datetime(2026, 11, 30, tzinfo=UTC)
PUBLIC_DIGEST = Place(channel_id="CDIGEST")
# The alert channel G1's own rule names, with quoting on: the quoting rule lets G1 be quoted there.
G1_ALERTS = Place(channel_id="CG1ALERTS", quotes_private=lambda channel: channel == "G1")
APP_HOME_OF_G1_MEMBER = Place(reader_may_read=lambda channel: channel == "G1")


def q(pair_id: int, channel: str, private: bool = False) -> Question:
    return Question(pair_id, channel, f"{pair_id}.0", f"question {pair_id}", AT, private=private)


# Who may read a question where ------------------------------------------------------------------------------------


def test_a_public_channels_question_may_be_read_anywhere():
    assert all(may_read("C1", False, place) for place in (PUBLIC_DIGEST, G1_ALERTS, APP_HOME_OF_G1_MEMBER, Place()))


def test_a_private_channels_question_is_not_read_in_another_channel():
    assert not may_read("G1", True, PUBLIC_DIGEST)


def test_a_private_channels_question_is_read_in_that_channel_itself():
    assert may_read("G1", True, Place(channel_id="G1"))


def test_a_private_channels_question_is_read_where_the_quoting_rule_quotes_it():
    assert may_read("G1", True, G1_ALERTS) and not may_read("G2", True, G1_ALERTS)


def test_one_person_reads_a_private_channel_only_as_its_member_and_where_it_may_be_quoted():
    assert not may_read("G1", True, APP_HOME_OF_G1_MEMBER)  # App Home quotes no private channel
    outsider_in_g1 = Place(channel_id="G1", reader_may_read=lambda _channel: False)
    assert not may_read("G1", True, outsider_in_g1)
    assert may_read("G1", True, Place(channel_id="G1", reader_may_read=lambda channel: channel == "G1"))


def test_a_slack_connect_channel_counts_as_private():
    # Capture stores a shared channel's pairs as private (channel_is_private): the rule sees `private`.
    assert not may_read("CSHARED", True, PUBLIC_DIGEST)


def test_the_operator_reads_every_channel():
    assert may_read("G1", True, Place.terminal()) and name_readable(None, Place.terminal())


def test_a_private_question_of_no_channel_is_read_nowhere_but_by_the_operator():
    assert not may_read(None, True, Place(channel_id=None, quotes_private=lambda _c: True))


# Which names are shown where --------------------------------------------------------------------------------------


def test_a_name_of_public_questions_is_shown_everywhere():
    assert shown_name("Refunds", (), PUBLIC_DIGEST) == "Refunds"


def test_a_name_of_a_private_channel_shows_neutral_where_it_may_not_be_read():
    assert shown_name("Zorblax refunds", ("G1",), PUBLIC_DIGEST) == NEUTRAL_NAME
    assert shown_name("Zorblax refunds", ("G1",), APP_HOME_OF_G1_MEMBER) == NEUTRAL_NAME


def test_a_name_of_a_private_channel_is_shown_where_it_may_be_read():
    assert shown_name("Zorblax refunds", ("G1",), G1_ALERTS) == "Zorblax refunds"


def test_a_name_of_two_private_channels_needs_both():
    assert shown_name("Mixed", ("G1", "G2"), G1_ALERTS) == NEUTRAL_NAME


def test_a_name_of_unknown_sources_is_never_shown_in_slack():
    assert shown_name("Old name", None, PUBLIC_DIGEST) == NEUTRAL_NAME and not name_readable(None, G1_ALERTS)


# What a name is made from -----------------------------------------------------------------------------------------


def test_a_topic_with_public_questions_is_named_from_them_only_even_when_private_ones_are_closer():
    questions = [q(1, "G1", True), q(2, "G1", True), q(3, "C1"), q(4, "G2", True), q(5, "C2")]
    choice = naming_choice(questions, G1_ALERTS)
    assert choice == NamingChoice((questions[2], questions[4]), ())


def test_a_private_topic_is_named_from_what_the_place_may_read():
    questions = [q(1, "G2", True), q(2, "G1", True), q(3, "G1", True)]
    choice = naming_choice(questions, G1_ALERTS)
    assert choice is not None and [x.pair_id for x in choice.questions] == [2, 3] and choice.sources == ("G1",)


def test_a_private_topic_no_question_of_which_the_place_may_read_gets_no_name_from_them():
    assert naming_choice([q(1, "G1", True), q(2, "G2", True)], PUBLIC_DIGEST) is None
    assert naming_choice([q(1, "G1", True)], APP_HOME_OF_G1_MEMBER) is None


def test_for_no_place_a_private_topic_is_named_from_the_one_channel_that_asked_most():
    questions = [q(1, "G2", True), q(2, "G1", True), q(3, "G1", True), q(4, "G2", True), q(5, "G1", True)]
    for place in (None, Place.terminal()):
        choice = naming_choice(questions, place)
        assert choice is not None and choice.sources == ("G1",) and {x.channel_id for x in choice.questions} == {"G1"}


def test_a_name_reads_at_most_five_questions():
    choice = naming_choice([q(i, "C1") for i in range(9)], PUBLIC_DIGEST)
    assert choice is not None and len(choice.questions) == 5


# When a continuing topic is named again ---------------------------------------------------------------------------

G1_CHOICE = NamingChoice((q(1, "G1", True),), ("G1",))
PUBLIC_CHOICE = NamingChoice((q(2, "C1"),), ())


def test_a_public_name_is_kept():
    assert keeps_name((), PUBLIC_CHOICE, PUBLIC_DIGEST) and keeps_name((), None, None)


def test_a_name_of_unknown_sources_is_made_again():
    assert not keeps_name(None, PUBLIC_CHOICE, PUBLIC_DIGEST) and not keeps_name(None, G1_CHOICE, None)


def test_a_private_name_is_made_again_once_the_topic_has_public_questions():
    assert not keeps_name(("G1",), PUBLIC_CHOICE, G1_ALERTS) and not keeps_name(("G1",), PUBLIC_CHOICE, None)


def test_a_private_name_shown_where_it_may_not_be_read_is_made_again_from_what_may_be_read_there():
    g2_name_in_g1_alerts = ("G2",)
    assert not keeps_name(g2_name_in_g1_alerts, G1_CHOICE, G1_ALERTS)


def test_a_private_name_is_kept_where_nothing_wider_may_name_it():
    assert keeps_name(("G1",), None, PUBLIC_DIGEST)  # shown neutral there, kept for where it may be read
    assert keeps_name(("G1",), G1_CHOICE, G1_ALERTS) and keeps_name(("G2",), G1_CHOICE, None)


# A failed endpoint is told by its kind ----------------------------------------------------------------------------

ECHOED = "Invalid input: how do I refund Zorblax's annual plan (private)"


def _status_error(status: int) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm.test/v1/embeddings")
    response = httpx.Response(status, request=request, json={"error": {"message": ECHOED}})
    return openai.APIStatusError(ECHOED, response=response, body={"error": {"message": ECHOED}})


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "HTTP 400 request refused"),
        (401, "HTTP 401 access refused"),
        (404, "HTTP 404 not found"),
        (429, "HTTP 429 rate limited"),
        (503, "HTTP 503 server error"),
    ],
)
def test_an_http_error_is_told_by_its_status(status, kind):
    assert error_kind(_status_error(status)) == kind


def test_a_timeout_and_a_refused_connection_are_told_apart():
    request = httpx.Request("POST", "http://llm.test/v1/embeddings")
    assert error_kind(openai.APITimeoutError(request)) == "timeout"
    assert error_kind(openai.APIConnectionError(message=ECHOED, request=request)) == "connection error"


def test_the_llm_clients_errors_are_told_by_their_cause():
    transient = TransientLLMError(f"the LLM endpoint failed (500): {ECHOED}", status_code=500)
    assert error_kind(transient) == "HTTP 500 server error"
    refused = LLMRequestError(f"the LLM endpoint rejected the request (400): {ECHOED}")
    refused.__cause__ = _status_error(400)
    assert error_kind(refused) == "HTTP 400 request refused"
    assert error_kind(ValueError(ECHOED)) == "unreadable reply"


def test_an_embeddings_error_says_its_own_kind():
    assert error_kind(EmbeddingsUnavailable(f"model: HTTP 400: {ECHOED}", "HTTP 400 request refused")) == (
        "HTTP 400 request refused"
    )


def test_the_notes_never_carry_the_providers_words():
    notes = [
        embedding_fallback_note("local TF-IDF + SVD", embeddings_error(EmbeddingsUnavailable(ECHOED))),
        naming_fallback_note(llm_error(_status_error(400))),
        not_built_note(RuntimeError(ECHOED)),
    ]
    assert notes == [
        "Grouped with the local embedding (local TF-IDF + SVD): embeddings endpoint error (unexpected reply).",
        "Some topics are named by their keywords: LLM error (HTTP 400 request refused).",
        "Topics could not be built this time (RuntimeError).",
    ]
    assert not any("Zorblax" in note or "Invalid input" in note for note in notes)


# What a place shows ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def private_named_report():
    """The corpus, every topic named from the private channel G1 (as a digest to G1's own alert channel names
    them), its questions asked in G1 and in public C0SUPPORT alike."""
    from dataclasses import replace
    from datetime import timedelta

    from tests.topics_corpus import START, corpus_questions
    from topics.build import build_topics, named
    from topics.local_embeddings import local_vectors

    questions = [replace(x, channel_id="G1", private=True) if x.pair_id % 2 else x for x in corpus_questions()]
    end = START + timedelta(days=7)
    vectors = local_vectors([x.text for x in questions])
    report = build_topics(questions, vectors, start=START, end=end, now=end, embedding="local")
    topics = tuple(named(t, f"k{i}", f"Zorblax topic {i}", "llm", ("G1",)) for i, t in enumerate(report.topics))
    return replace(report, topics=topics)


def test_a_place_that_may_not_read_a_names_sources_shows_it_neutral_in_the_list_the_gaps_and_the_chart(
    private_named_report,
):
    from common.messages.topics import fix_first_blocks
    from common.reports.topics import chart_bars, view_of

    view = view_of(private_named_report, audience_sees=lambda _c: True, may_quote=lambda x: not x.private)
    assert view.topics and all(line.name == NEUTRAL_NAME for line in view.topics)
    assert view.gaps and all(gap.topic == NEUTRAL_NAME for gap in view.gaps)
    assert all(bar.name == NEUTRAL_NAME for bar in chart_bars(view))
    assert "Zorblax" not in str(fix_first_blocks(view))


def test_a_place_that_may_read_a_names_sources_shows_it(private_named_report):
    from common.reports.topics import view_of

    view = view_of(private_named_report, audience_sees=lambda _c: True, may_quote=lambda _x: True, place=G1_ALERTS)
    assert view.topics[0].name.startswith("Zorblax topic")


def test_a_stored_run_shows_a_name_of_unknown_sources_neutral():
    from types import SimpleNamespace

    from common.reports.topics import stored_view

    run = SimpleNamespace(questions=40, left_out=2, embedding="local", notes=[])
    period = SimpleNamespace(
        topic_key="t-old",
        name="Old Zorblax name",
        name_sources=None,
        channels=["C1"],
        private_channels=[],
        only_private=False,
        examples=[],
        questions=40,
        failed=3,
        resolved=1,
        decided=2,
        mean_relevancy=None,
        previous_questions=None,
        previous_failed=None,
    )
    view = stored_view(run, [period], {}, audience_sees=lambda _c: True, may_quote=lambda _c, _p: True)
    assert view.topics[0].name == NEUTRAL_NAME
    public = SimpleNamespace(**{**vars(period), "name": "Refunds", "name_sources": []})
    shown = stored_view(run, [public], {}, audience_sees=lambda _c: True, may_quote=lambda _c, _p: True)
    assert shown.topics[0].name == "Refunds"
