"""The ingest API's signals and deletions over real HTTP to the bot's WSGI app served in this process
(tests.bot_harness: its tasks run inline, on real Redis and real databases; Slack is FakeSlack over HTTP): the bot's
thumbs, handoffs and resolutions become the outcome signals channel reads give (a handoff with the person's reply
a missed-failure alert on a well-scored answer and a golden item), a signal before its exchange waits for it, bad
bodies get their 4xx and leave nothing; a deletion scrubs every copy, and one before its exchange wins."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import MetaData, func, select

from capture.outcomes import outcome_label
from common import task_names, task_notes
from store.exchange_models import Exchange
from store.golden_models import GoldenItem
from store.models import Alert, Judgment, OutcomeSignal, OutcomeWindow, Pair
from store.outcomes import closed_examples
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, POSITIVE_REACTION, RESOLVED
from tests.bot_harness import BotServer
from tests.builders import ALERTS
from tests.fakes.slack_server import FakeSlack
from workers import ingesting
from workers.alerts import delivery
from workers.alerts.outcomes import follow_up

pytestmark = pytest.mark.slow

TOKEN = "ingest-token-one"
MARK = "QMARK7731Z"  # planted in a deleted exchange's question, answer, turns and documents
REPLY = "A teammate: open Settings, then Security, then Reset password."


def exchange(id: str, **fields: object) -> dict:
    answered = datetime.now(UTC) - timedelta(seconds=60)
    return {
        "id": id,
        "bot": "helpdesk",
        "conversation_id": f"conv-{id}",
        "turn": 1,
        "question": "How do I reset my password?",
        "answer": "Open Settings > Security > Reset.",
        "asked_at": (answered - timedelta(seconds=2)).isoformat(),
        "answered_at": answered.isoformat(),
        "visibility": "public",
        "asker": "U0ASKER",
        **fields,
    }


def headers(token: str | None = TOKEN) -> dict[str, str]:
    sent = {"Content-Type": "application/json"}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return sent


def post(base_url: str, path: str, body: object, token: str | None = TOKEN) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(base_url + path, content=data, headers=headers(token), timeout=10)


def signal(base_url: str, id: str, body: dict, token: str | None = TOKEN) -> httpx.Response:
    return post(base_url, f"/v1/exchanges/{quote(id, safe='')}/signals", {"bot": "helpdesk", **body}, token)


def delete(base_url: str, id: str, bot: str | None = "helpdesk", token: str | None = TOKEN) -> httpx.Response:
    query = f"?bot={quote(bot)}" if bot is not None else ""
    return httpx.delete(f"{base_url}/v1/exchanges/{quote(id, safe='')}{query}", headers=headers(token), timeout=10)


def pair_of(runtime, client_id: str) -> int:
    with runtime.db.reading() as session:
        return session.scalar(select(Exchange.pair_id).where(Exchange.client_id == client_id))


def judged(runtime, pair_id: int, score: float, reasoning: str = "Looks right.") -> int:
    """The pair judged by relevancy (as judge_pair stores it): its judgment's id."""
    with runtime.db.session() as session:
        judgment = Judgment(
            pair_id=pair_id,
            judge="relevancy",
            status="ok",
            score=score,
            max_score=4,
            normalized_score=score / 4,
            reasoning=reasoning,
            raw_output=json.dumps({"score": score, "reasoning": reasoning}),
            model="test-model",
        )
        session.add(judgment)
        session.get(Pair, pair_id).status = "judged"
        session.flush()
        return judgment.id


def signals(runtime, pair_id: int) -> set[str]:
    with runtime.db.reading() as session:
        return set(session.scalars(select(OutcomeSignal.name).where(OutcomeSignal.pair_id == pair_id)))


def noted_follow_ups(runtime) -> list[int]:
    calls = [task_notes.Call.from_json(raw) for raw in runtime.redis.hgetall(task_notes.KEY).values()]
    return [call.args[0] for call in calls if call.task == task_names.FOLLOW_UP_OUTCOME]


@pytest.fixture
def slack() -> FakeSlack:
    with FakeSlack() as fake:
        fake.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        yield fake


def test_the_bots_signals_are_outcome_signals_alerted_collected_and_counted(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, degradation_window_minutes=0)
    with BotServer(settings) as bot:
        runtime, url = bot.runtime, bot.base_url
        for id in ("good", "liked", "done", "open"):
            assert post(url, "/v1/exchanges", exchange(id)).status_code == 202
        good = pair_of(runtime, "good")
        judged(runtime, good, 4.0)  # well scored: no low-score alert

        # Thumbs down alone: a negative reaction, as in a channel; no failure yet (a reaction alone is none).
        answer = signal(url, "good", {"type": "feedback", "value": "negative"})
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"accepted": 1, "id": "good", "type": "feedback"}
        assert signals(runtime, good) == {NEGATIVE_REACTION}
        with runtime.db.reading() as session:
            window = session.get(OutcomeWindow, good)
            assert window is not None and window.closed_at is None  # opened by the bot's first signal
        assert good not in noted_follow_ups(runtime)  # nothing to follow up: not failed, no alert yet
        assert follow_up(runtime, good).missed == "not_failed"

        # Handed to a person who replied: escalation and takeover, the answer failed. The reply is the pair's
        # reference, its question joins the golden set, and a missed-failure alert is due.
        assert signal(url, "good", {"type": "handoff", "reply": REPLY}).status_code == 202
        assert signals(runtime, good) == {NEGATIVE_REACTION, ESCALATION, HUMAN_TAKEOVER}
        with runtime.db.reading() as session:
            assert session.get(Pair, good).reference_text == REPLY
            item = session.scalars(select(GoldenItem)).one()
            assert (item.question, item.expected, item.origin) == ("How do I reset my password?", REPLY, "takeover")
        assert good in noted_follow_ups(runtime)  # the follow-up, noted and sent as for a channel's signals
        assert follow_up(runtime, good).missed == "posted"
        posts = slack.posted(ALERTS)
        assert len(posts) == 1 and "bot helpdesk (public)" in json.dumps(posts[0])
        with runtime.db.reading() as session:
            assert session.scalar(select(Alert.kind).where(Alert.dedupe_key == f"missed:{good}")) == "missed_failure"
        # The same handoff again (a client's retry): nothing more.
        assert signal(url, "good", {"type": "handoff", "reply": REPLY}).status_code == 202
        assert follow_up(runtime, good).missed == "posted" and len(slack.posted(ALERTS)) == 1

        # Thumbs up, then resolved: the window closes as resolved (an evaluation's "good" label).
        liked, done, still_open = pair_of(runtime, "liked"), pair_of(runtime, "done"), pair_of(runtime, "open")
        assert signal(url, "liked", {"type": "feedback", "value": "positive"}).status_code == 202
        assert signal(url, "liked", {"type": "resolution", "value": "resolved"}).status_code == 202
        assert signals(runtime, liked) == {POSITIVE_REACTION, RESOLVED}
        # Unresolved: the window closes with nothing more; a later signal is not counted.
        assert signal(url, "done", {"type": "resolution", "value": "unresolved"}).status_code == 202
        assert signal(url, "done", {"type": "feedback", "value": "positive"}).status_code == 202
        assert signals(runtime, done) == set()
        with runtime.db.reading() as session:
            closed = {row.pair_id for row in session.scalars(select(OutcomeWindow)) if row.closed_at is not None}
            assert closed == {liked, done}
            examples = closed_examples(session)
        assert still_open not in closed and signals(runtime, still_open) == set()  # nothing said: no outcome
        assert [outcome_label(names) for *_, names in examples] == ["good", None]


def test_a_signal_before_its_exchange_waits_for_it(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    with BotServer(settings) as bot:
        runtime, url = bot.runtime, bot.base_url
        late = exchange("late")
        with bot.worker.paused():  # its task still on its way (a worker's retry through an outage, say)
            assert post(url, "/v1/exchanges", late).status_code == 202
        assert signal(url, "late", {"type": "feedback", "value": "negative"}).status_code == 202
        with runtime.db.reading() as session:
            assert session.scalar(select(func.count()).select_from(OutcomeSignal)) == 0
        assert list(runtime.redis.scan_iter("relmon:exchange-signals:*"))  # waiting for it in Redis
        assert ingesting.ingest(runtime, late) == "stored"  # the exchange's task comes: its signal with it
        assert signals(runtime, pair_of(runtime, "late")) == {NEGATIVE_REACTION}
        assert not list(runtime.redis.scan_iter("relmon:exchange-signals:*"))  # applied: no longer kept
        assert ingesting.ingest(runtime, late) == "duplicate"  # and once only
        assert signals(runtime, pair_of(runtime, "late")) == {NEGATIVE_REACTION}


def test_bad_signals_and_deletions_get_their_4xx_and_leave_nothing(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, ingest_max_bytes=10_000)
    with BotServer(settings) as bot:
        runtime, url = bot.runtime, bot.base_url
        assert post(url, "/v1/exchanges", exchange("ex")).status_code == 202
        path = "/v1/exchanges/ex/signals"
        refusals = {
            "no token": (signal(url, "ex", {"type": "feedback", "value": "negative"}, token=None), 401),
            "unknown token": (signal(url, "ex", {"type": "feedback", "value": "negative"}, token="guess"), 401),
            "no bot": (post(url, path, {"type": "feedback", "value": "negative"}), 400),
            "unknown type": (signal(url, "ex", {"type": "stars", "value": 5}), 400),
            "bad value": (signal(url, "ex", {"type": "feedback", "value": "meh"}), 400),
            "unknown field": (signal(url, "ex", {"type": "handoff", "to": "U1"}), 400),
            "number time": (signal(url, "ex", {"type": "feedback", "value": "negative", "at": 1765094400}), 400),
            "not JSON": (post(url, path, b"{nope"), 400),
            "too big": (signal(url, "ex", {"type": "handoff", "reply": "x" * 12_000}), 413),
            "a list": (post(url, path, [{"type": "feedback"}]), 400),
            "GET": (httpx.get(url + path, headers=headers()), 405),
            "unknown path": (post(url, "/v1/exchanges/ex/votes", {}), 405),
            "delete without bot": (delete(url, "ex", bot=None), 400),
            "delete without token": (delete(url, "ex", token=None), 401),
        }
        for what, (response, status) in refusals.items():
            assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
            assert response.json()["error"], what
        assert refusals["no bot"][0].json()["error"] == "bot: field required"
        assert refusals["bad value"][0].json()["error"] == "value: input should be 'positive' or 'negative'"
        assert refusals["unknown field"][0].json()["error"] == "to: extra inputs are not permitted"
        assert refusals["unknown type"][0].json()["error"] == "type: give one of feedback, handoff, resolution"
        assert refusals["delete without bot"][0].json()["error"] == "bot: field required"
        with runtime.db.reading() as session:
            assert session.scalar(select(func.count()).select_from(OutcomeSignal)) == 0
            assert session.scalar(select(func.count()).select_from(OutcomeWindow)) == 0
            assert session.get(Pair, pair_of(runtime, "ex")).question_text  # no deletion happened
        assert not runtime.redis.hlen(task_notes.KEY)
    off = settings_for(slack_api_url=slack.api_url, redis_url=settings.redis_url)
    with BotServer(off) as bot:
        assert signal(bot.base_url, "ex", {"type": "feedback", "value": "negative"}).status_code == 404
        assert delete(bot.base_url, "ex").status_code == 404


def database_values(runtime) -> str:
    """Every row of every table, as text."""
    metadata = MetaData()
    metadata.reflect(runtime.db.engine)
    with runtime.db.engine.connect() as connection:
        return "\n".join(repr(row) for table in metadata.sorted_tables for row in connection.execute(select(table)))


def test_a_deleted_exchange_leaves_no_copy_and_a_deletion_before_its_exchange_wins(
    settings_for, slack: FakeSlack
) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, degradation_window_minutes=0)
    planted = exchange(
        "secret",
        conversation_id="conv-s",
        question=f"Where is parcel {MARK}?",
        answer=f"Parcel {MARK} left the depot.",
        earlier_turns=[{"role": "user", "text": f"My order is {MARK}-ORDER"}],
        documents=[{"text": f"Depot log: {MARK} shipped.", "source": "kb/depot.md"}],
    )
    later = exchange(  # the next turn of the conversation quotes it as earlier turns
        "next",
        conversation_id="conv-s",
        turn=2,
        earlier_turns=[{"role": "user", "text": f"Where is parcel {MARK}?"}, {"role": "assistant", "text": "ok"}],
        question="And when does it arrive?",
    )
    with BotServer(settings) as bot:
        runtime, url = bot.runtime, bot.base_url
        assert post(url, "/v1/exchanges", {"exchanges": [planted, later]}).status_code == 202
        secret, following = pair_of(runtime, "secret"), pair_of(runtime, "next")
        low = judged(runtime, secret, 0.0, reasoning=f"It read: parcel {MARK}, and answered about the depot.")
        judged(runtime, following, 4.0, reasoning=f"The earlier turn asked about {MARK}.")
        assert delivery.consider(runtime, low).low == "posted"  # a public exchange: quoted in its alert
        assert MARK in json.dumps(slack.posted(ALERTS))
        assert signal(url, "secret", {"type": "handoff", "reply": f"Parcel {MARK} arrives Monday."}).status_code == 202
        with runtime.db.reading() as session:
            assert session.scalar(select(func.count()).select_from(GoldenItem)) == 1
        assert MARK in database_values(runtime)  # planted where it is kept
        slack.reset_calls()

        answer = delete(url, "secret")
        assert answer.status_code == 202, answer.text
        assert answer.json() == {"deleting": "secret", "bot": "helpdesk"}
        assert MARK not in database_values(runtime)
        with runtime.db.reading() as session:
            pair = session.get(Pair, secret)
            assert (pair.question_text, pair.answer_text, pair.context_text, pair.reference_text) == (None,) * 4
            assert session.get(Pair, following).context_text == "[customer] [deleted]\n[bot] ok"  # its earlier turn
            assert session.scalar(select(func.count()).select_from(GoldenItem)) == 0
            assert session.scalar(select(Exchange.documents).where(Exchange.client_id == "secret")) is None
        with runtime.db.reading() as session:
            posted = list(session.scalars(select(Alert.id).where(Alert.message_ts.is_not(None))))
        for alert_id in posted:  # what the deletion sent: refresh_alert_votes, the vote tally's redraw
            delivery.refresh_votes(runtime, alert_id)
        updates = slack.calls_to("chat.update")
        assert updates and MARK not in json.dumps(updates)  # the alert redrawn without its words
        assert "deleted by the bot's side" in json.dumps(updates[-1])
        assert delete(url, "secret").status_code == 202  # twice: nothing more to do
        assert post(url, "/v1/exchanges", planted).status_code == 202  # sent again: stays forgotten
        assert MARK not in database_values(runtime)
        assert delete(url, "never-sent").status_code == 202  # unknown: noted, in case it comes

        # A deletion before its exchange is stored: the exchange, when its task comes, is not stored.
        early = exchange("early", question=f"Call me on {MARK}-555")
        with bot.worker.paused():
            assert post(url, "/v1/exchanges", early).status_code == 202
        assert signal(url, "early", {"type": "handoff", "reply": f"Called {MARK}"}).status_code == 202
        assert delete(url, "early").status_code == 202
        assert ingesting.ingest(runtime, early) == "forgotten"
        assert pair_of(runtime, "early") is None
        assert MARK not in database_values(runtime)
        assert not runtime.redis.hlen(task_notes.KEY) or all(
            task_notes.Call.from_json(raw).task != task_names.INGEST_SIGNAL
            for raw in runtime.redis.hgetall(task_notes.KEY).values()
        )
