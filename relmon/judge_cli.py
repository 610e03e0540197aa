"""`relmon judge` (one verdict now) and `relmon eval` (a judge against human labels): thin adapters around the
`judges` library. The statistics live in `judges.metrics`."""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TextIO

from common.llm import llm_client_for
from common.runtime import shared_redis
from judges import LLMClient, TransientLLMError, Verdict
from judges.base import Judge
from judges.context import format_turns, parse_turns, with_context
from judges.custom import CustomJudge
from judges.labels import Label, LabelError, read_labels
from judges.metrics import agreement
from judges.safe_text import json_text, one_line, visible
from store.judge_catalog import judge_catalog
from store.settings import WHERE_TO_GET, Settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# The CLI lets the SDK retry transient failures (2 retries with backoff); the pipeline uses Celery instead.
CLI_MAX_RETRIES = 2


class UsageError(Exception):
    """A mistake in how the command was called; the message says how to fix it."""


# Shared ------------------------------------------------------------------------------------------------------


def build_client(settings: Settings) -> LLMClient:
    base_url = settings.openai_base_url
    api_key = settings.secret("openai_api_key")
    if not api_key and (base_url is None or "api.openai.com" in base_url):
        raise UsageError(
            f"OPENAI_API_KEY is not set: {WHERE_TO_GET['OPENAI_API_KEY']}. "
            "For a local endpoint (Ollama, vLLM), set OPENAI_BASE_URL instead."
        )
    return llm_client_for(settings, redis_client=shared_redis(settings), max_retries=CLI_MAX_RETRIES)


def _fail(message: str, code: int, stream: TextIO | None = None) -> int:
    print(f"relmon: {message}", file=stream or sys.stderr)
    return code


# relmon judge ------------------------------------------------------------------------------------------------


def read_context(filename: str | None, settings: Settings) -> str | None:
    """The earlier turns of `--context-file` (judges.context.parse_turns: `customer: …` / `bot: …` lines or JSON
    lines), formatted as the pipeline formats a thread's: its last RELMON_CONTEXT_TURNS turns (all of the file's
    when that is 0), bounded in characters."""
    if filename is None:
        return None
    try:
        turns = parse_turns(Path(filename).read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read --context-file {filename}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"--context-file {filename}: {exc}") from None
    return format_turns(turns, settings.context_turns or len(turns)) or None


def _read_input(label: str, value: str | None, filename: str | None, stdin: _Stdin) -> str | None:
    if value is not None and filename is not None:
        raise UsageError(f"give either --{label} or --{label}-file, not both")
    if value == "-" or filename == "-":
        return stdin.read(label)
    if filename is not None:
        try:
            return Path(filename).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read --{label}-file {filename}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"--{label}-file {filename} is not UTF-8 (byte {exc.start}): save it as UTF-8") from None
    return value


class _Stdin:
    """Standard input may feed one text only."""

    def __init__(self) -> None:
        self.used_by: str | None = None

    def read(self, label: str) -> str:
        if self.used_by is not None:
            raise UsageError(f"stdin is already read for the {self.used_by}: give the {label} another way")
        self.used_by = label
        return sys.stdin.read()


def format_verdict(verdict: Verdict, judge: Judge) -> str:
    if verdict.status == "ok" and isinstance(judge, CustomJudge):
        shown = (
            ("pass" if verdict.score else "fail") if judge.is_pass_fail else f"{verdict.score:g} on {judge.spec.scale}"
        )
        kept = "FAILS" if judge.fails(verdict.score) else "passes"
        head = f"{verdict.judge}: {shown} ({kept}: fails at {judge.threshold} or lower)"
    elif verdict.status == "ok":
        head = (
            f"{verdict.judge}: {verdict.score:g} on {judge.min_score}–{judge.max_score} "
            f"(normalized {verdict.normalized_score:.2f})"
        )
    elif verdict.status == "null":
        head = f"{verdict.judge}: null (the answer says no document answers the question: not graded)"
    elif verdict.status == "empty":
        head = f"{verdict.judge}: nothing judged ({verdict.error})"
    else:
        head = f"{verdict.judge}: error: {verdict.error}"
    lines = [head]
    if verdict.reasoning:
        lines.append(f"reasoning: {verdict.reasoning}")
    if verdict.status == "error" and verdict.raw_output:
        raw = verdict.raw_output if len(verdict.raw_output) <= 2000 else verdict.raw_output[:2000] + " […]"
        lines.append(f"raw reply: {raw}")
    if verdict.model:
        details = [f"model {verdict.model}"]
        if verdict.prompt_tokens is not None:
            cached = f" ({verdict.cached_tokens} cached)" if verdict.cached_tokens else ""
            details.append(f"tokens {verdict.prompt_tokens} in{cached} / {verdict.completion_tokens} out")
        if verdict.latency_ms is not None:
            details.append(f"{verdict.latency_ms:.0f} ms")
        if verdict.cached:
            details.append("cached")
        details.append(f"prompt {verdict.prompt_version}")
        lines.append(" · ".join(details))
    return visible("\n".join(lines))  # the reasoning and a raw reply are the LLM's words: shown, never obeyed


def judge_named(name: str, settings: Settings) -> Judge:
    """A seed judge or one of the team's (RELMON_JUDGES_DIR); a UsageError naming the choices otherwise, and
    saying why when the team's file for it is broken."""
    catalog = judge_catalog(settings)
    try:
        return catalog.get(name)
    except ValueError as error:
        broken = [str(problem) for problem in catalog.problems if Path(problem.path).stem == name]
        if broken:
            raise UsageError(f"judge {name!r} is left out: {broken[0]} (run `relmon judges check`)") from None
        raise UsageError(str(error)) from None


def run_judge(args: argparse.Namespace, settings: Settings) -> int:
    try:
        judge = judge_named(args.judge, settings)
        stdin = _Stdin()
        question = _read_input("question", args.question, args.question_file, stdin)
        answer = _read_input("answer", args.answer, args.answer_file, stdin)
        reference = _read_input("reference", args.reference, args.reference_file, stdin)
        if question is None or answer is None:
            raise UsageError("give the question and the answer (--question/--question-file, --answer/--answer-file)")
        question = with_context(question, read_context(getattr(args, "context_file", None), settings))
        if judge.needs_reference and not (reference and reference.strip()):
            raise UsageError(f"the {judge.name} judge compares with a reference answer: give --reference")
        if isinstance(judge, CustomJudge) and (missing := judge.missing(question, answer, reference)):
            wanted = ", ".join("{" + name + "}" for name in missing)
            raise UsageError(f"the {judge.name} judge needs {wanted}: give it (--context-file, --reference)")
        client = build_client(settings)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        verdict = judge.evaluate(client, question=question, answer=answer, reference=reference)
    except TransientLLMError as exc:
        return _fail(f"{exc} (after {CLI_MAX_RETRIES} retries; try again later)", EXIT_FAILED)
    print(json_text(verdict.model_dump(mode="json"), indent=2) if args.json else format_verdict(verdict, judge))
    return EXIT_OK if verdict.status in ("ok", "null") else EXIT_FAILED


# relmon eval -------------------------------------------------------------------------------------------------


def load_labels(path: Path, judge: Judge) -> list[Label]:
    """Read a JSONL file of labelled answers; any malformed line is a UsageError naming the line."""
    try:
        return read_labels(path, judge)
    except LabelError as exc:
        raise UsageError(str(exc)) from None


def feedback_labels(settings: Settings, judge: Judge) -> list[Label]:
    """The votes on alerts as labels (`common.feedback.label_from_votes`): the answers people voted on, scored
    as the judge did when they agreed, just above the alert threshold when they did not."""
    from common.feedback import label_from_votes
    from store.db import Database
    from store.feedback import voted_examples
    from store.rule_overrides import RuleSource

    database = Database(settings.resolved_database_url)
    try:
        with database.session() as session:
            examples = voted_examples(session, judge.name)
        rules = RuleSource(settings.channel_rules_file, lambda: database).current()  # with /judge config's changes
    finally:
        database.dispose()
    labels = []
    for number, example in enumerate(examples, start=1):
        threshold = rules.for_channel(example.channel_id, settings).thresholds.get(judge.name)
        human = label_from_votes(example.score, example.right, example.wrong, threshold, judge.max_score)
        if human is not None:
            labels.append(Label(number, example.question, example.answer, example.reference, human))
    if not labels:
        raise UsageError(f"no votes on {judge.name} alerts to use as labels yet")
    return labels


def outcome_labels(settings: Settings, judge: Judge) -> list[Label]:
    """Outcomes as labels (`capture.outcomes.outcome_label`) from stored pairs whose window closed: resolved →
    the judge's top score, failed (a failure signal) → its lowest; pairs with neither are left out."""
    from capture.outcomes import outcome_label
    from store.db import Database
    from store.outcomes import closed_examples

    database = Database(settings.resolved_database_url)
    try:
        with database.session() as session:
            examples = closed_examples(session)
    finally:
        database.dispose()
    scores = {"good": judge.max_score, "bad": judge.min_score}
    labels = []
    for number, (question, answer, reference, signals) in enumerate(examples, start=1):
        label = outcome_label(signals)
        if label is not None:
            labels.append(Label(number, question, answer, reference, scores[label]))
    if not labels:
        raise UsageError("no answers with a closed outcome window to use as labels yet")
    return labels


def _judge_all(judge: Judge, client: LLMClient, labels: list[Label], threads: int) -> list[Verdict]:
    progress = {"done": 0}
    lock = threading.Lock()

    def one(label: Label) -> Verdict:
        try:
            verdict = judge.evaluate(client, label.question, label.answer, label.reference)
        except TransientLLMError as exc:
            verdict = Verdict(
                judge=judge.name,
                status="error",
                max_score=judge.max_score,
                prompt_version=judge.prompt_version,
                error=str(exc),
            )
        with lock:
            progress["done"] += 1
            if sys.stderr.isatty():
                print(f"\rjudged {progress['done']}/{len(labels)}", end="", file=sys.stderr, flush=True)
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        verdicts = list(pool.map(one, labels))
    if sys.stderr.isatty():
        print(file=sys.stderr)
    return verdicts


def _snippet(text: str, limit: int = 160) -> str:
    return one_line(text, limit)


def eval_report(judge: Judge, labels: list[Label], verdicts: list[Verdict], worst: int) -> dict[str, Any]:
    """The report as plain data: statistics over the items both the human and the judge scored."""
    scored = [
        (label, v) for label, v in zip(labels, verdicts, strict=True) if v.status == "ok" and label.human is not None
    ]
    human = [label.human for label, _ in scored]
    judged = [int(v.score) for _, v in scored]
    scale = list(range(judge.min_score, judge.max_score + 1))
    stats = agreement(human, judged, scale)
    disagreements = sorted(
        (pair for pair in scored if pair[0].human != int(pair[1].score)),
        key=lambda pair: (-abs(pair[0].human - int(pair[1].score)), pair[0].line),
    )
    nulls = [(label, v) for label, v in zip(labels, verdicts, strict=True) if v.status == "null" or label.human is None]
    errors = [(label, v) for label, v in zip(labels, verdicts, strict=True) if v.status in ("error", "empty")]
    return {
        "judge": judge.name,
        "model": next((v.model for v in verdicts if v.model), None),
        "prompt_version": judge.prompt_version,
        "items": len(labels),
        "n": stats.n,
        "errors": len(errors),
        "null": {
            "both": sum(1 for label, v in nulls if label.human is None and v.status == "null"),
            "human_only": sum(1 for label, v in nulls if label.human is None and v.status == "ok"),
            "judge_only": sum(1 for label, v in nulls if label.human is not None and v.status == "null"),
        },
        "exact_agreement": stats.exact,
        "within_one_agreement": stats.within_one,
        "kappa_quadratic": stats.kappa,
        # Its 95% interval (Fleiss–Cohen–Everitt's standard error, docs/statistics.md), null when undefined.
        "kappa_quadratic_interval": _kappa_interval(stats.confusion),
        "spearman": stats.spearman,
        "confusion": {"labels": stats.labels, "rows": "human", "columns": "judge", "matrix": stats.confusion},
        "worst": [
            {
                "line": label.line,
                "human": label.human,
                "judge": int(verdict.score),
                "question": _snippet(label.question),
                "answer": _snippet(label.answer),
                "reasoning": _snippet(verdict.reasoning, 300),
            }
            for label, verdict in disagreements[: max(0, worst)]
        ],
        "error_samples": [{"line": label.line, "error": v.error} for label, v in errors[:5]],
    }


def _kappa_interval(confusion: list[list[int]]) -> list[float] | None:
    from common.reports.kappa import cohen_kappa

    interval = cohen_kappa(confusion, "quadratic").interval
    return None if interval is None else [interval.low, interval.high]


def _number(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _interval_text(report: dict[str, Any]) -> str:
    interval = report.get("kappa_quadratic_interval")
    return "" if not interval else f" ({_number(interval[0])} to {_number(interval[1])}, 95%)"


def format_report(report: dict[str, Any]) -> str:
    lines = [
        f"judge {report['judge']} (model {report['model']}, prompt {report['prompt_version']}) "
        f"on {report['items']} labelled answers",
        f"  scored by both:        {report['n']}",
        f"  errors:                {report['errors']}",
        f"  null (both/human/judge): {report['null']['both']}/{report['null']['human_only']}/"
        f"{report['null']['judge_only']}",
        f"  exact agreement:       {_number(report['exact_agreement'])}",
        f"  within one:            {_number(report['within_one_agreement'])}",
        f"  Cohen's kappa (quadratic weights): {_number(report['kappa_quadratic'])}{_interval_text(report)}",
        f"  Spearman correlation:  {_number(report['spearman'])}",
        "",
        "confusion matrix (rows: human score, columns: judge score)",
    ]
    labels = report["confusion"]["labels"]
    lines.append("  human\\judge " + "".join(f"{label:>6}" for label in labels))
    for label, row in zip(labels, report["confusion"]["matrix"], strict=True):
        lines.append(f"  {label:>11} " + "".join(f"{count:>6}" for count in row))
    if report["worst"]:
        lines += ["", "worst disagreements"]
        for item in report["worst"]:
            lines.append(f"  line {item['line']}: human {item['human']}, judge {item['judge']}")
            lines.append(f"    Q: {item['question']}")
            lines.append(f"    A: {item['answer']}")
            lines.append(f"    judge's reasoning: {item['reasoning']}")
    if report["error_samples"]:
        lines += ["", "errors (first ones)"]
        lines += [f"  line {item['line']}: {item['error']}" for item in report["error_samples"]]
    return "\n".join(lines)


def run_eval(args: argparse.Namespace, settings: Settings) -> int:
    try:
        judge = judge_named(args.judge, settings)
        if args.threads < 1:
            raise UsageError("--threads must be at least 1")
        if getattr(args, "labels_from", None) == "outcomes":
            labels = outcome_labels(settings, judge)
        elif getattr(args, "from_feedback", False):
            labels = feedback_labels(settings, judge)
        elif args.labels:
            labels = load_labels(Path(args.labels), judge)
        else:
            raise UsageError("give a labels file, --from-feedback (the votes on alerts) or --labels-from outcomes")
        client = build_client(settings)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    verdicts = _judge_all(judge, client, labels, args.threads)
    report = eval_report(judge, labels, verdicts, args.worst)
    print(json_text(report, indent=2) if args.json else visible(format_report(report)))
    if report["n"] == 0:
        return _fail("no answer could be compared with its label (see the errors above)", EXIT_FAILED)
    return EXIT_OK
