"""`relmon regress CANDIDATES`: the answers a new version of the bot gave to the golden questions, judged against the
expected answers (golden.regress), compared with a baseline run, reported for people and for CI.

Exit status: 0 good enough; 1 a regression, and only that: the pass rate is below --min-pass, or an item that passed
in the baseline now fails; 2 a usage or input problem: nothing judged, golden items missing from the candidates file
(judged and reported without them; not with --allow-missing, and 1 wins when the judged items regressed), or a report
file that cannot be written; 3 the LLM stayed unreachable or the daily budget is spent (the next run resumes), or the
database is unreachable. The last line printed says why (relmon.regress.verdict). The report files are written
before anything else can fail: the database's copy, the terminal, the exit status."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from capture.redact import redact_if
from golden.candidates import Candidate, CandidatesProblem, read_candidates
from golden.regress import CHECKS, MISSING, item_result, mark_changes, summarize
from judges import get_judge
from judges.base import Judge
from judges.names import JUDGE_NAMES
from judges.safe_text import json_text
from relmon.private_items import text_shown
from relmon.regress.judging import ItemCheck, Judging, StopRun, checks_of, seed_judge_of
from relmon.regress.junit import junit_xml
from relmon.regress.report import Terminal, print_regress_report, report_json
from relmon.regress.verdict import decide
from relmon.regress.views import ItemView, item_view
from store import golden as golden_store
from store import regress_runs
from store.db import Database
from store.golden_models import GoldenItem
from store.settings import Settings


def _fail(message: str, code: int) -> int:
    print(f"relmon regress: {message}", file=sys.stderr)
    return code


def input_sha(candidates: list[Candidate], items: dict[int, GoldenItem], model: str, team: Sequence[Judge] = ()) -> str:
    """What makes two runs the same run: the answers, what they are judged against, the model, the prompts and the
    team judges asked for (each by name and prompt version)."""
    digest = hashlib.sha256(model.encode())
    for name in JUDGE_NAMES:
        digest.update(get_judge(name).prompt_version.encode())
    for judge in team:
        digest.update(f"\0{judge.name}:{judge.prompt_version}".encode())
    for candidate in candidates:
        item = items[candidate.item_id]
        for part in (str(candidate.item_id), candidate.answer, item.question, item.context or "", item.expected or ""):
            encoded = part.encode()
            digest.update(len(encoded).to_bytes(8, "big") + encoded)
    return digest.hexdigest()


def _baseline(database: Database, wanted: str | None, run_id: int) -> tuple[dict[str, str] | None, Any]:
    """(item id → outcome, what it was) of the baseline: `none`, a run id, an earlier --json file, or by default
    the last finished run before this one."""
    if wanted == "none":
        return None, None
    if wanted and any(c.isdigit() and not c.isascii() for c in wanted):
        raise StopRun(f"--baseline {wanted!r}: write a run id in the digits 0-9", 2)
    if wanted and not (wanted.isascii() and wanted.isdigit() and len(wanted) <= 18):
        try:
            report = json.loads(Path(wanted).read_text(encoding="utf-8"))
            return _outcomes(report["items"]), wanted
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise StopRun(f"--baseline {wanted}: not a report of relmon regress ({error})", 2) from None
        except RecursionError:
            raise StopRun(f"--baseline {wanted}: JSON nested too deeply: not a report of relmon regress", 2) from None
    with database.reading() as session:
        run = regress_runs.finished_run(session, int(wanted) if wanted else None, before=None if wanted else run_id)
        if run is None:
            if wanted:
                raise StopRun(f"--baseline {wanted}: no finished run with that id", 2)
            return None, None
        report = run.report or {}
    return _outcomes(report.get("items", [])), run.id


def _outcomes(lines: list[dict[str, Any]]) -> dict[str, str]:
    """Item id → outcome of a report's items; one missing from that run was not run: not in its baseline."""
    return {str(line["id"]): line["outcome"] for line in lines if line["outcome"] != MISSING}


def team_judges(names: Sequence[str], settings: Settings) -> list[Judge]:
    """The team's judges `--judge` names (judges.d), each once; a StopRun (exit 2) naming the problem otherwise."""
    from relmon.judge_cli import UsageError, judge_named

    judges: list[Judge] = []
    for name in dict.fromkeys(names):
        if name in JUDGE_NAMES:
            raise StopRun(f"--judge {name}: a seed judge, checked in every run already; name one of the team's", 2)
        try:
            judges.append(judge_named(name, settings))
        except UsageError as error:
            raise StopRun(f"--judge {name}: {error}", 2) from None
    return judges


def run_regress(args, settings: Settings, only_items: Collection[int] | None = None) -> int:
    """`only_items`: judge only these golden items (a topic's, `relmon topics fixed --candidates`), the file's
    other answers left out and the set's other items not missed."""
    path = Path(args.candidates)
    if not 0.0 <= args.min_pass <= 1.0:
        return _fail(f"--min-pass is a fraction between 0 and 1, not {args.min_pass}", 2)
    try:
        args.team = team_judges(getattr(args, "judge", None) or [], settings)
    except StopRun as stop:
        return _fail(str(stop), stop.code)
    database = Database(settings.resolved_database_url, pool_size=max(2, args.threads))
    try:
        database.migrate()
        with database.reading() as session:
            items = {item.id: item for item in golden_store.active_items(session, None)}
            session.expunge_all()
        try:
            with path.open("rb") as handle:
                candidates = read_candidates(handle, {i: item.question for i, item in items.items()})
        except OSError as error:
            return _fail(f"cannot read {path}: {error.strerror}", 2)
        except CandidatesProblem as problem:
            return _fail(f"{path}: nothing judged:\n{problem}", 2)
        if only_items is not None:
            items = {item_id: item for item_id, item in items.items() if item_id in only_items}
            candidates = [candidate for candidate in candidates if candidate.item_id in items]
            if not candidates:
                return _fail(f"{path}: no answer to any of the topic's {len(items)} test-set items", 2)
        lacking = [f"line {c.line}: item {c.item_id} has no expected answer yet (write it in Slack or import one)"
                   for c in candidates if not items[c.item_id].expected]  # fmt: skip
        if lacking:
            return _fail(f"{path}: nothing judged:\n" + "\n".join(lacking), 2)
        return _judge_and_report(args, settings, database, path, candidates, items)
    except StopRun as stop:
        return _fail(str(stop), stop.code)
    finally:
        database.dispose()


def _not_run(candidates: list[Candidate], items: dict[int, GoldenItem]) -> tuple[list[GoldenItem], int]:
    """The golden items the file has no answer for, by id: those with an expected answer (missing: the run is
    incomplete without them), and how many have none yet (they cannot be judged, whatever the file holds)."""
    answered = {candidate.item_id for candidate in candidates}
    left = [item for item_id, item in sorted(items.items()) if item_id not in answered]
    return [item for item in left if item.expected], sum(1 for item in left if not item.expected)


def _view(
    item: GoldenItem, answer: str | None, verdicts, settings: Settings, include_private: bool, checks=CHECKS
) -> ItemView:
    # The reports quote the texts: redacted like every export when RELMON_REDACT_PII is on (imported ones too);
    # a private channel's withheld unless --include-private.
    return item_view(str(item.id), (item.question, item.expected, answer), verdicts,
                     shown=text_shown(item.channel_is_private, include_private=include_private),
                     redact=lambda text: redact_if(settings.redact_pii, text) or "", checks=checks)  # fmt: skip


def _judge_and_report(args, settings, database, path, candidates, items) -> int:
    from relmon.backfill.command import backfill_llm

    try:
        llm = backfill_llm(settings)
    except ValueError as error:  # no API key for OpenAI: a setup problem, said before anything starts
        return _fail(str(error), 2)
    team = {judge.name: judge for judge in args.team}
    sha = input_sha(candidates, items, settings.judge_model, args.team)
    with database.session() as session:
        run = regress_runs.latest_of(session, sha, finished_too=not args.fresh)
        run_id = run.id if run is not None else regress_runs.start(session, sha, path.name, len(candidates))
        stored = regress_runs.stored_checks(session, run_id)
    # The baseline is read before anything is judged: a --baseline that is wrong is an input error that costs nothing.
    baseline = _baseline(database, args.baseline, run_id)
    if run is not None:
        done = sum(1 for _charged, verdict in stored.values() if verdict is not None)
        what = "resuming" if run.finished_at is None else "the same answers as"
        total = (len(CHECKS) + len(team)) * len(candidates)
        print(f"relmon regress: {what} run {run_id} ({done} of {total} checks kept)", file=sys.stderr)
    every: list[ItemCheck] = []
    for candidate in candidates:
        item = items[candidate.item_id]
        every += checks_of(str(item.id), item.question, item.context, candidate.answer, item.expected, list(team))
    todo = [(check, stored.get((check.item_key, check.name), (False, None))[0]) for check in every
            if stored.get((check.item_key, check.name), (False, None))[1] is None]  # fmt: skip
    console = Console(stderr=True)
    columns = (TextColumn("judging"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, disable=not console.is_terminal) as progress:
        task = progress.add_task("checks", total=len(every), completed=len(every) - len(todo))
        judging = Judging(database, llm, run_id, settings.daily_budget, args.threads,
                          on_done=lambda n: progress.advance(task, n),
                          judge_of=lambda name: team[name] if name in team else seed_judge_of(name))  # fmt: skip
        if args.batch:
            judging.batch(todo, settings.batch_poll_seconds)
        else:
            judging.online(todo)
    with database.reading() as session:
        stored = regress_runs.stored_checks(session, run_id)
    return _report(args, settings, database, path, run_id, candidates, items, stored, baseline)


def _report(args, settings, database, path, run_id, candidates, items, stored, baseline) -> int:
    """The judged run's outcomes and verdict, written to the report files, the database and the terminal; its exit
    status. `baseline`: (item id → outcome, what it was) as _baseline read it."""
    baseline, baseline_run = baseline
    team = {judge.name: float(judge.threshold) for judge in args.team}
    checks = (*CHECKS, *team)
    results, views, stored_views = [], {}, {}
    for candidate in candidates:
        key, item = str(candidate.item_id), items[candidate.item_id]
        verdicts = {name: stored.get((key, name), (False, None))[1] or {} for name in checks}
        results.append(item_result(key, verdicts, relevancy_threshold=settings.threshold, team=team))
        views[key] = _view(item, candidate.answer, verdicts, settings, args.include_private, checks)
        stored_views[key] = _view(item, candidate.answer, verdicts, settings, False, checks)
    mark_changes(results, baseline)
    summary = summarize(results, team)
    missing_items, unready = _not_run(candidates, items)
    missing = [_view(item, None, None, settings, args.include_private) for item in missing_items]
    verdict = decide(summary, args.min_pass, missing=len(missing), allow_missing=args.allow_missing,
                     baseline=baseline_run)  # fmt: skip
    details = {"run_id": run_id, "source": path.name, "model": settings.judge_model, "baseline_run": baseline_run,
               "min_pass": args.min_pass, "allow_missing": args.allow_missing}  # fmt: skip
    report = report_json(results, summary, views, missing, verdict, texts=True, **details)
    junit = junit_xml(results, summary, views, missing, verdict, source=path.name, allow_missing=args.allow_missing)
    # The files first: CI reads them whatever happens next (the database, the terminal, the exit status).
    problem = _write_reports(args, report, junit)
    # The stored copy is the next run's baseline: outcomes by id; never a private channel's text, and none of the
    # answers or the judges' words (the run's checks hold those, and forgetting scrubs them there).
    stored_missing = [_view(item, None, None, settings, False) for item in missing_items]
    stored_report = report_json(results, summary, stored_views, stored_missing, verdict, texts=False, **details)
    with database.session() as session:
        regress_runs.finish_run(session, run_id, passed=summary.passed, pass_rate=summary.pass_rate,
                                report=stored_report)  # fmt: skip
    try:
        print_regress_report(Terminal(), results, summary, views, missing, verdict, source=path.name, unready=unready)
    except OSError as error:  # a closed pipe, a full disk: the report files hold it all; the exit status stands
        print(f"relmon regress: the report could not be printed ({error.strerror or error})", file=sys.stderr)
        print(f"relmon regress: {verdict.line}", file=sys.stderr)
        _stdout_gone()
    if problem is not None:
        return _fail(problem, 2)
    return verdict.code


def _stdout_gone() -> None:
    """Point a standard output that failed at /dev/null, so that Python's own flush at exit does not fail again
    (and exit 120)."""
    with contextlib.suppress(OSError, ValueError):  # not a file descriptor (a test's capture): nothing to flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _write_reports(args, report: dict[str, Any], junit: bytes) -> str | None:
    """Write --json and --junit (each tried, whatever became of the other); what stopped them, or None."""
    problems = []
    for option, path, content in (("--json", args.json, (json_text(report, indent=2) + "\n").encode("utf-8")),
                                  ("--junit", args.junit, junit)):  # fmt: skip
        if not path:
            continue
        try:
            Path(path).write_bytes(content)
        except OSError as error:
            problems.append(f"{option} {path}: cannot write it ({error.strerror})")
    if not problems:
        return None
    return "; ".join(problems) + ": the run is kept, run the same command again to write the report"
