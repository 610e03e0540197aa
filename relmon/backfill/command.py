"""`relmon backfill` and `relmon import`: read history (Slack's, or an export's), pair it with capture's rules,
store the pairs (source `backfill` / `import`: never alerted on), judge them within the budget and sampling,
and end with the digest's report of the period.

Resumable: a channel's history is read newest first and its checkpoint (SQL) moves after each page's pairs are
stored; pairs found but not judged stay pending and the next run judges them first. Idempotent: pairs are unique
on (channel, answer_ts), judgments on (pair, judge), so a second run judges nothing twice, nor a pair captured live.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta
from functools import cache

from slack_sdk.errors import SlackApiError
from sqlalchemy import func, select

from capture.directory import ChannelFlags, look_up_flags
from capture.history import FoundPair, HistoryPairer, has_replies, is_reply, newest_first_threads, read_message
from capture.pairing import Identity, channel_ignore_reason
from capture.redact import redact_if
from common.runtime import Runtime, set_runtime
from relmon.backfill.progress import Counters, Progress
from relmon.backfill.report import end_of_run, estimate
from store import backfill as rows
from store import channel_names as stored_names
from store.models import Judgment, Pair
from store.settings import Settings

INTERRUPTED = 130


def parse_since(text: str | None, now: datetime) -> datetime:
    """`30d` (days back from now) or a date `YYYY-MM-DD` (UTC midnight); default 30 days."""
    text = (text or "30d").strip()
    if match := re.fullmatch(r"([0-9]{1,5})d", text):  # 0–9 only (\d takes "١٢"); 99999 days fit a datetime
        return now - timedelta(days=int(match.group(1)))
    return datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)


def backfill_llm(settings: Settings):
    """The judges' client for a run in this process: the SDK's own retries (Retry-After honoured), no Celery."""
    from common.llm import llm_client_for
    from common.runtime import shared_redis

    return llm_client_for(settings, redis_client=shared_redis(settings), max_retries=min(settings.llm_max_retries, 5))


class Run:
    """One backfill or import: stores what the pairer finds and judges it (in a bounded pool, or in batches)."""

    def __init__(self, runtime: Runtime, args, source: str, now: datetime) -> None:
        self.runtime, self.args, self.source, self.now = runtime, args, source, now
        self.counters = Counters()
        self.limit = args.limit
        self.batched: list[int] = []
        self.submitted: set[int] = set()  # the pairs handed to judging in this run
        self.llm = backfill_llm(runtime.settings) if not args.dry_run else None
        workers = runtime.settings.backfill_concurrency
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="backfill-judge")
        self.slots = threading.BoundedSemaphore(2 * workers)  # pairs in flight: memory stays constant
        self.started_at = datetime.now(UTC)  # this run's judgments are those made since: its own spend
        self.names: Callable[[str], str | None] | None = None  # how the history's users are named (references)
        self.members: dict[str, tuple[str, ...]] = {}  # channels' members an export lists (staff, without Slack)
        self.channel_names: dict[str, str] = {}  # channels' names an export lists (its report names them)
        self.skipped_unit = "file(s) of the export"  # what a skipped piece of input is, as the end of the run says
        self._outcomes = None

    def outcomes(self):
        """The outcome recorder of this run (relmon.backfill.outcomes), made on first use."""
        if self._outcomes is None:
            from relmon.backfill.outcomes import HistoryOutcomes

            self._outcomes = HistoryOutcomes(self.runtime, self.now, self.names, self.members)
        return self._outcomes

    @property
    def full(self) -> bool:
        return self.limit is not None and self.counters.pairs >= self.limit

    def store(self, channel: str, found: Iterable[FoundPair], flags: dict[str, bool]) -> None:
        settings = self.runtime.settings
        for pair in found:
            self.counters.pairs += 1
            if self.args.dry_run:
                estimate(self.counters, self.runtime, channel, pair.answer_ts, pair.question_text, pair.answer_text)
                continue
            with self.runtime.db.session() as session:
                stored = rows.add_found(
                    session,
                    created_at=datetime.fromtimestamp(float(pair.answer_ts), UTC),
                    source=self.source,
                    channel_id=channel,
                    answer_ts=pair.answer_ts,
                    thread_ts=pair.thread_ts,
                    answer_bot_id=pair.answer_bot_id,
                    answer_text=redact_if(settings.redact_pii, pair.answer_text),
                    question_ts=pair.question_ts,
                    question_user=pair.question_user,
                    question_text=redact_if(settings.redact_pii, pair.question_text),
                    stream_errored=pair.stream_errored,
                    **flags,
                )
            recorded = None
            if stored.source == self.source:  # not a pair captured live: its window is the live path's
                recorded = self.outcomes().record(channel, stored.pair_id, pair)
                self.counters.outcome(recorded)
            # After the outcome: a teammate's reply is the correctness judge's reference, and it sends a pair an
            # earlier run judged back to pending for that judge.
            if stored.to_judge or (recorded is not None and recorded.reference):
                self.judge(stored.pair_id)

    def judge(self, pair_id: int) -> None:
        if pair_id in self.submitted:  # a leftover of an earlier run, found again in the history: judged once
            return
        self.submitted.add(pair_id)
        if self.args.batch:
            self.batched.append(pair_id)
            return
        from relmon.backfill.judging import judge_online

        self.slots.acquire()

        def work() -> None:
            try:
                self.counters.count(judge_online(self.runtime, pair_id, self.llm))
            finally:
                self.slots.release()

        self.pool.submit(work)

    def leftovers(self, channels: Iterable[str]) -> None:
        """Pairs an earlier run found but did not judge."""
        if self.args.dry_run:
            return
        with self.runtime.db.session() as session:
            pending = rows.pending_history_pairs(session, channels, self.source)
        for pair_id in pending:
            self.judge(pair_id)

    def finish_judging(self) -> None:
        self.pool.shutdown(wait=True)
        if self.batched:
            from relmon.backfill.batch import BatchRun

            poll = self.runtime.settings.batch_poll_seconds
            BatchRun(
                self.llm,
                poll,
                say=lambda text: print(text, file=sys.stderr),
                on_judged=self.counters.count,
                judges=self.runtime.judges,
            ).judge(self.runtime, self.batched)

    def spend(self) -> None:
        """The cost of the judgments this run made (not the day's, nor an earlier run's)."""
        if self.args.dry_run:
            return
        from common.reports.costs import judgment_cost
        from common.reports.figures import prices_for
        from store.stats_queries import JudgmentRow

        prices = prices_for(self.runtime)
        with self.runtime.db.session() as session:
            totals = session.execute(
                select(
                    Judgment.batch,
                    func.coalesce(func.sum(Judgment.prompt_tokens), 0),
                    func.coalesce(func.sum(Judgment.cached_tokens), 0),
                    func.coalesce(func.sum(Judgment.completion_tokens), 0),
                )
                .join(Pair, Pair.id == Judgment.pair_id)
                .where(
                    Pair.source == self.source,
                    Judgment.cached.is_(False),
                    Judgment.created_at >= self.started_at,
                )
                .group_by(Judgment.batch)
            ).all()
        self.counters.spend_usd = sum(
            judgment_cost(
                JudgmentRow(0, "", "", prompt_tokens=p, cached_tokens=c, completion_tokens=o, batch=b), prices
            )
            for b, p, c, o in totals
        )


def watched(runtime: Runtime, wanted: list[str] | None) -> list[str]:
    settings, rules = runtime.settings, runtime.rules
    channels = wanted or sorted(set(settings.watched_channels) | set(rules.channels))
    return [c for c in channels if channel_ignore_reason(c, settings, rules) is None]


def _flags(runtime: Runtime, channel: str) -> dict[str, bool]:
    """A channel's privacy as the live capture stores it: a channel Slack cannot describe is private, and one
    shared with another workspace or organisation is kept in as a private one is."""
    return flag_columns(look_up_flags(runtime.slack, channel)[0])


def flag_columns(flags: ChannelFlags) -> dict[str, bool]:
    return {"channel_is_private": flags.restricted, "channel_is_ext_shared": flags.ext_shared}


def _name_resolver(slack) -> Callable[[str], str | None]:
    @cache
    def name(user_id: str) -> str | None:
        try:
            user = slack.users_info(user=user_id).get("user") or {}
        except SlackApiError:
            return None
        return (user.get("profile") or {}).get("display_name") or user.get("real_name") or user.get("name")

    return name


def read_channel(run: Run, reader, channel: str, since: datetime, identity: Identity, names) -> None:
    """One channel's history from its checkpoint on, newest first; the checkpoint moves after each page."""
    settings, db = run.runtime.settings, run.runtime.db
    window = settings.toplevel_window_seconds
    oldest, latest = f"{since.timestamp():.6f}", f"{run.now.timestamp():.6f}"
    with db.session() as session:
        checkpoint = rows.get_checkpoint(session, channel)
        if checkpoint is not None and not checkpoint.done and float(checkpoint.oldest_ts) <= float(oldest):
            oldest, latest = checkpoint.oldest_ts, checkpoint.latest_ts
            resume = checkpoint.resume_ts or latest
        else:
            if checkpoint is not None and checkpoint.done and float(checkpoint.oldest_ts) <= float(oldest):
                oldest = f"{max(float(oldest), float(checkpoint.latest_ts) - window):.6f}"  # only what is new
            resume = latest
            if not run.args.dry_run:
                rows.start_checkpoint(session, channel, oldest, latest)
    flags = _flags(run.runtime, channel)
    pairer = HistoryPairer(window, names, settings.outcome_window_seconds)
    span = max(float(latest) - float(oldest), 1.0)
    for page in reader.history(channel, oldest, resume):
        for raw in page:
            if is_reply(raw):
                continue
            thread = reader.thread(channel, raw["ts"]) if has_replies(raw) else [raw]
            logged = [m for m in (read_message(r, settings.monitored_bots, identity) for r in thread) if m]
            if logged:
                if not run.args.dry_run:  # who helps others: evidence of teammates, as live capture notes it
                    run.outcomes().note_helpers(channel, logged)
                run.store(channel, pairer.feed(logged), flags)
        run.counters.messages += len(page)
        if page:
            resume = min([page[-1]["ts"], *([pairer.floor()] if pairer.floor() else [])], key=float)
            run.counters.done_fraction = min(1.0, (float(latest) - float(resume)) / span)
        if not run.args.dry_run:
            with db.session() as session:
                rows.advance_checkpoint(session, channel, resume, len(page), done=False)
        if run.full:
            return
    run.store(channel, pairer.finish(), flags)
    if not run.args.dry_run:
        with db.session() as session:
            rows.advance_checkpoint(session, channel, None, 0, done=True)


def run_backfill(args, settings: Settings, *, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    try:
        since = parse_since(args.since, now)
    except ValueError:
        print("relmon backfill: --since takes a number of days (30d) or a date (YYYY-MM-DD)", file=sys.stderr)
        return 2
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        if not settings.slack_bot_token:
            print("relmon backfill needs SLACK_BOT_TOKEN (or use relmon import EXPORT.zip)", file=sys.stderr)
            return 2
        runtime.db.migrate()
        from relmon.backfill.slack_history import HistoryReader

        channels = watched(runtime, args.channel)
        if not channels:
            print("relmon backfill: no watched channel (RELMON_WATCHED_CHANNELS or the channel rules)", file=sys.stderr)
            return 2
        auth = runtime.slack.auth_test()
        identity = Identity(auth.get("user_id"), auth.get("bot_id"))
        reader = HistoryReader(runtime.slack, settings.backfill_calls_per_minute)
        run = Run(runtime, args, "backfill", now)
        run.names = _name_resolver(runtime.slack)  # one cache of users.info for the pairs and the references
        return execute(run, channels, since, lambda c: read_channel(run, reader, c, since, identity, run.names))
    finally:
        runtime.db.dispose()
        set_runtime(None)


def run_import(args, settings: Settings, *, now: datetime | None = None) -> int:
    from relmon.backfill.export_reader import ExportError, SlackExport

    now = now or datetime.now(UTC)
    try:
        export = SlackExport(args.export)
    except ExportError as error:
        print(f"relmon import: {error}", file=sys.stderr)
        return 2
    try:
        listed = export.channels()
    except ExportError as error:
        print(f"relmon import: {error}", file=sys.stderr)
        return 2
    runtime = Runtime(settings)
    set_runtime(runtime)
    try:
        runtime.db.migrate()
        mapped = {c.id: c for c in listed}
        wanted = set(watched(runtime, list(mapped)))
        skipped = sorted(f"#{c.name} ({c.id})" for c in mapped.values() if c.id not in wanted)
        names = export.user_names()
        run = Run(runtime, args, "import", now)
        run.channel_names = {c.id: c.name for c in listed if c.name and c.name != c.id}  # a DM has no name
        if not args.dry_run:  # every later output (gaps, topics, the digest) names these channels too
            with runtime.db.session() as session:
                stored_names.remember(session, run.channel_names, stored_names.EXPORT)
        run.names = names.get
        run.members = {c.id: c.members for c in listed if c.members}
        oldest = [now]

        def read(channel_id: str) -> None:
            channel = mapped[channel_id]
            pairer = HistoryPairer(settings.toplevel_window_seconds, names.get, settings.outcome_window_seconds)
            flags = flag_columns(channel.flags)
            if not args.dry_run:  # the whole channel's evidence of who helps others, before any thread is judged
                for root, replies in newest_first_threads(export.days(channel)):
                    thread = [read_message(m, settings.monitored_bots, Identity()) for m in (root, *replies)]
                    run.outcomes().note_helpers(channel_id, [m for m in thread if m])
            for root, replies in newest_first_threads(counted(export.days(channel), run.counters)):
                thread = [read_message(m, settings.monitored_bots, Identity()) for m in (root, *replies)]
                if logged := [m for m in thread if m]:
                    run.store(channel_id, pairer.feed(logged), flags)
                    oldest[0] = min(oldest[0], datetime.fromtimestamp(float(root["ts"]), UTC))
                if run.full:
                    return
            run.store(channel_id, pairer.finish(), flags)

        code = execute(run, sorted(wanted), None, read, since_of=lambda: oldest[0], bad_days=export.bad_days)
        if skipped:
            print(f"skipped {len(skipped)} channel(s) no rule watches: {', '.join(skipped)}", file=sys.stderr)
        return code
    except ExportError as error:  # a file of the export that is not Slack's JSON: an input error, said so
        print(f"relmon import: {error}", file=sys.stderr)
        return 2
    finally:
        runtime.db.dispose()
        set_runtime(None)


def counted(days: Iterable[list[dict]], counters: Counters) -> Iterator[list[dict]]:
    """The day files as read, each counted in the messages read."""
    for day in days:
        counters.messages += len(day)
        yield day


def execute(run: Run, channels: list[str], since: datetime | None, read, since_of=None, bad_days=None) -> int:
    run.leftovers(channels)
    with Progress(run.counters, label=f"relmon {run.source}") as _progress:
        spender = threading.Event()

        def spend_loop() -> None:
            while not spender.wait(2.0):
                run.spend()

        threading.Thread(target=spend_loop, daemon=True).start()
        try:
            for done, channel in enumerate(channels):
                read(channel)
                run.counters.done_fraction = (done + 1) / len(channels) if since is None else run.counters.done_fraction
                if run.full:
                    break
            run.finish_judging()
        except KeyboardInterrupt:
            run.pool.shutdown(wait=False, cancel_futures=True)
            print(f"\nrelmon {run.source}: interrupted; run the same command again to continue", file=sys.stderr)
            return INTERRUPTED
        except SlackApiError as error:
            run.pool.shutdown(wait=True)
            refused = error.response.get("error")
            print(f"relmon {run.source}: Slack refused ({refused}); run again to continue", file=sys.stderr)
            return 4
        finally:
            spender.set()
        run.spend()
    since = since if since is not None else since_of()
    return end_of_run(
        run.runtime, run.counters, run.args, since, run.now, run.source, bad_days, run.channel_names, run.skipped_unit
    )
