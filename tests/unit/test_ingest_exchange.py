"""The ingest API's pure parts: the exchange model (common.exchanges), the token check and rate window
(bot.ingest), an exchange's rows (workers.ingesting), and how an ingested exchange alerts (policy, privacy, the
alert's message)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from bot.ingest import bearer, matching_token, token_key, window_left
from bot.publishing import exchange_calls
from common import task_names
from common.exchanges import MAX_BATCH, Refused, Visibility, parse_body, where
from common.messages.alerts import low_score_alert
from common.privacy import may_quote_exchange
from judges.context import MAX_TURN_CHARS
from store.models import PairSource
from tests.builders import make_settings
from tests.message_checks import alert, all_text
from workers.alerts.policy import Action, ChannelPolicy, DegradationWindow, JudgmentFacts, low_intent
from workers.ingesting import SOURCE_HEADING, rows_of
from workers.sampling import is_sampled_in, sampled_message


def exchange(**fields: object) -> dict:
    return {
        "id": "ex-1",
        "bot": "helpdesk",
        "conversation_id": "conv-9",
        "turn": 2,
        "question": "How do I reset my password?",
        "answer": "Open Settings > Security.",
        "asked_at": "2026-12-07T08:00:00Z",
        "answered_at": "2026-12-07T08:00:03+00:00",
        "visibility": "dm",
        **fields,
    }


def refusal(body: object) -> list[str]:
    with pytest.raises(Refused) as refused:
        parse_body(body)
    return refused.value.problems


def test_a_full_exchange_is_read_with_its_types() -> None:
    [parsed] = parse_body(
        exchange(
            earlier_turns=[{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}],
            documents=[{"text": "Reset it under Security.", "source": "kb/security.md", "id": "d1"}],
            bot_version="2.3.1",
            asker="U123ABC",
            slack={"channel": "C0SUPPORT", "ts": "1765094400.000100"},
            trace={"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"},
        )
    )
    assert parsed.visibility is Visibility.DM and parsed.private
    assert parsed.trace is not None and parsed.trace.span_id == "00f067aa0ba902b7"
    row, _ = rows_of(parsed, make_settings())
    assert (row["trace_id"], row["span_id"]) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    assert parsed.asked_at == datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    assert parsed.documents[0].source == "kb/security.md"
    assert parsed.slack is not None and parsed.slack.ts == "1765094400.000100"
    assert json.loads(json.dumps(parsed.to_task()))["answered_at"] == "2026-12-07T08:00:03Z"


def test_a_batch_is_read_whole() -> None:
    parsed = parse_body({"exchanges": [exchange(id="a"), exchange(id="b", visibility="public")]})
    assert [e.id for e in parsed] == ["a", "b"]
    assert not parsed[1].private


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (exchange(turn="2"), "turn: input should be a valid integer"),
        (exchange(turn=2.5), "turn: input should be a valid integer"),
        ({k: v for k, v in exchange().items() if k != "answer"}, "answer: field required"),
        (exchange(answer="   "), "answer: string should have at least 1 character"),
        (exchange(answer="x" * 40_001), "answer: string should have at most 40000 characters"),
        (exchange(asked_at=1765094400), "asked_at: give an ISO 8601 time as a string"),
        (exchange(asked_at="2026-12-07T08:00:00"), "asked_at: input should have timezone info"),
        (exchange(answered_at="2026-12-07T07:00:00Z"), "body: answered_at is before asked_at"),
        (exchange(visibility="secret"), "visibility: input should be 'public', 'private' or 'dm'"),
        (exchange(earlier_turns=[{"role": "bot", "text": "x"}]), "earlier_turns[0].role: input should be"),
        (exchange(documents=[{"text": "x"}]), "documents[0].source: field required"),
        (exchange(slack={"channel": "C0SUPPORT", "ts": "yesterday"}), "slack.ts: give a Slack message ts, such as"),
        (exchange(asker="ana"), "asker: give a Slack user id, such as U012AB3CD"),
        (exchange(slack={"channel": "#support", "ts": "1.2"}), "slack.channel: give a Slack channel id"),
        (exchange(extra="x"), "extra: extra inputs are not permitted"),
        (exchange(trace={"trace_id": "4BF92F3577B34DA6A3CE929D0E0E4736"}), "trace.trace_id: give a trace id: 32"),
        (exchange(trace={"trace_id": "0" * 32}), "trace.trace_id: give an id that is not all zeros"),
        (exchange(trace={"trace_id": "ab" * 16, "span_id": "abc"}), "trace.span_id: give a span id: 16"),
        (exchange(trace={"span_id": "ab" * 8}), "trace.trace_id: field required"),
        (exchange(trace="4bf92f3577b34da6a3ce929d0e0e4736"), "trace: input should be a valid dictionary"),
        (exchange(answer="a\x00b"), "answer: holds a NUL character"),
        (
            exchange(documents=[{"text": "\ud800", "source": "s"}]),
            "documents[0].text: input should be a valid string, unable to parse raw data as a unicode string",
        ),
        ([exchange()], "body: send a JSON object"),
        ({"exchanges": []}, "exchanges: list should have at least 1 item"),
        ({"exchanges": [exchange()] * (MAX_BATCH + 1)}, "exchanges: list should have at most 100 items"),
    ],
)
def test_each_bad_field_is_named(body: object, problem: str) -> None:
    assert refusal(body)[0].startswith(problem)


def test_one_bad_exchange_refuses_its_batch_naming_its_index() -> None:
    batch = {"exchanges": [exchange(id=str(n)) for n in range(5)]}
    del batch["exchanges"][3]["answer"]
    assert refusal(batch) == ["exchanges[3].answer: field required"]


def test_an_error_location_reads_as_a_path() -> None:
    assert where(("exchanges", 3, "documents", 0, "text")) == "exchanges[3].documents[0].text"
    assert where(()) == "body"


def test_the_bearer_token_is_read_from_its_header() -> None:
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None
    assert bearer("Bearer ") is None
    assert bearer(None) is None


def test_any_configured_token_is_accepted_and_nothing_else() -> None:
    tokens = ["old-token-1", "new-token-2"]
    assert matching_token("old-token-1", tokens) == "old-token-1"
    assert matching_token("new-token-2", tokens) == "new-token-2"
    assert matching_token("new-token-", tokens) is None  # a prefix is not the token
    assert matching_token("new-token-22", tokens) is None
    assert matching_token("", tokens) is None
    assert matching_token(None, tokens) is None
    assert matching_token("x", []) is None


def test_a_token_is_named_by_a_hash_never_itself() -> None:
    assert "secret" not in token_key("secret") and len(token_key("secret")) == 16
    assert token_key("a") != token_key("b")


def test_retry_after_is_the_rest_of_the_minute() -> None:
    assert window_left(120.0) == 60
    assert window_left(179.2) == 1
    assert window_left(150.5) == 30


def test_the_exchange_becomes_a_pair_as_the_judges_read_one() -> None:
    [parsed] = parse_body(
        exchange(
            question="Call me at 555-123-4567?",
            earlier_turns=[{"role": "user", "text": "Hi there"}, {"role": "assistant", "text": "y" * 2_000}],
            documents=[{"text": "Passwords reset under Security.", "source": "kb/security.md"}],
            asker="U123ABC",
            visibility="private",
        )
    )
    row, pair = rows_of(parsed, make_settings(context_turns=3))
    assert row["client_id"] == "ex-1" and row["bot"] == "helpdesk" and row["turn"] == 2
    assert row["trace_id"] is None and row["span_id"] is None  # none named: its verdict goes by today's rules
    assert row["documents"] == [{"text": "Passwords reset under Security.", "source": "kb/security.md"}]
    assert pair["channel_is_private"] and pair["channel_id"] is None and pair["question_user"] == "U123ABC"
    lines = pair["context_text"].split("\n")
    assert lines[0] == "[customer] Hi there"
    assert lines[1].startswith("[bot] yyy") and len(lines[1]) == len("[bot] ") + MAX_TURN_CHARS  # judges.context
    assert pair["reference_text"] == f"{SOURCE_HEADING}\n\n[1] kb/security.md\nPasswords reset under Security."
    assert "555-123-4567" in pair["question_text"]
    _, redacted = rows_of(parsed, make_settings(redact_pii=True))
    assert "555-123-4567" not in redacted["question_text"]


def test_no_turns_and_no_documents_leave_no_context_nor_reference() -> None:
    [parsed] = parse_body(exchange(slack={"channel": "C0SUPPORT", "ts": "1765094400.000100"}, visibility="public"))
    _, pair = rows_of(parsed, make_settings())
    assert pair["context_text"] is None and pair["reference_text"] is None
    assert (pair["channel_id"], pair["answer_ts"], pair["channel_is_private"]) == (
        "C0SUPPORT",
        "1765094400.000100",
        False,
    )


POLICY = ChannelPolicy({"relevancy": 2}, "C_ALERTS", 5, None, DegradationWindow(20), 2.5)


@pytest.mark.parametrize(
    ("source", "action"),
    [
        (PairSource.INGEST, Action.ALERT),
        (PairSource.CAPTURE, Action.ALERT),
        (PairSource.COMMAND, Action.NONE),
        (PairSource.BACKFILL, Action.NONE),
    ],
)
def test_an_ingested_low_score_alerts_like_a_captured_one(source: str, action: Action) -> None:
    facts = JudgmentFacts(1, "relevancy", "ok", 0.0, source, None)
    assert low_intent(facts, POLICY).action is action


def test_only_a_public_exchange_may_be_quoted() -> None:
    assert may_quote_exchange("public")
    assert not may_quote_exchange("dm") and not may_quote_exchange("private")
    assert may_quote_exchange(None)  # not an ingested exchange: the channel's rules decide


def test_an_ingested_alert_names_its_bot_and_no_missing_link() -> None:
    payload = low_score_alert(alert(channel_id=None, origin="bot helpdesk (dm)", permalink=None, quote=False))
    text = all_text(payload)
    assert payload["text"] == "Low relevancy score 1 / 4 in bot helpdesk (dm)"
    assert "bot helpdesk (dm)" in text and "link to the message is unavailable" not in text
    assert "How do I reset my password?" not in text
    assert "its rule does not let this channel quote it" in text and "members of the channel" not in text
    assert "Show the exchange" not in text  # only when the alert says so (below)


def test_a_withheld_exchange_alert_offers_its_viewers_the_exchange() -> None:
    payload = low_score_alert(
        alert(channel_id=None, origin="bot helpdesk (dm)", permalink=None, quote=False, show_exchange=True)
    )
    buttons = [e for b in payload["blocks"] if b["type"] == "actions" for e in b["elements"]]
    shown = [b for b in buttons if b.get("action_id") == "show_exchange"]
    assert [b["text"]["text"] for b in shown] == ["Show the exchange"] and shown[0]["value"] == "42"
    assert "How do I reset my password?" not in all_text(payload)


def test_exchanges_outside_slack_are_sampled_one_by_one() -> None:
    """With no Slack ts, each pair is its own point: a quarter of them judged, not all or none."""
    sampled = [is_sampled_in(None, sampled_message(None, pair_id), 0.25, source="ingest") for pair_id in range(2000)]
    assert 400 < sum(sampled) < 600
    assert sampled_message("1765094400.000100", 7) == "1765094400.000100"  # a Slack message keeps its own point


def test_a_requests_exchanges_are_a_few_calls_the_same_each_time_an_id_twice_handed_on_once() -> None:
    sent = [exchange(id=f"e{n}", turn=n) for n in range(250)] + [exchange(id="e3", turn=99)]
    calls = exchange_calls(sent, per_task=100)
    assert [len(call.kwargs["exchanges"]) for call in calls] == [100, 100, 50]
    assert {call.task for call in calls} == {task_names.INGEST_EXCHANGES}
    ids = [item["id"] for call in calls for item in call.kwargs["exchanges"]]
    assert ids == [f"e{n}" for n in range(250)]  # in order; e3's second copy dropped, the first kept
    assert calls[0].kwargs["exchanges"][3]["turn"] == 3
    # Sent again (a client's retry), the same calls: the same notes, nothing noted twice.
    assert [call.id for call in exchange_calls(list(sent), per_task=100)] == [call.id for call in calls]
    other_bot = exchange_calls([exchange(id="e0"), exchange(id="e0", bot="widget")])
    assert len(other_bot[0].kwargs["exchanges"]) == 2  # one id, two bots: two exchanges
