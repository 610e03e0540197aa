"""The digest's delivery: the weekly digest posted exactly once per period (claim, post once, chart in its
thread) and the private `/judge digest` preview. The Celery tasks in `workers.tasks.digest` call these.

Statistics come from `common.reports.stats`, rendering from `common.messages.digest`, SQL from
`store.stats_queries` and `store.digests`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta

from slack_sdk.errors import SlackApiError

from common.membership import ChannelAudience, MembershipCache, Viewer
from common.messages.agreement import linked_disagreements
from common.messages.chart_text import chart_alt_text
from common.messages.digest import Links, Quotes, digest_message
from common.messages.fixes import FixLine
from common.post_once import RECEIPT_TTL_SECONDS, PostOnce, Receipts
from common.privacy import Destination, may_quote
from common.replies import Asker, reply_privately
from common.reports.figures import load_report, prices_for
from common.reports.period import Period, period_for
from common.reports.stats import Report, WorstAnswer
from common.reports.topic_runs import fresh_view, place_of, quoting_in, stored_or_made_view
from common.reports.topics import TopicBar, chart_bars
from common.reports.view_cache import REPORT_VIEW_KEY, cached, viewer_class
from common.runtime import Runtime
from store import digests as digest_rows
from store.stats_queries import pair_texts, private_channel_ids
from workers.alerts.delivery import permalink
from workers.fixes import follow

log = logging.getLogger("relmon.digest")

# A run that claimed a period and then vanished (worker killed) is presumed dead after this long.
CLAIM_LEASE = timedelta(minutes=15)
METADATA_EVENT = "relmon_digest"


@dataclass(frozen=True)
class Outcome:
    status: str  # sent | already_sent | in_progress | no_channel
    period_key: str | None = None
    message_ts: str | None = None
    file_id: str | None = None


def _all_worst(report: Report) -> list[WorstAnswer]:
    seen: dict[int, WorstAnswer] = {}
    for worst in [*report.overall.worst, *(w for stats in report.channels for w in stats.worst)]:
        seen.setdefault(worst.pair_id, worst)
    return list(seen.values())


def quotes_for(
    runtime: Runtime, report: Report, destination: str | None, may_read: Callable[[str | None], bool] | None = None
) -> Quotes:
    """Texts of the worst answers that may be shown in `destination` (the privacy rule of alerts) and, for a
    preview, to its one reader (`may_read`: a member of the channel)."""
    where = Destination(destination, may_read)
    allowed = [
        w
        for w in _all_worst(report)
        if may_quote(w.channel_id, w.channel_is_private, runtime.rules, runtime.settings, where)
    ]
    if not allowed:
        return {}
    with runtime.db.session() as session:
        return pair_texts(session, [w.pair_id for w in allowed])


def links_for(runtime: Runtime, report: Report) -> Links:
    """Permalinks of the worst answers and of the judges' latest disagreements with the team (a missing link only
    costs the link, never the digest)."""
    links: dict[int, str] = {}
    for worst in [*_all_worst(report), *linked_disagreements(report.agreement)]:
        if worst.pair_id in links:
            continue
        link = permalink(runtime, worst.channel_id, worst.answer_ts)
        if link:
            links[worst.pair_id] = link
    return links


def first_post_bound(period: Period) -> datetime:
    """The earliest moment a digest with this period's key can have been posted: when a forced digest's key
    was made (the time in it), else the start of the ISO week the key names, in the digest's time zone."""
    week, _, forced = period.key.partition("+force-")
    try:
        if forced:
            return datetime.strptime(forced, "%Y%m%dT%H%M%S").replace(tzinfo=UTC)
        year, number = week.split("-W")
        monday = date.fromisocalendar(int(year), int(number), 1)
        return min(datetime.combine(monday, time.min, tzinfo=period.tz).astimezone(UTC), period.start)
    except ValueError:  # a key of another shape: the seven days the digest covers
        return period.start


def receipt_key(period: Period) -> str:
    return f"digest:{period.key}"


def channel_audience(runtime: Runtime, channel: str, period: Period) -> ChannelAudience:
    """Who reads `channel`, for the report's figures: a channel stored as private in the period (or the one
    before, which the report compares with) is shown only where its audience may see it."""
    with runtime.db.session() as session:
        private = private_channel_ids(session, period.previous_start, period.end)
    membership = MembershipCache(runtime.redis)
    return ChannelAudience(runtime.slack, membership, runtime.rules, runtime.settings, channel, private)


def digest_post_once(runtime: Runtime, period: Period) -> PostOnce:
    """The post-once protocol of the digest: marked with its period key, no attempt notes (its claim, taken
    over from a run that crashed or gave up, says when to look), and Redis may be down (the claim and the
    mark still find the post). Its receipt outlasts the visibility timeout: a worker killed after the post comes
    back as a redelivery that long after."""
    ttl = max(RECEIPT_TTL_SECONDS, 2 * runtime.settings.visibility_timeout_seconds)
    receipts = Receipts(runtime.redis, ttl_seconds=ttl, log=log)
    return PostOnce(runtime.slack, receipts, receipt_key(period), METADATA_EVENT, "period_key", notes_attempts=False)


def earlier_digest(runtime: Runtime, channel: str, period: Period, claim: digest_rows.DigestClaim) -> str | None:
    """The ts of this period's digest if an earlier run posted it: recorded in the claim, else its Redis receipt
    (left the moment Slack took the post), else, when the claim was taken over from a run that crashed or gave
    up, the marked message in the channel, looked for as far back as the key allows (the redelivery of a run
    killed after posting comes back a task lease later, possibly after the claim's lease too). A
    fresh claim had no earlier run: nothing is read."""
    if claim.message_ts:
        return claim.message_ts
    once = digest_post_once(runtime, period)
    return once.earlier(channel, first_post_bound(period), look=claim.taken_over) or None


def deliver_digest(
    runtime: Runtime,
    now: datetime,
    *,
    force: bool = False,
    period_key: str | None = None,
    period: Period | None = None,
) -> Outcome:
    """Send the digest for the period `now` falls in (or `period`: a backfill's month), unless it was sent already.
    Safe to repeat.

    `period_key` pins the key of a forced digest across retries (its key carries the first attempt's time).
    """
    settings = runtime.settings
    channel = settings.digest_channel
    if not channel:
        log.warning("no digest channel: set RELMON_DIGEST_CHANNEL or RELMON_ALERT_CHANNEL")
        return Outcome("no_channel")
    period = period or period_for(now, settings.timezone, force=force)
    if period_key:
        period = replace(period, key=period_key)
    with runtime.db.session() as session:
        claim = digest_rows.claim_digest(session, period.key, channel, now, CLAIM_LEASE)
        if claim is None:
            status = digest_rows.status_of(session, period.key)
    if claim is None:
        log.info("digest not sent again", extra={"period_key": period.key, "status": status})
        return Outcome("already_sent" if status == digest_rows.SENT else "in_progress", period.key)

    try:
        # A private channel's figures and lines only where the digest channel's audience may see them.
        audience = channel_audience(runtime, channel, period)
        report = load_report(runtime, period, may_see=audience.may_see)
        message_ts = earlier_digest(runtime, channel, period, claim)
        topics = None  # an empty week has no topics to make (nor a chart)
        if not report.empty:  # a private channel's topics, the same: named and counted only for its audience
            topics = fresh_view(runtime, period, now, channel, audience.may_see, f"digest:{period.key}")
        if message_ts is None:
            message = digest_message(
                report,
                links_for(runtime, report),
                quotes_for(runtime, report, channel),
                prices_for(runtime),
                chart_in_thread=not report.empty,
                topics=topics,
                fixes=followed_fixes(runtime, now, channel),
            )
            posted = digest_post_once(runtime, period).post(
                channel, text=message["text"], blocks=message["blocks"], unfurl_links=False
            )
            message_ts = posted["ts"]
        with runtime.db.session() as session:
            digest_rows.mark_digest_posted(session, claim.id, message_ts)
        file_id = None
        if not report.empty:  # an empty week has nothing to draw
            file_id = chart_in_thread(
                runtime, channel, message_ts, period, report, chart_bars(topics) if topics else []
            )
        with runtime.db.session() as session:
            digest_rows.mark_sent(session, claim.id, datetime.now(UTC))
    except Exception:
        with runtime.db.session() as session:
            digest_rows.release(session, claim.id)
        raise
    log.info("digest sent", extra={"period_key": period.key, "message_ts": message_ts})
    return Outcome("sent", period.key, message_ts, file_id)


def followed_fixes(
    runtime: Runtime, now: datetime, channel: Destination | str | None, *, tell: bool = True
) -> list[FixLine]:
    """The followed fixes' verdicts for the digest's "Fixes" (each change told in its mark's thread first, unless
    `tell` is off: a preview tells nothing); a failure leaves the section out, never the digest."""
    try:
        return follow(runtime, now, shown_in=channel, tell=tell)
    except Exception:
        log.exception("fixes not followed")
        return []


def chart_title(period: Period, report: Report) -> str:
    return f"relmon digest {period.week_key}: daily {report.primary_judge} and score distribution"


def chart_in_thread(
    runtime: Runtime, channel: str, message_ts: str, period: Period, report: Report, topics: list[TopicBar]
) -> str | None:
    """Upload the chart as a reply to the digest, unless an earlier attempt already did: the upload may have
    gone through before that run failed, and the thread is where it would be (exactly once, as the post)."""
    title = chart_title(period, report)
    try:
        replies = runtime.slack.conversations_replies(channel=channel, ts=message_ts, limit=200).get("messages")
    except SlackApiError as error:
        if error.response.get("error") != "thread_not_found":
            raise
        replies = []  # no replies yet (or the digest was deleted): nothing was uploaded there
    for reply in replies or []:
        for shared in reply.get("files") or []:
            if shared.get("title") == title:
                return shared.get("id")
    # Imported here: matplotlib is ~40 MB, and every process that loads this module (each worker, and the bot
    # when someone opens App Home) would carry it, though only the weekly digest draws.
    from workers.digest.chart import render_chart

    upload = runtime.slack.files_upload_v2(
        channel=channel,
        thread_ts=message_ts,
        content=render_chart(report, topics),
        filename=f"relmon-digest-{period.week_key}.png",
        title=title,
        alt_txt=chart_alt_text(report, topics),  # what screen readers say of the image
    )
    return (upload.get("file") or {}).get("id")


def deliver_preview(
    runtime: Runtime, now: datetime, *, user_id: str, channel_id: str | None, response_url: str | None
) -> dict:
    """The digest as it would be sent now, shown only to one person; claims nothing. That person sees the channels
    App Home shows them (a private channel's figures and links to its members only), and a channel's text only
    when they are a member and the quoting rule allows it in the conversation the preview appears in."""
    settings = runtime.settings
    period = period_for(now, settings.timezone)
    viewer = Viewer(runtime.slack, MembershipCache(runtime.redis), user_id)

    def build() -> dict:
        report = load_report(runtime, period, may_see=viewer.may_see)
        quotes = quotes_for(runtime, report, channel_id, may_read=viewer.may_read)
        # The newest stored topics (the daily run's); none stored (the first preview after an import), they are
        # made here, in the worker, as the daily run makes them, and stored for the next.
        here = Destination(channel_id, viewer.may_read)
        quoting = quoting_in(runtime, here)
        place = place_of(runtime, here)
        topics, _made = stored_or_made_view(
            runtime,
            now,
            audience_sees=viewer.may_see,
            may_quote_text=quoting,
            place=place,
            redis_client=runtime.redis,
        )
        fixes = followed_fixes(runtime, now, here, tell=False)
        return digest_message(report, links_for(runtime, report), quotes, prices_for(runtime), topics=topics,
                              fixes=fixes)  # fmt: skip

    # Served from one built per viewer class and place (what they may see and read, where it appears) a minute.
    shown_in = ("digest-preview", channel_id or "")
    message = cached(
        runtime.redis, REPORT_VIEW_KEY + viewer_class(runtime, viewer, period, reads=True, extra=shown_in), build
    )
    note = {
        "type": "context",
        "elements": [
            {
                "type": "mrkdwn",
                "text": "Preview: only you can see this. The weekly digest, with its chart, goes to "
                + (
                    f"<#{settings.digest_channel}>."
                    if settings.digest_channel
                    else "the digest channel once one is set."
                ),
            }
        ],
    }
    blocks = [note, *message["blocks"]]
    # The response_url with its 429s waited out, else an ephemeral message in the channel.
    reply_privately(
        runtime.slack, Asker(user_id, channel_id, response_url), {"text": message["text"], "blocks": blocks}
    )
    return message
