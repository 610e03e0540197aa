"""The trace id a verdict's send goes to, read from the bot's answer's metadata in Slack (top level or in a thread),
and ids that are not trace ids refused without a request to Langfuse or the OTLP endpoint.
The tasks run eagerly (Celery's own retry path, without the countdowns); judgments are real rows in SQLite and
PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from common.runtime import Runtime
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.fakes.slack_server import FakeSlack
from tests.trace_helpers import CHANNEL, TS, Watched, judged, signalled, watched
from workers.tasks.traces import send_langfuse_outcome, send_langfuse_scores, send_otlp_evaluations, send_otlp_outcome

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


THREAD, REPLY = "1767225700.000100", "1767225800.000100"


@pytest.fixture
def answers_in_slack(langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]) -> Iterator[tuple[FakeSlack, Runtime]]:
    """The bot's answers in Slack with the trace id in their metadata (one at top level, one in a thread with its
    id in upper case), and a runtime that reads it there."""
    with FakeSlack() as slack:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": TRACE}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        slack.add_message(CHANNEL, THREAD, user="U_ASKER", text="Where?")
        slack.add_message(
            CHANNEL,
            REPLY,
            text="Top right.",
            thread_ts=THREAD,
            bot_id="B_SUPPORT",
            metadata={"event_type": "support_answer", "event_payload": {"trace_id": TRACE.upper()}},
        )
        yield slack, runtime_on(langfuse.url, slack.api_url, trace_id_from="metadata")


def trace_id_sent_to(langfuse: FakeLangfuse, slack: FakeSlack, judgment_id: int) -> str:
    """Send the verdict: the trace id its score went to. Every read of Slack asks for the messages' metadata."""
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    reads = [call for call in slack.calls if call[0] in ("conversations.history", "conversations.replies")]
    assert reads and all(str(call[1].get("include_all_metadata")).lower() in ("true", "1") for call in reads)
    return langfuse.stored()[f"relmon-{judgment_id}-score"]["traceId"]


def test_the_trace_id_in_a_top_level_answers_metadata_is_read_at_the_configured_key(
    langfuse: FakeLangfuse, answers_in_slack: tuple[FakeSlack, Runtime]
) -> None:
    slack, runtime = answers_in_slack
    assert trace_id_sent_to(langfuse, slack, judged(runtime)) == TRACE


def test_the_trace_id_in_a_threaded_answers_metadata_is_read_at_the_configured_key(
    langfuse: FakeLangfuse, answers_in_slack: tuple[FakeSlack, Runtime]
) -> None:
    slack, runtime = answers_in_slack
    assert trace_id_sent_to(langfuse, slack, judged(runtime, ts=REPLY, thread_ts=THREAD)) == TRACE  # lower case


BAD_TRACE_IDS = pytest.mark.parametrize("given", ["not-a-trace", "4bf92f3577b34da6", "z" * 32, TRACE + "00"])
TOOLS = pytest.mark.parametrize("tool", ["langfuse", "otlp"])


@pytest.fixture
def bad_trace_id(
    given: str,
    tool: str,
    langfuse: FakeLangfuse,
    runtime_on: Callable[..., Runtime],
    caplog: pytest.LogCaptureFixture,
) -> Watched:
    """The bot's answer carries `given` as its trace id: a verdict's send, then a signal's, to `tool`; the requests
    watched are those to either tool."""
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        slack.add_channel(CHANNEL, "support", members=["U_RELMON"])
        metadata = {"event_type": "support_answer", "event_payload": {"trace_id": given}}
        slack.add_message(CHANNEL, TS, text="Open Settings.", bot_id="B_SUPPORT", metadata=metadata)
        runtime = runtime_on(langfuse.url, slack.api_url, trace_id_from="metadata", otlp_endpoint=otlp.url)
        judgment_id = judged(runtime)
        pair_id = signalled(runtime, judgment_id)
        verdict, outcome = (
            (send_langfuse_scores, send_langfuse_outcome)
            if tool == "langfuse"
            else (send_otlp_evaluations, send_otlp_outcome)
        )
        calls = [(verdict, [judgment_id]), (outcome, [pair_id, "reask"])]
        return watched(
            caplog,
            calls,
            tool=tool,
            outcome="bad_trace_id",
            message="trace id refused",
            requests=lambda: langfuse.requests + otlp.posts,
        )


@BAD_TRACE_IDS
@TOOLS
def test_a_trace_id_that_is_not_one_is_refused_without_a_request(bad_trace_id: Watched) -> None:
    """Wrong length (short, long), not hex: no request to either tool and no retry; the refusal counted, and one log
    line a send naming the key read and why the id is not one (one refusal, seen from its three sides: one run of
    the sends serves all three, 16 cases)."""
    assert bad_trace_id.returned == [("bad_trace_id", 0), ("bad_trace_id", 0)]
    assert bad_trace_id.counted == 2
    said = bad_trace_id.said
    assert len(said) == 2 and all(r.key == "event_payload.trace_id" and "expected 32 hex" in r.reason for r in said)
