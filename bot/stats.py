"""`/judge stats [channel]`: the last 7 days' figures of one channel, for its members only.

A person sees the figures of a channel they are a member of; for any other channel relmon answers one sentence,
the same for a name it doesn't know, a channel it can't see and a channel the person isn't in.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime, timedelta

from slack_sdk import WebClient
from sqlalchemy.orm import Session

from bot.config_grammar import channel_id_of
from bot.on_demand_limits import take_report
from bot.replies import tell
from common.membership import MembershipCache, Refusal
from common.messages.verdicts import StatsRow, error_message, stats_message
from common.messages.versions import within_text
from common.replies import Asker
from common.reports.figures import team_scales
from common.reports.resolution import ResolutionRules, ResolutionStats, ResolutionTally
from common.reports.stats import JudgeStats, is_team_judge
from common.reports.tallies import is_answer
from common.reports.trust import Vote, comparability, precision
from common.reports.view_cache import REPORT_VIEW_KEY, cached, digest_of
from common.reports.weighted import Weights
from common.runtime import Runtime
from store import bot_groups
from store.channel_scores import ChannelJudgeStats, channel_judge_stats, judge_versions
from store.confirmations import disputed_counts
from store.exchanges import in_report_channel
from store.feedback import voted_scores
from store.sampling import sampling_counts
from store.stats_queries import data_version, prompt_numbers, stream_pair_rows

log = logging.getLogger("relmon.commands")

STATS_DAYS = 7
CHANNEL_NAMES_KEY = "relmon:channel_names"  # name -> ID of the channels relmon can see (conversations.list)
CHANNEL_NAMES_SECONDS = 600


def channel_reference(argument: str) -> tuple[str | None, str | None]:
    """(channel ID, channel name) from `<#C123|name>`, `C123` or `#name`; (None, None) for nothing."""
    argument = argument.strip()
    if not argument:
        return None, None
    channel_id = channel_id_of(argument)
    if channel_id is not None:
        return channel_id, None
    return None, argument.lstrip("#").lower()


def channel_named(runtime: Runtime, client: WebClient, name: str) -> str | None:
    """The channel of that name relmon can see, from conversations.list read at most once per CHANNEL_NAMES_SECONDS
    (kept in Redis): `/judge stats #unknown` again and again pages nothing."""
    names = runtime.redis.hgetall(CHANNEL_NAMES_KEY)
    if not names:
        names = {b"": b""}  # read, even when there is no channel: an empty list is cached too
        pages = client.conversations_list(types="public_channel,private_channel", limit=1000, exclude_archived=True)
        for page in pages:
            listed = [c for c in page.get("channels", []) if c.get("name") and c.get("id")]
            names.update({c["name"].lower().encode(): c["id"].encode() for c in listed})
        with runtime.redis.pipeline() as pipe:
            pipe.hset(CHANNEL_NAMES_KEY, mapping=names).expire(CHANNEL_NAMES_KEY, CHANNEL_NAMES_SECONDS).execute()
    found = names.get(name.encode()) if name else None
    return found.decode() if found else None


BOT_ARGUMENT = re.compile(r"bot:([A-Za-z0-9_.\-]{1,80})")


def stats_channel(
    runtime: Runtime, client: WebClient, membership: MembershipCache, argument: str, current_channel: str, user_id: str
) -> str:
    """The channel whose figures this person may see, or a Refusal. `bot:<name>`: the bot's exchanges sent to the
    ingest API in no Slack channel (store.bot_groups), whose figures (never words) anyone may see, as in App Home."""
    bot = BOT_ARGUMENT.fullmatch(argument.strip())
    if bot is not None:
        return bot_groups.key_of(bot.group(1))
    channel_id, name = channel_reference(argument)
    if channel_id is None and name is None:  # this conversation: a DM, or a channel relmon may not be in
        member = membership.is_member(client, current_channel, user_id)
        if member is None:
            raise Refusal("stats_not_here")
        if not member:
            raise Refusal("stats_refused")
        return current_channel
    if channel_id is None:
        channel_id = channel_named(runtime, client, name or "")
    # A non-member learns nothing, not even whether a private channel of that name exists.
    if channel_id is None or not membership.is_member(client, channel_id, user_id):
        raise Refusal("stats_refused")
    return channel_id


def show_stats(
    runtime: Runtime, client: WebClient, asker: Asker, membership: MembershipCache, *, argument: str
) -> None:
    assert asker.user_id is not None and asker.channel_id is not None
    try:
        take_report(runtime.redis, runtime.settings, asker.user_id)
        channel_id = stats_channel(runtime, client, membership, argument, asker.channel_id, asker.user_id)
        tell(client, asker, channel_stats_message(runtime, channel_id))
    except Refusal as refusal:
        tell(client, asker, error_message(refusal.code))
    except Exception:
        log.exception("stats failed")
        tell(client, asker, error_message("unavailable"))


def channel_stats_message(runtime: Runtime, channel_id: str) -> dict:
    """The last STATS_DAYS days' figures of a channel, as every member is shown them: built once per channel, rule
    and data version a minute (`common.reports.view_cache`), however many members ask how often."""
    rule = runtime.rules.for_channel(channel_id, runtime.settings)
    with runtime.db.session() as session:
        version = data_version(session)
    key = REPORT_VIEW_KEY + digest_of("stats", channel_id, version, repr(sorted(rule.thresholds.items())))
    return cached(runtime.redis, key, lambda: _build_stats(runtime, channel_id, rule))


def channel_resolution(runtime: Runtime, session, channel_id: str, since: datetime, now: datetime) -> ResolutionStats:
    """The resolution tiers of the channel's answers made since `since`, as of `now` (those still in their window
    are counted apart, as open)."""
    settings = runtime.settings
    rules = ResolutionRules(
        now,
        timedelta(seconds=settings.outcome_window_seconds),
        lambda channel: runtime.rules.for_channel(channel, settings).thresholds,
    )
    tally = ResolutionTally()
    for row in stream_pair_rows(session, since, now, channel=channel_id):
        if is_answer(row):
            tally.add(rules.of(row))
    return tally.stats(channel_id)


def _build_stats(runtime: Runtime, channel_id: str, rule) -> dict:
    now = datetime.now(UTC)
    since = now - timedelta(days=STATS_DAYS)
    with runtime.db.session() as session:
        stats = channel_judge_stats(session, channel_id, since, dict(rule.thresholds))
        judged, decided, below_one = sampling_counts(session, in_report_channel(channel_id), since)
        voted = voted_scores(session, channel_id, since)
        disputed = disputed_counts(session, channel_id, since)
        resolution = channel_resolution(runtime, session, channel_id, since, now)
        team = [s.judge for s in stats if is_team_judge(s.judge)]
        notes = version_notes_of(session, channel_id, since, team, runtime.settings.timezone)
    scales = team_scales(runtime.settings) if team else {}
    votes = [Vote(channel_id, judge, score, right > wrong) for judge, score, right, wrong in voted if right != wrong]
    agreed = {found.judge: found for found in precision(votes) if found.channel_id == channel_id}
    rows = [
        StatsRow(
            s.judge,
            s.judged,
            s.mean,
            s.low,
            rule.thresholds[s.judge],
            s.max_score,
            s.errors,
            precision=agreed.get(s.judge),
            disputed=disputed.get(s.judge, 0),
            distribution=s.distribution,
            weights=_weights(s),
            team=team_judge_stats(s, rule.thresholds[s.judge], scales.get(s.judge)) if s.judge in team else None,
            version_note=notes.get(s.judge),
        )
        for s in stats
    ]
    window = runtime.settings.outcome_window_seconds
    sampled = below_one or judged < decided  # sampling left answers out: the share judged is said
    share = judged / decided if sampled and decided else None
    return stats_message(
        channel_id, rows, days=STATS_DAYS, resolution=resolution, window_seconds=window, sampled_share=share
    )


def team_judge_stats(stats: ChannelJudgeStats, threshold: float, scale: tuple[int, int] | None) -> JudgeStats:
    """A team judge's figures in the digest's terms (common.reports.stats.JudgeStats: its pass rate is the share
    scored above the threshold), so `/judge stats` shows it as the digest and App Home do. `scale`: from its file
    (None when the file is gone: the scores seen)."""
    seen = stats.distribution
    low, high = scale or (min(seen, default=0), max(seen, default=0))
    return JudgeStats(
        judge=stats.judge,
        scored=stats.judged,
        nulls=stats.nulls,
        errors=stats.errors,
        mean=stats.mean,
        distribution={score: seen.get(score, 0) for score in range(low, high + 1)},
        low=stats.low,
        thresholds=(float(threshold),),
        weights=_weights(stats),
        scale_of_file=scale,
    )


def version_notes_of(
    session: Session, channel_id: str, since: datetime, judges: list[str], timezone: str | None
) -> dict[str, str]:
    """A note per judge whose prompt (or model) changed within the period: its rate mixes versions, said as the
    digest says it (common.messages.versions), the versions numbered as people know them ("v3")."""
    changes = {
        judge: comparability(judge, set(seen), set(), seen).change
        for judge, seen in judge_versions(session, channel_id, since, judges).items()
    }
    changed = {judge: change for judge, change in changes.items() if change is not None}
    numbers = prompt_numbers(session, changed) if changed else {}
    return {
        judge: within_text(judge, change, numbers.get(judge, {}), timezone, whose=f"the {STATS_DAYS} days'")
        for judge, change in changed.items()
    }


def _weights(stats: ChannelJudgeStats) -> Weights | None:
    """The judge's weights when sampled answers weigh differently (common.reports.weighted); None otherwise."""
    weights = Weights(
        n=stats.judged,
        total=stats.weight_total,
        squares=stats.weight_squares,
        hits=stats.weight_low,
        hit_squares=stats.weight_low_squares,
        scores={float(score): weight for score, weight in stats.weighted_distribution.items()},
        score_squares={float(score): weight for score, weight in stats.weight_squares_distribution.items()},
    )
    return weights if weights.unequal else None
