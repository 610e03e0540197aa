"""Prometheus metrics: the one place relmon's processes count things for operators (`GET /metrics`).

Two kinds, so that no hot path grows more than a line:
- process counters, bumped by thin hooks at the edges (`event_acked`, `event_spooled`, Celery's task signals,
  `trace_send`): the processes of one component (gunicorn's workers, a Celery pool) write them into a directory
  they share (prometheus-client's multiprocess mode, set up by `prepare_process` before anything imports it);
- the state, read from the database and Redis when the bot's endpoint is scraped (`StateCollector`): judgments by
  judge and status, scores, second opinions, alerts, LLM calls, tokens, cost, latency and errors, queue depth,
  the oldest unjudged pair's age, budget left today, outcome signals. One copy of these, on the bot's endpoint
  (the worker's and beat's ports serve their process counters), so that no dashboard counts them twice. Read at
  most once per 15 s by one scrape for all (`common.metrics_cache`), so scrapes cannot starve Slack's acks.

Who may scrape, in every process: `common.metrics_door` (a bearer token, or a port of its own on 127.0.0.1).

No message text and no user ID is ever a label; a channel ID is one only when RELMON_METRICS_CHANNEL_LABELS names
it (the others count as "other"): the number of series stays bounded.
"""

from __future__ import annotations

import atexit
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from common.metrics_cache import SingleFlightState
from common.metrics_door import METRICS_PATH as METRICS_PATH  # named here too: callers import it from here
from common.metrics_door import Scrape, bind_host, start_server
from common.metrics_ports import PortReport, report_for, unserved_reason
from store.settings import Settings

log = logging.getLogger("relmon.metrics")

# The variable prometheus-client reads, at import, to choose its multiprocess value store.
MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
OTHER_CHANNEL = "other"
ACK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 3.0)  # Slack resends after 3 s


def prepare_process(settings: Settings, component: str) -> Path:
    """Before prometheus-client is imported: a directory the processes forked from this one share for their
    counters (wiped: a restart starts from zero, as a counter reset tells Prometheus)."""
    if settings.metrics_dir:
        directory = Path(settings.metrics_dir) / component
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True, exist_ok=True)
    else:
        directory = Path(tempfile.mkdtemp(prefix=f"relmon-metrics-{component}-"))
        owner = os.getpid()
        atexit.register(lambda: os.getpid() == owner and shutil.rmtree(directory, ignore_errors=True))
    # prometheus-client takes its configuration from this variable only; the forked processes inherit it.
    os.environ[MULTIPROC_VARIABLE] = str(directory)
    global _shared_directory
    _shared_directory = directory  # and the bot's state reading (metrics_cache), shared the same way
    return directory


# This component's shared directory (prepare_process); None in a process that did not go through it (tests, tools).
_shared_directory: Path | None = None


_creating = threading.Lock()


def _process_metrics() -> Any:
    """Created on first use (after prepare_process), once per process. Under a lock: the first requests reach
    gunicorn's threads together, and a second registration of the same series raises (a 500 to Slack)."""
    with _creating:
        return _created_metrics()


@cache
def _created_metrics() -> Any:
    from types import SimpleNamespace

    from prometheus_client import Counter, Histogram

    return SimpleNamespace(
        acked=Counter("relmon_events_acked", "Slack requests answered, by transport, status", ["transport", "status"]),
        ack_seconds=Histogram(
            "relmon_ack_seconds",
            "Slack request to its answer",
            ["transport"],
            buckets=ACK_BUCKETS,
        ),
        spooled=Counter("relmon_events_spooled", "Events written to the spool because the broker was out of reach"),
        tasks=Counter("relmon_tasks", "Celery tasks finished, by task and state", ["task", "state"]),
        trace_sends=Counter(
            "relmon_trace_sends",
            "Verdicts and outcome signals sent to a tracing tool, by tool and outcome",
            ["tool", "outcome"],
        ),
        state_reads=Counter("relmon_state_reads", "Times the state was read from the database and Redis"),
    )


def create_counters() -> None:
    """This process's counters, made now (a server's worker, before it serves) rather than on its first event."""
    _process_metrics()


def event_acked(transport: str, status: int, seconds: float) -> None:
    metrics = _process_metrics()
    metrics.acked.labels(transport, str(status)).inc()
    metrics.ack_seconds.labels(transport).observe(seconds)


def event_spooled() -> None:
    _process_metrics().spooled.inc()


def trace_send(tool: str, outcome: str) -> None:
    """outcome: sent | failed (retries spent) | rejected (the tool refused) | bad_trace_id | skipped | not_queued."""
    _process_metrics().trace_sends.labels(tool, outcome).inc()


def watch_celery_tasks() -> None:
    """Count each relmon task's end (success, failure, retry) from Celery's signals, in the process running it."""
    from celery import signals

    def finished(state: str):
        def handler(sender: Any = None, **_: Any) -> None:
            name = getattr(sender, "name", None) or "unknown"
            if str(name).startswith("workers.tasks."):  # relmon's own tasks (common.task_names): a bounded set
                _process_metrics().tasks.labels(str(name), state).inc()

        return handler

    for signal, state in ((signals.task_success, "success"), (signals.task_failure, "failure")):
        signal.connect(finished(state), weak=False)
    signals.task_retry.connect(finished("retry"), weak=False)


def error_kind(text: str) -> str:
    """A judgment error's kind, from the start of its text: a bounded label, never the text itself."""
    lowered = text.lower()
    for kind, words in ERROR_KINDS:
        if any(word in lowered for word in words):
            return kind
    return "other"


ERROR_KINDS = (
    ("timeout", ("timeout", "timed out")),
    ("rate_limit", ("429", "rate limit", "rate_limit")),
    ("auth", ("401", "403", "api key", "unauthorized", "permission")),
    ("unparseable", ("parse", "json", "verdict", "unreadable")),
    ("unreachable", ("connect", "unreachable", "refused")),
    ("server", ("500", "502", "503", "504", "server error")),
    ("budget", ("budget",)),
)


def channel_label(channel: str | None, allowed: frozenset[str]) -> str:
    return channel if channel and channel in allowed else OTHER_CHANNEL


class StateCollector:
    """What the database and Redis say now, read at each scrape. A store that does not answer gives
    relmon_state_up 0 and no other state series, never a failed scrape."""

    def __init__(self, runtime: Any) -> None:  # common.runtime.Runtime
        self.runtime = runtime

    def describe(self) -> list:
        return []  # no reads at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        started = time.monotonic()
        try:
            families = list(self._families(datetime.now(UTC)))
            up = 1
        except Exception as error:  # a store down or a query failing: say so in a series and a log line
            log.warning("metrics: cannot read the state", extra={"error": type(error).__name__})
            families, up = [], 0
        yield from families
        yield GaugeMetricFamily("relmon_state_up", "1 when the database and Redis answered this scrape", value=up)
        yield GaugeMetricFamily(
            "relmon_state_scrape_seconds", "Time the state's reads took", value=time.monotonic() - started
        )

    def _families(self, now: datetime) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        from common.celery_app import QUEUES
        from store.metrics_queries import read_state
        from store.models import as_utc
        from store.usage import budget_day, calls_on

        settings = self.runtime.settings
        allowed = frozenset(settings.metrics_channel_labels)
        with self.runtime.db.reading() as session:
            state = read_state(session)
            spent = calls_on(session, budget_day(now))
        pairs = GaugeMetricFamily("relmon_pairs", "Captured pairs by status", labels=["status", "channel"])
        for (status, channel), count in _merged(state.pairs, lambda key: (key[0], channel_label(key[1], allowed))):
            pairs.add_metric([status, channel], count)
        yield pairs
        yield _counter(
            CounterMetricFamily, "relmon_judgments", "Judgments stored", ["judge", "status"], state.judgments
        )
        yield from self._scores(state)
        yield _counter(
            CounterMetricFamily,
            "relmon_confirmations",
            "Second opinions on low scores, by outcome",
            ["outcome"],
            {(key,): value for key, value in state.confirmations.items()},
        )
        alerts = _merged(state.alerts, lambda key: (key[0], key[1], channel_label(key[2], allowed)))
        yield _counter(
            CounterMetricFamily, "relmon_alerts", "Alerts by kind, status", ["kind", "status", "channel"], alerts
        )
        yield from self._llm(state)
        signals = {(name,): count for name, count in state.outcome_signals.items()}
        yield _counter(CounterMetricFamily, "relmon_outcome_signals", "Outcome signals by name", ["name"], signals)
        depth = GaugeMetricFamily("relmon_queue_depth", "Tasks waiting in each Celery queue", labels=["queue"])
        for queue in QUEUES:
            depth.add_metric([queue], self.runtime.redis.llen(queue))
        yield depth
        oldest = as_utc(state.oldest_unjudged) if state.oldest_unjudged else None
        age = max(0.0, (now - oldest).total_seconds()) if oldest else 0.0
        yield GaugeMetricFamily("relmon_oldest_unjudged_seconds", "Oldest pair waiting for judging", value=age)
        yield GaugeMetricFamily(
            "relmon_budget_left",
            "Judgments left in today's budget (UTC)",
            value=settings.daily_budget - spent,
        )

    def _scores(self, state: Any) -> Iterator[Any]:
        from prometheus_client.core import HistogramMetricFamily

        from store.metrics_queries import SCORE_BUCKETS

        family = HistogramMetricFamily("relmon_score", "Normalised scores (0..1) by judge", labels=["judge"])
        for judge, histogram in sorted(state.scores.items()):
            family.add_metric([judge], _buckets(SCORE_BUCKETS, histogram), histogram.total)
        yield family

    def _llm(self, state: Any) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        from store.metrics_queries import LATENCY_BUCKETS

        calls = {(judge,): count for judge, count in state.llm_calls.items()}
        yield _counter(CounterMetricFamily, "relmon_llm_calls", "LLM calls made by the judges", ["judge"], calls)
        tokens = state.tokens
        family = CounterMetricFamily("relmon_llm_tokens", "LLM tokens as the provider reported them", labels=["kind"])
        for kind, value in (("prompt", tokens.prompt), ("cached", tokens.cached), ("completion", tokens.completion)):
            family.add_metric([kind], value)
        yield family
        yield CounterMetricFamily("relmon_llm_cost_usd", "Estimated LLM cost (RELMON_COST_*)", value=self._cost(tokens))
        latency = HistogramMetricFamily("relmon_llm_latency_seconds", "LLM call latency")
        if state.llm_latency is not None:
            latency.add_metric([], _buckets(LATENCY_BUCKETS, state.llm_latency), state.llm_latency.total)
        yield latency
        errors: dict[tuple[str], int] = {}
        for text, count in state.llm_errors.items():
            key = (error_kind(text),)
            errors[key] = errors.get(key, 0) + count
        yield _counter(CounterMetricFamily, "relmon_llm_errors", "Judgments the LLM failed, by kind", ["kind"], errors)

    def _cost(self, tokens: Any) -> float:
        settings = self.runtime.settings
        cached_price = settings.cached_input_price
        cached_price = settings.input_price / 2 if cached_price is None else cached_price

        def cost(prompt: int, cached: int, completion: int) -> float:
            cached = min(cached, prompt)
            return (
                (prompt - cached) * settings.input_price + cached * cached_price + completion * settings.output_price
            ) / 1e6

        total = cost(tokens.prompt, tokens.cached, tokens.completion)
        return total - cost(tokens.batch_prompt, tokens.batch_cached, tokens.batch_completion) / 2  # batch: half


def _merged(counts: dict, key_of) -> list[tuple[tuple, int]]:
    """Counts whose keys map to the same labels (channels not allowed: "other") added up."""
    merged: dict[tuple, int] = {}
    for key, count in counts.items():
        labels = key_of(key)
        merged[labels] = merged.get(labels, 0) + count
    return sorted(merged.items())


def _counter(family_type: Any, name: str, documentation: str, labels: list[str], counts: Any) -> Any:
    family = family_type(name, documentation, labels=labels)
    for key, value in sorted(dict(counts).items()):
        family.add_metric(list(key), value)
    return family


def _buckets(bounds: Iterable[float], histogram: Any) -> list[tuple[str, float]]:
    return [(str(bound), count) for bound, count in zip(bounds, histogram.buckets, strict=True)] + [
        ("+Inf", histogram.count)
    ]


class _Sources:
    """What generate_latest reads: the collect() of each source in turn."""

    def __init__(self, *sources: Any) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Any]:
        for source in self.sources:
            yield from source.collect()


def registry() -> Any:
    """This component's process counters (every process of it, in multiprocess mode)."""
    from prometheus_client import REGISTRY, CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector

    _process_metrics()
    if os.environ.get(MULTIPROC_VARIABLE):
        counters = CollectorRegistry()
        MultiProcessCollector(counters)
        return counters
    return REGISTRY  # a process that did not go through prepare_process (tests, tools): its own counters


def state_text(runtime: Any) -> bytes:
    """The state's exposition text, read now from the database and Redis (`StateCollector`)."""
    from prometheus_client import generate_latest

    _process_metrics().state_reads.inc()
    return generate_latest(_Sources(StateCollector(runtime)))


def state_cache(runtime: Any) -> SingleFlightState:
    """The state of `runtime`, read at most once per 15 s for this process and every process of its component."""
    return SingleFlightState(lambda: state_text(runtime), directory=_shared_directory)


# A whole answer is reused this long: a burst of scrapes costs one exposition, not one each (Prometheus scrapes
# every 15 s; a flood of scrapes must not take the CPU that Slack's acks need).
BODY_REUSE_SECONDS = 1.0


def scraper(runtime: Any) -> Scrape:
    """GET /metrics for the bot: `() -> (body, content type)`, the state read at most once per 15 s for every
    process of the component, and the whole answer reused for a second within this process."""
    from prometheus_client import CONTENT_TYPE_LATEST

    state = state_cache(runtime)
    body = SingleFlightState(lambda: exposition(runtime, state)[0], max_age=BODY_REUSE_SECONDS)
    return lambda: (body.get(), CONTENT_TYPE_LATEST)


def exposition(runtime: Any | None = None, state: SingleFlightState | None = None) -> tuple[bytes, str]:
    """The body and Content-Type of GET /metrics: the process counters, and with `runtime` the state (through
    `state`'s cache when given, else read now) and how old that reading is."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    if runtime is None:
        return generate_latest(registry()), CONTENT_TYPE_LATEST
    if state is None:
        started = time.time()
        body = state_text(runtime)
    else:
        reading = state.latest_reading()
        body, started = reading.body, reading.started_at
    age = GaugeMetricFamily(
        "relmon_state_age_seconds", "Age of the state served (read at most once per 15 s)", value=time.time() - started
    )
    counters = generate_latest(registry()) + generate_latest(_Sources(_Fixed(age)))
    return counters + body, CONTENT_TYPE_LATEST


class _Fixed:
    def __init__(self, *families: Any) -> None:
        self.families = families

    def collect(self) -> Iterator[Any]:
        yield from self.families


def serve_process_metrics(settings: Settings, component: str) -> PortReport:
    """`relmon worker` / `relmon beat`: GET /metrics on the component's port, in a daemon thread, through the door
    (`common.metrics_door`: 127.0.0.1 only, or every interface with the token asked). Returns what the process
    says of its port (`common.metrics_ports`, kept in Redis for the doctor): served, off (0), or taken (a clear
    line, and the process works on without it)."""
    port = settings.worker_metrics_port if component == "worker" else settings.beat_metrics_port
    if not port:
        return report_for(component, 0, None)
    if component == "worker":
        watch_celery_tasks()
    _served, error = _serve(settings, port, lambda: exposition())
    return report_for(component, port, error)


def serve_metrics_port(settings: Settings, port: int, scrape: Scrape) -> int | None:
    """GET /metrics alone on a port of its own (bound by the door's rule), in a daemon thread; None when the port
    cannot be had (logged: the process works on without it)."""
    return _serve(settings, port, scrape)[0]


def _serve(settings: Settings, port: int, scrape: Scrape) -> tuple[int | None, OSError | None]:
    token = settings.secret("metrics_token")
    host = bind_host(token)
    try:
        start_server(host, port, token=token, scrape=scrape, own_port=True)
    except OSError as error:
        reason = unserved_reason(port, error.errno, error.strerror)
        log.warning("metrics: port not served", extra={"port": port, "error": reason})
        return None, error
    log.info("serving metrics", extra={"host": host, "port": port, "path": METRICS_PATH, "token": bool(token)})
    return port, None
