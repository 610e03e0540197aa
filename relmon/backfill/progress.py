"""What a long backfill shows while it runs: a progress bar on a terminal (rich), a log line every few seconds
otherwise."""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field

LOG_EVERY_SECONDS = 5.0


@dataclass
class Counters:
    """What a run has done so far; for `--dry-run`, what judging would take (`relmon.backfill.report.estimate`)."""

    messages: int = 0
    pairs: int = 0
    judged: int = 0
    skipped: int = 0
    left: int = 0  # left pending (budget spent, LLM unavailable): the next run judges them
    outcomes: dict[str, int] = field(default_factory=dict)  # each judging outcome (relmon.backfill.judging): why
    spend_usd: float = 0.0
    # What the conversations after the answers said (relmon.backfill.outcomes)
    with_signals: int = 0  # pairs whose thread gave any signal but `resolved`
    unresolved: int = 0  # of them, a failure signal: re-asked, taken over, escalated, a negative reaction
    references: int = 0  # a teammate answered after the bot: the pair's reference
    golden_items: int = 0  # questions the golden set got from those
    done_fraction: float = 0.0  # of the period's time span, over all channels
    # --dry-run: the pairs sampling lets in, their LLM calls and tokens (from the prompts' lengths), a few examples
    sampled: int = 0
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    examples: list[tuple[str, str, str, str]] = field(default_factory=list)  # channel, answer ts, question, answer
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, outcome: str) -> None:
        from relmon.backfill.judging import BUDGET_SPENT, JUDGED, LEFT

        with self.lock:
            self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
            if outcome == JUDGED:
                self.judged += 1
            elif outcome in (BUDGET_SPENT, LEFT):
                self.left += 1
            else:
                self.skipped += 1

    def outcome(self, recorded) -> None:
        """Count one pair's recorded outcome (relmon.backfill.outcomes.Recorded)."""
        from capture.outcomes import FAILURE_SIGNALS
        from store.signals import RESOLVED

        with self.lock:
            self.with_signals += bool(set(recorded.signals) - {RESOLVED})
            self.unresolved += bool(FAILURE_SIGNALS & set(recorded.signals))
            self.references += recorded.reference
            self.golden_items += recorded.golden_item is not None

    def seconds_left(self) -> float | None:
        elapsed = time.monotonic() - self.started
        if self.done_fraction <= 0.01:
            return None
        return elapsed * (1 - self.done_fraction) / self.done_fraction

    def line(self) -> str:
        left = self.seconds_left()
        eta = f"{left:.0f}s left" if left is not None else "time left unknown"
        return (
            f"{self.messages} messages read, {self.pairs} pairs found, {self.judged} judged, "
            f"${self.spend_usd:.4f} spent, {eta}"
        )


class Progress:
    """Redraw from a background thread; `stop` draws the last state."""

    def __init__(self, counters: Counters, *, tty: bool | None = None, label: str = "relmon backfill") -> None:
        self.counters, self.label = counters, label
        self.tty = sys.stderr.isatty() if tty is None else tty
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="backfill-progress", daemon=True)
        self._bar = None

    def __enter__(self) -> Progress:
        if self.tty:
            from rich.progress import BarColumn, TextColumn, TimeRemainingColumn
            from rich.progress import Progress as Bar

            name = TextColumn(self.label.removeprefix("relmon "))
            self._bar = Bar(name, BarColumn(), TextColumn("{task.description}"), TimeRemainingColumn(), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(self.counters.line(), total=1.0)
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self._draw()
        if self._bar is not None:
            self._bar.stop()

    def _loop(self) -> None:
        while not self._stop.wait(0.2 if self.tty else LOG_EVERY_SECONDS):
            self._draw()

    def _draw(self) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=self.counters.done_fraction, description=self.counters.line())
        else:
            print(f"{self.label}: {self.counters.line()}", file=sys.stderr, flush=True)
