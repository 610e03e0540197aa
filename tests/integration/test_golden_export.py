"""`relmon golden export` in every format, field for field as each tool documents its import, DeepEval's file loaded
by DeepEval's own loader, and `relmon golden import` reading every format back."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

import pytest

from relmon.cli import build_parser
from relmon.golden_cli import run_golden
from store import golden
from store.db import Database
from store.golden_rules import ORIGIN_TAKEOVER, ORIGIN_VOTE
from tests.builders import make_settings
from tests.integration.test_golden_store import asked

# The fields each tool's documentation names for one record (required ones first).
DOCUMENTED = {
    "deepeval": (
        {"input"},
        {"actual_output", "expected_output", "context", "retrieval_context", "additional_metadata", "comments", "name"},
    ),
    "langfuse": (
        {"datasetName"},
        {"input", "expectedOutput", "metadata", "sourceTraceId", "sourceObservationId", "id", "status"},
    ),
    "langsmith": ({"inputs"}, {"outputs", "metadata", "id", "source_run_id", "split", "dataset_id"}),
    "braintrust": ({"input"}, {"expected", "metadata", "tags", "id"}),
    "phoenix": ({"name", "inputs"}, {"action", "description", "outputs", "metadata", "splits", "span_ids"}),
}


def seeded(database: Database) -> None:
    with database.session() as session:
        golden.add_occurrence(session, asked("100.0", bot_answer="Mail me at ana@example.com"))
        golden.add_occurrence(session, asked("200.0", question="How do I rotate my api key"))
        golden.add_occurrence(session, asked("300.0", question="Which plans have SSO?", expected="=Business",
                                             context=None, origin=ORIGIN_VOTE))  # fmt: skip
        golden.add_occurrence(session, asked("400.0", question="Where is the VPN guide?", channel="G1", private=True))


def export(db_url: str, tmp_path: Path, fmt: str, *extra: str, **settings) -> Path:
    path = tmp_path / f"golden.{fmt}"
    args = build_parser().parse_args(["golden", "export", "--format", fmt, "-o", str(path), *extra])
    assert run_golden(args, make_settings(database_url=db_url, **settings)) == 0
    return path


def records(path: Path, fmt: str) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if fmt in ("deepeval", "phoenix"):
        return json.loads(text)
    if fmt == "csv":
        return list(csv.DictReader(text.splitlines()))
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize("fmt", ["langfuse", "langsmith", "braintrust", "deepeval"])
def test_each_record_has_the_tools_documented_fields(database, db_url, tmp_path, fmt) -> None:
    seeded(database)
    rows = records(export(db_url, tmp_path, fmt), fmt)
    required, optional = DOCUMENTED[fmt]
    assert len(rows) == 2  # the two public questions (the first asked twice); the private one is left out
    for row in rows:
        assert required <= set(row) <= required | optional, set(row) - required - optional
    first = rows[0]
    if fmt == "langfuse":
        assert first["input"] == {"question": "How do I rotate my API key?", "context": "[customer] hi"}
        assert first["expectedOutput"] == "Settings > Keys > Rotate." and first["id"].startswith("relmon-golden-")
        assert first["metadata"]["times_asked"] == 2 and first["metadata"]["origin"] == ORIGIN_TAKEOVER
    elif fmt == "langsmith":
        assert uuid.UUID(first["id"]) and first["outputs"] == {"answer": "Settings > Keys > Rotate."}
        assert first["inputs"]["question"] == "How do I rotate my API key?" and first["split"] == "golden"
    elif fmt == "braintrust":
        assert first["expected"] == "Settings > Keys > Rotate." and first["tags"][0] == "relmon"
        assert rows[1]["tags"] == ["relmon", ORIGIN_VOTE]
    else:
        assert first["context"] == ["[customer] hi"] and rows[1]["context"] is None
        assert first["actual_output"] == "Mail me at ana@example.com"


def test_phoenix_gets_one_upload_body_with_a_list_per_field(database, db_url, tmp_path) -> None:
    seeded(database)
    body = records(export(db_url, tmp_path, "phoenix", "--include-private"), "phoenix")
    required, optional = DOCUMENTED["phoenix"]
    assert required <= set(body) <= required | optional and body["action"] == "create"
    assert len(body["inputs"]) == len(body["outputs"]) == len(body["metadata"]) == 3
    assert body["outputs"][1] == {"answer": "=Business"} and body["metadata"][2]["private"] is True


def test_the_deepeval_file_loads_with_deepevals_own_loader(database, db_url, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEEPEVAL_TELEMETRY_OPT_OUT", "1")  # no call home from a test
    dataset_module = pytest.importorskip("deepeval.dataset")  # the bench extra, which scripts/test.sh installs
    seeded(database)
    path = export(db_url, tmp_path, "deepeval")
    dataset = dataset_module.EvaluationDataset()
    dataset.add_goldens_from_json_file(str(path))
    goldens = dataset.goldens
    assert [g.input for g in goldens] == ["How do I rotate my API key?", "Which plans have SSO?"]
    assert goldens[0].expected_output == "Settings > Keys > Rotate." and goldens[0].context == ["[customer] hi"]
    assert goldens[0].additional_metadata["times_asked"] == 2


def test_an_export_withholds_what_it_may_not_show(database, db_url, tmp_path) -> None:
    seeded(database)
    rows = records(export(db_url, tmp_path, "jsonl", "--channel", "G1", redact_pii=True), "jsonl")
    assert [row["question"] for row in rows][-1] == "Where is the VPN guide?" and rows[-1]["private"] is True
    assert all(row["answer"] is None for row in rows)  # the regress template: the new bot's answers go there
    assert "ana@example.com" not in json.dumps(rows) and "[EMAIL]" in rows[0]["bot_answer"]
    assert len(records(export(db_url, tmp_path, "jsonl", "--channel", "G2"), "jsonl")) == 2
    cells = records(export(db_url, tmp_path, "csv"), "csv")
    assert cells[1]["expected"] == "'=Business"  # a spreadsheet does not run it as a formula


@pytest.mark.parametrize("fmt", ["deepeval", "langfuse", "langsmith", "braintrust", "phoenix", "jsonl", "csv"])
def test_import_reads_every_format_back(database, db_url, tmp_path, fmt) -> None:
    seeded(database)
    path = export(db_url, tmp_path, fmt, "--include-private")
    other_url = f"sqlite:///{tmp_path / 'other.sqlite3'}"  # another team's relmon
    other = Database(other_url)
    other.migrate()
    try:
        args = build_parser().parse_args(["golden", "import", str(path)])
        assert run_golden(args, make_settings(database_url=other_url)) == 0
        with other.session() as session:
            found = {item.question: item for item in golden.active_items(session)}
    finally:
        other.dispose()
    assert set(found) == {"How do I rotate my API key?", "Which plans have SSO?", "Where is the VPN guide?"}
    assert found["Which plans have SSO?"].expected in ("=Business", "'=Business")
    assert found["How do I rotate my API key?"].context == "[customer] hi"


def test_a_deepeval_file_of_its_own_imports_without_inventing_a_context(database, db_url, tmp_path) -> None:
    path = tmp_path / "goldens.json"
    path.write_text(json.dumps([{"input": "How do I reset?", "expected_output": "Settings > Reset."}]))
    assert run_golden(build_parser().parse_args(["golden", "import", str(path)]),
                      make_settings(database_url=db_url)) == 0  # fmt: skip
    with database.session() as session:
        [item] = golden.active_items(session)
        assert (item.question, item.expected, item.context) == ("How do I reset?", "Settings > Reset.", None)


def test_import_says_which_line_is_wrong(db_url, tmp_path, capsys) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"input": {"question": "Q?"}, "expected": "A"}\n{"input": \n', encoding="utf-8")
    args = build_parser().parse_args(["golden", "import", str(path)])
    assert run_golden(args, make_settings(database_url=db_url)) == 2
    assert "line 2: not JSON" in capsys.readouterr().err
    path.write_bytes("question,expected\nCaf\xe9?,A\n".encode("latin-1"))
    assert run_golden(args, make_settings(database_url=db_url)) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_for_a_person_the_private_channels_they_are_in_as_slack_says(database, db_url, tmp_path) -> None:
    from tests.fakes.slack_server import FakeSlack

    seeded(database)
    with FakeSlack() as slack:
        slack.add_channel("G1", "vpn-help", members=["U_SAM", "U_RELMON"], is_private=True)
        slack_settings = {"slack_api_url": slack.api_url, "slack_bot_token": "xoxb-test"}
        member = records(export(db_url, tmp_path, "jsonl", "--for-user", "U_SAM", **slack_settings), "jsonl")
        other = records(export(db_url, tmp_path, "jsonl", "--for-user", "U_ANA", **slack_settings), "jsonl")
    assert [row["channel"] for row in member] == ["C1", "C1", "G1"]
    assert [row["channel"] for row in other] == ["C1", "C1"]


def test_list_prints_the_set(database, db_url, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # rich's table on one line per item
    seeded(database)
    args = build_parser().parse_args(["golden", "list"])
    assert run_golden(args, make_settings(database_url=db_url)) == 0
    shown = capsys.readouterr().out
    assert "How do I rotate my API key?" in shown and "Where is the VPN guide?" not in shown
