"""An LLM outage longer than every retry budget, with real `relmon worker` processes and one `relmon beat`: the
answers captured meanwhile wait (pending, never an error verdict), the alert channel hears once that judging
paused and once that it resumed, and once the endpoint answers again every answer is scored, oldest first, paced,
and each low one alerted once."""

from __future__ import annotations

import re
import time

import pytest
import redis

from store.models import JudgmentStatus, PairStatus
from tests.fakes.openai_replies import is_sampled
from tests.processes import wait_for
from tests.running_system import ALERTS
from workers.judging import outage

pytestmark = pytest.mark.slow

ANSWERS = 8
RESUME_PER_MINUTE = 60  # one a second once the endpoint is back: the release takes several seconds


def _notices(system) -> list[str]:
    return [p.get("text") or "" for p in system.slack.posted(ALERTS) if "Judging " in (p.get("text") or "")]


def test_an_llm_outage_past_every_retry_budget_loses_no_answer(make_system, redis_url: str) -> None:
    system = make_system(
        # Budgets shrunk for speed: two LLM retries 50 ms apart, a probe every second.
        RELMON_LLM_MAX_RETRIES=2,
        RELMON_RETRY_BASE_SECONDS=0.05,
        RELMON_LLM_PROBE_SECONDS=1,
        RELMON_LLM_RESUME_PER_MINUTE=RESUME_PER_MINUTE,
    )
    client = redis.Redis.from_url(redis_url)
    system.llm.set_behavior(always_status=503, retry_after_seconds=0.05)
    system.send_answers(ANSWERS, offtopic_every=4)  # answers 0 and 4 are off topic

    # Every answer waits: pending, in the waiting set; the endpoint is known to be down; one notice says so.
    wait_for(lambda: outage.waiting_count(client) == ANSWERS, timeout=60, interval=0.2, what="every answer waiting")
    assert outage.current(client) is not None
    wait_for(lambda: len(_notices(system)) == 1, timeout=30, interval=0.2, what="the 'paused' notice")
    # Held down well past every retry budget: two probes failed (a second, then two seconds apart).
    wait_for(lambda: outage.current(client).probes >= 2, timeout=90, interval=0.2, what="two failed probes")
    assert {p.status for p in system.pairs()} == {PairStatus.PENDING}
    assert system.judgments() == []  # no error verdict for an endpoint that did not answer
    calls_while_down = len(system.llm.requests)
    # While down, the workers make no call but the probes: far fewer than a retry budget per answer.
    assert calls_while_down <= ANSWERS * 3 + 10
    (paused,) = _notices(system)
    assert re.fullmatch(
        r":double_vertical_bar: Judging paused since \d\d:\d\d UTC: the LLM endpoint answers 503\. "
        r"Answers wait and are judged when it is back\.",
        paused,
    ), paused

    back_at = time.monotonic()
    system.llm.set_behavior()  # the endpoint answers again
    system.wait_until_finished(timeout=90)
    tallies = system.check_exactly_once(extra_llm_calls=calls_while_down)
    assert tallies == {"pairs": ANSWERS, "ok": ANSWERS, "errors": 0, "alerts": 2}
    assert all(j.status == JudgmentStatus.OK for j in system.judgments())
    assert outage.current(client) is None and outage.waiting_count(client) == 0

    notices = _notices(system)
    assert len(notices) == 2 and notices[0] == paused, notices
    assert re.fullmatch(
        r":arrow_forward: Judging resumed at \d\d:\d\d UTC: the LLM endpoint answers again after \d+ min\. "
        rf"{ANSWERS} answers waited; they are judged now, oldest first \(up to {RESUME_PER_MINUTE} a minute\)\.",
        notices[1],
    ), notices[1]

    # Judged oldest first, paced: the first judgments after the outage follow the answers' order, and the
    # backlog took about (ANSWERS - 1) seconds at one a second, never a burst.
    bodies = system.llm.requests[calls_while_down:]
    times = system.llm.request_times[calls_while_down:]
    judged = [(t, _device(b)) for t, b in zip(times, bodies, strict=True) if not is_sampled(b)]
    oldest_first = [_device(p.question_text) for p in sorted(system.pairs(), key=lambda p: float(p.answer_ts))]
    assert [device for _, device in judged] == oldest_first
    spread = judged[-1][0] - judged[0][0]
    assert spread >= (ANSWERS - 2) * 60 / RESUME_PER_MINUTE, spread
    # No burst: never more than a tick's release (and the probe) in any one second.
    assert max(sum(1 for u, _ in judged if t <= u < t + 1) for t, _ in judged) <= 3
    assert judged[0][0] >= back_at


def _device(request: dict | str) -> int:
    """The device a question asks about (in a request to the LLM, or the question itself)."""
    text = request if isinstance(request, str) else " ".join(str(m.get("content")) for m in request["messages"])
    return int(re.search(r"on device (\d+)\?", text).group(1))
