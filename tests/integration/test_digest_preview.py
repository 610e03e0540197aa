"""The digest previewed by `/judge digest`, against the fake Slack Web API (real HTTP) and a real database (SQLite
and PostgreSQL): private to the person, claiming nothing, showing them only the figures and text App Home would."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from sqlalchemy import func, select

from common.replies import keep_response_url
from common.runtime import Runtime
from store.models import Digest
from tests import digest_helpers
from tests.digest_helpers import now_utc, seed
from tests.fakes.slack_server import FakeSlack
from workers.tasks.digest import send_digest_preview

make_runtime, runtime, slack = digest_helpers.make_runtime, digest_helpers.runtime, digest_helpers.slack  # fixtures


def previewed(runtime: Runtime, slack: FakeSlack) -> dict:
    """The week's digest previewed for U1 in C1 by the command's response URL, then (none) by chat.postEphemeral;
    returns what the response URL received."""
    seed(runtime, now_utc())
    send_digest_preview.apply(args=("U1", "C1", keep_response_url(runtime.redis, slack.response_url("preview")))).get()
    send_digest_preview.apply(args=("U1", "C1", None)).get()
    (body,) = slack.responses["preview"]
    return body


def test_preview_is_private(runtime: Runtime, slack: FakeSlack) -> None:
    body = previewed(runtime, slack)
    assert body["response_type"] == "ephemeral" and "Weekly digest" in str(body["blocks"])
    assert "secret answer" not in str(body["blocks"])
    (ephemeral,) = slack.calls_to("chat.postEphemeral")
    assert ephemeral["user"] == "U1" and ephemeral["channel"] == "C1"
    assert slack.posted() == []


def test_preview_claims_nothing(runtime: Runtime, slack: FakeSlack) -> None:
    body = previewed(runtime, slack)
    assert slack.calls_to("files.completeUploadExternal") == []
    assert "thread" not in str(body["blocks"])  # the preview has no chart thread
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(Digest)).scalar_one() == 0


@pytest.fixture
def preview(runtime: Runtime, slack: FakeSlack) -> Callable[[str], str]:
    """`preview(user)`: the blocks of the week's digest previewed for `user` in a DM, as JSON. U_OUT is in C1;
    U_IN in C1, C2 and the private GPRIV."""
    seed(runtime, now_utc())
    slack.add_channel("C1", "one", members=["U_OUT", "U_IN"])
    slack.add_channel("C2", "two", members=["U_IN"])
    slack.add_channel("GPRIV", "private", is_private=True, members=["U_IN"])

    def blocks_for(user: str) -> str:
        send_digest_preview.apply(args=(user, "CDM", keep_response_url(runtime.redis, slack.response_url(user)))).get()
        (body,) = slack.responses[user]
        return json.dumps(body["blocks"])

    return blocks_for


def test_preview_shows_a_person_only_the_figures_app_home_would(preview: Callable[[str], str]) -> None:
    """The App Home rule for figures and links: a private channel's to its members only."""
    outsider = preview("U_OUT")
    assert "<#C1>" in outsider and "<#C2>" in outsider and "GPRIV" not in outsider
    assert "<#GPRIV>" in preview("U_IN")


def test_preview_quotes_to_a_person_only_the_text_of_their_channels(preview: Callable[[str], str]) -> None:
    """A channel's text only to its members, where the quoting rule allows it: never to anyone, in any
    conversation."""
    outsider = preview("U_OUT")
    assert "in C1" in outsider and "in C2" not in outsider  # quotes of C1 only: U_OUT is not in C2
    member = preview("U_IN")
    assert "in C2" in member
    assert "secret" not in member  # a member, but its rule does not let relmon quote the private channel


def test_the_first_preview_after_an_import_groups_the_weeks_topics(make_runtime, redis_url, slack) -> None:
    """No topics stored (no daily run yet): the worker's preview task makes them, at the embeddings endpoint of
    their own (the judge's gets no embeddings call, only naming), and stores them for the next preview."""
    from dataclasses import replace
    from datetime import timedelta

    from tests.fakes.openai_server import FakeOpenAI
    from tests.topics_corpus import corpus_questions, store_questions

    with FakeOpenAI(api_key="sk-judge-key") as judge, FakeOpenAI(api_key="sk-embed-key") as embedder:
        runtime = make_runtime(
            redis_url=redis_url,
            openai_base_url=judge.base_url,
            openai_api_key="sk-judge-key",
            embedding_base_url=embedder.base_url,
            embedding_api_key="sk-embed-key",
        )
        start = now_utc() - timedelta(days=3)
        asked = [replace(q, created_at=start + timedelta(minutes=q.pair_id)) for q in corpus_questions()]
        store_questions(runtime.db, asked)
        slack.add_channel("C0SUPPORT", "support", members=["U1", "U2"])
        send_digest_preview.apply(args=("U1", "C1", keep_response_url(runtime.redis, slack.response_url("a")))).get()
        (body,) = slack.responses["a"]
        opening = next(b["text"]["text"] for b in body["blocks"] if "What to fix first" in str(b.get("text")))
        assert opening.startswith("*What to fix first*") and "1. *" in opening
        assert len(embedder.embedding_requests) == 2 and judge.embedding_requests == [] and judge.requests
        assert embedder.embedding_authorizations == ["Bearer sk-embed-key"] * 2
        named = len(judge.requests)
        send_digest_preview.apply(args=("U2", "C1", keep_response_url(runtime.redis, slack.response_url("b")))).get()
        assert "*What to fix first*" in json.dumps(slack.responses["b"])
        assert len(embedder.embedding_requests) == 2 and len(judge.requests) == named  # read back, not made again


def test_two_previews_at_once_make_the_topics_once(make_runtime, redis_url) -> None:
    """Two workers asked at once, none stored: one makes the topics (held up by a slow naming LLM), the other waits
    for it and reads what it stored; each embedding and each name is paid once."""
    from concurrent.futures import ThreadPoolExecutor
    from dataclasses import replace
    from datetime import timedelta

    from common.reports.topic_runs import place_of, stored_or_made_view
    from tests.fakes.openai_server import FakeOpenAI
    from tests.topics_corpus import corpus_questions, store_questions

    with FakeOpenAI(latency_ms=150) as judge:
        runtime = make_runtime(redis_url=redis_url, openai_base_url=judge.base_url)
        now = now_utc()
        asked = [replace(q, created_at=now - timedelta(days=2, minutes=q.pair_id)) for q in corpus_questions()]
        store_questions(runtime.db, asked)
        runtime.redis.delete("relmon:topics:on-demand")

        def preview(_: int):
            view, made = stored_or_made_view(
                runtime,
                now,
                audience_sees=lambda _channel: True,
                may_quote_text=lambda _channel, _private: True,
                place=place_of(runtime, "C1"),
                redis_client=runtime.redis,
            )
            return len(view.topics), made

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(preview, range(2)))
        assert sorted(made for _, made in results) == [False, True]
        assert results[0][0] == results[1][0] > 0
        assert len(judge.embedding_requests) == 2 and len(judge.requests) == results[0][0]


def test_the_daily_run_waits_for_topics_being_made_on_demand(make_runtime, redis_url) -> None:
    """Beat's daily run takes the lock a preview making topics holds: the two never group the same week at once
    (each would pay, and the later one's assignments would overwrite the other's half way)."""
    import threading
    from dataclasses import replace
    from datetime import timedelta

    from common.reports.topic_runs import MAKING_KEY, MAKING_SECONDS, refresh
    from tests.fakes.openai_server import FakeOpenAI
    from tests.topics_corpus import corpus_questions, store_questions

    with FakeOpenAI() as judge:
        runtime = make_runtime(redis_url=redis_url, openai_base_url=judge.base_url)
        now = now_utc()
        asked = [replace(q, created_at=now - timedelta(days=2, minutes=q.pair_id)) for q in corpus_questions()]
        store_questions(runtime.db, asked)
        runtime.redis.delete(MAKING_KEY)
        held = runtime.redis.lock(MAKING_KEY, timeout=MAKING_SECONDS)
        assert held.acquire(blocking=False)  # a preview is making them
        done = threading.Event()
        run = threading.Thread(target=lambda: (refresh(runtime, now, redis_client=runtime.redis), done.set()))
        run.start()
        assert not done.wait(1.0) and judge.embedding_requests == []  # waiting, nothing paid
        held.release()
        assert done.wait(60)
        run.join()
        assert len(judge.embedding_requests) == 2
