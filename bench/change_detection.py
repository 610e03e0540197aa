"""Change alerts against known truth: the Bernoulli CUSUM of `common.reports.change_detection` on simulated
channels, the detector exactly as the worker runs it (the same state, the same parameters, answers one at a time).

Prints, at RELMON_CHANGE_ALERT_FALSE_ALARMS' default (0.5 per channel-month) unless told otherwise:
- false alerts per channel-month on stable traffic (target ≤ 1): channels at baseline rates 5, 10, 15 and 20%,
  30 answers a day, each warmed up on its minimum history then run for many months; every alarm is a false one;
- answers needed to detect a doubling from 10% to 20% (target ≤ 200 at 30 answers a day): two months at 10%,
  then 20%; the answers from the change to the alarm, median and 90th percentile (a channel that alarmed before
  the change is drawn again, and counted).

    python -m bench.change_detection                      # 200 channels × 12 months per rate, 400 doublings
    python -m bench.change_detection --channels 50 --months 6 --doublings 100 --seed 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from common.reports.change_detection import ChangeParams, ChangeState, Outcome, observe

PER_DAY = 30
DAY = 86_400.0
RATES = (0.05, 0.10, 0.15, 0.20)


def stream(rng: random.Random, rate: float, answers: int, start: float) -> list[Outcome]:
    """`answers` answers failing at `rate`, evenly spread at PER_DAY a day from `start`."""
    gap = DAY / PER_DAY
    return [Outcome(rng.random() < rate, start + i * gap, i) for i in range(answers)]


def false_alarms(rate: float, channels: int, months: int, params: ChangeParams, rng: random.Random) -> float:
    """False alarms per channel-month at a stable `rate`, counted after the warm-up (the minimum history)."""
    alarms = 0
    for _ in range(channels):
        state = ChangeState()
        warm = stream(rng, rate, params.min_baseline, 0.0)
        for outcome in warm:
            observe(state, outcome, params)
        for outcome in stream(rng, rate, months * 30 * PER_DAY, warm[-1].at + DAY / PER_DAY):
            alarms += observe(state, outcome, params).alarm is not None
    return alarms / (channels * months)


def detection_delay(params: ChangeParams, rng: random.Random, before: float = 0.10, after: float = 0.20) -> int | None:
    """Answers from the change (60 days at `before`, then `after`) to the alarm; None when it alarmed before."""
    state = ChangeState()
    for outcome in stream(rng, before, 60 * PER_DAY, 0.0):
        if observe(state, outcome, params).alarm is not None:
            return None
    start = 60 * DAY
    for i, outcome in enumerate(stream(rng, after, 60 * PER_DAY, start), start=1):
        if observe(state, outcome, params).alarm is not None:
            return i
    return 60 * PER_DAY  # not within two months: counted as that long


def percentile(values: list[int], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--channels", type=int, default=200, help="simulated channels per baseline rate")
    parser.add_argument("--months", type=int, default=12, help="months each stable channel runs")
    parser.add_argument("--doublings", type=int, default=400, help="simulated 10% → 20% changes")
    parser.add_argument("--target", type=float, default=ChangeParams.false_alarms_per_month)
    parser.add_argument("--min-baseline", type=int, default=ChangeParams.min_baseline)
    parser.add_argument("--seed", type=int, default=47)
    args = parser.parse_args()
    params = ChangeParams(false_alarms_per_month=args.target, min_baseline=args.min_baseline)
    rng = random.Random(args.seed)
    started = time.perf_counter()
    print(
        f"Bernoulli CUSUM, p1 = 2·p0, target {params.false_alarms_per_month:g} false alarms per channel-month, "
        f"minimum history {params.min_baseline} answers, {PER_DAY} answers/day"
    )
    print(f"\nFalse alerts per channel-month on stable traffic ({args.channels} channels × {args.months} months each):")
    worst = 0.0
    for rate in RATES:
        found = false_alarms(rate, args.channels, args.months, params, rng)
        worst = max(worst, found)
        print(f"  baseline {rate:4.0%}: {found:.2f}")
    verdict = "ok" if worst <= 1 else "OVER TARGET"
    print(f"  worst {worst:.2f} (target ≤ 1): {verdict}")

    found: list[int] = []
    early = 0
    while len(found) < args.doublings:  # a channel that alarmed before the change is drawn again
        delay = detection_delay(params, rng)
        early += delay is None
        found += [delay] if delay is not None else []
    median, p90 = statistics.median(found), percentile(found, 0.9)
    print(
        f"\nAnswers to detect 10% → 20% ({len(found)} changes; {early} more channels alarmed falsely in the 60 days "
        "before it and were drawn again):"
    )
    print(
        f"  median {median:.0f} answers ({median / PER_DAY:.1f} days), "
        f"90th percentile {p90:.0f} ({p90 / PER_DAY:.1f} days)"
    )
    print(
        f"  target ≤ 200 answers: {'ok' if p90 <= 200 else 'median ok, p90 over' if median <= 200 else 'OVER TARGET'}"
    )
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
