"""What a history pair's conversation says, stored as the live path stores it: the pair's outcome window, the
signals its thread gives (capture.history_outcomes, over capture.outcomes' rules), a teammate's reply as the
pair's reference (judged by the correctness judge with it), the question in the golden set, and the window
closed with `resolved` when nothing said the answer failed. So `relmon gaps`, `topics`, `golden export` and the
digest read an imported thread as they read a live one. Nothing alerts: history is never alerted on."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from capture.history import FoundPair
from capture.history_outcomes import helpers, thread_outcome
from capture.outcome_watches import channel_members, support_team
from capture.outcomes import Watch, closing_signals, window_closes_at
from capture.pairing import LoggedMessage
from capture.redact import redact_if
from capture.teammates import HELPED_DAYS, StaffEvidence
from capture.text import message_text
from common.runtime import Runtime
from store import outcomes as store
from store.signals import HUMAN_TAKEOVER
from workers import golden_items
from workers.outcome_watching import judges_with_reference


@dataclass(frozen=True)
class Recorded:
    """What one pair's thread gave: its signals (with the window's closing one), a reference, a golden item."""

    signals: tuple[str, ...] = ()
    reference: bool = False
    golden_item: int | None = None


class _ProcessCache:
    """Where the live path caches the support team and the alert channel's members in Redis (ten minutes), one
    run keeps them in memory: an import or a backfill needs no Redis."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str, ex: int | None = None) -> None:
        self.values[key] = value


class HistoryOutcomes:
    """Records the outcome of each history pair of one run. Who is staff is decided as live (capture.teammates:
    RELMON_SUPPORT_TEAM, else the alert channel's members and the people who answered other threads of the
    channel lately), with the evidence of the history itself kept in memory for the run."""

    def __init__(
        self,
        runtime: Runtime,
        now: datetime,
        names: Callable[[str], str | None] | None = None,
        members: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        self.runtime, self.now, self.names = runtime, now, names
        self.members = members or {}  # channel -> its members, as an export lists them (used without Slack)
        settings = runtime.settings
        self.slack_usable = bool(settings.slack_bot_token)
        # Without a token (an import), no Slack call: user groups cannot be resolved, members cannot be listed.
        self.team_entries = [e for e in settings.support_team if self.slack_usable or not e.startswith("S")]
        self.cache = _ProcessCache()
        self._team: set[str] | None = None
        self.helped: dict[tuple[str, str], dict[str, float]] = {}  # (channel, user) -> thread key -> when

    @property
    def team(self) -> set[str]:
        if self._team is None:
            self._team = support_team(self.cache, self.runtime.slack, self.team_entries) if self.team_entries else set()
        return self._team

    def note_helpers(self, channel: str, thread: Sequence[LoggedMessage]) -> None:
        """Evidence of who helps others in the channel, noted as the live path notes it (note_helped). An import
        notes its channel's whole history before reading any pair; a backfill, the threads read so far."""
        if not thread:
            return
        for message in helpers(thread, thread[0].user):
            self.helped.setdefault((channel, str(message.user)), {})[message.thread_key] = message.seconds

    def evidence(self, channel: str, message: LoggedMessage) -> StaffEvidence:
        """Who is staff for a reply in a thread, as live (capture.outcome_watches.staff_evidence) decides it."""
        if self.team_entries:
            return StaffEvidence(team=frozenset(self.team))
        settings = self.runtime.settings
        alert_channel = self.runtime.rules.for_channel(channel, settings).alert_channel
        if not alert_channel:
            members: Collection[str] = ()
        elif self.slack_usable:
            members = channel_members(self.cache, self.runtime.slack, alert_channel)
        else:  # an import without Slack: the alert channel's members as the export lists them
            members = self.members.get(alert_channel, ())
        horizon = message.seconds - HELPED_DAYS * 86_400
        threads = self.helped.get((channel, str(message.user)), {})
        count = sum(1 for key, at in threads.items() if at >= horizon and key != message.thread_key)
        return StaffEvidence(alert_members=frozenset(members), helped={str(message.user): count})

    def record(self, channel: str, pair_id: int, found: FoundPair) -> Recorded:
        """Store what the pair's thread says (once: a second run finds the window and records nothing). The window,
        its signals and its close are one transaction: an import's quiet answer costs one round trip."""
        runtime, settings = self.runtime, self.runtime.settings
        window_seconds = settings.outcome_window_seconds
        if window_seconds <= 0 or not found.question_ts:
            return Recorded()
        closes = window_closes_at(found.answer_ts, window_seconds)
        thread_key = found.thread_ts or found.answer_ts
        topic = "\n".join(redact_if(settings.redact_pii, t) for t in (found.question_text, found.answer_text))
        watch = Watch(pair_id, found.answer_ts, thread_key, found.question_user, closes,
                      parts=tuple(p.ts for p in found.parts if p.ts != found.answer_ts), topic=topic)  # fmt: skip
        outcome = thread_outcome(
            watch,
            found.thread,
            found.parts,
            phrases=settings.escalation_phrases,
            evidence_of=lambda message: self.evidence(channel, message),
            team_mentions=self.team | set(settings.support_team),
            negative=settings.negative_reactions,
            positive=settings.positive_reactions,
        )
        with runtime.db.engine.begin() as connection:
            window = {"pair_id": pair_id, "channel_id": channel, "answer_ts": found.answer_ts}
            window |= {"thread_key": thread_key, "asker": found.question_user}
            if not store.insert_window(connection, **window, closes_at=datetime.fromtimestamp(closes, UTC)):
                return Recorded()
            for event in outcome.events:
                store.record_signals(connection, pair_id, event.names, at=datetime.fromtimestamp(event.at, UTC))
            if closes <= self.now.timestamp():  # the window is over: closed as the live sweep closes it
                closing = closing_signals(store.signal_names(connection, pair_id))
                store.close_window(connection, pair_id, now=datetime.fromtimestamp(closes, UTC), closing=closing)
            signals = tuple(sorted(store.signal_names(connection, pair_id)))
        referenced, item = False, None
        reference = outcome.reference
        if reference is not None and HUMAN_TAKEOVER in signals:
            text = redact_if(settings.redact_pii, message_text(reference.content, self.names)).strip()
            if text:
                with runtime.db.session() as session:
                    referenced = store.set_teammate_reference(
                        session, pair_id, text, judges_with_reference(runtime, session, pair_id)
                    )
                item = golden_items.collect_takeover(runtime, pair_id, reference.ts, link=self.slack_usable)
        return Recorded(signals, referenced, item)
