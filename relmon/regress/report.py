"""What `relmon regress` writes for people and tools: the table, summary and verdict line in the terminal (rich),
and the JSON report (`--json FILE`, and kept in the database as the next run's baseline). The JUnit XML is
relmon.regress.junit's.

The questions and answers come from Slack or from an imported set, so any text may be in them: each format writes
it through judges.safe_text (the terminal sees no raw control character and no rich markup it would obey, the JSON
reads back as the same strings). An item whose view is `withheld` is a private channel's (relmon.private_items):
its item is reported, its texts are not, and `withheld` counts them in every format."""

from __future__ import annotations

import errno
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from golden.regress import ERROR, FAIL, MISSING, PASS, UNCERTAIN, ItemResult, Summary
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY
from judges.safe_text import markup_safe, one_line
from relmon.private_items import WITHHELD, withheld_note
from relmon.regress.verdict import RunVerdict
from relmon.regress.views import ItemView

_STYLE = {PASS: "green", FAIL: "red", UNCERTAIN: "yellow", ERROR: "magenta", MISSING: "red"}
_CHANGE = {"improved": "[green]improved[/]", "regressed": "[red]regressed[/]", "new": "new", None: ""}
MISSING_LISTED = 20  # in the terminal; the report files list them all


def score_text(value: Any) -> str:
    if isinstance(value, list):
        return " / ".join(score_text(v) for v in value)
    if value is None:
        return "—"
    return f"{value:g}" if isinstance(value, float) else str(value)


def team_cell(result: ItemResult, name: str) -> str:
    """A team judge's cell: `pass 1`, `fail 0`, or — (not judged, or no verdict)."""
    score = result.scores.get(name)
    if score is None:
        return "—"
    verdict = "[red]fail[/]" if name in result.failed_by else "[green]pass[/]"
    return f"{verdict} {score_text(score)}"


def shown_question(view: ItemView | None, width: int, *, markup: bool) -> str:
    """An item's question on one line, cut to `width`: the withheld mark for a private channel's."""
    if view is not None and view.withheld:
        return WITHHELD
    text = view.question if view is not None else ""
    return markup_safe(text, width) if markup else one_line(text, width)


def withheld_count(views: Sequence[ItemView]) -> int:
    return sum(1 for view in views if view.withheld)


class Terminal(Console):
    """rich's Console, but a standard output that went away (a closed pipe) is an OSError for the caller: rich's own
    answer is SystemExit(1), and 1 says the new version regressed."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the standard output was closed")


def report_json(
    results: Sequence[ItemResult],
    summary: Summary,
    views: dict[str, ItemView],
    missing: Sequence[ItemView],
    verdict: RunVerdict,
    *,
    texts: bool,
    run_id: int,
    source: str,
    model: str,
    baseline_run: int | str | None,
    min_pass: float,
    allow_missing: bool,
) -> dict[str, Any]:
    """The report. `texts`: with each item's expected and candidate answers and the judges' scores and reasoning
    (the --json file); without them for the copy kept in the database, which needs only the outcomes."""
    withheld = withheld_count([*views.values(), *missing])

    def line(view: ItemView, fields: dict[str, Any]) -> dict[str, Any]:
        head = {"id": view.key, "question": view.question, "withheld": view.withheld}  # question None: withheld
        return head | fields | (view.texts_json() if texts else {})

    judged = [
        line(
            views[r.key],
            {"outcome": r.outcome, "change": r.change, "scores": r.scores, "failed_by": r.failed_by, "notes": r.notes},
        )
        for r in results
    ]
    not_run = {
        "outcome": MISSING,
        "change": None,
        "scores": {},
        "failed_by": [],
        "notes": [f"not in {source}: not run"],
    }
    missing_lines = [line(view, not_run) for view in missing]
    return {
        "run_id": run_id,
        "candidates": source,
        "model": model,
        "baseline": baseline_run,
        "min_pass": min_pass,
        "allow_missing": allow_missing,
        "result": {"passed": verdict.passed, "reasons": list(verdict.failing), "line": verdict.line},
        "summary": {
            "golden_items": summary.items + len(missing),
            "items": summary.items,  # judged: the pass rate's denominator
            "missing": len(missing),
            "passed": summary.passed,
            "failed": summary.failed,
            "uncertain": summary.uncertain,
            "errors": summary.errors,
            "pass_rate": summary.pass_rate,
            "pass_rate_interval_95": list(summary.interval),
            "mean_scores": summary.means,
            "improved": summary.improved,
            "regressed": summary.regressed,
            "judges": {
                name: {
                    "passed": passed,
                    "judged": judged,
                    "pass_rate": passed / judged if judged else None,
                    "pass_rate_interval_95": list(summary.team_interval(name)),
                }
                for name, (passed, judged) in summary.team.items()
            },
        },
        "private_withheld": withheld,
        "note": withheld_note(withheld),
        "items": judged + missing_lines,
    }


def _first_words(view: ItemView, width: int = 60) -> str:
    return shown_question(view, width, markup=True)


def print_regress_report(
    console: Console,
    results: Sequence[ItemResult],
    summary: Summary,
    views: dict[str, ItemView],
    missing: Sequence[ItemView],
    verdict: RunVerdict,
    *,
    source: str,
    unready: int = 0,
) -> None:
    """The table (one row per golden item, missing ones too), the summary, the missing items named, how many
    private items were withheld, and last the verdict line. `unready`: items without an expected answer yet."""
    caption = "relevancy 0–4 · correctness 0–2 · grounded 1–5, the candidate first as answer 2, then as answer 1"
    team = list(summary.team)
    if team:
        caption += " · " + ", ".join(team) + ": pass or fail (the team's judges)"
    table = Table(title="relmon regress", caption=caption, show_lines=False)
    for column in ("item", "question", RELEVANCY, "correct", GROUNDED, *team, "result", "change"):
        table.add_column(column, overflow="fold")
    for result in results:
        outcome = f"[{_STYLE[result.outcome]}]{result.outcome}[/]"
        table.add_row(result.key, shown_question(views.get(result.key), 48, markup=True),
                      score_text(result.scores.get(RELEVANCY)), score_text(result.scores.get(CORRECTNESS)),
                      score_text(result.scores.get(GROUNDED)), *(team_cell(result, name) for name in team), outcome,
                      _CHANGE.get(result.change, result.change or ""))  # fmt: skip
    for view in missing:
        table.add_row(view.key, shown_question(view, 48, markup=True), "—", "—", "—", *("—" for _ in team),
                      f"[red]{MISSING}[/]", "")  # fmt: skip
    console.print(table)
    low, high = summary.interval
    means = ", ".join(f"{name} {score_text(round(value, 2)) if value is not None else '—'}"
                      for name, value in summary.means.items())  # fmt: skip
    console.print(
        f"pass rate {summary.pass_rate:.0%} ({summary.passed} of {summary.items} judged; 95% interval "
        f"{low:.0%}–{high:.0%}) · failed {summary.failed} · uncertain {summary.uncertain} · no verdict {summary.errors}"
    )
    console.print(f"mean scores: {means} · improved {summary.improved} · regressed {summary.regressed}")
    for name, (passed, judged) in summary.team.items():
        low, high = summary.team_interval(name)
        rate = f"{passed / judged:.0%} ({passed} of {judged}; 95% interval {low:.0%}–{high:.0%})" if judged else "—"
        console.print(f"{markup_safe(name)}: passed {rate}")
    if missing:
        count = len(missing)
        console.print(f"{count} golden item{'' if count == 1 else 's'} not in {markup_safe(source)}, not run:")
        for view in missing[:MISSING_LISTED]:
            console.print(f"  item {view.key}: {_first_words(view)}", soft_wrap=True)
        if count > MISSING_LISTED:
            console.print(f"  … and {count - MISSING_LISTED} more (the --json and --junit reports list them all)")
    if unready:
        console.print(f"{unready} golden item{'' if unready == 1 else 's'} without an expected answer yet, not run "
                      "(write it in Slack or import one)")  # fmt: skip
    if note := withheld_note(withheld_count([*views.values(), *missing])):
        console.print(note)
    # One line whatever the terminal's width (a CI log is 80 columns to rich): what a person or a grep looks for.
    console.print(f"[{'green' if verdict.passed else 'red'}]{markup_safe(verdict.line)}[/]", soft_wrap=True)
