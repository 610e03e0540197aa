"""The one JSON-lines reader (`judges.jsonl`): objects keep their line numbers, blank lines are skipped, and a bad
line is a value naming its problem, so a caller may stop at it or list it with the others."""

from __future__ import annotations

from judges.jsonl import BadLine, json_objects


def test_objects_keep_their_line_numbers_past_blank_lines() -> None:
    lines = ['{"question": "Q?"}', "", "   ", '{"answer": "A."}']
    assert list(json_objects(enumerate(lines, start=1))) == [(1, {"question": "Q?"}), (4, {"answer": "A."})]


WITH_BAD_LINES = [(2, "not json"), (3, "[1, 2]"), (5, '{"ok": true}')]


def test_a_bad_line_is_a_value_naming_its_problem() -> None:
    assert list(json_objects(WITH_BAD_LINES))[:2] == [
        (2, BadLine("not JSON (Expecting value)")),
        (3, BadLine("expected a JSON object, got list")),
    ]


def test_the_reading_goes_on_past_a_bad_line() -> None:
    assert list(json_objects(WITH_BAD_LINES))[2:] == [(5, {"ok": True})]
