"""Telling a JSONL file of exchanges from a workspace export, and reading it line by line: each bad line named by
its number and why, the good ones validated by the ingest API's own model."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from relmon.backfill.exchanges_import import is_exchanges_file, read_lines

EXCHANGE = {
    "id": "ex-1",
    "bot": "helpdesk",
    "conversation_id": "c-1",
    "turn": 0,
    "question": "Where is my invoice?",
    "answer": "Billing, Invoices.",
    "asked_at": "2026-12-01T10:00:00Z",
    "answered_at": "2026-12-01T10:00:02Z",
    "visibility": "public",
}


def test_a_file_is_told_by_its_extension_then_its_first_byte(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.txt").write_text("  " + json.dumps(EXCHANGE))
    with zipfile.ZipFile(tmp_path / "c.bin", "w") as archive:
        archive.writestr("channels.json", "[]")
    (tmp_path / "d.zip").write_text(json.dumps(EXCHANGE))  # named a zip: the export reader says it is not one
    assert is_exchanges_file(str(tmp_path / "a.jsonl")) and is_exchanges_file(str(tmp_path / "b.txt"))
    assert not is_exchanges_file(str(tmp_path / "c.bin")) and not is_exchanges_file(str(tmp_path / "d.zip"))
    assert not is_exchanges_file(str(tmp_path / "missing"))


def test_bad_lines_are_named_and_the_rest_read(tmp_path: Path) -> None:
    lines = [
        json.dumps(EXCHANGE),
        "[1, 2]",
        json.dumps({**EXCHANGE, "answered_at": "2026-12-01T09:00:00Z"}),
        "\xff",
        "",
        json.dumps({"exchanges": [EXCHANGE, {**EXCHANGE, "id": "ex-2"}]}),
        json.dumps({**EXCHANGE, "extra": 1}),
    ]
    path = tmp_path / "x.jsonl"
    path.write_bytes("\n".join(lines).encode("latin-1"))
    bad: dict[str, str] = {}
    read = [(number, [e.id for e in exchanges]) for number, exchanges in read_lines(str(path), bad)]
    assert read == [(1, ["ex-1"]), (6, ["ex-1", "ex-2"])]
    assert set(bad) == {"line 2", "line 3", "line 4", "line 7"}
    assert bad["line 2"].startswith("body: send a JSON object")
    assert "answered_at is before asked_at" in bad["line 3"]
    assert bad["line 4"].startswith("not JSON")
    assert bad["line 7"] == "extra: extra inputs are not permitted"
