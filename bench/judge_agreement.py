"""How honest the judge-agreement figures are, by simulation with a known truth (docs/statistics.md, "A judge you
can check"): pure functions of `common.reports.kappa`, no services.

1. The failure rate corrected by the team's labels: weeks of answers whose true failure rate is known, judged by a
   biased judge (it misses half the failures and fails 5% of good answers); the share of weeks whose 95% interval
   covers the truth, for plain prediction-powered inference (`ppi_mean`), the one by the judge's verdict
   (`ppi_failure_rate`, what the digest shows) and the judge's own rate. Once with labels drawn at random, once
   with half of them votes on alerts (answers the judge failed).
2. The fall alert: pairs of weeks from one steady judge; the share called a significant fall (`kappa_fall`).

    python -m bench.judge_agreement                   # 1,000 weeks each
    python -m bench.judge_agreement --weeks 200
"""

from __future__ import annotations

import argparse

import numpy as np

from common.reports.kappa import cohen_kappa, kappa_fall, ppi_failure_rate, ppi_mean

TRUTH = 0.20  # the true failure rate
ANSWERS = 1000  # judged answers a week


def biased_week(rng: np.random.Generator, labels: int, *, alerts_first: bool):
    failed = rng.random(ANSWERS) < TRUTH
    judge = np.where(failed, rng.random(ANSWERS) < 0.5, rng.random(ANSWERS) < 0.05)
    if alerts_first:
        chosen = np.concatenate([np.flatnonzero(judge)[: labels // 2], np.flatnonzero(~judge)[: labels // 2]])
    else:
        chosen = rng.choice(ANSWERS, labels, replace=False)
    table = [[0, 0], [0, 0]]
    for i in chosen:
        table[0 if judge[i] else 1][0 if failed[i] else 1] += 1
    return judge, chosen, failed, table


def coverage(weeks: int, labels: int, *, alerts_first: bool, seed: int = 47) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    covered = {"plain PPI": 0, "PPI by verdict": 0, "judge's rate": 0}
    judge_rates = []
    for _ in range(weeks):
        judge, chosen, failed, table = biased_week(rng, labels, alerts_first=alerts_first)
        plain = ppi_mean(judge.astype(float), judge[chosen].astype(float), failed[chosen].astype(float))
        covered["plain PPI"] += plain.low is not None and plain.low <= TRUTH <= plain.high
        by_verdict = ppi_failure_rate(ANSWERS, int(judge.sum()), table).rate
        covered["PPI by verdict"] += by_verdict.low is not None and by_verdict.low <= TRUTH <= by_verdict.high
        rate = judge.mean()
        judge_rates.append(rate)
        half = 1.96 * np.sqrt(rate * (1 - rate) / ANSWERS)
        covered["judge's rate"] += rate - half <= TRUTH <= rate + half
    shares = {name: count / weeks for name, count in covered.items()}
    shares["judge's mean rate"] = float(np.mean(judge_rates))
    return shares


def false_falls(weeks: int, labels: int, seed: int = 3) -> float:
    rng = np.random.default_rng(seed)

    def week():
        team = rng.random(labels) < 0.3
        judge = np.where(team, rng.random(labels) < 0.8, rng.random(labels) < 0.1)
        both = [[(judge & team).sum(), (judge & ~team).sum()], [(~judge & team).sum(), (~judge & ~team).sum()]]
        return cohen_kappa([[int(cell) for cell in row] for row in both])

    falls = sum(bool(found and found.fell) for found in (kappa_fall(week(), week()) for _ in range(weeks)))
    return falls / weeks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weeks", type=int, default=1000)
    args = parser.parse_args()
    print(f"true failure rate {TRUTH:.0%}, {ANSWERS} judged answers a week, {args.weeks} weeks")
    for labels, alerts_first in ((150, False), (60, True)):
        how = "half of them votes on alerts" if alerts_first else "drawn at random"
        shares = coverage(args.weeks, labels, alerts_first=alerts_first)
        said = shares.pop("judge's mean rate")
        print(f"{labels} team labels, {how}: the judge says {said:.1%} on average")
        for name, share in shares.items():
            print(f"  95% interval covers the truth, {name}: {share:.1%}")
    for labels in (20, 40, 150):
        print(
            f"steady judge, {labels} labels a week: called a significant fall in {false_falls(args.weeks, labels):.1%}"
        )


if __name__ == "__main__":
    main()
