"""The alert when a judge agrees significantly less with the team than last week (`common.reports.kappa.kappa_fall`:
the 95% interval of this week's kappa minus last week's lies below 0). Checked after the weekly digest went out, over
the digest's seven days and the seven before, for the alert channel's audience (a private channel's figures only
where its people may see them); posted once per week, judge and channel by the one post-once protocol (keyed by
the ISO week), so a retry or a second check the same week finds the first post instead of posting again."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from common.messages.agreement import fall_alert_text
from common.post_once import PostOnce, Receipts
from common.reports.figures import read_report
from common.reports.period import Period, period_for
from common.runtime import Runtime
from workers.alerts.delivery import permalink
from workers.digest.delivery import channel_audience

log = logging.getLogger("relmon.agreement")

METADATA_EVENT = "relmon_agreement"


def alert_key(period: Period, judge: str, channel_id: str | None) -> str:
    return f"agreement:{period.week_key}:{judge}:{channel_id or 'all'}"


def check_agreement(runtime: Runtime, now: datetime, period: Period | None = None) -> list[str]:
    """Post an alert for each judge (over every channel, and per channel) whose kappa with the team fell
    significantly since the week before; returns the keys of the falls found (posted now or before)."""
    channel = runtime.settings.alert_channel
    if not channel:
        log.info("no alert channel: agreement falls are not posted")
        return []
    period = period or period_for(now, runtime.settings.timezone)
    audience = channel_audience(runtime, channel, period)
    report = read_report(runtime, period, may_see=audience.may_see).report()
    keys = []
    for found, fall in report.agreement.falls():
        key = alert_key(period, found.judge, found.channel_id)
        keys.append(key)
        once = PostOnce(runtime.slack, Receipts(runtime.redis), key, METADATA_EVENT)
        if once.earlier(channel, period.end - timedelta(minutes=1), look=once.attempted()) is not None:
            continue
        links = {
            d.pair_id: link for d in found.disagreements if (link := permalink(runtime, d.channel_id, d.answer_ts))
        }
        once.post(channel, text=fall_alert_text(found, fall, links), unfurl_links=False)
        log.info("agreement fell", extra={"judge": found.judge, "channel": found.channel_id, "kappa": fall.after.value})
    return keys
