"""The LLM endpoint's outage state, shared by every worker through Redis: an outage loses no answer.

A judge task whose transient LLM failures (connection refused, timeouts, 5xx, 429) outlast its retries declares
the endpoint down instead of storing an error verdict. While it is down, judge tasks make no call: each pair stays
pending and waits in a sorted set (oldest answer first), which the sweeps leave alone. Beat's outage tick
(`workers.tasks.outage`) then probes: it judges the oldest waiting answer, at widening intervals (the one backoff
rule, common.backoff). When a probe gets an answer from the endpoint, the endpoint is up again, and the tick
releases the waiting answers oldest first at RELMON_LLM_RESUME_PER_MINUTE, so that the backlog does not trip the
endpoint's rate limit. The alert channel hears once that judging paused, and once that it resumed with how many
answers waited (workers.outage_notices).

The rules are the pure functions at the top (`now` passed in); the Redis adapter below them.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

import openai

from common.backoff import backoff_seconds
from judges import TransientLLMError

STATE_KEY = "relmon:llm-outage"  # JSON of `Outage`; absent: the endpoint is up
WAITING_KEY = "relmon:llm-outage:waiting"  # sorted set: pair ID → when its answer was posted (epoch seconds)
WAITED_KEY = "relmon:llm-outage:waited"  # answers that waited in this outage (counted once each)
RELEASED_KEY = "relmon:llm-outage:released"  # the release pacing's mark (epoch seconds, see `release_plan`)
PROBE_CAP_SECONDS = 300.0  # the longest wait between probes: an endpoint back is noticed within five minutes
TICK_MOST_SECONDS = 10.0


# Pure rules ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outage:
    """The endpoint is down: since when it failed (epoch seconds), how it failed (`failure`: a status such as
    "503", "timeout" or "connection"), how many probes failed since, and when the next probe is due."""

    since: float
    failure: str
    probes: int = 0
    next_probe_at: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str | bytes) -> Outage:
        fields = json.loads(raw)
        return cls(
            since=float(fields["since"]),
            failure=str(fields["failure"]),
            probes=int(fields.get("probes", 0)),
            next_probe_at=float(fields.get("next_probe_at", 0.0)),
        )


def failure_of(error: TransientLLMError) -> str:
    """How the endpoint failed, in a word: its status ("503", "429"), "timeout" or "connection"."""
    if error.status_code is not None:
        return str(error.status_code)
    cause = error.__cause__
    if isinstance(cause, openai.APITimeoutError) or "timeout" in str(error):
        return "timeout"
    return "connection"


def failure_words(failure: str) -> str:
    """What the endpoint does, for a person: 'answers 503', 'does not answer in time', 'refuses connections'."""
    if failure == "timeout":
        return "does not answer in time"
    if failure == "connection":
        return "cannot be reached"
    if failure == "429":
        return "answers 429 (rate limit)"
    return f"answers {failure}"


def clock(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M UTC")


def paused_text(outage: Outage) -> str:
    return (
        f":double_vertical_bar: Judging paused since {clock(outage.since)}: the LLM endpoint "
        f"{failure_words(outage.failure)}. Answers wait and are judged when it is back."
    )


def resumed_text(since: float, resumed_at: float, waited: int, per_minute: float) -> str:
    minutes = max(1, round((resumed_at - since) / 60))
    answers = "1 answer" if waited == 1 else f"{waited:,} answers"
    text = (
        f":arrow_forward: Judging resumed at {clock(resumed_at)}: the LLM endpoint answers again after {minutes} min."
    )
    if waited:
        text += f" {answers} waited; they are judged now, oldest first (up to {per_minute:g} a minute)."
    return text


def declared(failing_since: float | None, error: TransientLLMError, now: float, probe_seconds: float) -> Outage:
    """The outage a task declares when its retries ran out: failing since its first failed call; first probe
    after `probe_seconds`."""
    since = failing_since if failing_since is not None and failing_since <= now else now
    return Outage(since=since, failure=failure_of(error), probes=0, next_probe_at=now + probe_seconds)


def probe_delay(probes: int, probe_seconds: float, *, jitter: float = 0.0) -> float:
    """The wait before the next probe after `probes` failed ones: probe_seconds, doubling, at most five minutes
    (or probe_seconds, when that is longer)."""
    return backoff_seconds(probes, base=probe_seconds, cap=max(probe_seconds, PROBE_CAP_SECONDS), jitter=jitter)


def after_failed_probe(outage: Outage, error: TransientLLMError, now: float, probe_seconds: float) -> Outage:
    """Still down: the probe's failure is the latest word on how, and the next probe waits longer."""
    probes = outage.probes + 1
    return replace(
        outage, failure=failure_of(error), probes=probes, next_probe_at=now + probe_delay(probes, probe_seconds)
    )


def probe_due(outage: Outage, now: float) -> bool:
    return now >= outage.next_probe_at


def tick_interval(probe_seconds: float) -> float:
    """How often beat's outage tick runs: often enough to probe on time and pace the release, at most every 10 s."""
    return max(1.0, min(TICK_MOST_SECONDS, probe_seconds))


def release_plan(
    per_minute: float, mark: float | None, now: float, backlog: int, burst_seconds: float
) -> tuple[int, float]:
    """How many waiting answers to release now, and the pacing's new mark. The mark moves 1/rate per answer
    released; credit unused for longer than `burst_seconds` is not kept, so no tick releases more than a
    burst's worth. The first release (no mark) sends one at once."""
    rate = per_minute / 60.0
    if mark is None:
        mark = now - 1.0 / rate
    mark = max(mark, now - max(burst_seconds * rate, 1.0) / rate)
    count = min(backlog, math.floor((now - mark) * rate + 1e-9))
    return max(0, count), mark + max(0, count) / rate


def answered_at_score(answer_ts: str | None, fallback: float) -> float:
    """The waiting set's order: when the answer was posted (its Slack ts), else `fallback`."""
    try:
        return float(answer_ts) if answer_ts else fallback
    except ValueError:
        return fallback


# Redis ------------------------------------------------------------------------------------------------------


def current(client) -> Outage | None:
    raw = client.get(STATE_KEY)
    return Outage.from_json(raw) if raw else None


def declare(client, outage: Outage) -> bool:
    """Record the outage unless one is recorded already; True for the one caller that recorded it (that caller
    sends the 'paused' notice). The count of answers that waited is not reset here: the resume that ended the last
    outage took it away, and an answer another worker held while this one declared (its failure as old as ours)
    waited in this outage too."""
    return bool(client.set(STATE_KEY, outage.to_json(), nx=True))


def update(client, outage: Outage) -> None:
    """A failed probe's news, if the outage still stands (a resume meanwhile is not undone)."""
    client.set(STATE_KEY, outage.to_json(), xx=True)


def resume(client) -> tuple[Outage, int] | None:
    """The endpoint answered: end the outage. For the one caller that ended it: the outage and how many answers
    waited in it; None for everyone else."""
    pipe = client.pipeline()
    pipe.getdel(STATE_KEY)
    pipe.getdel(WAITED_KEY)
    raw, waited = pipe.execute()
    if not raw:
        return None
    client.delete(RELEASED_KEY)  # the release starts with one answer, then keeps the pace
    return Outage.from_json(raw), int(waited or 0)


def hold(client, pair_id: int, answered_at: float) -> None:
    """Keep the pair waiting for the endpoint (once: a pair held twice is counted once)."""
    if client.zadd(WAITING_KEY, {str(pair_id): answered_at}):
        client.incr(WAITED_KEY)


def oldest_waiting(client) -> int | None:
    found = client.zrange(WAITING_KEY, 0, 0)
    return int(found[0]) if found else None


def waiting_ids(client) -> set[int]:
    """Every waiting pair (the sweeps leave them to the outage tick)."""
    return {int(member) for member in client.zrange(WAITING_KEY, 0, -1)}


def waiting_count(client) -> int:
    return int(client.zcard(WAITING_KEY))


def drop_waiting(client, pair_id: int) -> None:
    client.zrem(WAITING_KEY, str(pair_id))


def probe_made_no_call(client, pair_id: int, now: float) -> None:
    """A probe found nothing to call the endpoint about (its pair gone, judged meanwhile, or every verdict
    cached): the pair waits no more, and, if the endpoint is still down, the next tick probes at once."""
    drop_waiting(client, pair_id)
    known = current(client)
    if known is not None:
        update(client, replace(known, next_probe_at=now))


def take_oldest(client, count: int) -> list[int]:
    """Take up to `count` waiting pairs off the set, oldest first."""
    if count <= 0:
        return []
    return [int(member) for member, _score in client.zpopmin(WAITING_KEY, count)]


def release_mark(client) -> float | None:
    raw = client.get(RELEASED_KEY)
    return float(raw) if raw else None


def set_release_mark(client, mark: float) -> None:
    client.set(RELEASED_KEY, repr(mark), ex=3600)
