"""`relmon regress --junit FILE`: JUnit XML for CI, one testcase per golden item, missing ones too.

A testcase fails when any judge fails its item (the failing judges' scores and reasoning in the failure's text),
is skipped when uncertain, an error when a judge gave no verdict; an item missing from the candidates file is a
failure, or skipped with --allow-missing, so that `tests` counts the whole set. Each testcase's `system-out` holds
what a CI tool shows next to it: the question, the expected and candidate answers, and each judge's score and
reasoning (only the scores for a private channel's item, unless --include-private). The suite's properties carry the
verdict line and the counts.

ElementTree escapes `<`, `&` and `>` (so `]]>` is `]]&gt;`); judges.safe_text's `visible` and `one_line` leave no
character XML 1.0 forbids, so the file parses whatever was typed into Slack."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from golden.regress import ERROR, FAIL, GROUNDED_SWAPPED, UNCERTAIN, ItemResult, Summary
from judges.names import GROUNDED
from judges.safe_text import one_line, visible
from relmon.private_items import WITHHELD, withheld_note
from relmon.regress.report import score_text, shown_question, withheld_count
from relmon.regress.verdict import RunVerdict
from relmon.regress.views import CheckView, ItemView

_CHECK_LABEL = {
    GROUNDED: "grounded (candidate as answer 2)",
    GROUNDED_SWAPPED: "grounded, swapped (candidate as answer 1)",
}
_WITHHELD_TEXTS = (
    f"{WITHHELD}: the question, the answers and the judges' reasoning are left out; --include-private to show them"
)


def _block(label: str, text: str | None) -> str:
    """`label: text`, a text of several lines indented under its label."""
    shown = visible(text).strip()
    if not shown:
        return label
    if "\n" not in shown:
        return f"{label}: {shown}"
    return f"{label}:\n" + "\n".join(f"    {line}" if line.strip() else "" for line in shown.splitlines())


def check_line(check: CheckView) -> str:
    """`correctness 1 of 2: <reasoning>`; the grounded checks give both answers' grades and reasons."""
    label = _CHECK_LABEL.get(check.check, check.check)
    if check.status is None:
        return f"{label}: no verdict"
    if check.status in ("error", "empty"):
        return _block(f"{label}: no verdict ({check.status})", check.error)
    head = f"{label}: {score_text(check.score)} of {score_text(check.max_score)}"
    if check.judge == GROUNDED:
        head += f" (expected answer {score_text(check.expected_score)})"
    lines = [_block(head, check.reasoning) if check.reasoning is not None else head]
    if check.judge == GROUNDED and check.expected_reasoning is not None:
        lines.append(_block("    on the expected answer", check.expected_reasoning))
    return "\n".join(lines)


def item_text(view: ItemView, result: ItemResult | None) -> str:
    """The testcase's system-out: the texts (or that they are withheld), then each judge's line."""
    if view.withheld:
        parts = [_WITHHELD_TEXTS]
    else:
        parts = [_block("question", view.question), _block("expected answer", view.expected)]
        if view.answer is not None:
            parts.append(_block("candidate answer", view.answer))
    if result is None:
        parts.append("not in the candidates file: not run")
        return "\n".join(parts)
    parts.append("")
    parts += [check_line(check) for check in view.checks]
    if result.notes:
        parts.append("notes: " + "; ".join(result.notes))
    if result.change:
        parts.append(f"change: {result.change} against the baseline")
    return "\n".join(parts)


def _failing_lines(view: ItemView, judges: Sequence[str]) -> str:
    return "\n".join(check_line(check) for check in view.checks if check.judge in judges)


def junit_xml(
    results: Sequence[ItemResult],
    summary: Summary,
    views: dict[str, ItemView],
    missing: Sequence[ItemView],
    verdict: RunVerdict,
    *,
    source: str,
    allow_missing: bool,
) -> bytes:
    missing_failures = 0 if allow_missing else len(missing)
    suite = ET.Element(
        "testsuite",
        name="relmon regress",
        tests=str(summary.items + len(missing)),
        failures=str(summary.failed + missing_failures),
        errors=str(summary.errors),
        skipped=str(summary.uncertain + len(missing) - missing_failures),
    )
    withheld = withheld_count([*views.values(), *missing])
    properties = ET.SubElement(suite, "properties")
    for name, value in (("result", verdict.line), ("pass_rate", f"{summary.pass_rate:g}"),
                        ("missing", str(len(missing))), ("private_withheld", str(withheld)),
                        *((f"judge.{judge}.passed", f"{passed} of {judged}")
                          for judge, (passed, judged) in summary.team.items())):  # fmt: skip
        ET.SubElement(properties, "property", name=name, value=one_line(value))
    for result in results:
        view = views[result.key]
        case = ET.SubElement(suite, "testcase", classname="golden",
                             name=f"item {result.key}: {shown_question(view, 80, markup=False)}")  # fmt: skip
        if result.outcome == FAIL:
            failure = ET.SubElement(case, "failure", message="failed by " + ", ".join(result.failed_by))
            failure.text = _failing_lines(view, result.failed_by)
        elif result.outcome == UNCERTAIN:
            skipped = ET.SubElement(case, "skipped", message="uncertain: " + "; ".join(result.notes))
            skipped.text = _failing_lines(view, [GROUNDED])
        elif result.outcome == ERROR:
            error = ET.SubElement(case, "error", message="; ".join(result.notes))
            error.text = "\n".join(check_line(c) for c in view.checks if c.status in (None, "error", "empty"))
        ET.SubElement(case, "system-out").text = item_text(view, result)
    for view in missing:
        case = ET.SubElement(suite, "testcase", classname="golden",
                             name=f"item {view.key}: {shown_question(view, 80, markup=False)}")  # fmt: skip
        where = one_line(source)
        if allow_missing:
            ET.SubElement(case, "skipped", message=f"missing from {where}: not run (--allow-missing)")
        else:
            ET.SubElement(case, "failure", type="missing",
                          message=f"missing from {where}: not run (use --allow-missing to run without it)")  # fmt: skip
        ET.SubElement(case, "system-out").text = item_text(view, None)
    if note := withheld_note(withheld):
        ET.SubElement(suite, "system-out").text = note
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)
