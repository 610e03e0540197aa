"""Hostile input files and arguments through the `relmon` command itself (`relmon.cli.main` in process, or a real
process where argparse decides the exit status), on a real database and the fake LLM over HTTP: JSON nested
thousands deep, a CSV field over the csv module's 128 KiB, an id in non-ASCII digits (int() reads "١" as 1), an
over-long topic, a NUL or a lone surrogate. Each is a clear error naming its line, never a traceback, and exits 2
(an input error), never 1 (which says `relmon regress` found a regression)."""

from __future__ import annotations

import json
import subprocess
import zipfile
from pathlib import Path

import pytest

from store import golden
from store.db import Database
from store.golden_import import import_items
from tests import relmon_cli
from tests.fakes.openai_server import FakeOpenAI

cli = relmon_cli.cli
DEEP = "[" * 5000 + "]" * 5000  # past Python's recursion limit: json.loads raises RecursionError
BIG = "x" * (200 * 1024)  # over csv.field_size_limit() (128 KiB)


def refused(outcome: relmon_cli.Outcome, *said: str) -> str:
    """The command exited 2 with a short message saying each of `said`, and no traceback."""
    assert outcome.returncode == 2, (outcome.returncode, outcome.stderr[-2000:])
    assert "Traceback" not in outcome.stderr and "Traceback" not in outcome.stdout
    for words in said:
        assert words in outcome.stderr, outcome.stderr[-2000:]
    return outcome.stderr


def golden_import(cli, db_url: str, tmp_path: Path, name: str, content: str) -> relmon_cli.Outcome:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8", errors="surrogatepass")
    return cli("golden", "import", str(path), base_url=None, DATABASE_URL=db_url)


def nothing_imported(database: Database) -> None:
    with database.reading() as session:
        assert golden.active_items(session) == []


# relmon golden import ----------------------------------------------------------------------------------------


def test_import_of_a_json_document_nested_too_deep_names_its_line(database, db_url, cli, tmp_path) -> None:
    content = '[\n{"input": "How do I reset?", "expected_output": "Settings."},\n' + DEEP + "\n]\n"
    refused(golden_import(cli, db_url, tmp_path, "set.json", content), "line 3: JSON nested too deeply")
    nothing_imported(database)


def test_import_of_a_json_line_nested_too_deep_names_its_line(database, db_url, cli, tmp_path) -> None:
    content = '{"question": "How do I reset?", "expected": "Settings."}\n{"question": ' + DEEP + "}\n"
    refused(golden_import(cli, db_url, tmp_path, "set.jsonl", content), "line 2: JSON nested too deeply")
    nothing_imported(database)


def test_import_of_a_csv_field_over_128_kib_names_its_line(database, db_url, cli, tmp_path) -> None:
    content = f"question,expected\nHow do I reset?,Settings.\nHow do I pay?,{BIG}\n"
    refused(golden_import(cli, db_url, tmp_path, "set.csv", content), "line 3: a field is over 128 KiB")
    nothing_imported(database)


def test_import_of_an_over_long_topic_names_its_line(database, db_url, cli, tmp_path) -> None:
    rows = [
        {"input": {"question": "How do I reset?"}, "expectedOutput": "Settings.", "metadata": {"topic": "resets"}},
        {"input": {"question": "How do I pay?"}, "expectedOutput": "Card.", "metadata": {"topic": "t" * 300}},
    ]
    content = "".join(json.dumps(row) + "\n" for row in rows)
    refused(golden_import(cli, db_url, tmp_path, "langfuse.jsonl", content), "line 2: the topic is 300 characters")
    nothing_imported(database)


@pytest.mark.parametrize(
    ("escaped", "said"), [("\\u0000", "a NUL character"), ("\\ud800", "a lone surrogate")], ids=["nul", "surrogate"]
)
def test_import_of_a_text_no_database_can_store_names_its_line(database, db_url, cli, tmp_path, escaped, said) -> None:
    content = '{"question": "Fine?", "expected": "Yes."}\n{"question": "Bad' + escaped + '?", "expected": "No."}\n'
    refused(golden_import(cli, db_url, tmp_path, "set.jsonl", content), f"line 2: the question holds {said}")
    nothing_imported(database)


# relmon regress ------------------------------------------------------------------------------------------------


@pytest.fixture
def one_item(database: Database) -> int:
    with database.session() as session:
        import_items(session, [{"question": "How do I reset my password?", "expected": "Settings > Reset."}])
        [item] = golden.active_items(session)
        return item.id


def regress_refused(cli, db_url: str, path: Path, *said: str, extra: tuple[str, ...] = ()) -> None:
    with FakeOpenAI() as fake:
        outcome = cli("regress", str(path), *extra, base_url=fake.base_url, DATABASE_URL=db_url)
        assert fake.requests == []  # nothing judged, nothing spent
    refused(outcome, *said)


def test_regress_refuses_an_id_in_non_ascii_digits(one_item, db_url, cli, tmp_path) -> None:
    arabic = "".join(chr(0x0660 + int(digit)) for digit in str(one_item))  # int() would read it as the item's id
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"id": arabic, "answer": "Settings > Reset."}, ensure_ascii=False) + "\n")
    regress_refused(cli, db_url, path, f"line 1: the id {arabic!r} is not written in the digits 0–9")


def test_regress_refuses_a_csv_field_over_128_kib(one_item, db_url, cli, tmp_path) -> None:
    path = tmp_path / "answers.csv"
    path.write_text(f"id,answer\n{one_item},{BIG}\n", encoding="utf-8")
    regress_refused(cli, db_url, path, "line 2: a field is over 128 KiB")


def test_regress_refuses_a_json_line_nested_too_deep(one_item, db_url, cli, tmp_path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"id": one_item, "answer": "Settings."}) + '\n{"answer": ' + DEEP + "}\n")
    regress_refused(cli, db_url, path, "line 2: JSON nested too deeply")


def test_regress_refuses_a_baseline_nested_too_deep_before_judging(one_item, db_url, cli, tmp_path) -> None:
    path, baseline = tmp_path / "answers.jsonl", tmp_path / "baseline.json"
    path.write_text(json.dumps({"id": one_item, "answer": "Settings > Reset."}) + "\n")
    baseline.write_text('{"items": ' + DEEP + "}")
    regress_refused(cli, db_url, path, "JSON nested too deeply", extra=("--baseline", str(baseline)))


def test_regress_refuses_a_baseline_run_id_in_non_ascii_digits(one_item, db_url, cli, tmp_path) -> None:
    path = tmp_path / "answers.jsonl"
    path.write_text(json.dumps({"id": one_item, "answer": "Settings > Reset."}) + "\n")
    regress_refused(cli, db_url, path, "digits 0-9", extra=("--baseline", "١"))


# the other commands' files and arguments -------------------------------------------------------------------------


def test_eval_refuses_labels_nested_too_deep(cli, tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"question": "Q?", "answer": "A.", "score": 3}\n{"question": ' + DEEP + "}\n")
    refused(cli("eval", str(labels), base_url=None), f"{labels}:2: JSON nested too deeply")


def test_eval_refuses_labels_not_in_utf8(cli, tmp_path) -> None:
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes('{"question": "Café?", "answer": "A.", "score": 3}\n'.encode("latin-1"))
    refused(cli("eval", str(labels), base_url=None), "is not UTF-8")


def test_judge_refuses_a_context_file_nested_too_deep(cli, tmp_path) -> None:
    context = tmp_path / "context.jsonl"
    context.write_text('{"speaker": "customer", "text": "hi"}\n{"speaker": ' + DEEP + "}\n")
    outcome = cli("judge", "-q", "Q?", "-a", "A.", "--context-file", str(context), base_url=None)
    refused(outcome, "line 2: JSON nested too deeply")


def test_import_of_a_slack_export_nested_too_deep_is_refused(db_url, cli, tmp_path) -> None:
    export = tmp_path / "export.zip"
    with zipfile.ZipFile(export, "w") as archive:
        archive.writestr("channels.json", DEEP)
    refused(cli("import", str(export), base_url=None, DATABASE_URL=db_url), "channels.json", "nested too deeply")


@pytest.mark.parametrize("since", ["١٢d", "99999999999d", "soon"])
def test_a_period_in_other_digits_or_out_of_range_is_refused(db_url, cli, since) -> None:
    refused(cli("topics", "--since", since, base_url=None, DATABASE_URL=db_url), "--since takes")
    refused(cli("backfill", "--since", since, base_url=None, DATABASE_URL=db_url), "--since takes")


def test_golden_remove_of_an_id_not_in_the_set_exits_2(database, db_url, cli) -> None:
    refused(cli("golden", "remove", "999", base_url=None, DATABASE_URL=db_url), "no item 999")


@pytest.mark.parametrize("argument", ["١", "１２", "1" * 40])
def test_number_arguments_in_other_digits_exit_2(tmp_path, argument) -> None:
    """argparse decides these (a real process: its exit status is argparse's own)."""
    process = subprocess.run(
        [*relmon_cli.RELMON, "golden", "remove", argument], env=relmon_cli.clean_env(DATABASE_URL="sqlite://"),
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert process.returncode == 2 and "not a whole number in the digits 0-9" in process.stderr
    assert "Traceback" not in process.stderr
