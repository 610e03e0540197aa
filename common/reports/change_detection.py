"""Whether a group's failure rate rose above its own baseline: a Bernoulli CUSUM, run one answer at a time.

Pure: plain outcomes in order (failed or not, when, which answer), the state carried from one call to the next as a
plain dataclass (stored as JSON by the worker: `workers.alerts.changes`), no clock of its own. docs/statistics.md
("Change alerts") gives the method and the figures of bench/change_detection.py.

The chart is Reynolds & Stoumbos' Bernoulli CUSUM (J. Quality Technology 31(1), 1999): the log-likelihood ratio of
"failure rate p1" against "baseline p0" summed over answers, reset at zero (Page, Biometrika 41, 1954). p1 = 2·p0
(a doubling), the increments scaled to whole numbers (a failure +m−1, a pass −1, m = round(1/γ)), so the chart is
a Markov chain on 0..H−1 and its in-control average run length (answers until a false alarm) is computed exactly
(Brook & Evans, Biometrika 59, 1972). H is the smallest limit whose run length is at least the group's answers per
month divided by the false-alarm target: about that many false alarms per group-month on stable traffic.

The baseline is the group's own trailing history: the answers of every stretch the chart came back to zero from
(no change there), exponentially forgotten over about `baseline_window` answers. The stretch the chart is in now
is pending: when it alarms, it is the change (its start is the change point, Page's estimate: the answer after
the chart last stood at zero). One alarm per episode: the episode ends (re-arms) when a recovery chart (the
log-likelihood ratio of p0 against 1.5·p0, reset at zero) reaches the alarm's own threshold: as sure that the rate
is back as the alarm was that it rose. The stretch since the change point is not folded into the baseline.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from functools import lru_cache

P0_FLOOR = 0.01  # a baseline under 1% failed is charted as 1% (a doubling of nothing is no alarm to write)
P0_CEILING = 0.45  # above this a doubling leaves the scale; charted as 45%
LIMIT_MOST = 20_000  # the chart's limit is searched up to this (at the floor and the longest run length: about 700)
# An episode ends when the answers favour the baseline over 1.5 times it as strongly as the alarm favoured a doubling:
# a rate still well above the baseline (1.7 times, say) never re-arms it by chance, one at the baseline does in
# about 400 answers at 10% (about two weeks at 30 a day).
RECOVERY_RATIO = 1.5
# The longest run length a chart is drawn for (a group of 100,000 answers a month at the default target): beyond it a
# busier group gets a few more false alarms per month than its target rather than an ever longer chart.
RUN_LENGTH_MOST = 200_000.0
EXAMPLES = 5  # failed answers an alarm keeps as its examples
DAY_SECONDS = 86_400.0
MONTH_DAYS = 30.0
# A group's traffic is measured over at least this many days (a backfill's burst is not a month's traffic).
TRAFFIC_MIN_DAYS = 7.0


@dataclass(frozen=True)
class Outcome:
    """One judged answer of the group: failed or not, when (epoch seconds), which one (an id, for examples)."""

    failed: bool
    at: float
    ref: int = 0


@dataclass(frozen=True)
class ChangeParams:
    """How sure an alarm must be: false alarms per group-month on stable traffic (the target), answers of own
    history before the chart starts, and about how many answers the baseline remembers."""

    false_alarms_per_month: float = 0.5
    min_baseline: int = 200
    baseline_window: int = 1_000
    guard: float = 1.0  # standard errors added to the baseline estimate (`guarded_rate`)


@dataclass(frozen=True)
class Chart:
    """The chart for one baseline: its rounded p0, the scaled failure weight m, the limit H, its run length."""

    p0: float
    weight: int
    limit: int
    arl: float


@dataclass
class ChangeState:
    """Everything the detector carries between calls (JSON-able: `as_json` / `of_json`)."""

    base_failed: float = 0.0  # the baseline's failures and answers, exponentially forgotten
    base_n: float = 0.0
    base_count: int = 0  # answers folded into the baseline, not forgotten (the minimum history counts these)
    seen: int = 0  # every answer observed
    first_at: float | None = None
    last_at: float | None = None
    chart: int = 0  # the CUSUM, in units of a pass's −1
    p0: float | None = None  # the baseline the chart runs on: fixed while it is above zero
    run_start: float | None = None  # the first answer after the chart last stood at zero
    run_n: int = 0
    run_failed: int = 0
    run_examples: list[int] = field(default_factory=list)  # the newest failed answers of the run
    alerted: bool = False  # an episode is open: alarmed, not yet back to baseline
    recovery: float = 0.0  # while alerted: the recovery chart, evidence that the rate is back at the baseline
    episodes: int = 0

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def of_json(cls, data: dict | None) -> ChangeState:
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass(frozen=True)
class Alarm:
    """A change: the baseline rate, and since the change point its answers, failures and examples."""

    episode: int
    baseline: float  # the baseline failure rate (unrounded estimate)
    baseline_n: int  # answers of history it was estimated from
    since: float  # epoch seconds of the change point's first answer
    n: int
    failed: int
    examples: tuple[int, ...]
    at: float  # the answer that raised it

    @property
    def rate(self) -> float:
        return self.failed / self.n if self.n else 0.0


@dataclass(frozen=True)
class Step:
    """What one answer did: an alarm raised, or an episode ended (re-armed)."""

    alarm: Alarm | None = None
    rearmed: bool = False
    ended: float | None = None  # when re-armed: the change point of the episode that ended (its alarm's `since`)


def weight_of(p0: float) -> int:
    """m = round(1/γ), γ = ln((1−p0)/(1−p1)) / ln(p1(1−p0)/(p0(1−p1))) with p1 = 2·p0 (Reynolds & Stoumbos)."""
    p1 = 2 * p0
    b = math.log((1 - p0) / (1 - p1))
    a = math.log(p1 * (1 - p0) / (p0 * (1 - p1)))
    return max(2, round(a / b))


def run_length(p: float, weight: int, limit: int) -> float:
    """The average number of answers from a chart at zero until it reaches `limit`, when each fails with
    probability `p` (a failure moves it +weight−1, a pass −1, never under zero): Brook & Evans' Markov chain,
    (I − Q)·L = 1 over the states 0..limit−1, L[0]."""
    import numpy as np  # on first use: the worker's alert path imports this module, most of it never charts
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import spsolve

    # I − Q has at most three entries a row (stay, up, down): a sparse solve keeps a limit of a thousand cheap.
    states = np.arange(limit)
    up = states + weight - 1
    inside = up < limit
    rows = np.concatenate([states, states[inside], states])
    columns = np.concatenate([states, up[inside], np.maximum(states - 1, 0)])
    values = np.concatenate([np.ones(limit), np.full(int(inside.sum()), -p), np.full(limit, -(1 - p))])
    matrix = coo_matrix((values, (rows, columns)), shape=(limit, limit)).tocsc()  # duplicates (0 → 0) are summed
    lengths = spsolve(matrix, np.ones(limit))
    return float(lengths[0])


@lru_cache(maxsize=4096)
def chart_for(p0: float, target_arl: float) -> Chart:
    """The smallest limit whose in-control run length is at least `target_arl` (run length grows with the limit:
    doubled, then halved back). `p0` comes rounded (`rounded_p0`) so that a few charts serve every baseline."""
    weight = weight_of(p0)
    low, high = 1, weight
    while run_length(p0, weight, high) < target_arl:
        low, high = high, high * 2
        if high > LIMIT_MOST:
            raise ValueError(f"no chart limit reaches a run length of {target_arl:g} at p0={p0:g}")
    while low < high:
        middle = (low + high) // 2
        if run_length(p0, weight, middle) >= target_arl:
            high = middle
        else:
            low = middle + 1
    return Chart(p0, weight, high, run_length(p0, weight, high))


def rounded_p0(estimate: float) -> float:
    """The baseline the chart is drawn for: within the floor and the ceiling, to 0.5 percentage point (rounded
    up: a slightly high baseline errs towards fewer false alarms)."""
    clipped = min(max(estimate, P0_FLOOR), P0_CEILING)
    return math.ceil(clipped * 200 - 1e-9) / 200


def answers_per_month(state: ChangeState) -> float:
    """The group's traffic, from the answers seen and the span they came in (at least TRAFFIC_MIN_DAYS)."""
    if state.first_at is None or state.last_at is None:
        return 0.0
    days = max((state.last_at - state.first_at) / DAY_SECONDS, TRAFFIC_MIN_DAYS)
    return state.seen / days * MONTH_DAYS


def target_run_length(state: ChangeState, params: ChangeParams) -> float:
    """Answers between false alarms that make `false_alarms_per_month`, rounded up to two significant figures (the
    charts are cached by it)."""
    wanted = min(max(answers_per_month(state) / params.false_alarms_per_month, 100.0), RUN_LENGTH_MOST)
    scale = 10 ** (math.floor(math.log10(wanted)) - 1)
    return math.ceil(wanted / scale) * scale


def baseline_rate(state: ChangeState) -> float | None:
    return state.base_failed / state.base_n if state.base_n > 0 else None


def guarded_rate(state: ChangeState, params: ChangeParams) -> float:
    """The baseline the chart is drawn for: the estimate plus `guard` standard errors. A baseline estimated a little
    low is the common cause of false alarms (Jones, Champ & Rigdon, Technometrics 46, 2004): the guard costs little
    once the history is long and keeps a young group's alarms near the target."""
    rate = baseline_rate(state) or 0.0
    return rate + params.guard * math.sqrt(max(rate, P0_FLOOR) * (1 - rate) / max(state.base_n, 1.0))


def ready(state: ChangeState, params: ChangeParams) -> bool:
    """Enough own history for a baseline: the chart runs only then."""
    return state.base_count >= params.min_baseline


def _fold(state: ChangeState, failed: int, n: int, params: ChangeParams) -> None:
    """Answers judged to belong to the baseline join it; older ones fade (about `baseline_window` remembered)."""
    keep = (1 - 1 / params.baseline_window) ** n
    state.base_failed = state.base_failed * keep + failed
    state.base_n = state.base_n * keep + n
    state.base_count += n


def _reset_run(state: ChangeState) -> None:
    state.chart, state.run_start, state.run_n, state.run_failed, state.run_examples = 0, None, 0, 0, []


def observe(state: ChangeState, outcome: Outcome, params: ChangeParams) -> Step:
    """Feed one answer (in order); the state is updated in place. Cheap: the chart for a baseline is cached."""
    state.seen += 1
    # Answers may come a little out of order (judged late): the span is the earliest to the latest seen.
    state.first_at = outcome.at if state.first_at is None else min(state.first_at, outcome.at)
    state.last_at = outcome.at if state.last_at is None else max(state.last_at, outcome.at)
    if not ready(state, params):
        _fold(state, int(outcome.failed), 1, params)
        return Step()
    if state.chart == 0 and not state.alerted:  # a new stretch: charted against the baseline as it is now
        state.p0 = guarded_rate(state, params)
    chart = chart_for(rounded_p0(state.p0 or 0.0), target_run_length(state, params))
    if state.run_n == 0:
        state.run_start = outcome.at
    state.run_n += 1
    if outcome.failed:
        state.run_failed += 1
        state.run_examples = [*state.run_examples, outcome.ref][-EXAMPLES:]
    if state.alerted:
        # The recovery chart: the log-likelihood ratio of the baseline against 1.5 times it, reset at zero.
        p0, back = chart.p0, RECOVERY_RATIO * chart.p0
        step = math.log(p0 / back) if outcome.failed else math.log((1 - p0) / (1 - back))
        state.recovery = max(0.0, state.recovery + step)
        if state.recovery >= chart.limit * math.log((1 - p0) / (1 - 2 * p0)):  # the alarm's own threshold h
            ended = state.run_start
            state.alerted, state.recovery = False, 0  # back to baseline: the stretch since is not the baseline's
            _reset_run(state)
            return Step(rearmed=True, ended=ended)
        return Step()
    state.chart = max(0, state.chart + (chart.weight if outcome.failed else 0) - 1)
    if state.chart == 0:
        _fold(state, state.run_failed, state.run_n, params)  # no change in that stretch: it is the baseline's
        _reset_run(state)
        return Step()
    if state.chart < chart.limit:
        return Step()
    state.alerted = True
    state.episodes += 1
    alarm = Alarm(
        episode=state.episodes,
        baseline=baseline_rate(state) or 0.0,
        baseline_n=state.base_count,
        since=state.run_start or outcome.at,
        n=state.run_n,
        failed=state.run_failed,
        examples=tuple(reversed(state.run_examples)),
        at=outcome.at,
    )
    state.chart, state.recovery = chart.limit, 0
    return Step(alarm=alarm)


def feed(state: ChangeState, outcomes: list[Outcome], params: ChangeParams) -> list[Step]:
    """Feed answers in order; the steps that did something (an alarm, a re-arm)."""
    return [step for outcome in outcomes if (step := observe(state, outcome, params)).alarm or step.rearmed]
