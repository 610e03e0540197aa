"""`relmon judges check`: every judge file of RELMON_JUDGES_DIR (or --dir) checked, each problem on its own line
with the file's line number, then one judge's prompt filled with a sample pair, as the LLM would read it. Exit 0
when every file is a judge, 1 when one is not (or there is nothing to check)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from judges.judge_files import JudgeCatalog, load_catalog
from judges.safe_text import visible
from store.settings import Settings

EXIT_OK, EXIT_PROBLEMS = 0, 1
SAMPLE_QUESTION = "My invoice is wrong and the billing page is down. Can I get my money back?"
SAMPLE_ANSWER = "Sorry about that! I have asked the billing team to look at your invoice; they will reply here."
SAMPLE_CONTEXT = "[customer] Hi, I have a question about my invoice.\n[bot] Of course, what is it?"
SAMPLE_REFERENCE = "The billing team reviews invoice disputes; see https://status.example.com during incidents."
SAMPLE_DOCUMENTS = "Documents the bot retrieved:\n\n[1] billing.md\nRefunds are decided by the billing team."


def check_report(catalog: JudgeCatalog, max_prompt_chars: int) -> tuple[list[str], bool]:
    """The lines to print, and whether every file is a judge."""
    from judges.context import with_context

    lines = [f"{judge.spec.source}: ok: judge {name} ({judge!r})" for name, judge in catalog.custom.items()]
    lines += [f"{problem}" for problem in catalog.problems]
    unreadable = labels_problems(catalog)
    lines += unreadable
    if catalog.custom:
        judge = next(iter(catalog.custom.values()))
        question = with_context(SAMPLE_QUESTION, SAMPLE_CONTEXT)
        # A judge reading {documents} gets the sample passages; any other, the sample reference answer.
        reference = SAMPLE_DOCUMENTS if "documents" in judge.template.placeholders else SAMPLE_REFERENCE
        prompt = judge.example_prompt(question, SAMPLE_ANSWER, reference, max_prompt_chars)
        lines += ["", f"example: the prompt of {judge.name} filled with a sample pair", "-" * 60, prompt, "-" * 60]
    return lines, not catalog.problems and not unreadable and bool(catalog.custom)


def labels_problems(catalog: JudgeCatalog) -> list[str]:
    """A judge's labelled file that cannot be read (the canary and `relmon eval` would fail on it), by file and line;
    the judge itself still runs."""
    from judges.judge_files import key_line
    from judges.labels import LabelError, read_labels

    problems = []
    for judge in catalog.custom.values():
        path = judge.spec.labels_path
        if path is None:
            continue
        try:
            read_labels(path, judge)
        except LabelError as error:
            try:
                line = key_line(Path(judge.spec.source).read_text(encoding="utf-8"), judge.spec.source, "labels")
            except (OSError, UnicodeDecodeError):
                line = None
            where = f"{judge.spec.source}:{line}" if line else judge.spec.source
            problems.append(f"{where}: labels: {error}")
    return problems


def run_judges_check(args: argparse.Namespace, settings: Settings) -> int:
    directory = Path(args.dir) if getattr(args, "dir", None) else settings.judges_dir
    if directory is None:
        print("relmon: no judges to check: set RELMON_JUDGES_DIR (or give --dir)", file=sys.stderr)
        return EXIT_PROBLEMS
    catalog = load_catalog(directory, max_prompt_chars=settings.max_prompt_chars)
    lines, good = check_report(catalog, settings.max_prompt_chars)
    if not catalog.custom and not catalog.problems:
        lines.append(f"{directory}: no judge files (*.toml, *.yaml, *.yml)")
    print(visible("\n".join(lines)))
    found = len(catalog.custom) + len({problem.path for problem in catalog.problems})
    summary = f"{len(catalog.custom)} of {found} judge file(s) ok" if found else "nothing checked"
    print(summary, file=sys.stderr)
    return EXIT_OK if good else EXIT_PROBLEMS
