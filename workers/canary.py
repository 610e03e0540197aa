"""The canary: a labelled set of support answers re-judged weekly (before the digest) and on demand
(`relmon canary`). Each run stores the model the API answered with, the prompt version, exact agreement and
weighted kappa; when kappa fell by more than RELMON_CANARY_DROP since the last run, or another model answers
under the configured name, relmon posts "the judge moved" in the alert channel, once per run (the one post-once
protocol, keyed by the run).

A team's judge with a labelled file (`labels = "NAME.jsonl"` in its judges.d file) is re-judged the same way, in a
run of its own: its agreement is stored, compared with its own last run, and reported beside the seed judge's."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from common.llm import llm_client_for
from common.post_once import PostOnce, Receipts
from common.reports.figures import canary_point
from common.reports.trust import CanaryPoint
from common.runtime import Runtime
from judges import TransientLLMError, get_judge
from judges.base import Judge
from judges.labels import SUPPORT_CANARY, LabelError, read_labels
from judges.metrics import agreement
from judges.names import RELEVANCY
from store import canary as canary_store
from store.judge_catalog import judge_catalog
from store.models import CanaryRun

log = logging.getLogger("relmon.canary")

CANARY_JUDGE = RELEVANCY
CANARY_METADATA_EVENT = "relmon_canary"
# A degradation alert says the judge moved when a canary run this recent said so.
RECENT_CANARY = timedelta(days=7)


def judge_moved(
    previous: CanaryPoint | None, *, kappa: float | None, model: str | None, configured: str | None, drop: float
) -> str | None:
    """Why the judge moved since the previous run, or None: kappa fell by more than `drop`, or the API answered
    with another model under the same configured name (a provider's silent upgrade)."""
    if previous is None:
        return None
    reasons = []
    if previous.model and model and previous.model != model and previous.configured_model == configured:
        reasons.append(f"`{configured}` is now answered by `{model}` (was `{previous.model}`)")
    if previous.kappa is not None and kappa is not None and previous.kappa - kappa > drop:
        reasons.append(f"kappa fell from {previous.kappa:.2f} to {kappa:.2f}")
    return "; ".join(reasons) or None


def moved_text(run: CanaryRun) -> str:
    return (
        f":warning: *The judge moved.* The canary ({run.examples} labelled answers, {run.judge}) was re-judged: "
        f"{run.moved}. Kappa {_num(run.kappa)}, exact agreement {_num(run.exact_agreement)}. Low scores and "
        "degradation alerts this week may reflect the judge rather than the bot."
    )


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


@dataclass(frozen=True)
class Measured:
    """What a run measured: the columns of its `canary_runs` row (store.models.CanaryRun) by the same names."""

    examples: int
    scored: int
    exact_agreement: float | None
    kappa: float | None
    model: str | None
    prompt_version: str


def measure(runtime: Runtime, judge: Judge | None = None, labels_file: Path | None = None) -> Measured:
    """Judge every labelled answer afresh (a client without a verdict cache; the SDK retries transient errors): the
    seed canary by default, or a team's judge with its labelled file."""
    settings = runtime.settings
    judge = judge or get_judge(CANARY_JUDGE)
    labels = read_labels(labels_file or settings.canary_file or SUPPORT_CANARY, judge)
    client = llm_client_for(settings, redis_client=runtime.redis, max_retries=2, cache_size=0)
    human, judged, models = [], [], []
    for label in labels:
        try:
            verdict = judge.evaluate(client, label.question, label.answer, label.reference)
        except TransientLLMError:
            continue
        if verdict.model:
            models.append(verdict.model)
        if verdict.status == "ok" and verdict.score is not None and label.human is not None:
            human.append(label.human)
            judged.append(int(verdict.score))
    scale = list(range(judge.min_score, judge.max_score + 1))
    stats = agreement(human, judged, scale) if human else None
    model = max(set(models), key=models.count) if models else None
    return Measured(
        len(labels),
        len(human),
        stats.exact if stats else None,
        stats.kappa if stats else None,
        model,
        judge.prompt_version,
    )


def run(
    runtime: Runtime, now: datetime | None = None, judge: Judge | None = None, labels_file: Path | None = None
) -> int:
    """Measure and store one run (the seed canary's, or a team judge's with its labels); returns its id."""
    now = now or datetime.now(UTC)
    settings = runtime.settings
    name = judge.name if judge is not None else CANARY_JUDGE
    measured = measure(runtime, judge, labels_file)
    with runtime.db.session() as session:
        # Compared with its own last run: a team judge's kappa is not the seed's.
        previous = canary_store.recent_runs(session, limit=1, judges=[name])
        before = canary_point(previous[0]) if previous else None
        moved = judge_moved(
            before,
            kappa=measured.kappa,
            model=measured.model,
            configured=settings.judge_model,
            drop=settings.canary_drop,
        )
        stored = canary_store.record_run(
            session,
            judge=name,
            configured_model=settings.judge_model,
            moved=moved[:200] if moved else None,
            created_at=now,
            **asdict(measured),
        )
        run_id = stored.id
    log.info(
        "canary run",
        extra={"canary_run": run_id, "judge": name, "kappa": measured.kappa, "model": measured.model, "moved": moved},
    )
    return run_id


def run_team(runtime: Runtime, now: datetime | None = None) -> list[int]:
    """A run for each team judge with a labelled file; one whose file cannot be read is logged and left out (the
    others still run). Returns the runs' ids."""
    runs = []
    for judge in judge_catalog(runtime.settings).custom.values():
        path = judge.spec.labels_path
        if path is None:
            continue
        try:
            runs.append(run(runtime, now, judge, path))
        except LabelError as error:
            log.warning("canary: a team judge's labels cannot be read: left out", extra={"judge": judge.name,
                        "problem": str(error)[:300]})  # fmt: skip
    return runs


def announce(runtime: Runtime, run_id: int) -> str:
    """Post "the judge moved" for this run once (a retry finds the receipt or the marked message)."""
    channel = runtime.settings.alert_channel
    with runtime.db.session() as session:
        found = session.get(CanaryRun, run_id)
        if found is None:
            return "missing"
        session.expunge(found)
    if not found.moved:
        return "steady"
    if not channel:
        log.warning("the judge moved; no alert channel to say so", extra={"canary_run": run_id})
        return "no_alert_channel"
    once = PostOnce(runtime.slack, Receipts(runtime.redis), f"canary:{run_id}", CANARY_METADATA_EVENT)
    since = found.created_at if found.created_at.tzinfo else found.created_at.replace(tzinfo=UTC)
    if once.earlier(channel, since - timedelta(minutes=1), look=once.attempted()) is not None:
        return "posted"
    once.post(channel, text=moved_text(found))
    return "posted"
