"""The judge's reasoning quotes the conversation: the trace bridges send it (Langfuse's comment, the OTLP event's
explanation) only for a public channel not shared with another organisation, unless the admin opts in with
RELMON_TRACES_REASONING=all; the score goes either way. Langfuse's fake and a fake OTLP receiver over HTTP, real rows
in SQLite and PostgreSQL, the send tasks run eagerly. Phoenix (a real server): tests/system/test_traces_phoenix.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langfuse import Langfuse

from common.runtime import Runtime
from store.models import Pair
from tests import slack_requests as sr
from tests.alert_helpers import add_judgment
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from workers.tasks.traces import send_langfuse_scores, send_otlp_evaluations

REASONING = "The asker wrote 'my card 4111 was declined'; the answer talks about opening hours."
# Where the answer was given: (channel, stored as private, shared with another organisation)
PUBLIC = ("C_SUPPORT", False, False)
WITHHELD = {
    "private channel": ("C_PRIVATE", True, False),
    "Slack Connect channel": ("C_SHARED", False, True),
    "DM": ("D_ASKER", False, False),  # a conversation that is no channel: private whatever its row says
    "group DM": ("G_GROUP", True, False),
}


def judged_in(runtime: Runtime, channel: str, private: bool, ext_shared: bool) -> tuple[int, str]:
    """A verdict on an answer in `channel`: (judgment id, the answer's trace ID as slack_ts derives it)."""
    ts = sr.next_ts()
    judgment_id = add_judgment(runtime, score=1, channel_id=channel, private=private, answer_ts=ts, reasoning=REASONING)
    if ext_shared:
        with runtime.db.session() as session:
            pair = session.query(Pair).filter_by(answer_ts=ts).one()
            pair.channel_is_ext_shared = True
    return judgment_id, Langfuse.create_trace_id(seed=f"{channel}:{ts}")


def langfuse_comment(langfuse: FakeLangfuse, runtime: Runtime, where: tuple[str, bool, bool]) -> tuple[str, float]:
    judgment_id, trace_id = judged_in(runtime, *where)
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    score = langfuse.stored()[f"relmon-{judgment_id}-score"]
    assert score["traceId"] == trace_id
    return score.get("comment"), score["value"]


@pytest.mark.parametrize("where", list(WITHHELD))
def test_langfuse_gets_no_reasoning_for_a_private_dm_or_connect_channel(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], where: str
) -> None:
    runtime = runtime_on(langfuse.url)
    assert langfuse_comment(langfuse, runtime, WITHHELD[where]) == (None, 0.25)  # the score, no comment
    assert "4111" not in str(langfuse.stored())
    assert "4111" in langfuse_comment(langfuse, runtime, PUBLIC)[0]  # a public channel's: sent


def test_langfuse_gets_every_channels_reasoning_when_the_admin_opts_in(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(langfuse.url, traces_reasoning="all")
    for where in WITHHELD.values():
        comment, value = langfuse_comment(langfuse, runtime, where)
        assert "4111" in comment and value == 0.25


def otlp_explanations(runtime: Runtime, otlp: FakeOtlpReceiver, where: tuple[str, bool, bool]) -> list[dict]:
    judgment_id, trace_id = judged_in(runtime, *where)
    assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
    return [attributes for trace, _, _, attributes in otlp.log_records() if trace == trace_id]


def test_otlp_events_carry_no_reasoning_for_a_private_dm_or_connect_channel(
    runtime_on: Callable[..., Runtime],
) -> None:
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url)
        for where in WITHHELD.values():
            [event] = otlp_explanations(runtime, otlp, where)
            assert event == {"gen_ai.evaluation.name": "relmon.relevancy", "gen_ai.evaluation.score.value": 0.25}
        [public] = otlp_explanations(runtime, otlp, PUBLIC)
        assert "4111" in public["gen_ai.evaluation.explanation"]
        opted_in = runtime_on("", langfuse_host=None, otlp_endpoint=otlp.url, traces_reasoning="all")
        [private] = otlp_explanations(opted_in, otlp, WITHHELD["private channel"])
        assert "4111" in private["gen_ai.evaluation.explanation"]
