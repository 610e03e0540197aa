"""judges.safe_text and the line-numbered readers' helpers (judges.jsonl), directly: what each output may hold."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from judges.jsonl import deep_line, json_objects
from judges.safe_text import json_text, markup_safe, not_text, one_line, visible

HOSTILE = "a\x1b[2Jb\x07\x9b\x7f\uffff\ufffe\u202e\ud800\tc\nd\re"


def test_visible_shows_every_unsafe_character_and_keeps_tab_and_newline() -> None:
    assert visible(HOSTILE) == "a␛[2Jb␇<U+009B>␡<U+FFFF><U+FFFE><U+202E>\ufffd\tc\nd␍e"


def test_visible_text_is_well_formed_in_xml() -> None:
    element = ET.Element("case", name=one_line(HOSTILE + "]]>"))
    element.text = visible(HOSTILE + "]]> <&")
    parsed = ET.fromstring(ET.tostring(element, encoding="utf-8"))
    assert parsed.text.endswith("]]> <&") and parsed.get("name").endswith("]]>")


def test_markup_safe_prints_markup_as_typed() -> None:
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(markup_safe("[/] [link=https://evil.example]pay[/link] \\"))
    assert console.export_text().strip() == "[/] [link=https://evil.example]pay[/link] \\"


def test_one_line_cuts_with_an_ellipsis() -> None:
    assert one_line("a  b\n\nc", 4) == "a b…" and one_line("a b", 4) == "a b"


def test_json_text_reads_back_the_same_strings_with_no_unsafe_character_written() -> None:
    value = {"q": HOSTILE.replace("\ud800", ""), "é": "café \u2028"}
    written = json_text(value, indent=2)
    assert json.loads(written) == value
    assert not any(char in written for char in "\x1b\x07\x9b\x7f\uffff\ufffe\u202e\u2028") and "café" in written
    written.encode("utf-8")  # a lone surrogate is escaped, so the text is always UTF-8
    assert json.loads(json_text("\ud800")) == "\ud800"


@pytest.mark.parametrize(("text", "said"), [("a\x00b", "NUL"), ("a\udc00b", "surrogate"), ("fine \x1b", None)])
def test_not_text_names_what_no_database_stores(text, said) -> None:
    problem = not_text(text)
    assert (problem is None) if said is None else (said in problem)


def test_a_line_nested_too_deep_is_a_bad_line_not_a_recursion_error() -> None:
    lines = [(1, '{"a": 1}'), (2, '{"a": ' + "[" * 5000 + "]" * 5000 + "}")]
    found = list(json_objects(lines))
    assert found[0] == (1, {"a": 1}) and "nested too deeply" in found[1][1].problem


def test_deep_line_finds_where_a_document_goes_too_deep_ignoring_brackets_in_strings() -> None:
    text = '[\n"[[[[[[",\n' + "[" * 10 + "\n" + "]" * 11
    assert deep_line(text, depth=5) == 3 and deep_line("[[]]", depth=5) == 1
