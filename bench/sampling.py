"""What RELMON_SAMPLE saves and what it costs in certainty: simulated weeks of traffic where a share of the answers
is signalled (re-asked, taken over, 👎) and those fail far more often than the rest. Every signalled answer is
judged, the rest at each rate (workers.sampling's rules, its hashed points); the failure rate is then read three
ways: the rate of every answer (the truth of the week), the plain share of the judged answers, and the reweighted
one (common.reports.weighted: Hájek, Wilson at the estimator's effective n).

Prints, per rate: the share of answers judged (the LLM calls paid), the mean error of the plain and the weighted
rate against the week's truth, how often each one's 95% interval covers the traffic's rate, and the weighted
interval's mean width (against judging every answer).

    python -m bench.sampling                       # 300 weeks of 1,400 answers, rates 100%, 50%, 20%, 10%
    python -m bench.sampling --weeks 100 --per-day 500 --signalled 0.1
"""

from __future__ import annotations

import argparse

import numpy as np

from common.reports.intervals import proportion
from common.reports.weighted import Weights, weight_of, weighted_proportion
from workers import sampling


def week(rng: np.random.Generator, answers: int, signalled_share: float, signalled_fails: float, quiet_fails: float):
    signalled = rng.random(answers) < signalled_share
    failed = np.where(signalled, rng.random(answers) < signalled_fails, rng.random(answers) < quiet_fails)
    return failed, signalled


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weeks", type=int, default=300)
    parser.add_argument("--per-day", type=int, default=200)
    parser.add_argument("--signalled", type=float, default=0.15, help="share of answers signalled")
    parser.add_argument("--signalled-fails", type=float, default=0.7)
    parser.add_argument("--quiet-fails", type=float, default=0.08)
    parser.add_argument("--rates", default="1,0.5,0.2,0.1")
    args = parser.parse_args(argv)
    process = args.signalled * args.signalled_fails + (1 - args.signalled) * args.quiet_fails
    answers = 7 * args.per_day
    print(
        f"{args.weeks} weeks of {answers:,} answers; {args.signalled:.0%} signalled, failing "
        f"{args.signalled_fails:.0%};"
        f" the rest failing {args.quiet_fails:.0%}; traffic's failure rate {process:.1%}"
    )
    print(f"{'rate':>6} {'judged':>7} {'plain err':>10} {'weighted err':>13} {'plain cover':>12} "
          f"{'weighted cover':>15} {'width':>7}")  # fmt: skip
    for rate in (float(r) for r in args.rates.split(",")):
        rng = np.random.default_rng(47)
        judged_share, plain_err, weighted_err, plain_cover, weighted_cover, width = [], [], [], 0, 0, []
        for w in range(args.weeks):
            failed, signalled = week(rng, answers, args.signalled, args.signalled_fails, args.quiet_fails)
            weights, judged_failed = Weights(), 0
            for i, (bad, signal) in enumerate(zip(failed, signalled, strict=True)):
                probability = sampling.inclusion_probability(rate, source="capture", signalled=bool(signal))
                if sampling.chosen(sampling.sample_point(f"C{w}", f"{i}.000001"), probability):
                    weights.add(weight_of(probability), hit=bool(bad))
                    judged_failed += bool(bad)
            truth = failed.mean()
            plain = proportion(judged_failed, weights.n)
            found = weighted_proportion(weights)
            judged_share.append(weights.n / answers)
            plain_err.append(plain.value - truth)
            weighted_err.append(found.value - truth)
            plain_cover += plain.low <= process <= plain.high
            weighted_cover += found.low <= process <= found.high
            width.append(found.high - found.low)
        print(
            f"{rate:>6.0%} {np.mean(judged_share):>7.1%} {np.mean(plain_err):>+10.1%} {np.mean(weighted_err):>+13.2%} "
            f"{plain_cover / args.weeks:>12.0%} {weighted_cover / args.weeks:>15.0%} {np.mean(width):>7.1%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
