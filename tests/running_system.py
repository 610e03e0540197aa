"""A whole running relmon for system tests: the fake Slack and LLM, and relmon's own processes.

- `relmon_processes(...)`: real `relmon bot` / `relmon worker` / `relmon beat` processes on the fakes;
- `running_system(...)`: the bot's WSGI app served in this process over HTTP, real `relmon worker` processes and
  one `relmon beat`, with what the fault tests check (`System`);
- `fresh_database(...)`: one migrated database for a test (PostgreSQL when a server answers, else SQLite).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import select

from common.messages.alerts import ACTION_RIGHT
from store.db import Database
from store.models import Alert, ConfirmationStatus, Judgment, JudgmentStatus, Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import BotServer, ServedBot
from tests.builders import SECRET, make_settings
from tests.bursts import burst
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import RelmonProcess, relmon_env, start_bot, start_worker, wait_for
from tests.services import create_postgres_database, drop_postgres_database, postgres_admin_url

CHANNEL = "C_SUPPORT"
ALERTS = "C_ALERTS"
THRESHOLD = 2  # relevancy ≤ 2 alerts; the fake LLM scores "offtopic" answers 0 and others 4
SETTLE_TIMEOUT = 90.0  # the longest a test waits for the pipeline to finish (it usually takes seconds)


@contextmanager
def fresh_database(directory: Path) -> Iterator[str]:
    """A fresh, migrated database: PostgreSQL (as in production) when a server answers, else SQLite."""
    admin = postgres_admin_url()
    if admin is None:
        url = f"sqlite:///{directory / 'relmon.sqlite3'}"
        Database(url).migrate()
        yield url
        return
    url, name = create_postgres_database(admin)
    database = Database(url)
    database.migrate()
    database.dispose()
    try:
        yield url
    finally:
        drop_postgres_database(admin, name)


# The fakes and relmon's own processes ----------------------------------------------------------------------------


def add_support_channel(slack: FakeSlack, *, members: Sequence[str] = ("U_ASKER", "U_RELMON")) -> FakeSlack:
    """The asker and the support channel the tests' questions and answers are posted in."""
    slack.add_user("U_ASKER", "ana", "Ana Diaz")
    slack.add_channel(CHANNEL, "support", members=list(members))
    return slack


def fakes_env(
    slack: FakeSlack, llm: FakeOpenAI | None, *, redis_url: str, database_url: str, directory: Path, **settings: object
) -> dict[str, str]:
    """An environment for relmon processes on these fakes, with their data under `directory`/data."""
    return relmon_env(
        redis_url=redis_url,
        database_url=database_url,
        slack_api_url=slack.api_url,
        openai_base_url=llm.base_url if llm is not None else None,
        data_dir=directory / "data",
        **settings,
    )


@dataclass
class Processes:
    """The fakes, the environment and the relmon processes started on them (None: not started)."""

    slack: FakeSlack
    llm: FakeOpenAI
    env: dict[str, str]
    log_dir: Path
    bot: RelmonProcess | None = None
    base_url: str = ""
    worker: RelmonProcess | None = None
    beat: RelmonProcess | None = None

    def start(self, name: str, *, timeout: float = 60.0) -> RelmonProcess:
        """Start `relmon bot` (waits for /healthz), `relmon worker` (waits until ready) or `relmon beat`."""
        if name == "bot":
            self.bot, self.base_url = start_bot(self.env, log_dir=self.log_dir, timeout=timeout)
        elif name == "worker":
            self.worker = start_worker(self.env, log_dir=self.log_dir, timeout=timeout)
        elif name == "beat":
            self.beat = RelmonProcess("beat", env=self.env, log_dir=self.log_dir).start()
        else:
            raise ValueError(f"no relmon process {name!r}")
        return getattr(self, name)

    def post_event(self, event: dict, secret: str = SECRET) -> httpx.Response:
        """One event, in its Events API envelope, signed and sent to the bot's /slack/events."""
        return sr.post(self.base_url + "/slack/events", sr.envelope(event), secret)

    def stop(self) -> None:
        for process in (self.bot, self.worker, self.beat):
            if process is not None:
                process.stop()


@contextmanager
def relmon_processes(
    *,
    redis_url: str,
    database_url: str,
    directory: Path,
    start: Sequence[str] = ("bot", "worker"),
    slack: FakeSlack | None = None,
    llm: FakeOpenAI | None = None,
    slack_options: dict | None = None,
    log_dir: Path | None = None,
    timeout: float = 60.0,
    **settings: object,
) -> Iterator[Processes]:
    """The fakes (a FakeSlack with the support channel and a FakeOpenAI, unless given) and the relmon processes
    named in `start`, in that order, on an environment with these settings; every process is stopped after.
    start=() leaves the starting to the test (`.start(name)`), e.g. after it has set the fakes up."""
    with ExitStack() as stack:
        if slack is None:
            slack = add_support_channel(stack.enter_context(FakeSlack(**(slack_options or {}))))
        if llm is None:
            llm = stack.enter_context(FakeOpenAI())
        env = fakes_env(slack, llm, redis_url=redis_url, database_url=database_url, directory=directory, **settings)
        system = Processes(slack, llm, env, log_dir or directory)
        stack.callback(system.stop)
        for name in start:
            system.start(name, timeout=timeout)
        yield system


# The system under test ---------------------------------------------------------------------------------------


@dataclass
class System:
    bot: ServedBot
    slack: FakeSlack
    llm: FakeOpenAI
    database: Database
    worker_env: dict[str, str]
    log_dir: Path
    workers: list[RelmonProcess] = field(default_factory=list)
    beat: RelmonProcess | None = None
    answers: dict[str, bool] = field(default_factory=dict)  # answer ts → offtopic (should alert)
    restarts: int = 0  # workers the supervisor replaced

    def start_workers(self, count: int = 1) -> list[RelmonProcess]:
        """Start `count` workers at once and wait until each is ready (start-up is the slow part)."""
        fresh = [RelmonProcess("worker", env=self.worker_env, log_dir=self.log_dir).start() for _ in range(count)]
        self.workers.extend(fresh)
        for worker in fresh:
            worker.wait_until_ready(timeout=90)
        return fresh

    def send(self, event: dict, *, deadline: float = 60.0) -> None:
        """Deliver one event as Slack does: until the bot answers 2xx, retrying 5xx and dropped connections
        (same event_id, a fresh signature each time)."""
        body = sr.envelope(event)
        stop = time.monotonic() + deadline
        while True:
            try:
                response = sr.post(self.bot.url, body, SECRET, timeout=10)
                if response.status_code < 300:
                    return
                assert response.status_code >= 500, f"{response.status_code} {response.text}"
            except httpx.TransportError:
                pass
            if time.monotonic() > stop:
                raise AssertionError(f"the bot never accepted event {body['event_id']}")
            time.sleep(0.3)

    def send_answers(self, count: int, *, start: int = 0, offtopic_every: int = 4) -> None:
        """`count` questions, each answered in its thread by the monitored bot; every n-th answer is off topic.
        Four conversations at a time, as Slack delivers events concurrently."""
        burst(lambda i: self._send_answer(i, offtopic_every), range(start, start + count), workers=4)

    def send_pair(self, question: str, answer: str, *, offtopic: bool = False) -> str:
        """One question and the monitored bot's answer in its thread; returns the answer's ts."""
        question_ts = sr.next_ts()
        self.send(sr.human_message(CHANNEL, question_ts, question))
        answer_ts = sr.next_ts()
        self.send(sr.bot_message(CHANNEL, answer_ts, answer, thread_ts=question_ts))
        self.answers[answer_ts] = offtopic
        return answer_ts

    def _send_answer(self, i: int, offtopic_every: int) -> None:
        offtopic = i % offtopic_every == 0
        text = (
            f"Our offtopic cafeteria menu for day {i} is pasta."
            if offtopic
            else f"Open Settings, then Security, then Reset on device {i}."
        )
        self.send_pair(f"How do I reset the password on device {i}?", text, offtopic=offtopic)

    def post_answer_once(self, i: int) -> tuple[str, list[int]]:
        """A question and its answer (off topic every 4th), each posted once, not retried: (answer ts, the
        statuses the bot answered, 0 for a dropped connection)."""
        question_ts, answer_ts = sr.next_ts(), sr.next_ts()
        offtopic = i % 4 == 0
        text = f"Our offtopic cafeteria menu for day {i}." if offtopic else f"Open Settings, then Reset on {i}."
        statuses = []
        for event in (
            sr.human_message(CHANNEL, question_ts, f"How do I reset device {i}?"),
            sr.bot_message(CHANNEL, answer_ts, text, thread_ts=question_ts),
        ):
            try:
                statuses.append(sr.post(self.bot.url, sr.envelope(event), SECRET, timeout=10).status_code)
            except httpx.TransportError:
                statuses.append(0)
        self.answers[answer_ts] = offtopic
        return answer_ts, statuses

    # What happened -----------------------------------------------------------------------------------------

    def pairs(self) -> list[Pair]:
        with self.database.session() as session:
            return list(session.execute(select(Pair).order_by(Pair.id)).scalars())

    def judgments(self) -> list[Judgment]:
        with self.database.session() as session:
            return list(session.execute(select(Judgment)).scalars())

    def alert_rows(self) -> list[Alert]:
        with self.database.session() as session:
            return list(session.execute(select(Alert)).scalars())

    def posted_low_alerts(self) -> Counter[int]:
        """Judgment IDs of low-score alerts that Slack accepted (429'd attempts are not posts), with counts."""
        with self.slack._lock:
            messages = list(self.slack.messages.get(ALERTS, {}).values())
        ids: Counter[int] = Counter()
        for message in messages:
            for block in message.get("blocks") or []:
                for element in block.get("elements") or []:
                    if isinstance(element, dict) and element.get("action_id") == ACTION_RIGHT:
                        ids[int(element["value"])] += 1
        return ids

    def revive_dead_workers(self) -> None:
        """What systemd or a container restart policy does: a worker process that exited is replaced.
        (Celery 5.7 / kombu 5.7 workers exit with "Unrecoverable error" when Redis is killed under them.)"""
        for index, worker in enumerate(self.workers):
            if not worker.running():
                worker.stop()
                self.workers[index] = RelmonProcess("worker", env=self.worker_env, log_dir=self.log_dir).start()
                self.restarts += 1

    @property
    def confirm_off(self) -> bool:
        return self.worker_env.get("RELMON_CONFIRM") == "off"

    def finished(self) -> bool:
        self.revive_dead_workers()
        pairs = self.pairs()
        if len(pairs) < len(self.answers) or any(p.status != PairStatus.JUDGED for p in pairs):
            return False
        low = [j for j in self.judgments() if j.status == JudgmentStatus.OK and j.score <= THRESHOLD]
        # A low score whose second opinion could not confirm it (disputed, unconfirmed) is done without an alert.
        waiting = {j.id for j in low if j.confirmation_status in (None, ConfirmationStatus.CONFIRMED)}
        settled = all(j.confirmation_status is not None for j in low) or self.confirm_off
        return settled and set(self.posted_low_alerts()) >= waiting

    def wait_until_finished(self, timeout: float = SETTLE_TIMEOUT) -> None:
        try:
            wait_for(self.finished, timeout=timeout, interval=0.25, what="every pair judged and alerted")
        except AssertionError as error:
            statuses = Counter(p.status for p in self.pairs())
            tails = "\n".join(
                f"--- worker {w.pid} ---\n" + "\n".join(line[:300] for line in w.tail(15).splitlines())
                for w in self.workers
            )
            raise AssertionError(f"{error}\npair statuses: {dict(statuses)}\n{tails}") from None
        # A late duplicate (a redelivered task) would land in this second. Not a wait for the broker to be idle:
        # that waits out every countdown and lease the workers hold, 20 s and more per fault test, which the
        # suite's 15 minutes cannot afford; check_exactly_once's tallies are the positive sign here.
        time.sleep(1.0)

    def check_exactly_once(self, *, extra_llm_calls: int = 0) -> dict[str, int]:
        """The promises, checked on the database and at both fakes; returns the tallies for the message."""
        pairs = self.pairs()
        assert sorted(p.answer_ts for p in pairs) == sorted(self.answers), "a captured answer is missing or doubled"
        assert all(p.status == PairStatus.JUDGED for p in pairs)

        judgments = self.judgments()
        per_pair_judge = Counter((j.pair_id, j.judge) for j in judgments)
        assert set(per_pair_judge.values()) == {1}
        assert {pair_id for pair_id, _ in per_pair_judge} == {p.id for p in pairs}
        assert all(j.status in (JudgmentStatus.OK, JudgmentStatus.ERROR) for j in judgments)

        offtopic_by_pair = {p.id: self.answers[p.answer_ts] for p in pairs}
        ok = [j for j in judgments if j.status == JudgmentStatus.OK]
        for judgment in ok:  # the score follows the answer, whatever the faults
            assert (judgment.score <= THRESHOLD) == offtopic_by_pair[judgment.pair_id], judgment.id
        low_scores = [j for j in ok if j.score <= THRESHOLD]
        # Alerted: the low scores a second opinion confirmed (every low score with RELMON_CONFIRM=off); a
        # disputed or unconfirmed one alerts nobody.
        low = {j.id for j in low_scores if j.confirmation_status in (None, ConfirmationStatus.CONFIRMED)}
        if not self.confirm_off:
            assert all(j.confirmation_status is not None for j in low_scores), "a low score was never confirmed"

        posted = self.posted_low_alerts()
        assert set(posted) == low, "an alert is missing, or an error or a good score was alerted"
        assert set(posted.values()) <= {1}, f"duplicate alerts: {[i for i, n in posted.items() if n > 1]}"
        low_rows = Counter(a.judgment_id for a in self.alert_rows() if a.kind == "low_score")
        assert set(low_rows) == low and set(low_rows.values()) <= {1}

        llm_calls = len(self.llm.requests)
        fresh = [j for j in ok if not j.cached]
        assert llm_calls >= len(fresh)
        second_opinions = 0 if self.confirm_off else len(low_scores)  # at most one each, retries aside
        most = len(judgments) + second_opinions + extra_llm_calls
        assert llm_calls <= most, f"{llm_calls} LLM calls for {len(judgments)} pairs"
        return {"pairs": len(pairs), "ok": len(ok), "errors": len(judgments) - len(ok), "alerts": len(posted)}

    def start_beat(self) -> None:
        """Exactly one `relmon beat`, as in production: its sweeper is part of what keeps nothing stuck."""
        self.beat = RelmonProcess("beat", env=self.worker_env, log_dir=self.log_dir).start()

    def stop(self) -> None:
        for process in [*self.workers, *([self.beat] if self.beat else [])]:
            process.kill()  # nothing to finish gracefully: the test has checked what it needed
            process.stop()


@contextmanager
def running_system(
    *,
    redis_url: str,
    database_url: str,
    directory: Path,
    llm_latency_ms: float = 50,
    workers: int = 2,
    concurrency: int = 8,
    bot_overrides: dict | None = None,
    **worker_settings: object,
) -> Iterator[System]:
    """The in-process bot over HTTP, `workers` real `relmon worker` processes, the fake Slack and LLM."""
    with FakeSlack() as slack, FakeOpenAI(latency_ms=llm_latency_ms) as llm:
        add_support_channel(slack, members=["U_ASKER", "U_RELMON", "U_SUPPORT"])
        # U_AGENT, the support team's teammate: staff on evidence (a member of the alert channel).
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON", "U_AGENT"])
        timings = {
            # The recovery timings (task lease, orphan check, sweeper) stay at their defaults: a green fault test
            # means the defaults recover. Shortened, for speed only: the settle quiet time and the first LLM retry.
            "RELMON_SETTLE_SECONDS": 0,
            "RELMON_RETRY_BASE_SECONDS": 0.05,
            # Long enough that a reply stalled on a loaded machine is not retried (the tests count LLM calls);
            # the fault test that serves timeouts sets 1 s.
            "RELMON_LLM_TIMEOUT": 10,
            "RELMON_ALERT_CAP_PER_HOUR": 10_000,
            # Exactly one alert per low score: a degradation alert depends on the order the scores land in.
            "RELMON_DEGRADATION_WINDOW_MINUTES": 0,
            "RELMON_THRESHOLD": THRESHOLD,
            "RELMON_HISTORY_FALLBACK": "false",
        }
        env = fakes_env(
            slack,
            llm,
            redis_url=redis_url,
            database_url=database_url,
            directory=directory,
            RELMON_WORKER_CONCURRENCY=concurrency,
            **{**timings, **worker_settings},
        )
        settings = make_settings(
            redis_url=redis_url,
            database_url=database_url,
            slack_api_url=slack.api_url,
            **{"settle_seconds": 0, "history_fallback": False, **(bot_overrides or {})},
        )
        with BotServer(settings) as bot:
            system = System(bot, slack, llm, Database(database_url), env, directory / "logs")
            try:
                system.start_workers(workers)
                system.start_beat()
                yield system
            finally:
                system.stop()
                system.database.dispose()
