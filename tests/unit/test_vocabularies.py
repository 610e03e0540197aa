"""The vocabularies relmon's parts share, each defined once: task names (and the queue each is routed to), judge
names, pair sources; and the rule that tasks reach each other only through `common.task_names`."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

from common import task_names
from common.celery_app import QUEUE_FORGET, QUEUE_JUDGE, QUEUE_SLACK, celery, celery_config
from judges import JUDGES
from judges.names import JUDGE_NAMES
from store.models import ALERTING_SOURCES, ANSWER_SOURCES, HISTORY_SOURCES, ON_DEMAND_SOURCES, PairSource
from store.settings import Settings
from store.signals import RESOLVED, SIGNALS
from workers.main import import_task_modules

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "workers" / "tasks"
PRODUCT = ("bot", "capture", "common", "golden", "judges", "relmon", "store", "topics", "workers")
NAMES = {value for key, value in vars(task_names).items() if key.isupper() and isinstance(value, str)}


def test_the_registered_tasks_are_exactly_the_names_of_task_names() -> None:
    import_task_modules()
    registered = {name for name in celery.tasks if not name.startswith("celery.")}
    assert registered == NAMES


def test_the_posting_tasks_are_names_of_task_names() -> None:
    assert task_names.POSTING <= NAMES


def test_the_tasks_that_post_to_slack_are_posting_tasks() -> None:
    assert {task_names.SEND_DIGEST, task_names.SEND_DIGEST_PREVIEW, task_names.CONSIDER_ALERT} <= task_names.POSTING


def _queue(name: str, kwargs: dict | None = None) -> str:
    [router] = celery_config(Settings(_env_file=None), "redis://127.0.0.1:1/0")["task_routes"]
    return (router(name, [], kwargs or {}, {}) or {"queue": QUEUE_JUDGE})["queue"]


def test_a_task_goes_to_the_slack_queue_if_it_posts_the_forget_queue_if_it_forgets_else_to_the_judge_queue() -> None:
    for name in NAMES:
        expected = QUEUE_JUDGE
        if name in task_names.POSTING:
            expected = QUEUE_SLACK
        elif name in task_names.FORGETTING:
            expected = QUEUE_FORGET
        assert _queue(name) == expected, name


def test_a_deletions_or_a_persons_edits_event_goes_to_the_forget_queue_and_other_events_to_the_judge_queue() -> None:
    def capture(event: dict) -> str:
        return _queue(task_names.CAPTURE_EVENT, {"entry": {"body": {"event": event}, "own": {}}})

    deleted = {"type": "message", "subtype": "message_deleted", "channel": "C1", "deleted_ts": "1.0"}
    tombstone = {"type": "message", "subtype": "message_changed", "message": {"subtype": "tombstone", "ts": "1.0"}}
    edited = {"type": "message", "subtype": "message_changed", "message": {"text": "new", "ts": "1.0", "user": "U1"}}
    streamed = {"type": "message", "subtype": "message_changed", "message": {"text": "more", "bot_id": "B1"}}
    legacy_bot = {"type": "message", "subtype": "message_changed", "message": {"subtype": "bot_message", "text": "x"}}
    assert capture(deleted) == capture(tombstone) == capture(edited) == QUEUE_FORGET
    assert capture(streamed) == capture(legacy_bot) == QUEUE_JUDGE
    assert capture({"type": "message", "text": "hi"}) == capture({}) == QUEUE_JUDGE
    assert _queue(task_names.CAPTURE_EVENT, {"entry": "not an entry"}) == QUEUE_JUDGE


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, whether the import is inside a function) for every import in the file."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ImportFrom) and child.module:
                found.append((child.module, in_function))
            elif isinstance(child, ast.Import):
                found.extend((alias.name, in_function) for alias in child.names)
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def test_no_task_module_imports_another() -> None:
    for path in TASKS.glob("*.py"):
        for module, _ in _imports(path):
            assert not module.startswith("workers.tasks"), f"{path.name} imports {module}"


def test_no_task_module_imports_inside_a_function() -> None:
    for path in TASKS.glob("*.py"):
        for module, in_function in _imports(path):
            assert not in_function, f"{path.name} imports {module} in a function"


def test_the_judge_names_are_the_judges_librarys() -> None:
    assert tuple(JUDGES) == JUDGE_NAMES


def test_the_pair_source_groups_are_drawn_from_the_one_list() -> None:
    assert set(PairSource) == ON_DEMAND_SOURCES | HISTORY_SOURCES | ALERTING_SOURCES
    assert not (ON_DEMAND_SOURCES | HISTORY_SOURCES) & ALERTING_SOURCES
    # The reports count every answer but those asked for on demand, and (for now) the ingested exchanges, which
    # have no Slack channel to be grouped under.
    assert set(PairSource) - ON_DEMAND_SOURCES == ANSWER_SOURCES
    assert not ON_DEMAND_SOURCES & ANSWER_SOURCES


def test_the_judge_names_load_without_the_judges_library() -> None:
    """The bot and the CLI read the names (and the channel rules) without loading the OpenAI SDK."""
    probe = "import sys, judges, judges.names, store.rules, relmon.cli; print('openai' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "False"


@functools.cache
def _strings() -> tuple[tuple[Path, int, str], ...]:
    """Every string literal in product code (a migration keeps the names of its day: not read)."""
    found = []
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                for node in ast.walk(ast.parse(path.read_text())):
                    if isinstance(node, ast.Constant) and isinstance(node.value, str):
                        found.append((path, node.lineno, node.value))
    return tuple(found)


def _literals(words: set[str], homes: set[Path]) -> list[str]:
    """The string literals that spell one of `words`, outside the modules that define them."""
    return [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path, line, value in _strings()
        if value in words and path not in homes
    ]


def test_judge_names_are_written_out_only_in_judges_names() -> None:
    """SQL, messages, reports, settings' defaults and CLI choices name the judges through `judges.names`."""
    assert _literals(set(JUDGE_NAMES), {ROOT / "judges" / "names.py"}) == []


def test_signal_names_are_written_out_only_where_signals_are_defined() -> None:
    # "resolved" also names a window's end and a figure (topics, digests, reports): a word of its own there.
    assert _literals(set(SIGNALS) - {RESOLVED}, {ROOT / "store" / "signals.py"}) == []
