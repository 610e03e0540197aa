"""What `relmon regress` writes: the table and summary in the terminal (rich), the JSON report (kept in the database
as the next run's baseline, and `--json FILE`) and JUnit XML for CI (`--junit FILE`: one testcase per golden item).

The questions come from Slack or from an imported set, so any text may be in them: each format writes it through
judges.safe_text (the terminal sees no raw control character and no rich markup it would obey, the XML holds only
characters XML 1.0 allows, the JSON reads back as the same strings). A question `questions` maps to None is a
private channel's, withheld (relmon.private_items): its item is reported, its text is not, and `withheld` counts them
in every format."""

from __future__ import annotations

import errno
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from golden.regress import ERROR, FAIL, IMPROVED, PASS, REGRESSED, UNCERTAIN, ItemResult, Summary
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY
from judges.safe_text import markup_safe, one_line
from relmon.private_items import WITHHELD, withheld_note

_STYLE = {PASS: "green", FAIL: "red", UNCERTAIN: "yellow", ERROR: "magenta"}
_CHANGE = {IMPROVED: "[green]improved[/]", REGRESSED: "[red]regressed[/]", "new": "new", None: ""}


def _score(value: Any) -> str:
    if isinstance(value, list):
        return " / ".join(_score(v) for v in value)
    if value is None:
        return "—"
    return f"{value:g}" if isinstance(value, float) else str(value)


class Terminal(Console):
    """rich's Console, but a standard output that went away (a closed pipe) is an OSError for the caller: rich's own
    answer is SystemExit(1), and 1 says the new version regressed."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError(errno.EPIPE, "the standard output was closed")


def _withheld(questions: dict[str, str | None]) -> int:
    return sum(1 for text in questions.values() if text is None)


def report_json(
    results: Sequence[ItemResult],
    summary: Summary,
    questions: dict[str, str | None],
    *,
    run_id: int,
    source: str,
    model: str,
    baseline_run: int | str | None,
    min_pass: float,
) -> dict[str, Any]:
    withheld = _withheld(questions)
    return {
        "run_id": run_id,
        "candidates": source,
        "model": model,
        "baseline": baseline_run,
        "min_pass": min_pass,
        "summary": {
            "items": summary.items,
            "passed": summary.passed,
            "failed": summary.failed,
            "uncertain": summary.uncertain,
            "errors": summary.errors,
            "pass_rate": summary.pass_rate,
            "pass_rate_interval_95": list(summary.interval),
            "mean_scores": summary.means,
            "improved": summary.improved,
            "regressed": summary.regressed,
        },
        "private_withheld": withheld,
        "note": withheld_note(withheld),
        "items": [
            {
                "id": result.key,
                "question": questions.get(result.key, ""),  # None: a private channel's, withheld
                "withheld": questions.get(result.key, "") is None,
                "outcome": result.outcome,
                "change": result.change,
                "scores": result.scores,
                "failed_by": result.failed_by,
                "notes": result.notes,
            }
            for result in results
        ],
    }


def _shown(questions: dict[str, str | None], key: str, width: int, *, markup: bool) -> str:
    text = questions.get(key, "")
    if text is None:
        return WITHHELD
    return markup_safe(text, width) if markup else one_line(text, width)


def print_regress_report(
    console: Console, results: Sequence[ItemResult], summary: Summary, questions: dict[str, str | None]
) -> None:
    caption = "relevancy 0–4 · correctness 0–2 · grounded 1–5, the candidate first as answer 2, then as answer 1"
    table = Table(title="relmon regress", caption=caption, show_lines=False)
    for column in ("item", "question", RELEVANCY, "correct", GROUNDED, "result", "change"):
        table.add_column(column, overflow="fold")
    for result in results:
        outcome = f"[{_STYLE[result.outcome]}]{result.outcome}[/]"
        table.add_row(result.key, _shown(questions, result.key, 48, markup=True), _score(result.scores.get(RELEVANCY)),
                      _score(result.scores.get(CORRECTNESS)), _score(result.scores.get(GROUNDED)), outcome,
                      _CHANGE.get(result.change, result.change or ""))  # fmt: skip
    console.print(table)
    low, high = summary.interval
    means = ", ".join(f"{name} {_score(round(value, 2)) if value is not None else '—'}"
                      for name, value in summary.means.items())  # fmt: skip
    console.print(
        f"pass rate {summary.pass_rate:.0%} ({summary.passed} of {summary.items}; 95% interval {low:.0%}–{high:.0%})"
        f" · failed {summary.failed} · uncertain {summary.uncertain} · no verdict {summary.errors}"
    )
    console.print(f"mean scores: {means} · improved {summary.improved} · regressed {summary.regressed}")
    if note := withheld_note(_withheld(questions)):
        console.print(note)


def junit_xml(results: Sequence[ItemResult], summary: Summary, questions: dict[str, str | None]) -> bytes:
    """One testcase per golden item: a failure when any judge fails it, skipped when it is uncertain, an error when
    a judge gave no verdict."""
    suite = ET.Element(
        "testsuite",
        name="relmon regress",
        tests=str(summary.items),
        failures=str(summary.failed),
        errors=str(summary.errors),
        skipped=str(summary.uncertain),
    )
    withheld = _withheld(questions)
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="private_withheld", value=str(withheld))
    for result in results:
        # ElementTree escapes <, & and > (so `]]>` is `]]&gt;`); one_line leaves no character XML 1.0 forbids.
        case = ET.SubElement(suite, "testcase", classname="golden", name=f"item {result.key}: "
                             f"{_shown(questions, result.key, 80, markup=False)}")  # fmt: skip
        scores = ", ".join(f"{name} {_score(value)}" for name, value in result.scores.items())
        if result.outcome == FAIL:
            failure = ET.SubElement(case, "failure", message="failed by " + ", ".join(result.failed_by))
            failure.text = scores + ("; " + "; ".join(result.notes) if result.notes else "")
        elif result.outcome == UNCERTAIN:
            ET.SubElement(case, "skipped", message="uncertain: " + "; ".join(result.notes))
        elif result.outcome == ERROR:
            ET.SubElement(case, "error", message="; ".join(result.notes))
        if result.change:
            ET.SubElement(case, "system-out").text = f"{result.change} against the baseline; {scores}"
    if note := withheld_note(withheld):
        ET.SubElement(suite, "system-out").text = note
    return ET.tostring(ET.ElementTree(suite).getroot(), encoding="utf-8", xml_declaration=True)
