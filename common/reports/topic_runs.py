"""The topics of a place, from the runtime: made fresh and stored as a run (the weekly digest, the daily refresh),
or read back from the latest stored run (App Home, the `/judge digest` preview). Thin adapters around
`topics.service` and `common.reports.topics`; numpy and scikit-learn are imported only to make topics."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from common.privacy import Destination, may_quote
from common.reports.period import Period
from common.reports.topics import TopicsView, spend_summary, stored_view, view_of
from common.runtime import Runtime
from store import topics as topic_rows
from topics.audience import Place

log = logging.getLogger("relmon.topics")
WEEK = timedelta(days=7)


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
    runtime: Runtime, start: datetime, end: datetime, now: datetime, run_key: str | None, place: Place | None = None
):
    """The topics of [start, end), compared with the week before, stored as run `run_key`, named for `place`."""
    from topics.service import TopicsDeps, TopicsQuery, compute_topics

    deps = TopicsDeps(runtime.db, runtime.settings, runtime.rules, llm=lambda: runtime.llm, place=place)
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


def daily_run(runtime: Runtime, now: datetime):
    """The daily run App Home (and the digest's dry run) shows: the last seven days' topics, stored under the
    day's key, named for App Home (one person, no channel: the quoting rule quotes no private channel there, so
    neither does a name). Beat makes it (`refresh`), and `relmon topics --refresh` on demand."""
    key = f"daily:{now.date().isoformat()}"
    return make_topics(runtime, now - WEEK, now, now, key, place_of(runtime, Destination(None, lambda _channel: True)))


def refresh(runtime: Runtime, now: datetime) -> str:
    """The daily run (`daily_run`), made and stored; its key."""
    daily_run(runtime, now)
    return f"daily:{now.date().isoformat()}"
