"""The pure parts of the ingest API's signals and deletions: the signal model and the exchange's key
(common.exchange_signals), the paths (bot.ingest.route_of), what a signal means in outcome signals and its window
(workers.bot_signals), and what an exchange's deletion takes out (capture.forgetting)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.ingest import route_of
from capture.forgetting import EXCHANGE_ABOUT, plan_exchange_forget, removal_of_exchange, scrub
from capture.outcomes import closing_signals, failed
from common.exchange_signals import Feedback, Handoff, Resolution, exchange_key, parse_signal, signal_task
from common.exchanges import Refused
from common.messages.forgotten import forgotten_note
from store.forget_plan import DELETED_MARK, StoredJudgment, StoredPair
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, POSITIVE_REACTION, RESOLVED
from workers.bot_signals import effect_of, window_bounds


def refusal(body: object) -> list[str]:
    with pytest.raises(Refused) as caught:
        parse_signal(body)
    return caught.value.problems


def test_signals_parse_strictly_and_name_the_field_at_fault() -> None:
    assert parse_signal({"bot": "b", "type": "feedback", "value": "negative"}) == Feedback(
        bot="b", type="feedback", value="negative"
    )
    handoff = parse_signal({"bot": "b", "type": "handoff", "reply": " Try X. ", "at": "2026-12-07T08:00:00Z"})
    assert isinstance(handoff, Handoff) and handoff.reply == "Try X." and handoff.at.tzinfo is not None
    assert refusal({"bot": "b", "type": "feedback", "value": "meh"}) == [
        "value: input should be 'positive' or 'negative'"
    ]
    assert refusal({"bot": "b", "type": "resolution"}) == ["value: field required"]
    assert refusal({"type": "handoff"}) == ["bot: field required"]
    assert refusal({"bot": "b", "type": "thumbs"}) == ["type: give one of feedback, handoff, resolution"]
    assert refusal({"bot": "b", "type": "handoff", "to": "U1"}) == ["to: extra inputs are not permitted"]
    assert refusal({"bot": "b", "type": "handoff", "reply": "a\x00b"})[0].startswith("reply: holds a NUL")
    assert refusal({"bot": "b", "type": "feedback", "value": "positive", "at": 1}) == [
        "at: give an ISO 8601 time as a string, e.g. 2026-12-07T08:15:00Z"
    ]
    assert refusal([1]) and refusal("x")


def test_a_signals_task_carries_its_time_received_unless_given() -> None:
    signal = parse_signal({"bot": "b", "type": "feedback", "value": "positive"})
    assert signal_task("ex", signal, "2026-12-07T08:00:00+00:00") == {
        "exchange_id": "ex",
        "signal": {"bot": "b", "type": "feedback", "value": "positive", "at": "2026-12-07T08:00:00+00:00"},
    }
    given = parse_signal({"bot": "b", "type": "resolution", "value": "resolved", "at": "2026-12-07T09:00:00Z"})
    assert signal_task("ex", given, "later")["signal"]["at"] == "2026-12-07T09:00:00Z"


def test_an_exchanges_key_is_checked_like_its_fields() -> None:
    assert exchange_key(" ex-1 ", "helpdesk") == ("helpdesk", "ex-1")
    with pytest.raises(Refused) as caught:
        exchange_key("x" * 201, None)
    assert caught.value.problems == ["id: string should have at most 200 characters", "bot: field required"]


@pytest.mark.parametrize(
    ("path", "method", "route"),
    [
        ("/v1/exchanges", "POST", ("exchanges", None)),
        ("/v1/exchanges", "GET", ("method", None)),
        ("/v1/exchanges/ex-1/signals", "POST", ("signal", "ex-1")),
        ("/v1/exchanges/ex-1/signals", "GET", ("method", None)),
        ("/v1/exchanges/ex-1", "DELETE", ("delete", "ex-1")),
        ("/v1/exchanges/a/b", "DELETE", ("delete", "a/b")),  # an id with a slash, percent-encoded by the client
        ("/v1/exchanges/ex-1", "POST", ("method", None)),
        ("/v1/exchanges/" + "é".encode().decode("latin-1"), "DELETE", ("delete", "é")),  # WSGI's latin-1 text
        ("/v1/exchanges/", "DELETE", None),
        ("/v1/exchangesX", "POST", None),
    ],
)
def test_paths_under_the_ingest_api(path: str, method: str, route: tuple | None) -> None:
    assert route_of(path, method) == route


def test_what_the_bots_signals_mean() -> None:
    def effect(**body):
        return effect_of(parse_signal({"bot": "b", **body}))

    assert effect(type="feedback", value="negative").names == {NEGATIVE_REACTION}
    assert effect(type="feedback", value="positive").names == {POSITIVE_REACTION}
    handed = effect(type="handoff")
    assert handed.names == {ESCALATION} and handed.reference is None and not failed(handed.names)
    replied = effect(type="handoff", reply="Try X.")
    assert replied.names == {ESCALATION, HUMAN_TAKEOVER} and replied.reference == "Try X."
    assert failed(replied.names)  # a handoff answered by a person: the answer failed, as in a channel
    assert not failed(effect(type="feedback", value="negative").names)  # a thumbs down alone: as a reaction
    resolved, unresolved = effect(type="resolution", value="resolved"), effect(type="resolution", value="unresolved")
    assert resolved.names == {RESOLVED} and resolved.ends
    assert unresolved.names == set() and unresolved.ends
    assert isinstance(parse_signal({"bot": "b", "type": "resolution", "value": "resolved"}), Resolution)
    assert closing_signals({NEGATIVE_REACTION}) == set()  # a window closed by time after a thumbs down


def test_an_exchanges_window_starts_at_its_answer() -> None:
    answered = datetime(2026, 12, 7, 8, 0, 2, tzinfo=UTC)
    ts, closes = window_bounds(None, answered, 1800)
    assert ts == f"{answered.timestamp():.6f}" and closes == datetime(2026, 12, 7, 8, 30, 2, tzinfo=UTC)
    assert window_bounds("1765094400.000100", answered, 60) == (
        "1765094400.000100",
        datetime.fromtimestamp(1765094460.0001, UTC),
    )  # the Slack answer's own ts, when the exchange joined a captured pair


def test_an_exchanges_deletion_blanks_its_pair_and_scrubs_its_conversation() -> None:
    context = "[customer] My order is ZX-4471\n[bot] Which one?"
    removal = removal_of_exchange("Where is ZX-4471?", "It left the depot.", context, ["Depot log: ZX-4471 shipped."])
    assert "ZX" in removal.words and "4471" in removal.words and "customer" not in removal.words
    assert "My order is ZX-4471" in removal.texts  # a turn, without its speaker
    own = StoredPair(1, None, None, "Where is ZX-4471?", "It left the depot.", context, "Depot log: ZX-4471")
    later = StoredPair(2, None, None, "When?", "Monday.", "[customer] Where is ZX-4471?\n[bot] It left the depot.")
    untouched = StoredPair(3, None, None, "Hello", "Hi", None)
    judgments = [
        StoredJudgment(10, 1, "It said ZX-4471.", "{}", None),
        StoredJudgment(11, 2, "The turn asked about ZX-4471.", None, None),
        StoredJudgment(12, 3, "Fine.", None, None),
    ]
    plan = plan_exchange_forget(1, removal, [own, later, untouched], judgments)
    assert plan.pairs[1] == dict.fromkeys(("question_text", "answer_text", "context_text", "reference_text"))
    assert plan.pairs[2] == {"context_text": f"[customer] {DELETED_MARK}\n[bot] {DELETED_MARK}"}
    assert 3 not in plan.pairs and 12 not in plan.judgments
    assert plan.judgments[10] == {"reasoning": None, "raw_output": None}
    assert plan.judgments[11] == {"reasoning": f"The turn asked about {DELETED_MARK}-{DELETED_MARK}."}
    assert plan.about == {1: EXCHANGE_ABOUT, 2: "message"}
    assert scrub("ZX-4471 again", removal) == f"{DELETED_MARK}-{DELETED_MARK} again"
    assert "deleted by the bot's side" in forgotten_note(EXCHANGE_ABOUT)


def test_a_deletion_runs_on_the_forget_queue_and_its_calls_are_noted() -> None:
    from common import task_names, task_notes
    from common.celery_app import QUEUE_FORGET, route_task

    assert route_task(task_names.FORGET_EXCHANGE, (), {"bot": "b", "exchange_id": "x"}, {}) == {"queue": QUEUE_FORGET}
    assert route_task(task_names.INGEST_SIGNAL, (), {}, {}) is None  # the judge queue, with the exchanges
    assert {task_names.FORGET_EXCHANGE, task_names.INGEST_SIGNAL} <= task_notes.NOTED
