"""The topics of a place, from the runtime: made fresh and stored as a run (the weekly digest, the daily refresh),
or read back from the latest stored run (App Home), made first when none is stored (the `/judge digest` preview,
`relmon digest --dry-run`). Thin adapters around
`topics.service` and `common.reports.topics`; numpy and scikit-learn are imported only to make topics."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timedelta

import redis

from common.privacy import Destination, may_quote
from common.reports.period import Period
from common.reports.topics import TopicsView, spend_summary, stored_view, view_of
from common.runtime import Runtime
from judges import LLMClient
from store import topics as topic_rows
from topics.audience import Place

log = logging.getLogger("relmon.topics")
WEEK = timedelta(days=7)
NamingLLM = Callable[[], LLMClient] | None  # the client that names topics, made when first needed


def quoting_in(runtime: Runtime, destination: Destination | str | None) -> Callable[[str | None, bool], bool]:
    """Whether a question's text may be shown in `destination` (a channel, or one person): the one quoting rule."""
    return lambda channel, private: may_quote(channel, private, runtime.rules, runtime.settings, destination)


def place_of(runtime: Runtime, destination: Destination | str | None) -> Place:
    """Who reads a topic's name in `destination` (a channel, or one person: App Home, a preview), for the audience
    rule (`topics.audience`): a private channel's text may be read there where the quoting rule allows it."""
    where = destination if isinstance(destination, Destination) else Destination(destination)
    return Place(
        channel_id=where.channel_id,
        reader_may_read=where.reader_may_read,
        quotes_private=lambda channel: may_quote(channel, True, runtime.rules, runtime.settings, where),
    )


def make_topics(
    runtime: Runtime,
    start: datetime,
    end: datetime,
    now: datetime,
    run_key: str | None,
    place: Place | None = None,
    llm: NamingLLM = None,
):
    """The topics of [start, end), compared with the week before, stored as run `run_key`, named for `place` by
    `llm` (None: the runtime's judge client, Celery's retries and all)."""
    from topics.service import TopicsDeps, TopicsQuery, compute_topics

    deps = TopicsDeps(runtime.db, runtime.settings, runtime.rules, llm=llm or (lambda: runtime.llm), place=place)
    return compute_topics(deps, TopicsQuery(start, end, now, previous_start=start - (end - start), run_key=run_key))


def fresh_view(
    runtime: Runtime,
    period: Period,
    now: datetime,
    destination: str,
    audience_sees: Callable[[str], bool],
    run_key: str,
) -> TopicsView:
    """The topics of the period made now for a message to `destination` (`audience_sees`: whether its people may
    see a private channel's figures, `common.membership.ChannelAudience`), with the topics' LLM spend of the
    period. Topics never stop the digest: if they fail, the view says so."""
    from topics.failures import not_built_note

    settings = runtime.settings
    start, end = period.start, period.end
    place = place_of(runtime, destination)
    try:
        report = make_topics(runtime, start, end, now, run_key, place)
    except Exception as error:  # a bug or the database: the digest still goes out, without its topics
        log.exception("topics failed")
        return TopicsView(0, 0, "none", (), notes=(not_built_note(error),))
    with runtime.db.reading() as session:
        spend = topic_rows.spend_between(session, start, end + timedelta(minutes=1))
    cost = spend_summary(
        spend,
        embedding_price=settings.embedding_price,
        input_price=settings.input_price,
        output_price=settings.output_price,
    )
    quoting = quoting_in(runtime, destination)
    return view_of(
        report,
        audience_sees=audience_sees,
        may_quote=lambda question: quoting(question.channel_id, question.private),
        place=place,
        cost=cost,
    )


def too_few_view(
    runtime: Runtime, period: Period, now: datetime, destination: str | None, audience_sees: Callable[[str], bool]
) -> TopicsView | None:
    """What a message to `destination` would show of a period with too few questions to group (its failed
    questions), made read only: nothing embedded, named or stored (the digest's dry run). None: enough to group."""
    from topics.service import TopicsDeps, TopicsQuery, too_few_to_group

    deps = TopicsDeps(runtime.db, runtime.settings, runtime.rules)
    report = too_few_to_group(deps, TopicsQuery(period.start, period.end, now))
    if report is None:
        return None
    quoting = quoting_in(runtime, destination)
    return view_of(
        report,
        audience_sees=audience_sees,
        may_quote=lambda question: quoting(question.channel_id, question.private),
        place=place_of(runtime, destination),
    )


def latest_view(
    runtime: Runtime,
    now: datetime,
    *,
    audience_sees: Callable[[str], bool],
    may_quote_text: Callable[[str | None, bool], bool],
    place: Place,
) -> TopicsView | None:
    """The topics of the newest stored run of the last seven days, as one audience may see them (None: no run):
    names as `place` may read them (`place_of`)."""
    with runtime.db.reading() as session:
        found = topic_rows.latest_run(session, now - WEEK)
        if found is None:
            return None
        run, periods = found
        examples = [pair_id for period in periods for pair_id in period.examples]
        texts = topic_rows.example_texts(session, examples)
    return stored_view(run, periods, texts, audience_sees=audience_sees, may_quote=may_quote_text, place=place)


def daily_run(runtime: Runtime, now: datetime, llm: NamingLLM = None, redis_client: redis.Redis | None = None):
    """The daily run App Home (and the digest's dry run) shows: the last seven days' topics, stored under the
    day's key, named for App Home (one person, no channel: the quoting rule quotes no private channel there, so
    neither does a name). Beat makes it (`refresh`), `relmon topics --refresh` and a view with none stored on
    demand. With `redis_client`, under the same lock as a view making topics on demand: beat's run, the CLI's and
    a preview's never group the same week at once (each would pay, and the later one's assignments would
    overwrite the other's half way)."""
    with _one_maker(redis_client):
        return _make_daily(runtime, now, llm)


def _make_daily(runtime: Runtime, now: datetime, llm: NamingLLM):
    key = f"daily:{now.date().isoformat()}"
    place = place_of(runtime, Destination(None, lambda _channel: True))
    return make_topics(runtime, now - WEEK, now, now, key, place, llm)


def refresh(runtime: Runtime, now: datetime, llm: NamingLLM = None, redis_client: redis.Redis | None = None) -> str:
    """The daily run (`daily_run`), made and stored; its key."""
    daily_run(runtime, now, llm, redis_client)
    return f"daily:{now.date().isoformat()}"


def stored_or_made_view(
    runtime: Runtime,
    now: datetime,
    *,
    audience_sees: Callable[[str], bool],
    may_quote_text: Callable[[str | None, bool], bool],
    place: Place,
    llm: NamingLLM = None,
    redis_client: redis.Redis | None = None,
) -> tuple[TopicsView, bool]:
    """The newest stored topics of the last seven days (`latest_view`); none stored (the first digest after an
    import, before the daily run), they are made now as the daily run makes them (`refresh`, within the daily
    budget) and stored, so the next view reads them. With `redis_client`, one process at a time makes them (two
    previews asked at once pay once: the second reads what the first stored). Whether they were made now comes
    second. Topics never stop what shows them: if making them fails, the view says so."""
    from topics.failures import not_built_note

    def stored() -> TopicsView | None:
        return latest_view(runtime, now, audience_sees=audience_sees, may_quote_text=may_quote_text, place=place)

    view = stored()
    if view is not None:
        return view, False
    with _one_maker(redis_client):
        view = stored()  # made by another while this one waited
        if view is not None:
            return view, False
        try:
            _make_daily(runtime, now, llm)
        except Exception as error:  # a bug or the database: the digest still shows, without its topics
            log.exception("topics failed")
            return TopicsView(0, 0, "none", (), notes=(not_built_note(error),)), True
    view = stored()
    return view if view is not None else TopicsView(0, 0, "none", ()), True


MAKING_KEY = "relmon:topics:on-demand"
MAKING_SECONDS = 900  # longer than any run (a week of 20,000 questions embedded afresh takes a few minutes)


@contextmanager
def _one_maker(redis_client: redis.Redis | None) -> Iterator[None]:
    """Hold the on-demand topics lock while making them; without Redis, or when the holder outlasts the wait (a
    dead process's lock expires), make them anyway: a second run is only a second cost, never wrong."""
    lock = redis_client.lock(MAKING_KEY, timeout=MAKING_SECONDS) if redis_client is not None else None
    try:
        held = lock is not None and lock.acquire(blocking_timeout=MAKING_SECONDS)
    except redis.RedisError:
        held = False
    try:
        yield
    finally:
        if held and lock is not None:
            with suppress(redis.RedisError):  # expired meanwhile: nothing to release
                lock.release()
